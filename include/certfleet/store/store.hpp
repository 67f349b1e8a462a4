#pragma once
// Store interfaces: every operation is atomic on its own and runs off the event loop; callers
// `co_await` it and resume on their own executor. Backends: SQLite (embedded default).
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"

#include <boost/asio/awaitable.hpp>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace certfleet::store {

class catalog_tx;  // certfleet/store/catalog.hpp

template <class T>
using task = boost::asio::awaitable<result<T>>;

// Operations available inside a running write transaction (terminal hooks use it, so what they
// do commits or rolls back with the transition that triggered them).
class job_tx {
 public:
  virtual ~job_tx() = default;
  virtual result<enqueue_outcome> enqueue(const new_job& j, time_ms now) = 0;
  virtual result<std::int64_t> append_log(const std::string& job_id, std::string_view level,
                                          std::string_view message, std::string_view detail, time_ms now) = 0;
  // The catalog operations of this same transaction (fan-out children report from the hook).
  virtual catalog_tx& catalog() = 0;
};

// Called, inside the write transaction, each time a job reaches a terminal status
// (completed, dead, cancelled) by any operation. Runs on a store thread: no awaiting.
struct terminal_hook {
  std::function<void(job_tx&, const job_record&)> fn;
  // The job types it acts on (empty: every type). A job of another type skips the hook and the
  // read of its whole document: a worker finishing thousands of no-op jobs a second pays nothing.
  std::vector<std::string> types;
  // Also every job of any type that ends dead (job.dead notifications): dead jobs are few, and
  // completed or cancelled jobs of other types still skip the hook.
  bool every_dead = false;

  bool wants(std::string_view type, job_status status) const {
    if (!fn) return false;
    if (every_dead && status == job_status::dead) return true;
    return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
  }
};

class job_store {
 public:
  virtual ~job_store() = default;

  virtual void set_terminal_hook(terminal_hook hook) = 0;

  // Insert, or return the job an existing idempotency key names (created=false).
  virtual task<enqueue_outcome> enqueue(new_job j, time_ms now) = 0;
  // All in one transaction: every job is inserted (or found by key), or none.
  virtual task<std::vector<enqueue_outcome>> enqueue_many(std::vector<new_job> jobs, time_ms now) = 0;

  // Claims up to `limit` claimable jobs of `lane` with ready_at <= now, oldest first, in one
  // atomic statement: active, locked_by, locked_until = ready_at = now + lease, attempts+1, fence+1.
  // Each record carries what a handler reads (not the previous attempt's error or progress).
  virtual task<std::vector<job_record>> claim(std::string lane, std::string worker_id, time_ms now,
                                              time_ms lease_ms, int limit) = 0;
  // Extends the leases this worker still holds; reports each as held, lost or cancel_requested.
  virtual task<std::vector<heartbeat_result>> heartbeat(std::vector<lease_ref> leases, std::string worker_id,
                                                        time_ms now, time_ms lease_ms) = 0;
  // Ends attempts; each element is the finished job (id, status, result_status, attempts, fence,
  // ready_at, completed_at, error, max_attempts — not the whole document), or lease_lost when the caller no longer
  // holds it (its fence moved on or its status changed) — then nothing changed for that job.
  virtual task<std::vector<result<job_record>>> finish(std::vector<finish_request> reqs, time_ms now) = 0;
  // Active jobs whose lease expired: with attempts left, back to pending (attempt still counted,
  // fence kept, lock cleared); with none left, dead ("lease expired: worker lost"); those with a
  // cancel request, cancelled. Terminal hooks run. Returns how many.
  virtual task<int> reap_expired(time_ms now, int limit) = 0;

  virtual task<job_record> get(std::string project_id, std::string id) = 0;
  virtual task<job_page> list(job_filter f) = 0;
  // pending/failed -> cancelled at once; active -> cancel_requested; otherwise conflict.
  virtual task<cancel_outcome> cancel(std::string project_id, std::string id, time_ms now) = 0;
  // failed/dead -> pending (attempts reset, fence kept); conflict otherwise; rate_limited past
  // `per_minute` retries in the project's current minute.
  virtual task<job_record> retry(std::string project_id, std::string id, time_ms now, int per_minute) = 0;
  virtual task<void> set_progress(lease_ref lease, std::int64_t current, std::int64_t total) = 0;

  // Appends a line (seq = the job's last + 1); with a lease, only while that lease holds.
  virtual task<std::int64_t> append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                        std::string message, std::string detail, time_ms now) = 0;
  virtual task<log_page> read_logs(std::string job_id, std::int64_t after_seq, int limit) = 0;

  virtual task<std::vector<lane_stats>> lane_statistics(time_ms now) = 0;
  // How many jobs of one lane wait (claimable now) and run. A backend that cannot count cheaply
  // answers invalid_argument, and workers then claim without spreading.
  virtual task<lane_load> load_of_lane(std::string lane, time_ms now) {
    (void)lane;
    (void)now;
    co_return make_error(errc::invalid_argument, "this store does not count lane load", "lane");
  }
};

struct project {
  std::string id;
  std::string name;
  time_ms created_at = 0;
};

class project_store {
 public:
  virtual ~project_store() = default;
  // Returns the project and whether this call created it.
  virtual task<std::pair<project, bool>> ensure(std::string name, time_ms now) = 0;
  virtual task<project> find_by_name(std::string name) = 0;
  virtual task<std::vector<project>> list() = 0;
  // A new project; conflict when the name is taken (the name is checked by the caller).
  virtual task<project> create(std::string name, time_ms now) = 0;
  // Deletes a project, in one transaction. Refused (conflict, saying what is left) while it has
  // catalog objects or distributions, jobs that are not terminal (pending, active, failed
  // awaiting retry), or an unrevoked system-admin token. Its terminal jobs and their logs and its
  // rate-limit windows go with it; its other tokens are revoked (kept, for the token list);
  // audit entries stay until the retention sweep. not_found when there is no such project.
  virtual task<project> remove(std::string name, time_ms now) = 0;
};

class auth_store;     // certfleet/store/auth.hpp
class lease_store;        // certfleet/store/maintenance.hpp
class maintenance_store;  // certfleet/store/maintenance.hpp
class observe_store;  // certfleet/store/auth.hpp
class catalog_store;  // certfleet/store/catalog.hpp
class session_slot_store;  // certfleet/store/session_slots.hpp
class worker_store;        // certfleet/store/workers.hpp

class store {
 public:
  virtual ~store() = default;
  virtual job_store& jobs() = 0;
  virtual project_store& projects() = 0;
  virtual auth_store& auth() = 0;        // tokens, audit log, system settings
  virtual observe_store& observe() = 0;  // /metrics and live log reads
  virtual lease_store& leases() = 0;              // the scheduler's leader lease
  virtual maintenance_store& maintenance() = 0;  // retention, backup
  virtual catalog_store& catalog() = 0;          // certificates, targets, distributions
  virtual session_slot_store& session_slots() = 0;  // SSH sessions per destination (issue 20)
  virtual worker_store& workers() = 0;              // worker heartbeats and liveness (issue 34)
  // A round trip to the store (/readyz); while writes are refused for a full disk, a small
  // write, failing with store_disk_full until space is freed.
  virtual task<void> ping() = 0;
  struct write_health {
    bool disk_full = false;                 // the last write failed for a full disk, none succeeded since
    std::int64_t disk_full_refusals = 0;    // operations refused for a full disk since the start
  };
  virtual write_health write_state() const { return {}; }
  // Calls `on_claimable(lane)` (on a store thread) when a job of that lane became claimable in
  // another process, so this process's workers claim at once instead of at their next poll.
  // A backend that cannot tell (SQLite: one machine; its own enqueues wake its workers) never
  // calls it; the poll stays the fallback either way.
  virtual void watch_claimable(std::function<void(std::string_view lane)> on_claimable) { (void)on_claimable; }
  // Stops the store threads after the work queued so far; later calls fail with shutting_down.
  virtual void close() = 0;
};

struct sqlite_options {
  std::string path;  // the database file
  int readers = 2;
  int busy_timeout_ms = 5000;
  bool synchronous_full = false;
  // `certfleet doctor`: an existing file at this build's schema, opened without a write of any
  // kind (no create, no chmod, no migration, no switch to WAL); every write fails.
  bool read_only = false;
};

// Opens (creating if needed) and migrates the SQLite store; with read_only, opens it as it is.
result<std::unique_ptr<store>> open_sqlite(const sqlite_options& options);

// A look at a store file without changing it (`certfleet doctor`): opened read-only, never
// migrated. Errors (store_failure, field "data"): the file cannot be opened or read as SQLite.
struct sqlite_file_report {
  int schema_version = 0;        // migrations applied to the file (0: not a certfleet store yet)
  int build_schema_version = 0;  // migrations this build knows
  std::vector<std::string> integrity;  // PRAGMA integrity_check: {"ok"}, or up to 20 problems
};
result<sqlite_file_report> inspect_sqlite(const std::string& path);

}  // namespace certfleet::store
