#pragma once
// Where `certfleet jobs …` reads and acts: the store itself (local mode, on the store's host) or a
// server's API (remote mode, remote.hpp). The commands print the same from either.
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"

#include <memory>
#include <optional>
#include <string>

namespace certfleet::store {
class store;
}
namespace certfleet::queue {
class queue_service;
}

namespace certfleet::app {

class remote_client;

class jobs_backend {
 public:
  virtual ~jobs_backend() = default;
  virtual result<store::job_page> list(std::optional<store::job_status> status, const std::string& type, int page,
                                       int page_size) = 0;
  virtual result<store::job_record> get(const std::string& id) = 0;
  virtual result<store::log_page> logs(const std::string& id, std::int64_t after, int limit) = 0;
  struct enqueued {
    store::job_record job;
    bool created = true;
  };
  virtual result<enqueued> enqueue(const std::string& type, const std::string& payload, const std::string& key,
                                   time_ms run_at) = 0;
  // `count` identical jobs in chunks of one transaction each: local mode only.
  virtual result<void> enqueue_many(const std::string& type, const std::string& payload, time_ms run_at, int count) = 0;
  virtual result<store::job_record> retry(const std::string& id) = 0;
  virtual result<store::cancel_outcome> cancel(const std::string& id) = 0;
};

// The API of the server `client` talks to, for project `project`.
std::unique_ptr<jobs_backend> remote_jobs(const remote_client& client, std::string project);

}  // namespace certfleet::app
