#include "certfleet/core/log.hpp"

#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <chrono>
#include <cmath>
#include <memory>

namespace certfleet::log {

namespace {

thread_local const fields* current = nullptr;

// The names log_level uses (spdlog says "warning" and "critical").
std::string_view level_name(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace: return "trace";
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "critical";
    default: return "off";
  }
}

// The text format's %& flag: the line's fields, except a job id its message already shows (a
// "job 66a…: lease lost" line does not repeat it as job_id=66a…). request_id and route are always
// written, so `grep route=` finds every access line.
class fields_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const fields* f = current;
    if (!f) return;
    std::string_view payload(msg.payload.data(), msg.payload.size());
    auto add = [&](std::string_view name, std::string_view value) {
      if (value.empty()) return;
      dest.push_back(' ');
      dest.append(name.data(), name.data() + name.size());
      dest.push_back('=');
      dest.append(value.data(), value.data() + value.size());
    };
    if (payload.find(f->job_id) == std::string_view::npos) add("job_id", f->job_id);
    add("request_id", f->request_id);
    add("route", f->route);
    add("event", f->event);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<fields_flag>(); }
};

// log_format = json: one JSON object a line, for journald, Loki and jq.
class json_formatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    static const fields none;
    auto line = json_line(ms, level_name(msg.level), std::string_view(msg.payload.data(), msg.payload.size()),
                          current ? *current : none);
    line.push_back('\n');
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<json_formatter>(); }
};

}  // namespace

namespace detail {
scoped_fields::scoped_fields(const fields& f) noexcept : previous_(current) { current = &f; }
scoped_fields::~scoped_fields() { current = previous_; }
const fields* current_fields() noexcept { return current; }
}  // namespace detail

std::string json_line(std::int64_t time_ms, std::string_view level, std::string_view message, const fields& f) {
  boost::json::object o;
  // time 0 would format as empty: the epoch itself is written out.
  o["time"] = time_ms == 0 ? std::string("1970-01-01T00:00:00.000Z") : format_iso8601(time_ms);
  o["level"] = level;
  o["message"] = message;
  if (!f.job_id.empty()) o["job_id"] = f.job_id;
  if (!f.request_id.empty()) o["request_id"] = f.request_id;
  if (!f.route.empty()) o["route"] = f.route;
  if (!f.method.empty()) o["method"] = f.method;
  if (f.status != 0) o["status"] = f.status;
  if (f.bytes >= 0) o["bytes"] = f.bytes;
  if (f.duration_ms >= 0) o["duration_ms"] = std::round(f.duration_ms * 1000) / 1000;
  if (!f.client.empty()) o["client"] = f.client;
  if (!f.event.empty()) o["event"] = f.event;
  if (!f.type.empty()) o["type"] = f.type;
  if (!f.project.empty()) o["project"] = f.project;
  return boost::json::serialize(o);
}

void init(std::string_view level, std::string_view format) {
  std::shared_ptr<spdlog::logger> logger;
  if (format == "json") {
    // No colour codes in a machine-read stream.
    logger = spdlog::stderr_logger_mt("certfleet");
    logger->set_formatter(std::make_unique<json_formatter>());
  } else {
    logger = spdlog::stderr_color_mt("certfleet");
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<fields_flag>('&').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%P] %v%&");
    logger->set_formatter(std::move(f));
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace certfleet::log
