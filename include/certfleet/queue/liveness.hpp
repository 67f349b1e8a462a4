#pragma once
// Worker liveness (issue 34). A worker process records a heartbeat in the store's worker registry
// every few seconds; every process — API, scheduler or worker — looks at the registry as often
// and releases the jobs of a worker it knows to be dead at once, instead of leaving them locked
// until their lease (5 min by default) runs out:
//   - on the same host (same kernel boot and pid namespace), a worker whose pid is gone or now
//     belongs to another process (another start time) is dead at once;
//   - anywhere, a worker whose last heartbeat is older than dead_after_ms is dead.
// A released job goes through the same transitions as an expired lease, with its fence raised,
// so a worker that was only paused finds its late writes refused. The lease stays the outer
// bound for a worker whose death cannot be known (partitioned away while still heartbeating
// nothing, a paused VM whose heartbeat stops too — that one is caught by age).
//
// The verdict and the dist lane's fair share are pure (unit-tested); the monitor does the I/O.
#include "certfleet/core/clock.hpp"
#include "certfleet/store/workers.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace certfleet::store {
class store;
}

namespace certfleet::queue {

// This machine as the registry knows it: the host name for people, and the key under which pids
// can be compared (host name, kernel boot id, pid namespace).
struct host_identity {
  std::string host;
  std::string host_key;
};
const host_identity& this_host();

// A process's start time as the kernel counts it (/proc/PID/stat, field 22), or "" when no
// such process exists. With the pid, it names one process: a pid reused later has another.
std::string process_start_of(std::int64_t pid);

enum class liveness_state { alive, dead_process, dead_heartbeat, declared_dead };

struct liveness_verdict {
  liveness_state state = liveness_state::alive;
  std::string reason;  // for a dead worker: why, in words for the job log and the workers list
  bool dead() const noexcept { return state == liveness_state::dead_process || state == liveness_state::dead_heartbeat; }
};

// The verdict on one registered worker. `start_of` answers process_start_of for a pid on this
// host (a parameter so the tests can say which pids run).
liveness_verdict judge_worker(const store::worker_presence& w, const host_identity& here, time_ms dead_after_ms,
                              const std::function<std::string(std::int64_t)>& start_of);
// A verdict's state as the workers list (API, CLI, UI) words it: "alive", "dead (being
// reclaimed)" (judged dead, its jobs not yet released) or "dead" (declared; released).
const char* liveness_state_name(liveness_state s) noexcept;

// How many jobs a worker of a lane may claim now so that one run's waiting children go to every
// live worker of the lane instead of to whichever asks first: its share of everything the lane
// has (waiting + running) split over the live workers, less what it runs already; at least one
// while it runs none (so progress never waits on a peer), never more than `free` or `waiting`.
// A lone worker's share is everything.
int fair_share(std::int64_t waiting, std::int64_t running, int mine, int live_workers, int free);

struct liveness_options {
  time_ms beat_ms = 5'000;         // worker_heartbeat_ms
  time_ms dead_after_ms = 20'000;  // worker_dead_after_ms
  time_ms forget_after_ms = 24 * 3'600'000;  // a dead worker stays listed this long
};

struct liveness_stats {
  std::int64_t checks = 0;
  std::int64_t declared_dead = 0;  // by this process
  std::int64_t reclaimed_jobs = 0;  // released by this process's declarations
  std::int64_t workers_alive = 0;   // at the last check
  time_ms last_worker_seen_age_ms = -1;  // the freshest heartbeat's age at the last check; -1: none
};

// Runs in every process: every beat_ms reads the registry, declares the dead dead and releases
// their jobs (one process wins each declaration; the others' attempts are refused as conflict).
class liveness_monitor {
 public:
  liveness_monitor(boost::asio::any_io_executor ex, store::store& st, const clock_source& clock, liveness_options o);
  ~liveness_monitor();
  liveness_monitor(const liveness_monitor&) = delete;
  liveness_monitor& operator=(const liveness_monitor&) = delete;

  void start();
  boost::asio::awaitable<void> stop();
  // One pass now (tests; also what the loop does).
  boost::asio::awaitable<void> check_once();
  const liveness_stats& stats() const;
  const liveness_options& options() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace certfleet::queue
