// The job queue on MongoDB (DESIGN §10): jobs, job logs and projects. Every write is w:majority;
// a claim is one findAndModify on the claim index; every later write of an attempt filters on
// its fence; transitions that run a terminal hook run in a transaction with it.
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
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
#include <map>
#include <set>
#include <stdexcept>

namespace certfleet::store {
namespace mongo {
namespace {


class mongo_queue final : public job_queue {
 public:
  mongo_queue(connection& c, executor& ex, catalog_tx_factory catalog)
      : c_(&c), ex_(ex), catalog_factory_(std::move(catalog)) {}

  task<void> ping() override {
    return run<result<void>>(ex_, [this](mongoc_client_t* client) -> result<void> {
      doc cmd;
      cmd.i32("ping", 1);
      doc reply;
      if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "ping");
      return {};
    });
  }

  void set_terminal_hook(terminal_hook hook) override { hook_ = std::move(hook); }

  // The time a due-time filter compares with: the caller's, moved onto the server's clock.
  time_ms due(time_ms now) const {
    return c_->options().clock == lease_clock::server ? now + c_->clock_offset_ms() : now;
  }
  time_expr now_expr(time_ms now) const { return {c_->options().clock == lease_clock::server, now}; }

  task<enqueue_outcome> enqueue(new_job j, time_ms now) override {
    return run<result<enqueue_outcome>>(ex_, [this, j = std::move(j), now](mongoc_client_t* client) {
      return enqueue_one(client, j, now);
    });
  }

  result<enqueue_outcome> enqueue_one(mongoc_client_t* client, const new_job& j, time_ms now) {
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

  task<std::vector<enqueue_outcome>> enqueue_many(std::vector<new_job> jobs, time_ms now) override {
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

  task<std::vector<job_record>> claim(std::string lane, std::string worker_id, time_ms now, time_ms lease_ms,
                                      int limit) override {
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

  task<std::vector<heartbeat_result>> heartbeat(std::vector<lease_ref> leases, std::string worker_id, time_ms now,
                                                time_ms lease_ms) override {
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

  task<std::vector<result<job_record>>> finish(std::vector<finish_request> reqs, time_ms now) override {
    return run<result<std::vector<result<job_record>>>>(
        ex_, [this, reqs = std::move(reqs), now](mongoc_client_t* client) -> result<std::vector<result<job_record>>> {
          std::vector<result<job_record>> out;
          out.reserve(reqs.size());
          for (const auto& r : reqs) out.push_back(finish_one(client, r, now));
          return out;
        });
  }

  static error lease_lost(const finish_request& r) {
    return make_error(errc::lease_lost,
                      fmt::format("job {} attempt {} is no longer held by {}", r.lease.id, r.lease.fence, r.worker_id),
                      "fence");
  }

  // Whether `j` is what this finish made of the attempt (read back after an unknown outcome).
  static bool finished_by(const job_record& j, const finish_request& r) {
    if (j.fence != r.lease.fence) return false;
    if (r.kind == finish_kind::released) return j.status == job_status::pending && j.locked_by.empty();
    return j.status != job_status::active && j.locked_by == r.worker_id;
  }

  result<job_record> finish_one(mongoc_client_t* client, const finish_request& r, time_ms now) {
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
  doc lost_worker_command(const job_record& j, time_ms now, bool in_transaction) const {
    const auto t = reap_transition_of(j, now);
    doc q;
    q.str("_id", j.id).i64("fence", j.fence).str("status", "active");
    doc set;
    doc unset;
    set.str("status", to_string(t.status)).str("error", t.error);
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

  std::optional<failure> release_lost(mongoc_client_t* client, mongoc_client_session_t* s, const job_record& j,
                                      time_ms now, bool& changed) override {
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

  task<int> reap_expired(time_ms now, int limit) override {
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

  std::optional<job_record> find_job(mongoc_client_t* client, const std::string& project_id, const std::string& id,
                                     std::optional<failure>& fail, mongoc_client_session_t* s = nullptr) {
    doc f;
    f.str("_id", id).str("project_id", project_id);
    doc reply;
    fail = s ? c_->command(client, find_in_txn("jobs", f, 1, c_->max_time_ms()), reply, s)
             : c_->command(client, find_command("jobs", f, nullptr, 1, 0, c_->max_time_ms(), false), reply);
    if (fail) return std::nullopt;
    auto batch = first_batch(reply);
    if (batch.empty()) return std::nullopt;
    return read_job(batch.front().get());
  }

  task<job_record> get(std::string project_id, std::string id) override {
    return run<result<job_record>>(
        ex_, [this, p = std::move(project_id), id = std::move(id)](mongoc_client_t* client) -> result<job_record> {
          std::optional<failure> fail;
          auto j = find_job(client, p, id, fail);
          if (fail) return to_error(*fail, "get job");
          if (!j) return job_not_found(id);
          return std::move(*j);
        });
  }

  task<job_page> list(job_filter f) override {
    return run<result<job_page>>(ex_, [this, f = std::move(f)](mongoc_client_t* client) -> result<job_page> {
      job_page page;
      // Counts per status for the tabs: one aggregation over the project's (and type's) jobs.
      doc match;
      match.str("project_id", f.project_id);
      if (!f.type.empty()) match.str("type", f.type);
      {
        doc m;
        m.sub("$match", match);
        doc sum;
        sum.i32("$sum", 1);
        doc group_body;
        group_body.str("_id", "$status").sub("n", sum);
        doc g;
        g.sub("$group", group_body);
        doc cursor;
        doc cmd;
        cmd.str("aggregate", "jobs").array("pipeline", {m, g}).sub("cursor", cursor).i32("maxTimeMS", c_->max_time_ms());
        doc reply;
        if (auto fail = c_->command(client, cmd, reply)) return to_error(*fail, "list jobs: counts");
        for (const auto& d : first_batch(reply)) {
          view v(d.get());
          if (auto st = parse_job_status(v.str("_id"))) page.counts[static_cast<std::size_t>(*st)] = v.i64("n");
        }
      }
      if (f.status) page.total = page.counts[static_cast<std::size_t>(*f.status)];
      else
        for (auto n : page.counts) page.total += n;
      doc filter = match;
      if (f.status) filter.str("status", to_string(*f.status));
      std::int64_t skip = 0;
      if (!f.cursor.empty()) {
        doc lt;
        lt.str("$lt", f.cursor);
        filter.sub("_id", lt);
      } else {
        skip = static_cast<std::int64_t>(f.page - 1) * f.page_size;
        if (skip >= page.total) return page;
      }
      doc sort;
      sort.i32("_id", -1);
      doc reply;
      if (auto fail = c_->command(client, find_command("jobs", filter, &sort, f.page_size + 1, skip, c_->max_time_ms(), false),
                                  reply))
        return to_error(*fail, "list jobs");
      for (const auto& d : first_batch(reply)) page.items.push_back(read_job(d.get()));
      if (static_cast<int>(page.items.size()) > f.page_size) {
        page.items.pop_back();
        page.next_cursor = page.items.back().id;
      }
      return page;
    });
  }

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

  task<cancel_outcome> cancel(std::string project_id, std::string id, time_ms now) override {
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

  task<job_record> retry(std::string project_id, std::string id, time_ms now, int per_minute) override {
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
                unset.str("result_status", "");
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

  task<void> set_progress(lease_ref lease, std::int64_t current, std::int64_t total) override {
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

  task<std::int64_t> append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                std::string message, std::string detail, time_ms now) override {
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

  task<log_page> read_logs(std::string job_id, std::int64_t after_seq, int limit) override {
    return run<result<log_page>>(ex_, [this, job_id = std::move(job_id), after_seq, limit](mongoc_client_t* client) -> result<log_page> {
      log_page page;
      page.next_cursor = after_seq;
      doc gt;
      gt.i64("$gt", after_seq);
      doc filter;
      filter.str("job_id", job_id).sub("seq", gt);
      doc sort;
      sort.i32("seq", 1);
      doc reply;
      if (auto f = c_->command(client, find_command("job_logs", filter, &sort, limit, 0, c_->max_time_ms(), false), reply))
        return to_error(*f, "read logs");
      for (const auto& d : first_batch(reply)) {
        view v(d.get());
        page.lines.push_back(log_line{v.i64("seq"), v.i64("ts"), v.str("level"), v.str("message"), v.str("detail")});
        page.next_cursor = page.lines.back().seq;
      }
      return page;
    });
  }

  // Two counts for the dist lane's fair share (issue 34): waiting (claimable by the claim's own
  // index, {q, ready_at}) and running (active jobs of the lane).
  task<lane_load> load_of_lane(std::string lane, time_ms now) override {
    return run<result<lane_load>>(ex_, [this, lane = std::move(lane), now](mongoc_client_t* client) -> result<lane_load> {
      lane_load out;
      doc reply;
      {
        doc statuses;
        statuses.str_array("$in", {"pending", "failed"});
        doc lte;
        lte.i64("$lte", now);
        doc query;
        query.str("q", lane).sub("ready_at", lte).sub("status", statuses);
        doc cmd;
        cmd.str("count", "jobs").sub("query", query).i32("maxTimeMS", c_->max_time_ms());
        if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "lane load: waiting");
        out.waiting = view(reply.get()).i64("n");
      }
      {
        doc query;
        query.str("status", "active").str("lane", lane);
        doc cmd;
        cmd.str("count", "jobs").sub("query", query).i32("maxTimeMS", c_->max_time_ms());
        doc running;
        if (auto f = c_->command(client, cmd, running)) return to_error(*f, "lane load: running");
        out.running = view(running.get()).i64("n");
      }
      return out;
    });
  }

  task<std::vector<lane_stats>> lane_statistics(time_ms) override {
    return run<result<std::vector<lane_stats>>>(ex_, [this](mongoc_client_t* client) -> result<std::vector<lane_stats>> {
      // One aggregation on the claim index: waiting jobs per lane and the oldest due time.
      doc in_lanes;
      in_lanes.str_array("$in", {"main", "dist"});
      doc statuses;
      statuses.str_array("$in", {"pending", "failed"});
      doc match_body;
      match_body.sub("q", in_lanes).sub("status", statuses);
      doc m;
      m.sub("$match", match_body);
      doc sum;
      sum.i32("$sum", 1);
      doc oldest;
      oldest.str("$min", "$ready_at");
      doc group_body;
      group_body.str("_id", "$q").sub("n", sum).sub("oldest", oldest);
      doc g;
      g.sub("$group", group_body);
      doc cmd;
      cmd.str("aggregate", "jobs").array("pipeline", {m, g}).sub("cursor", doc{}).i32("maxTimeMS", c_->max_time_ms());
      doc reply;
      if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "lane statistics");
      std::map<std::string, lane_stats> by_lane{{"main", {"main", 0, 0}}, {"dist", {"dist", 0, 0}}};
      for (const auto& d : first_batch(reply)) {
        view v(d.get());
        auto it = by_lane.find(v.str("_id"));
        if (it == by_lane.end()) continue;
        it->second.pending = v.i64("n");
        it->second.oldest_ready_at = v.i64("oldest");
      }
      return std::vector<lane_stats>{by_lane["main"], by_lane["dist"]};
    });
  }

  // project_store
  static project read_project(const bson_t* b) {
    view v(b);
    return project{v.str("_id"), v.str("name"), v.i64("created_at")};
  }

  task<std::pair<project, bool>> ensure(std::string name, time_ms now) override {
    return run<result<std::pair<project, bool>>>(
        ex_, [this, name = std::move(name), now](mongoc_client_t* client) -> result<std::pair<project, bool>> {
          doc q;
          q.str("name", name);
          doc on_insert;
          on_insert.str("_id", new_object_id()).i64("created_at", now);
          doc update;
          update.sub("$setOnInsert", on_insert);
          doc cmd;
          cmd.str("findAndModify", "projects").sub("query", q).sub("update", update).boolean("upsert", true);
          cmd.boolean("new", true).sub("writeConcern", write_concern(*c_)).i32("maxTimeMS", c_->max_time_ms());
          // Two upserts of one name race to the unique index: the loser reads the winner's.
          for (int attempt = 0; attempt < 2; ++attempt) {
            doc reply;
            auto f = c_->command(client, cmd, reply);
            if (f && (is_duplicate_key(*f) || f->network)) continue;
            if (f) return to_error(*f, "ensure project");
            view v(reply.get());
            auto value = v.sub("value");
            if (!value) break;
            const bool created = !v.boolean("lastErrorObject.updatedExisting");
            return std::pair{read_project(value->get()), created};
          }
          doc found;
          if (auto f = c_->command(client, find_command("projects", q, nullptr, 1, 0, c_->max_time_ms(), true), found))
            return to_error(*f, "ensure project");
          auto batch = first_batch(found);
          if (batch.empty()) return make_error(errc::store_failure, fmt::format("project {} could not be created", name));
          return std::pair{read_project(batch.front().get()), false};
        });
  }

  task<project> find_by_name(std::string name) override {
    return run<result<project>>(ex_, [this, name = std::move(name)](mongoc_client_t* client) -> result<project> {
      doc q;
      q.str("name", name);
      doc reply;
      if (auto f = c_->command(client, find_command("projects", q, nullptr, 1, 0, c_->max_time_ms(), false), reply))
        return to_error(*f, "find project");
      auto batch = first_batch(reply);
      if (batch.empty()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
      return read_project(batch.front().get());
    });
  }

  task<project> create(std::string name, time_ms now) override {
    return run<result<project>>(ex_, [this, name = std::move(name), now](mongoc_client_t* client) -> result<project> {
      doc p;
      p.str("_id", new_object_id()).str("name", name).i64("created_at", now);
      doc cmd;
      cmd.str("insert", "projects").array("documents", {p}).sub("writeConcern", write_concern(*c_));
      cmd.i32("maxTimeMS", c_->max_time_ms());
      doc reply;
      if (auto f = c_->command(client, cmd, reply)) {
        if (is_duplicate_key(*f))
          return make_error(errc::conflict, fmt::format("a project named {} already exists", name), "name");
        return to_error(*f, "create project");
      }
      return read_project(p.get());
    });
  }

  task<project> remove(std::string name, time_ms now) override {
    return run<result<project>>(ex_, [this, name = std::move(name), now](mongoc_client_t* client) {
      return in_transaction<project>(
          client, "remove project", [&](mongoc_client_session_t* s, std::optional<failure>& f) -> result<project> {
            doc q;
            q.str("name", name);
            doc reply;
            if ((f = c_->command(client, find_in_txn("projects", q, 1, c_->max_time_ms()), reply, s)))
              return to_error(*f, "remove project");
            auto batch = first_batch(reply);
            if (batch.empty()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
            auto p = read_project(batch.front().get());
            doc live_status;
            live_status.str_array("$in", {"pending", "active", "failed"});
            doc live;
            live.str("project_id", p.id).sub("status", live_status);
            // count is not allowed in a transaction; an aggregate with $count is.
            doc m;
            m.sub("$match", live);
            doc c;
            c.str("$count", "n");
            doc agg;
            agg.str("aggregate", "jobs").array("pipeline", {m, c}).sub("cursor", doc{}).i32("maxTimeMS", c_->max_time_ms());
            if ((f = c_->command(client, agg, reply, s))) return to_error(*f, "remove project");
            auto counted = first_batch(reply);
            const auto n = counted.empty() ? 0 : view(counted.front().get()).i64("n");
            if (n > 0)
              return make_error(errc::conflict,
                                fmt::format("project {} still has {} jobs that are not finished (cancel them or let them end)",
                                            name, n),
                                "project");
            // The project's jobs, their logs (each line names its project) and its rate windows go
            // with it.
            doc in_project;
            in_project.str("project_id", p.id);
            for (const char* coll : {"job_logs", "jobs", "rate_windows"}) {
              doc del;
              del.sub("q", in_project).i32("limit", 0);
              doc cmd;
              cmd.str("delete", coll).array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
              if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
            }
            {  // its settings object (PUT …/projects/{p}/settings) is part of the project, not content
              doc settings;
              settings.str("project_id", p.id).str("kind", std::string(kind_project_settings));
              doc del;
              del.sub("q", settings).i32("limit", 0);
              doc cmd;
              cmd.str("delete", "objects").array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
              if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
            }
            doc by_id;
            by_id.str("_id", p.id);
            doc del;
            del.sub("q", by_id).i32("limit", 1);
            doc cmd;
            cmd.str("delete", "projects").array("deletes", {del}).i32("maxTimeMS", c_->max_time_ms());
            if ((f = c_->command(client, cmd, reply, s))) return to_error(*f, "remove project");
            (void)now;
            return p;
          });
    });
  }

  task<std::vector<project>> list() override {
    return run<result<std::vector<project>>>(ex_, [this](mongoc_client_t* client) -> result<std::vector<project>> {
      doc sort;
      sort.i32("name", 1);
      doc reply;
      if (auto f = c_->command(client, find_command("projects", doc{}, &sort, 10'000, 0, c_->max_time_ms(), false), reply))
        return to_error(*f, "list projects");
      std::vector<project> out;
      for (const auto& d : first_batch(reply)) out.push_back(read_project(d.get()));
      return out;
    });
  }

 private:
  connection* c_;
  executor& ex_;
  terminal_hook hook_;
  catalog_tx_factory catalog_factory_;
};

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
