#pragma once
// The distribution protocol's decisions, written without I/O (DESIGN §4): job payloads, batch
// splitting, a child's outcome, which targets a retry wave takes, the failure budget, the canary
// verdict and the run's final status. The engine applies them inside store transactions.
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::distribution {

// Waves per lineage: a batch and its retry children run at most this many retries.
inline constexpr int max_retry_waves = 3;
// A target's highest retry_attempt in one run: the automatic waves, then an operator's re-drives
// (redrive.hpp); past it the operator opens a new run with Retry failed.
inline constexpr std::int64_t max_retry_attempt = 20;
inline constexpr int default_batch_size = 50;
inline constexpr int default_ssh_concurrency = 10;

// What a distribution_execute / distribution_rollback job is asked to do.
enum class job_mode { normal, batch, retry, rollback };
std::string_view to_string(job_mode m) noexcept;

struct job_plan {
  std::string distribution_id;
  std::int64_t run_no = 0;
  job_mode mode = job_mode::normal;
  std::vector<std::string> target_ids;  // sorted, unique
  std::int64_t batch_no = 0;            // batch: 1-based; retry: the lineage's batch
  std::int64_t retry_attempt = 0;       // 0 for normal/batch children; a retry child's wave
  std::int64_t rollback_of_run = 0;     // rollback: the run whose delivery is undone
};

std::string to_payload(const job_plan& p);
// Payloads are written by certfleet itself, but a stored one is still parsed defensively:
// errors name the field.
result<job_plan> parse_payload(std::string_view payload);

// Idempotency keys: this module is the only one that spells them. Ids are ObjectIds (no ':'),
// so no two of these formats, runs or channels share a key.
//
// The idempotency key of a run's job: dist:<id>:<run>:normal | batch:<n> | retry:<parent job>
// | rollback. One prefix per run (run_key_prefix), so the store finds a run's jobs by key range.
std::string job_key(const job_plan& p, std::string_view parent_job_id = {});
// "dist:<id>:<run>:", the start of every job key of that run and of no other run's.
std::string run_key_prefix(std::string_view distribution_id, std::int64_t run_no);
// The key bases of this module's events (notify::notification_key makes the jobs' keys).
// A finished run: <distribution>:<run>, so notify:<distribution>:<run>:<channel>; its end after
// the n-th re-drive (redrive.hpp): <distribution>:<run>:redrive:<n>.
std::string run_notification_base(std::string_view distribution_id, std::int64_t run_no, std::int64_t redrives = 0);
std::string run_notification_key(std::string_view distribution_id, std::int64_t run_no, std::string_view channel_id,
                                 std::int64_t redrives = 0);
// A certificate's expiry for one threshold in days (0: expired): cert:<certificate>:<days>, so
// notify:cert:<certificate>:<days>:<channel>.
std::string expiry_notification_base(std::string_view certificate_id, std::int64_t days);
std::string expiry_notification_key(std::string_view certificate_id, std::int64_t days, std::string_view channel_id);
// What opened a distribution's run for a new version of its certificate (its run_trigger):
// dist-renew:<distribution>:<version>. One per distribution and version.
std::string renewal_run_trigger(std::string_view distribution_id, std::int64_t version);
// A job's death (job.dead) at one fence: job:<job>:<fence>, so notify:job:<job>:<fence>:<channel>.
std::string dead_job_notification_base(std::string_view job_id, std::int64_t fence);
// The id of a certificate's lifecycle event (and its notifications' key base):
// <event>:<certificate>:<what tells two apart> — the version for certificate.issued/renewed,
// the serial for certificate.revoked, the job and its fence for certificate.renewal_failed.
std::string certificate_event_id(std::string_view event, std::string_view certificate_id, std::string_view which);
// The scheduler's certificate_expiration_check: exp_check:<hours since the epoch>, one per hour
// whatever the cycle, so a restart within the hour finds the hour's key taken.
std::string expiration_check_key(time_ms now);

// The jobs API's answer to a retry of a distribution's job (409, field "retry-targets"): such a
// job's failed targets are re-driven in its run by the distribution's retry-targets (redrive.hpp),
// or in a new run by retry-failed. The queue's retry asks the type's owner for it
// (handler_registry's retry_refusal).
error job_retry_refusal(const store::job_record& job);

// Sorted target ids cut into batches of `batch_size` (0 -> default_batch_size).
std::vector<std::vector<std::string>> split_batches(std::vector<std::string> target_ids, int batch_size);
// Whether a run of `targets` fans out under these settings.
bool fans_out(std::size_t targets, std::int64_t threshold) noexcept;
int effective_batch_size(std::int64_t setting) noexcept;
int effective_ssh_concurrency(std::int64_t setting) noexcept;

// DESIGN §4 error classes a retry wave takes.
bool retryable_class(std::string_view error_class) noexcept;

// The outcome of each target among `results`, by target id: store::target_outcomes, the rule the
// store's run_outcomes applies.
std::vector<store::target_result> outcomes(const std::vector<store::target_result>& results);

// A child's counter from its own results: succeeded (all its targets succeeded or skipped),
// failed (none succeeded), partial; cancelled when the job was cancelled.
std::string child_outcome(const std::vector<store::target_result>& own_results, bool job_cancelled);

// The targets of a finished child that a retry wave takes: its failed targets of a retryable
// class, sorted and deduplicated; empty when the lineage has no wave left.
std::vector<std::string> retry_targets(const std::vector<store::target_result>& own_results,
                                       std::int64_t child_retry_attempt);

// Whether failed targets exceed the tolerance share of all targets of the run.
bool over_failure_budget(std::size_t failed_targets, std::size_t total_targets, double tolerance) noexcept;

struct run_summary {
  std::int64_t targets = 0, succeeded = 0, failed = 0, skipped = 0, cancelled = 0, pending = 0;
};
run_summary summarize(const std::vector<std::string>& run_target_ids, const std::vector<store::target_result>& outcomes);

// The final status of a run (DESIGN §4): every child cancelled (or the distribution cancelled) →
// cancelled; fail-fast fired → failed; no non-skipped target succeeded → failed; every non-skipped
// target succeeded → success; otherwise partial. `error` gets the operator's reason when not
// success.
struct final_verdict {
  std::string status;
  std::string error;
};
final_verdict final_status(const store::distribution_record& d, const std::vector<store::finalized_child>& children,
                           const run_summary& s, std::string_view first_error);

// Work of a running run that no job holds (its job rows lost: an execute aborted between opening
// the run and enqueuing, a store edited by hand). `present` are the plans of the run's jobs that
// exist; `with_results` the targets that have a result in the run.
struct lost_work {
  std::int64_t missing_batches = 0;  // fan_out_total minus the normal/batch jobs present
  std::int64_t batch_no = 0;         // the re-triggered job's: the lowest batch number not present (0: normal run)
  std::vector<std::string> uncovered;  // run targets in no present job and without a result, sorted
};
lost_work find_lost_work(const store::distribution_record& d, const std::vector<job_plan>& present,
                         const std::vector<std::string>& with_results);

}  // namespace certfleet::distribution
