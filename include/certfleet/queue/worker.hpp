#pragma once
// The worker: per lane, a dispatcher coroutine claims jobs (in small batches, one transaction
// each) up to the lane's concurrency and runs their handlers as coroutines on the one event loop.
// One heartbeat loop extends every lease this process holds; one finisher writes the ends of
// attempts in batches; a reaper returns expired leases to pending (attempts left) or ends them
// dead (none left) or cancelled (cancel requested).
#include "certfleet/core/clock.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace certfleet::queue {

struct worker_options {
  std::string worker_id;  // empty: host:pid:random
  time_ms lease_ms = 300'000;
  int main_concurrency = 8;
  int dist_concurrency = 16;
  int claim_batch = 64;
  time_ms poll_ms = 250;
  time_ms grace_ms = 30'000;
  time_ms heartbeat_ms = 0;  // 0: min(lease/3, 5 s)
  time_ms reap_ms = 0;       // 0: lease/2
  bool record_latency = false;  // keep per-claim latency samples (benchmarks)
  // The worker registry (issue 34): a heartbeat every presence_ms (worker_heartbeat_ms); peers
  // older than dead_after_ms (worker_dead_after_ms) are not counted as live when the dist lane
  // spreads a run's children; 0 presence_ms: no registration (and no spreading).
  time_ms presence_ms = 5'000;
  time_ms dead_after_ms = 20'000;
  std::string version = "dev";
};

struct worker_stats {
  std::int64_t claimed = 0;
  std::int64_t completed = 0;
  std::int64_t failed = 0;
  std::int64_t dead = 0;
  std::int64_t cancelled = 0;
  std::int64_t released = 0;
  std::int64_t lost = 0;   // lease lost: another worker owns the job now
  std::int64_t reaped = 0;
  std::int64_t claim_calls = 0;
  std::int64_t live_dist_workers = 1;  // at the last presence beat, this worker included
  std::int64_t declared_dead = 0;      // times this worker found itself declared dead (it was paused)
  // Microseconds, when record_latency: a claim statement's round trip; a job's claim → handler start.
  std::vector<std::uint32_t> claim_us;
  std::vector<std::uint32_t> claim_to_start_us;
};

class worker {
 public:
  worker(boost::asio::any_io_executor ex, store::store& s, const handler_registry& handlers,
         const clock_source& clock, worker_options options);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  void start();
  // Graceful: stop claiming, interrupt handlers, wait up to grace_ms, release what is left to
  // pending without spending an attempt, flush finishes, stop the loops.
  boost::asio::awaitable<void> stop();

  void wake(std::string_view lane);                // a job became claimable in this process
  void request_cancel(const std::string& job_id);  // an operator asked to cancel an active job
  const std::string& id() const;
  const worker_stats& stats() const;
  int running() const;
  // How many jobs of `lane` this process runs at once (its worker_*_concurrency); 0 for no such lane.
  int concurrency(std::string_view lane) const;
  // Receives each log line a handler here appends; set before start().
  void set_log_publisher(log_publisher p);

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

std::string make_worker_id();

}  // namespace certfleet::queue
