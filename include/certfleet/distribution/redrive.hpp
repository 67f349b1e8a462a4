#pragma once
// Re-driving failed targets of a run that has ended (issue 31): one child job's failed targets, or
// named targets, run again in the same run as one retry job that the run counts like its retry
// waves. Written without I/O: the route's body, and the choice of targets, wave and key from the
// run's results; the service applies it in one store transaction.
#include "certfleet/core/error.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/store/catalog.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace certfleet::distribution {

// At most this many targets named in one request.
inline constexpr std::size_t max_redrive_targets = 1000;

// The body of POST …/distributions/{id}/retry-targets: exactly one of
// {"job_id": "<a job of the run>"} (that job's failed targets) or {"target_ids": [...]} (1 to
// max_redrive_targets distinct target ids).
struct redrive_request {
  std::string job_id;
  std::vector<std::string> target_ids;  // unique, in the client's order (errors name target_ids[i])
};
result<redrive_request> parse_redrive_request(std::string_view body);

struct redrive {
  job_plan plan;              // mode retry, the run's number, the targets, the next wave
  std::string parent_job_id;  // the job asked for, or the job of the first target's last result
  std::string key;            // the job's idempotency key: dist:<id>:<run>:redrive:<n>
};

// What a re-drive of `req` runs, from the distribution and every result row of its current run:
// conflict while the run is running, for a rollback run, for a target whose last result succeeded
// or was skipped, and past max_retry_attempt; not_found for a job with no result in the run;
// invalid_argument for a target outside the run. Errors name the field.
result<redrive> plan_redrive(const store::distribution_record& d, const std::vector<store::target_result>& run_results,
                             const redrive_request& req);

// The distribution as the re-drive leaves it, in the transaction that enqueues the job: the run
// reopened (running, its end and reason cleared, fail-fast and cancel reset), one more retry child
// awaited, and the re-drive counted.
void reopen_for_redrive(store::distribution_record& d, const redrive& r, time_ms now);

}  // namespace certfleet::distribution
