#pragma once
// The job document (DESIGN §3) and the values the job store takes and returns.
#include "certfleet/core/clock.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::store {

enum class job_status { pending, active, completed, failed, dead, cancelled };
std::string_view to_string(job_status s) noexcept;
std::optional<job_status> parse_job_status(std::string_view s) noexcept;
inline bool is_terminal(job_status s) noexcept {
  return s == job_status::completed || s == job_status::dead || s == job_status::cancelled;
}

struct job_record {
  std::string id;
  std::string project_id;
  std::string type;
  std::string lane;
  std::string payload;  // JSON object text
  job_status status = job_status::pending;
  std::string result_status;  // "ok" | "partial" | "" (not completed)
  int attempts = 0;
  int max_attempts = 0;
  std::int64_t fence = 0;
  time_ms ready_at = 0;
  bool held = false;
  std::string locked_by;  // the lock holder while active; afterwards, the worker of the last attempt
  time_ms locked_until = 0;
  std::string idempotency_key;
  std::string parent_job_id;
  std::string certificate_id;
  std::string distribution_id;
  std::string triggered_by;
  time_ms created_at = 0;
  time_ms started_at = 0;
  time_ms completed_at = 0;
  std::string error;
  // What kind of failure `error` is, decided once when it was stored (both empty while there is
  // no error, and on rows written before they existed): the code says how the attempt ended
  // (an errc name such as "timeout", "invalid_argument", "lease_lost", or "handler_error"), the
  // class which row of the hint table explains it (queue/error_hint.hpp: "dns", "msca_auth", …).
  std::string error_code;
  std::string error_class;
  std::int64_t progress_current = 0;
  std::int64_t progress_total = 0;
  bool cancel_requested = false;
};

struct new_job {
  std::string id;  // generated when empty
  std::string project_id;
  std::string type;
  std::string lane;
  std::string payload = "{}";
  int max_attempts = 1;
  time_ms run_at = 0;  // 0: now
  bool held = false;
  std::string idempotency_key;
  std::string parent_job_id;
  std::string certificate_id;
  std::string distribution_id;
  std::string triggered_by;
};

struct enqueue_outcome {
  job_record job;
  bool created = false;  // false: the idempotency key already named this job
};

// A job this worker holds, as the fencing filter of heartbeat/finish/log/progress sees it.
struct lease_ref {
  std::string id;
  std::int64_t fence = 0;
};

enum class lease_state { held, lost, cancel_requested };
struct heartbeat_result {
  std::string id;
  lease_state state = lease_state::lost;
};

// How a lock holder ends its attempt.
enum class finish_kind {
  completed,  // result_status ok|partial
  failed,     // retry later at retry_at
  dead,       // no attempts left, or an error not worth retrying
  cancelled,  // the handler stopped on a cancel request
  released,   // graceful shutdown: back to pending without spending the attempt
};
struct finish_request {
  lease_ref lease;
  std::string worker_id;
  finish_kind kind = finish_kind::completed;
  std::string result_status;  // completed
  std::string error;          // failed, dead
  std::string error_code;     // failed, dead (job_record::error_code)
  std::string error_class;    // failed, dead (job_record::error_class)
  time_ms retry_at = 0;       // failed
};

struct job_filter {
  std::string project_id;
  std::optional<job_status> status;
  std::string type;  // empty: all
  int page = 1;
  int page_size = 25;
  // Keyset paging: only jobs older than this job id (the previous page's next_cursor); with a
  // cursor, `page` is not used. A deep page then costs what the first does.
  std::string cursor;
};
// Jobs per status, for the list's tabs: index = job_status.
using status_counts = std::array<std::int64_t, 6>;
struct job_page {
  std::vector<job_record> items;
  std::int64_t total = 0;           // jobs matching the filter
  status_counts counts{};           // the filter's project and type, per status
  std::string next_cursor;          // empty: this page is the last
};

struct log_line {
  std::int64_t seq = 0;
  time_ms ts = 0;
  std::string level;
  std::string message;
  std::string detail;  // JSON text or empty
};
struct log_page {
  std::vector<log_line> lines;
  std::int64_t next_cursor = 0;  // pass as after= for the next page
};

struct cancel_outcome {
  job_record job;
  bool immediate = false;  // false: an active job was asked to stop at its next checkpoint
};

// What the queue needs to know to pick its next poll and fill /metrics.
// One lane's load, for spreading a run's children over the live workers (issue 34).
struct lane_load {
  std::int64_t waiting = 0;  // claimable now (pending or failed, not held, ready_at <= now)
  std::int64_t running = 0;  // active
};

struct lane_stats {
  std::string lane;
  std::int64_t pending = 0;
  time_ms oldest_ready_at = 0;  // of claimable pending/failed jobs; 0 when none
};

}  // namespace certfleet::store
