#pragma once
// The worker registry (issue 34): each worker process records a heartbeat of its own, so any
// process can tell a dead worker from a slow one in seconds instead of waiting out the job lease,
// and release the dead worker's jobs at once. The lease stays the outer bound for a worker whose
// death cannot be known (partitioned away, a paused VM): this only shortens the wait when it can.
//
// The store keeps the facts (who beat when, by its own clock where it has one); the verdict —
// dead by heartbeat age, or at once by a pid that no longer runs on the same host — is the
// queue's (certfleet/queue/liveness.hpp).
#include "certfleet/store/store.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace certfleet::store {

struct worker_presence {
  std::string id;         // the worker id (host:pid:random)
  std::string host;       // host name, for people
  // Where a pid means something: host name, kernel boot id and pid namespace. Two processes
  // with the same host_key can check each other's pid; others only by heartbeat age.
  std::string host_key;
  std::int64_t pid = 0;
  std::string proc_start;  // the process's start time as the kernel counts it (pid reuse check)
  std::string version;
  std::string lanes;      // "main,dist"
  time_ms started_at = 0;
  std::int64_t running = 0;  // jobs it ran at its last heartbeat
  // Read back: the last heartbeat, and its age by the store's clock (SQLite: the caller's now).
  time_ms last_seen = 0;
  time_ms age_ms = 0;
  // Set once the worker is declared dead (and its jobs released); it then beats no more (a
  // paused worker that wakes up is a new registration only if it restarts).
  time_ms dead_at = 0;
  std::string dead_reason;
  std::int64_t released_jobs = 0;  // jobs given back when it was declared dead
};

class worker_store {
 public:
  virtual ~worker_store() = default;
  // Records a heartbeat (insert or update; last_seen = now by the store's clock). A worker once
  // declared dead stays dead: its beat is refused with lease_lost so it knows its jobs are gone.
  virtual task<void> beat(worker_presence w, time_ms now) = 0;
  // Every registered worker, alive first then the dead, newest heartbeat first; age_ms computed.
  virtual task<std::vector<worker_presence>> list_workers(time_ms now) = 0;
  // Declares `worker_id` dead (once: conflict when it already is, or when it beat within
  // `min_age_ms` after all — a fresh heartbeat wins over a stale verdict) and, in the same
  // transaction, ends the lease of every job it holds and returns them exactly as lease expiry
  // does (the attempt stays counted; attempts left → pending with locked_by cleared, so a late
  // write of a merely paused worker is refused, and the next claim raises the fence as every
  // claim does; no attempts left → dead and the terminal hook runs). Returns how many it released.
  virtual task<std::int64_t> declare_dead(std::string worker_id, std::string reason, time_ms min_age_ms,
                                          time_ms now) = 0;
  // Forgets workers declared dead before `before` (the list stays short).
  virtual task<std::int64_t> prune_workers(time_ms before) = 0;
};

}  // namespace certfleet::store
