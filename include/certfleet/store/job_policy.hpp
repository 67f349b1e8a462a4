#pragma once
// Job policy both store backends apply (DESIGN §3, §4), without I/O: what an expired lease does
// to a job, when a job may be retried by hand and how often, and which of a run's results is a
// target's outcome. A backend reads inside its transaction, asks these, and writes the answer.
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/job.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace certfleet::store {

// The code and class the store itself gives a job's error (job_record::error_code, error_class):
// the codes are errc names (errc_name), the class a row of the hint table.
inline constexpr std::string_view lease_lost_code = "lease_lost";
inline constexpr std::string_view lease_lost_class = "lease_lost";
inline constexpr std::string_view cancelled_code = "cancelled";

// What an expired lease (or a worker declared dead) does to the active job it held (DESIGN §3
// "lost worker"): with attempts left and no cancel asked, back to pending (the lost attempt stays
// counted, the fence is kept, ready_at keeps the lease's end); else dead, or cancelled when a
// cancel was asked, and then the terminal hook runs with the transition.
struct reap_transition {
  job_status status = job_status::pending;  // pending | dead | cancelled
  std::string_view error;                   // the job's error from now on
  std::string_view error_code;              // and its code and class (job_record)
  std::string_view error_class;
  time_ms completed_at = 0;                 // 0 when it returns to pending
  bool returns_to_pending() const noexcept { return status == job_status::pending; }
};
reap_transition reap_transition_of(const job_record& j, time_ms now) noexcept;

// A job that another job of a distribution run spawned (a retry wave's child): its run accounts
// for it, so no backend retries it alone (the conformance suite checks it). Told from the row's
// own links, not from its type: job types are the queue's table.
inline bool is_distribution_child(const job_record& j) noexcept {
  return !j.parent_job_id.empty() && !j.distribution_id.empty();
}

// Why the operator's retry of `j` is refused (409), or nullopt when it may be retried: only a
// failed or dead job, and never a fan-out child.
std::optional<error> retry_refusal(const job_record& j);

// Manual retries per project and minute: the counter of one window, as a backend stores it
// (rate_windows, name "job_retry").
inline constexpr time_ms retry_window_ms = 60'000;
struct rate_window {
  std::int64_t window = 0;  // now / retry_window_ms
  std::int64_t count = 0;   // retries counted in that window
};
// Counts one retry at `now` against the stored counter (nullopt: none stored yet): the counter to
// store, or rate_limited (with retry_after_s: until the next window) when `per_minute` retries
// were already counted in now's window.
result<rate_window> count_retry(const std::optional<rate_window>& stored, time_ms now, int per_minute);

// A target's outcome in a run is its last result: the one with the highest (retry_attempt,
// fence), then job id. One per target, in target id order, from results in any order.
std::vector<target_result> target_outcomes(std::vector<target_result> results);

}  // namespace certfleet::store
