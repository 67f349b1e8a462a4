#pragma once
// Opening a distribution run (DESIGN §4 "Runs"), inside a caller's write transaction: the execute,
// retry-failed and rollback routes open one, and so does a certificate's new version for every
// distribution that executes by itself (certificates.hpp) — in the transaction that stores it.
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace certfleet::distribution {

enum class run_kind { execute, retry_failed, rollback };

// The settings a run is planned with, read at execute time (DESIGN §4).
struct run_settings {
  std::int64_t fanout_threshold = 0;
  int batch_size = 50;
};
run_settings run_settings_from(const settings_map& s);

struct run_request {
  std::string project_id;
  std::string distribution_id;
  std::string actor;          // the jobs' triggered_by
  run_kind kind = run_kind::execute;
  std::int64_t rollback_of = 0;  // rollback: the delivery run to undo (0: the last one)
  std::string trigger;        // what opened it when not a person (stored as run_trigger)
};

// Opens the run and enqueues its jobs in `tx`; the answer of the execute route:
// {distribution_id, run_no, mode, job_ids, targets}. Conflict while a run is going, when the
// certificate was deleted or has no issued version yet. With `created`, the run's jobs are
// appended to it, for the caller to wake their lanes after the commit.
result<boost::json::object> open_run(store::catalog_tx& tx, const run_request& req, const run_settings& rs, time_ms now,
                                     std::vector<store::enqueue_outcome>* created = nullptr);

}  // namespace certfleet::distribution
