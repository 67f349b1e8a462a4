#pragma once
// The job queue on MongoDB (job_queue, queue.hpp), private to src/store/mongo: its one class,
// declared here so that three files can define its members and each stays readable on its own:
// mongo_queue.cpp the writes, mongo_queue_reads.cpp the reads, mongo_queue_projects.cpp
// project_store.
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/store.hpp"
#include "client.hpp"
#include "job_document.hpp"
#include "job_tx.hpp"
#include "queue.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace certfleet::store::mongo::detail {

class mongo_queue final : public job_queue {
 public:
  mongo_queue(connection& c, executor& ex, catalog_tx_factory catalog)
      : c_(&c), ex_(ex), catalog_factory_(std::move(catalog)) {}

  task<void> ping() override;

  void set_terminal_hook(terminal_hook hook) override { hook_ = std::move(hook); }

  // The time a due-time filter compares with: the caller's, moved onto the server's clock.
  time_ms due(time_ms now) const {
    return c_->options().clock == lease_clock::server ? now + c_->clock_offset_ms() : now;
  }
  time_expr now_expr(time_ms now) const { return {c_->options().clock == lease_clock::server, now}; }

  task<enqueue_outcome> enqueue(new_job j, time_ms now) override;
  result<enqueue_outcome> enqueue_one(mongoc_client_t* client, const new_job& j, time_ms now);
  task<std::vector<enqueue_outcome>> enqueue_many(std::vector<new_job> jobs, time_ms now) override;
  task<std::vector<job_record>> claim(std::string lane, std::string worker_id, time_ms now, time_ms lease_ms,
                                      int limit) override;
  task<std::vector<heartbeat_result>> heartbeat(std::vector<lease_ref> leases, std::string worker_id, time_ms now,
                                                time_ms lease_ms) override;
  task<std::vector<result<job_record>>> finish(std::vector<finish_request> reqs, time_ms now) override;
  static error lease_lost(const finish_request& r);
  static bool finished_by(const job_record& j, const finish_request& r);
  result<job_record> finish_one(mongoc_client_t* client, const finish_request& r, time_ms now);
  doc lost_worker_command(const job_record& j, time_ms now, bool in_transaction) const;
  std::optional<failure> release_lost(mongoc_client_t* client, mongoc_client_session_t* s, const job_record& j,
                                      time_ms now, bool& changed) override;
  task<int> reap_expired(time_ms now, int limit) override;

  // mongo_queue_reads.cpp
  std::optional<job_record> find_job(mongoc_client_t* client, const std::string& project_id, const std::string& id,
                                     std::optional<failure>& fail, mongoc_client_session_t* s = nullptr);
  task<job_record> get(std::string project_id, std::string id) override;
  task<job_page> list(job_filter f) override;

  // Runs a read-decide-write on one job in a transaction (cancel, retry): the decision reads a
  // majority snapshot and the write commits only if nothing changed the job meanwhile.
  template <class T, class Body>
  result<T> in_transaction(mongoc_client_t* client, const char* doing, Body body) {
    std::optional<result<T>> out;
    auto fail = c_->transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
      out.reset();
      std::optional<failure> f;
      out.emplace(body(s, f));
      return f;
    });
    if (fail) return to_error(*fail, doing);
    return std::move(*out);
  }

  task<cancel_outcome> cancel(std::string project_id, std::string id, time_ms now) override;
  task<job_record> retry(std::string project_id, std::string id, time_ms now, int per_minute) override;
  task<void> set_progress(lease_ref lease, std::int64_t current, std::int64_t total) override;
  task<std::int64_t> append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                std::string message, std::string detail, time_ms now) override;

  // mongo_queue_reads.cpp
  task<log_page> read_logs(std::string job_id, std::int64_t after_seq, int limit) override;
  task<lane_load> load_of_lane(std::string lane, time_ms now) override;
  task<std::vector<lane_stats>> lane_statistics(time_ms) override;

  // project_store: mongo_queue_projects.cpp
  static project read_project(const bson_t* b);
  task<std::pair<project, bool>> ensure(std::string name, time_ms now) override;
  task<project> find_by_name(std::string name) override;
  task<project> create(std::string name, time_ms now) override;
  task<project> remove(std::string name, time_ms now) override;
  task<std::vector<project>> list() override;

 private:
  connection* c_;
  executor& ex_;
  terminal_hook hook_;
  catalog_tx_factory catalog_factory_;
};

}  // namespace certfleet::store::mongo::detail
