#pragma once
// The job queue on MongoDB (jobs, job logs, projects) over a connection and its store threads,
// owned by whoever assembles the store (the whole store, or the queue alone).
#include "certfleet/store/store.hpp"
#include "client.hpp"
#include "job_tx.hpp"

#include <memory>

namespace certfleet::store::mongo {

class job_queue : public job_store, public project_store {
 public:
  virtual task<void> ping() = 0;
};

// `catalog` makes the catalog side of a transaction for terminal hooks (empty: none).
std::unique_ptr<job_queue> make_job_queue(connection& c, executor& ex, catalog_tx_factory catalog);

}  // namespace certfleet::store::mongo
