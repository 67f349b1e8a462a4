#pragma once
// Process logging: spdlog, one line per event, as text or as JSON (log_format); secrets never
// reach these calls.
#include <spdlog/spdlog.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace certfleet::log {

// Sets the level ("trace".."error") and the line format ("text" | "json", the log_format
// setting) of the default logger, which writes to stderr.
void init(std::string_view level, std::string_view format = "text");

// What a line is about beyond its message. A json line carries each non-empty one as a member;
// a text line appends " name=value" for each (job_id only when the message does not show it).
struct fields {
  std::string_view job_id = {};
  std::string_view request_id = {};
  std::string_view route = {};
  // An access line (json only: the text line says them in its message).
  std::string_view method = {};
  int status = 0;              // 0: none
  std::int64_t bytes = -1;     // -1: none
  double duration_ms = -1;     // <0: none
  std::string_view client = {};
  // A job's lifecycle line: event (enqueued, claimed, finished, retried, dead, cancelled,
  // released), the job's type and project id.
  std::string_view event = {};
  std::string_view type = {};
  std::string_view project = {};
};

namespace detail {
// The fields of the line being written on this thread. Set only around one synchronous spdlog
// call (no co_await in between), so another coroutine on the loop never sees them.
class scoped_fields {
 public:
  explicit scoped_fields(const fields& f) noexcept;
  ~scoped_fields();
  scoped_fields(const scoped_fields&) = delete;
  scoped_fields& operator=(const scoped_fields&) = delete;

 private:
  const fields* previous_;
};
const fields* current_fields() noexcept;
}  // namespace detail

// One line with its fields: log::write(spdlog::level::warn, {.job_id = id}, "lease lost …").
template <class... Args>
void write(spdlog::level::level_enum level, const fields& f, spdlog::format_string_t<Args...> format,
           Args&&... args) {
  if (!spdlog::should_log(level)) return;
  detail::scoped_fields scope(f);
  spdlog::log(level, format, std::forward<Args>(args)...);
}

// A line as a JSON object: {"time","level","message", and each field that is set} (the json
// format's line, without the newline). `time_ms`: milliseconds since the epoch, written as RFC 3339
// UTC with milliseconds.
std::string json_line(std::int64_t time_ms, std::string_view level, std::string_view message, const fields& f);

}  // namespace certfleet::log
