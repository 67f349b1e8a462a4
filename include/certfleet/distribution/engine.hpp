#pragma once
// The distribution engine (DESIGN §4): the distribution_execute / distribution_rollback handlers,
// the reporting of finished children (the queue's terminal hook), completion, notifications and
// reconciliation.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <memory>

namespace certfleet::distribution {

// Reports a finished distribution job to its run, inside the write transaction that made it
// terminal: its un-reported targets get results (worker_lost when the worker died, cancelled
// when it was cancelled), exactly one counter moves (guarded by the finalized set), a retry wave
// is spawned for its transient failures while the lineage has waves left, the canary verdict and
// the failure budget are applied, and the run completes when its last batch is in. A duplicate
// report changes nothing.
result<void> report_child(store::catalog_tx& tx, const store::job_record& job, time_ms now);

// Completes the run when every batch child has finalized and no retry child is out: the final
// status from the targets' outcomes and, in the same transaction, one notification.send per
// matching rule. Returns whether it completed the run now.
result<bool> try_complete(store::catalog_tx& tx, store::distribution_record& d, time_ms now);

// The queue's terminal hook: reports distribution jobs, ignores every other type.
store::terminal_hook make_terminal_hook();

// The reconciliation pass (scheduler sweep, `certfleet distributions reconcile`): reports
// terminal children missing from their run's finalized set and completes runs whose batches have
// all finalized. Returns how many runs it changed.
boost::asio::awaitable<result<int>> reconcile(store::store& st, const clock_source& clock, int limit = 500);

// The distribution sweep (scheduler, `certfleet distributions reconcile`): a running run whose
// jobs are gone (an execute aborted between opening the run and enqueuing its jobs, job rows
// deleted by hand) gets its uncovered targets re-enqueued under the lost job's key, so they run
// exactly once; a lost rollback job closes its run as failed. Returns how many runs it changed.
boost::asio::awaitable<result<int>> retrigger_lost(store::store& st, const clock_source& clock, int limit = 500);

class delivery_phase_metrics;  // certfleet/distribution/phase_metrics.hpp

struct engine_options {
  const kek* key = nullptr;  // opens sealed certificate keys and credentials
  boost::asio::thread_pool* cpu = nullptr;  // resolution, file I/O
  std::chrono::milliseconds lock_poll{100};  // waiting for a held target-path/distribution lock
  std::chrono::milliseconds lock_ttl{600'000};
  std::string ca_pem;  // extra trust anchors for webhook targets/notifications (tests)
  delivery_phase_metrics* phases = nullptr;  // /metrics: the phases of every delivery (outlives the handlers)
};

// distribution_execute and distribution_rollback. The other modules register their own handlers
// (app/serve.cpp calls each).
void register_handlers(queue::handler_registry& r, std::shared_ptr<const engine_options> options);


// The backup name of a run on a target ([A-Za-z0-9._-]).
std::string run_backup_id(std::string_view distribution_id, std::int64_t run_no);

}  // namespace certfleet::distribution
