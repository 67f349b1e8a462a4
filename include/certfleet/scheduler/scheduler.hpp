#pragma once
// The scheduler: one leader among every process running it, elected through a lease in the
// store (holder, epoch, expiry). Each cycle the leader enqueues each sweep as a job keyed
// `sweep:<name>:<cycle>` (cycle = the interval's number since the epoch), so a sweep runs once
// per cycle whoever is leader, its work is logged in that job, and a deposed leader that wakes
// late can at most re-enqueue a key that already exists.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace certfleet::scheduler {

struct scheduler_options {
  std::string holder_id;                 // empty: host:pid:random
  time_ms lease_ttl_ms = 30'000;         // a dead leader is replaced within this
  time_ms interval_ms = 3'600'000;       // one cycle
  time_ms retention_ms = 30LL * 86'400'000;
};

struct scheduler_stats {
  bool leader = false;
  std::int64_t epoch = 0;
  std::int64_t sweeps_enqueued = 0;  // by this process, created (not found by key)
  std::int64_t terms = 0;            // times this process became leader
};

class scheduler {
 public:
  scheduler(boost::asio::any_io_executor ex, store::store& s, queue::queue_service& q, const clock_source& clock,
            scheduler_options o);
  ~scheduler();
  void start();
  boost::asio::awaitable<void> stop();  // releases the lease so another process takes over at once
  const scheduler_stats& stats() const;
  const std::string& holder_id() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

// The `maintenance_sweep` job handler (payload {"name", "cycle"}): runs one sweep and logs
// what it did. Registered in every process that runs workers. `cpu` and `ca_pem` (extra trust
// anchors for every CA) are for the acme_renewal sweep's renewal-information requests and the
// msca_policy sweep, which opens each AD CS CA's secret with `key`.
void register_sweep_handler(queue::handler_registry& r, time_ms retention_ms, time_ms audit_retention_ms,
                            boost::asio::thread_pool* cpu = nullptr, std::string ca_pem = {}, const kek* key = nullptr);

}  // namespace certfleet::scheduler
