#pragma once
// The SQLite store (open_sqlite), private to src/store/sqlite: its one class, declared here so that
// four files can define its members and each stays readable on its own: sqlite_store.cpp the
// opening, the job writes and the expired-lease transitions, sqlite_store_reads.cpp the job reads,
// sqlite_store_workers.cpp worker_store, sqlite_store_projects.cpp project_store.
#include "certfleet/store/store.hpp"
#include "certfleet/store/workers.hpp"
#include "executor.hpp"
#include "sqlite_auth.hpp"
#include "sqlite_catalog.hpp"
#include "sqlite_maintenance.hpp"
#include "sqlite_session_slots.hpp"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// The claimable set; the text must match the partial index jobs_claim for SQLite to use it.
#define CLAIMABLE "status IN ('pending', 'failed') AND held = 0"

namespace certfleet::store::sqlite::detail {

error job_not_found(const std::string& id);
std::optional<job_record> find_job(db& d, const std::string& project_id, const std::string& id);

class sqlite_store final : public store, public job_store, public project_store, public worker_store {
 public:
  explicit sqlite_store(const sqlite_options& o);
  ~sqlite_store() override { close(); }

  job_store& jobs() override { return *this; }
  project_store& projects() override { return *this; }
  auth_store& auth() override { return auth_->auth(); }
  observe_store& observe() override { return auth_->observe(); }
  lease_store& leases() override { return maintenance_->leases(); }
  maintenance_store& maintenance() override { return maintenance_->maintenance(); }
  catalog_store& catalog() override { return *catalog_; }
  session_slot_store& session_slots() override { return *slots_; }
  worker_store& workers() override { return *this; }
  void close() override {
    writer_.close();
    readers_.close();
  }

  task<void> ping() override;

  write_health write_state() const override { return {writer_.disk_full(), writer_.disk_full_refusals()}; }

  void set_terminal_hook(terminal_hook hook) override { hook_ = std::move(hook); }

  void terminal(db& d, const job_record& j);

  task<enqueue_outcome> enqueue(new_job j, time_ms now) override;
  task<std::vector<enqueue_outcome>> enqueue_many(std::vector<new_job> jobs, time_ms now) override;
  task<std::vector<job_record>> claim(std::string lane, std::string worker_id, time_ms now, time_ms lease_ms,
                                      int limit) override;
  task<std::vector<heartbeat_result>> heartbeat(std::vector<lease_ref> leases, std::string worker_id, time_ms now,
                                                time_ms lease_ms) override;
  task<std::vector<result<job_record>>> finish(std::vector<finish_request> reqs, time_ms now) override;
  result<job_record> finish_one(db& d, const finish_request& r, time_ms now);
  task<int> reap_expired(time_ms now, int limit) override;

  // worker_store: sqlite_store_workers.cpp
  task<void> beat(worker_presence w, time_ms now) override;
  task<std::vector<worker_presence>> list_workers(time_ms now) override;
  task<std::int64_t> declare_dead(std::string worker_id, std::string reason, time_ms min_age_ms, time_ms now) override;
  task<std::int64_t> prune_workers(time_ms before) override;

  int reap_jobs(db& d, const std::vector<job_record>& expired, time_ms now);

  // sqlite_store_reads.cpp
  task<job_record> get(std::string project_id, std::string id) override;
  task<job_page> list(job_filter f) override;

  task<cancel_outcome> cancel(std::string project_id, std::string id, time_ms now) override;
  task<job_record> retry(std::string project_id, std::string id, time_ms now, int per_minute) override;
  task<void> set_progress(lease_ref lease, std::int64_t current, std::int64_t total) override;
  task<std::int64_t> append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                std::string message, std::string detail, time_ms now) override;

  // sqlite_store_reads.cpp
  task<log_page> read_logs(std::string job_id, std::int64_t after_seq, int limit) override;
  task<lane_load> load_of_lane(std::string lane, time_ms now) override;
  task<std::vector<lane_stats>> lane_statistics(time_ms now) override;

  // project_store: sqlite_store_projects.cpp
  task<std::pair<project, bool>> ensure(std::string name, time_ms now) override;
  task<project> find_by_name(std::string name) override;
  task<project> create(std::string name, time_ms now) override;
  task<project> remove(std::string name, time_ms now) override;
  task<std::vector<project>> list() override;

 private:
  terminal_hook hook_;
  writer writer_;
  reader_pool readers_;
  std::unique_ptr<auth_stores> auth_;
  std::unique_ptr<maintenance_stores> maintenance_;
  std::unique_ptr<catalog_store> catalog_;
  std::unique_ptr<session_slot_store> slots_;
};

}  // namespace certfleet::store::sqlite::detail
