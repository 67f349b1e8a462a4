// The job queue on MongoDB (DESIGN §10): jobs, job logs and projects. Every write is w:majority;
// a claim is one findAndModify on the claim index; every later write of an attempt filters on
// its fence; transitions that run a terminal hook run in a transaction with it. Here: the writes
// and the queue alone; the reads are mongo_queue_reads.cpp's, projects mongo_queue_projects.cpp's
// (mongo_queue_detail.hpp: the class they share).
#include "mongo_queue_detail.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/job_policy.hpp"
#include "certfleet/store/mongodb.hpp"
#include "client.hpp"
#include "commands.hpp"
#include "job_tx.hpp"
#include "queue.hpp"
#include "job_document.hpp"
#include "schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace certfleet::store {
namespace mongo {

using namespace detail;

namespace detail {

task<void> mongo_queue::ping() {
  return run<result<void>>(ex_, [this](mongoc_client_t* client) -> result<void> {
    doc cmd;
    cmd.i32("ping", 1);
    doc reply;
    if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "ping");
    return {};
  });
}

task<enqueue_outcome> mongo_queue::enqueue(new_job j, time_ms now) {
  return run<result<enqueue_outcome>>(ex_, [this, j = std::move(j), now](mongoc_client_t* client) {
    return enqueue_one(client, j, now);
  });
}

result<enqueue_outcome> mongo_queue::enqueue_one(mongoc_client_t* client, const new_job& j, time_ms now) {
  const auto id = j.id.empty() ? new_object_id() : j.id;
  auto d = new_job_document(j, id, now);
  doc cmd;
  cmd.str("insert", "jobs").array("documents", {d}).sub("writeConcern", write_concern(*c_));
  cmd.i32("maxTimeMS", c_->max_time_ms());
  // The _id is ours, so sending the insert again after an unknown outcome is safe: it lands
  // once, and a second copy fails on _id.
  for (int attempt = 0;; ++attempt) {
    doc reply;
    auto fail = c_->command(client, cmd, reply);
    if (!fail) return enqueue_outcome{read_job(d.get()), true};
    if (fail->network && attempt == 0) continue;
    if (!is_duplicate_key(*fail)) return to_error(*fail, "enqueue");
    doc f;
    if (duplicate_on_id(*fail) || j.idempotency_key.empty()) f.str("_id", id);
    else f.str("project_id", j.project_id).str("idempotency_key", j.idempotency_key);
    doc found;
    if (auto rf = c_->command(client, find_command("jobs", f, nullptr, 1, 0, c_->max_time_ms(), true), found))
      return to_error(*rf, "enqueue: reading the job the key names");
    auto batch = first_batch(found);
    if (batch.empty()) return make_error(errc::store_failure, "enqueue: duplicate key but no job holds it");
    auto rec = read_job(batch.front().get());
    // Our own earlier insert (its reply was lost) is a creation, not a duplicate.
    return enqueue_outcome{std::move(rec), duplicate_on_id(*fail)};
  }
}

task<std::vector<enqueue_outcome>> mongo_queue::enqueue_many(std::vector<new_job> jobs, time_ms now) {
  return run<result<std::vector<enqueue_outcome>>>(
      ex_, [this, jobs = std::move(jobs), now](mongoc_client_t* client) -> result<std::vector<enqueue_outcome>> {
        std::vector<enqueue_outcome> out;
        auto fail = c_->transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
          out.clear();
          out.reserve(jobs.size());
          mongo_job_tx tx(*c_, client, s, &catalog_factory_);
          for (const auto& j : jobs) {
            auto r = tx.enqueue(j, now);
            if (!r) {
              if (tx.failed) return tx.failed;
              failure f;
              f.err = r.error();
              return f;
            }
            out.push_back(std::move(*r));
          }
          return std::nullopt;
        });
        if (fail) return to_error(*fail, "enqueue (one transaction)");
        return out;
      });
}

task<std::vector<job_record>> mongo_queue::claim(std::string lane, std::string worker_id, time_ms now, time_ms lease_ms,
                                                 int limit) {
  return run<result<std::vector<job_record>>>(
      ex_, [this, lane = std::move(lane), worker_id = std::move(worker_id), now, lease_ms,
            limit](mongoc_client_t* client) -> result<std::vector<job_record>> {
        std::vector<job_record> out;
        const auto cmd = claim_command(lane, worker_id, due(now), now_expr(now), lease_ms, c_->max_time_ms());
        for (int i = 0; i < limit; ++i) {
          doc reply;
          // Never sent twice: a claim whose reply was lost is recovered by its lease ending.
          if (auto fail = c_->command(client, cmd, reply)) {
            if (!out.empty()) break;  // keep what was claimed; the next poll tries again
            return to_error(*fail, "claim");
          }
          auto v = find_and_modify_value(reply);
          if (!v) break;
          auto j = read_job(v->get());
          // What a handler reads, not the previous attempt's error or progress.
          j.error.clear();
          j.progress_current = j.progress_total = 0;
          out.push_back(std::move(j));
        }
        std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
        return out;
      });
}

task<std::vector<heartbeat_result>> mongo_queue::heartbeat(std::vector<lease_ref> leases, std::string worker_id,
                                                           time_ms now, time_ms lease_ms) {
  return run<result<std::vector<heartbeat_result>>>(
      ex_, [this, leases = std::move(leases), worker_id = std::move(worker_id), now,
            lease_ms](mongoc_client_t* client) -> result<std::vector<heartbeat_result>> {
        std::vector<heartbeat_result> out;
        for (const auto& l : leases) {
          doc q;
          q.str("_id", l.id).str("locked_by", worker_id).i64("fence", l.fence).str("status", "active");
          doc end;
          {
            mongo::list add;
            now_expr(now).append_to(add);
            add.i64(lease_ms);
            end.arr("$add", add);
          }
          doc set;
          set.sub("locked_until", end).sub("ready_at", end);
          doc stage;
          stage.sub("$set", set);
          doc fields;
          fields.i32("cancel_requested", 1);
          doc cmd;
          cmd.str("findAndModify", "jobs").sub("query", q).array("update", {stage}).boolean("new", true);
          cmd.sub("fields", fields).sub("writeConcern", write_concern(*c_)).i32("maxTimeMS", c_->max_time_ms());
          doc reply;
          heartbeat_result h{l.id, lease_state::lost};
          // Extending a lease twice is harmless: an unknown outcome is sent again once.
          auto fail = c_->command(client, cmd, reply);
          if (fail && fail->network) fail = c_->command(client, cmd, reply);
          if (fail) return to_error(*fail, "heartbeat");
          if (auto v = find_and_modify_value(reply))
            h.state = view(v->get()).boolean("cancel_requested") ? lease_state::cancel_requested : lease_state::held;
          out.push_back(std::move(h));
        }
        return out;
      });
}

task<std::vector<result<job_record>>> mongo_queue::finish(std::vector<finish_request> reqs, time_ms now) {
  return run<result<std::vector<result<job_record>>>>(
      ex_, [this, reqs = std::move(reqs), now](mongoc_client_t* client) -> result<std::vector<result<job_record>>> {
        std::vector<result<job_record>> out;
        out.reserve(reqs.size());
        for (const auto& r : reqs) out.push_back(finish_one(client, r, now));
        return out;
      });
}

error mongo_queue::lease_lost(const finish_request& r) {
  return make_error(errc::lease_lost,
                    fmt::format("job {} attempt {} is no longer held by {}", r.lease.id, r.lease.fence, r.worker_id),
                    "fence");
}

// Whether `j` is what this finish made of the attempt (read back after an unknown outcome).
bool mongo_queue::finished_by(const job_record& j, const finish_request& r) {
  if (j.fence != r.lease.fence) return false;
  if (r.kind == finish_kind::released) return j.status == job_status::pending && j.locked_by.empty();
  return j.status != job_status::active && j.locked_by == r.worker_id;
}

result<job_record> mongo_queue::finish_one(mongoc_client_t* client, const finish_request& r, time_ms now) {
  // Every kind but a release may end the job (a failure with no attempts left is dead).
  if (hook_.fn && r.kind != finish_kind::released) {
    // The transition and its terminal hook commit together.
    std::optional<job_record> done;
    auto fail = c_->transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
      done.reset();
      doc reply;
      if (auto f = c_->command(client, finish_command(r, now, c_->max_time_ms(), true), reply, s)) return f;
      auto v = find_and_modify_value(reply);
      if (!v) return std::nullopt;
      done = read_job(v->get());
      if (is_terminal(done->status) && hook_.wants(done->type, done->status)) {
        mongo_job_tx tx(*c_, client, s, &catalog_factory_);
        hook_.fn(tx, *done);
        if (tx.failed) return tx.failed;
      }
      return std::nullopt;
    });
    if (fail) return to_error(*fail, "finish");
    if (!done) return lease_lost(r);
    return std::move(*done);
  }
  const auto cmd = finish_command(r, now, c_->max_time_ms(), false);
  doc reply;
  auto fail = c_->command(client, cmd, reply);
  if (fail && fail->network) {
    // The outcome is unknown. The filter (worker, fence, active) makes the write idempotent:
    // read the job back; if it still holds the attempt, send the finish again.
    doc found;
    doc f;
    f.str("_id", r.lease.id);
    if (auto rf = c_->command(client, find_command("jobs", f, nullptr, 1, 0, c_->max_time_ms(), true), found))
      return to_error(*fail, "finish");
    auto batch = first_batch(found);
    if (batch.empty()) return job_not_found(r.lease.id);
    auto j = read_job(batch.front().get());
    if (finished_by(j, r)) return j;
    fail = c_->command(client, cmd, reply);
  }
  if (fail) return to_error(*fail, "finish");
  auto v = find_and_modify_value(reply);
  if (!v) return lease_lost(r);
  return read_job(v->get());
}

// The findAndModify of an expired lease's transition (reap_transition_of, for `j` as read),
// applied only where `j` still holds attempt `j.fence`. Back in pending, the job is in its
// lane's queue again (q); an ending one leaves it.
doc mongo_queue::lost_worker_command(const job_record& j, time_ms now, bool in_transaction) const {
  const auto t = reap_transition_of(j, now);
  doc q;
  q.str("_id", j.id).i64("fence", j.fence).str("status", "active");
  doc set;
  doc unset;
  set.str("status", to_string(t.status)).str("error", t.error).str("error_code", t.error_code);
  if (t.error_class.empty()) unset.str("error_class", "");
  else set.str("error_class", t.error_class);
  if (t.returns_to_pending()) {
    set.str("q", j.lane);
    unset.str("locked_by", "").str("locked_until", "");
  } else {
    set.i64("completed_at", t.completed_at);
    unset.str("locked_until", "").str("q", "");
  }
  doc update;
  update.sub("$set", set).sub("$unset", unset);
  doc cmd;
  cmd.str("findAndModify", "jobs").sub("query", q).sub("update", update).boolean("new", true);
  if (!in_transaction) cmd.sub("writeConcern", write_concern(*c_));
  cmd.i32("maxTimeMS", c_->max_time_ms());
  return cmd;
}

std::optional<failure> mongo_queue::release_lost(mongoc_client_t* client, mongoc_client_session_t* s,
                                                 const job_record& j, time_ms now, bool& changed) {
  changed = false;
  doc r;
  if (auto fail = c_->command(client, lost_worker_command(j, now, true), r, s)) return fail;
  auto v = find_and_modify_value(r);
  if (!v) return std::nullopt;
  changed = true;
  auto rec = read_job(v->get());
  if (is_terminal(rec.status) && hook_.wants(rec.type, rec.status)) {
    mongo_job_tx tx(*c_, client, s, &catalog_factory_);
    hook_.fn(tx, rec);
    if (tx.failed) return tx.failed;
  }
  return std::nullopt;
}

task<int> mongo_queue::reap_expired(time_ms now, int limit) {
  return run<result<int>>(ex_, [this, now, limit](mongoc_client_t* client) -> result<int> {
    doc lte;
    lte.i64("$lte", due(now));
    doc filter;
    filter.str("status", "active").sub("locked_until", lte);
    doc sort;
    sort.i32("locked_until", 1);
    doc reply;
    if (auto f = c_->command(client, find_command("jobs", filter, &sort, limit, 0, c_->max_time_ms(), true), reply))
      return to_error(*f, "reap expired leases");
    int n = 0;
    for (const auto& d : first_batch(reply)) {
      auto j = read_job(d.get());
      // Only an ending job with a hook needs a transaction (the transition and the hook commit
      // together); the rest is one findAndModify.
      if (reap_transition_of(j, now).returns_to_pending() || !hook_.fn) {
        doc r;
        if (auto f = c_->command(client, lost_worker_command(j, now, false), r)) return to_error(*f, "reap expired leases");
        if (find_and_modify_value(r)) ++n;
        continue;
      }
      bool changed = false;
      auto f = c_->transaction(
          client, [&](mongoc_client_session_t* s) { return release_lost(client, s, j, now, changed); });
      if (f) return to_error(*f, "reap expired leases");
      if (changed) ++n;
    }
    return n;
  });
}

task<cancel_outcome> mongo_queue::cancel(std::string project_id, std::string id, time_ms now) {
  return run<result<cancel_outcome>>(
      ex_, [this, p = std::move(project_id), id = std::move(id), now](mongoc_client_t* client) {
        return in_transaction<cancel_outcome>(
            client, "cancel", [&](mongoc_client_session_t* s, std::optional<failure>& f) -> result<cancel_outcome> {
              auto j = find_job(client, p, id, f, s);
              if (f) return to_error(*f, "cancel");
              if (!j) return job_not_found(id);
              doc q;
              q.str("_id", id).str("status", to_string(j->status));
              doc set;
              doc unset;
              bool immediate = false;
              if (j->status == job_status::pending || j->status == job_status::failed) {
                set.str("status", "cancelled").i64("completed_at", now).str("error", "cancelled on request");
                set.str("error_code", cancelled_code);
                unset.str("error_class", "");
                immediate = true;
              } else if (j->status == job_status::active) {
                set.boolean("cancel_requested", true);
              } else {
                return make_error(errc::conflict,
                                  fmt::format("job {} is {}; only pending, failed or active jobs can be cancelled", id,
                                              to_string(j->status)),
                                  "status");
              }
              unset.str("q", "");
              doc update;
              update.sub("$set", set).sub("$unset", unset);
              doc cmd;
              cmd.str("findAndModify", "jobs").sub("query", q).sub("update", update).boolean("new", true);
              cmd.i32("maxTimeMS", c_->max_time_ms());
              doc reply;
              if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "cancel");
              auto v = find_and_modify_value(reply);
              if (!v) return make_error(errc::conflict, fmt::format("job {} changed while it was being cancelled", id), "status");
              auto rec = read_job(v->get());
              if (immediate && hook_.wants(rec.type, rec.status)) {
                mongo_job_tx tx(*c_, client, s, &catalog_factory_);
                hook_.fn(tx, rec);
                if (tx.failed) {
                  f = tx.failed;
                  return to_error(*f, "cancel: terminal hook");
                }
              }
              return cancel_outcome{std::move(rec), immediate};
            });
      });
}

task<job_record> mongo_queue::retry(std::string project_id, std::string id, time_ms now, int per_minute) {
  return run<result<job_record>>(
      ex_, [this, p = std::move(project_id), id = std::move(id), now, per_minute](mongoc_client_t* client) {
        return in_transaction<job_record>(
            client, "retry", [&](mongoc_client_session_t* s, std::optional<failure>& f) -> result<job_record> {
              auto j = find_job(client, p, id, f, s);
              if (f) return to_error(*f, "retry");
              if (!j) return job_not_found(id);
              if (auto refused = retry_refusal(*j)) return std::move(*refused);
              const auto key = p + ":job_retry";
              {
                doc wf;
                wf.str("_id", key);
                doc reply;
                if ((f = c_->command(client, find_in_txn("rate_windows", wf, 1, c_->max_time_ms()), reply, s)))
                  return to_error(*f, "retry");
                auto batch = first_batch(reply);
                std::optional<rate_window> stored;
                if (!batch.empty()) {
                  view w(batch.front().get());
                  stored = rate_window{w.i64("window"), w.i64("count")};
                }
                auto counted = count_retry(stored, now, per_minute);
                if (!counted) return std::move(counted).error();
                if (stored) {
                  doc q;
                  q.str("_id", key);
                  doc set;
                  set.i64("window", counted->window).i64("count", counted->count);
                  doc update;
                  update.sub("$set", set);
                  doc stmt;
                  stmt.sub("q", q).sub("u", update);
                  doc cmd;
                  cmd.str("update", "rate_windows").array("updates", {stmt}).i32("maxTimeMS", c_->max_time_ms());
                  if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "retry");
                } else {
                  doc w;
                  w.str("_id", key).str("project_id", p).str("name", "job_retry").i64("window", counted->window);
                  w.i64("count", counted->count);
                  doc cmd;
                  cmd.str("insert", "rate_windows").array("documents", {w}).i32("maxTimeMS", c_->max_time_ms());
                  if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "retry");
                }
              }
              doc q;
              q.str("_id", id).str("status", to_string(j->status));
              doc set;
              set.str("status", "pending").i64("ready_at", now).i32("attempts", 0).boolean("cancel_requested", false);
              if (!j->held) set.str("q", j->lane);
              doc unset;
              unset.str("error", "").str("locked_by", "").str("locked_until", "").str("completed_at", "");
              unset.str("result_status", "").str("error_code", "").str("error_class", "");
              doc update;
              update.sub("$set", set).sub("$unset", unset);
              doc cmd;
              cmd.str("findAndModify", "jobs").sub("query", q).sub("update", update).boolean("new", true);
              cmd.i32("maxTimeMS", c_->max_time_ms());
              doc reply;
              if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "retry");
              auto v = find_and_modify_value(reply);
              if (!v) return make_error(errc::conflict, fmt::format("job {} changed while it was being retried", id), "status");
              return read_job(v->get());
            });
      });
}

task<void> mongo_queue::set_progress(lease_ref lease, std::int64_t current, std::int64_t total) {
  return run<result<void>>(ex_, [this, lease = std::move(lease), current, total](mongoc_client_t* client) -> result<void> {
    doc q;
    q.str("_id", lease.id).i64("fence", lease.fence).str("status", "active");
    doc set;
    set.i64("progress_current", current).i64("progress_total", total);
    doc update;
    update.sub("$set", set);
    doc stmt;
    stmt.sub("q", q).sub("u", update);
    doc cmd;
    cmd.str("update", "jobs").array("updates", {stmt}).sub("writeConcern", write_concern(*c_));
    cmd.i32("maxTimeMS", c_->max_time_ms());
    doc reply;
    // Setting the same progress twice is harmless: an unknown outcome is sent again once.
    auto fail = c_->command(client, cmd, reply);
    if (fail && fail->network) fail = c_->command(client, cmd, reply);
    if (fail) return to_error(*fail, "set progress");
    if (view(reply.get()).i64("n") == 0)
      return make_error(errc::lease_lost, fmt::format("job {} attempt {} no longer holds its lease", lease.id, lease.fence));
    return {};
  });
}

task<std::int64_t> mongo_queue::append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                           std::string message, std::string detail, time_ms now) {
  return run<result<std::int64_t>>(
      ex_, [this, job_id = std::move(job_id), lease = std::move(lease), level = std::move(level),
            message = std::move(message), detail = std::move(detail), now](mongoc_client_t* client) -> result<std::int64_t> {
        // The job's own counter gives the line its seq, under the lease's fence; the line is
        // inserted after. A lost insert leaves a gap in seq, never a duplicate: the cursor reads
        // seq > after, so a gap costs nothing.
        const auto cmd = next_log_seq_command(job_id, lease, c_->max_time_ms(), false);
        doc reply;
        // Not sent again after an unknown outcome: $inc is not idempotent (a gap at most).
        if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "append log");
        auto v = find_and_modify_value(reply);
        if (!v) {
          if (lease)
            return make_error(errc::lease_lost,
                              fmt::format("job {} attempt {} no longer holds its lease", job_id, lease->fence));
          return job_not_found(job_id);
        }
        const auto seq = view(v->get()).i64("log_seq");
        const auto ins = log_line_insert(job_id, v->get(), level, message, detail, now, c_->max_time_ms(), false);
        // The unique {job_id, seq} index makes a second send of the same line fail on the key:
        // sent again once after an unknown outcome, a duplicate key then means it landed.
        auto f = c_->command(client, ins, reply);
        if (f && f->network) {
          f = c_->command(client, ins, reply);
          if (f && is_duplicate_key(*f)) f.reset();
        }
        if (f) return to_error(*f, "append log");
        return seq;
      });
}

}  // namespace detail

namespace {

// The queue alone (open_mongodb_queue): its own connection and store threads.
class queue_only final : public mongodb_queue {
 public:
  explicit queue_only(std::unique_ptr<connection> c)
      : c_(std::move(c)), ex_(*c_, c_->options().threads), q_(make_job_queue(*c_, ex_, {})) {}
  ~queue_only() override { close(); }
  job_store& jobs() override { return *q_; }
  project_store& projects() override { return *q_; }
  task<void> ping() override { return q_->ping(); }
  void close() override { ex_.close(); }
  std::string database() const override { return c_->database(); }
  time_ms clock_offset_ms() const override { return c_->clock_offset_ms(); }

 private:
  std::unique_ptr<connection> c_;
  executor ex_;
  std::unique_ptr<job_queue> q_;
};

}  // namespace

std::unique_ptr<job_queue> make_job_queue(connection& c, executor& ex, catalog_tx_factory catalog) {
  return std::make_unique<mongo_queue>(c, ex, std::move(catalog));
}

}  // namespace mongo

result<std::unique_ptr<mongodb_queue>> open_mongodb_queue(const mongodb_options& options) {
  auto c = mongo::connection::open(options);
  if (!c) return std::move(c).error();
  if (auto ok = mongo::prepare_schema(**c); !ok) return std::move(ok).error();
  return std::unique_ptr<mongodb_queue>(std::make_unique<mongo::queue_only>(std::move(*c)));
}

}  // namespace certfleet::store
