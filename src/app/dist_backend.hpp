#pragma once
// Where `certfleet distributions …` reads and acts: the store (local mode, through the
// distribution service) or a server's API (remote mode). Both answer the API's JSON, so the
// commands print the same from either.
#include "certfleet/core/error.hpp"

#include <boost/json/value.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace certfleet::app {

class remote_client;

class dist_backend {
 public:
  virtual ~dist_backend() = default;
  virtual result<boost::json::value> list(int page, int page_size) = 0;
  virtual result<boost::json::value> get(const std::string& id) = 0;
  // Each opens a run: {distribution_id, run_no, mode, job_ids, targets}.
  virtual result<boost::json::value> execute(const std::string& id) = 0;
  virtual result<boost::json::value> retry_failed(const std::string& id) = 0;
  // Re-drives targets of the last run in that run (body: {"job_id"} or {"target_ids"}):
  // {distribution_id, run_no, job_id, retry_attempt, redrive, target_ids}.
  virtual result<boost::json::value> retry_targets(const std::string& id, const boost::json::value& body) = 0;
  virtual result<boost::json::value> rollback(const std::string& id, std::int64_t run_no) = 0;  // 0: the last run
  virtual result<boost::json::value> cancel(const std::string& id) = 0;
  // One page of a run's per-target results (run 0: the current one), filtered by status and
  // error class (empty: all).
  virtual result<boost::json::value> results(const std::string& id, std::int64_t run_no, int page, int page_size,
                                             const std::string& status, const std::string& error_class) = 0;
};

std::unique_ptr<dist_backend> remote_distributions(const remote_client& client, std::string project);

}  // namespace certfleet::app
