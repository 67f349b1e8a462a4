#pragma once
// The job queue on MongoDB (jobs, job logs, projects) over a connection and its store threads,
// owned by whoever assembles the store (the whole store, or the queue alone); and the worker
// registry, which releases a dead worker's jobs through the queue's lost-worker policy.
#include "certfleet/store/store.hpp"
#include "certfleet/store/workers.hpp"
#include "client.hpp"
#include "job_tx.hpp"

#include <memory>

namespace certfleet::store::mongo {

class job_queue : public job_store, public project_store {
 public:
  virtual task<void> ping() = 0;
  // What an expired lease does to `j` as read (DESIGN §3 "lost worker"; the one copy of that
  // policy, for reap_expired and declare_dead): with attempts left and no cancel request back to
  // pending, else dead or cancelled with its terminal hook. Runs inside the open transaction `s`;
  // `changed` says whether the job still held attempt `j.fence` (else nothing was written).
  virtual std::optional<failure> release_lost(mongoc_client_t* client, mongoc_client_session_t* s, const job_record& j,
                                              time_ms now, bool& changed) = 0;
};

// `catalog` makes the catalog side of a transaction for terminal hooks (empty: none).
std::unique_ptr<job_queue> make_job_queue(connection& c, executor& ex, catalog_tx_factory catalog);
// The worker registry (collection `workers`); `queue` releases a dead worker's jobs.
std::unique_ptr<worker_store> make_worker_store(connection& c, executor& ex, job_queue& queue);

}  // namespace certfleet::store::mongo
