// The worker registry on MongoDB (issue 34; collection `workers`, one document per worker process,
// _id = the worker id), mirroring the SQLite store's: a heartbeat is an upsert stamped with the
// server's clock; declaring a worker dead and releasing its jobs is one transaction that goes
// through the queue's lost-worker policy (release_lost), so it cannot drift from lease expiry.
// The collection stays a few dozen documents (dead ones are pruned): no index beyond _id.
#include "commands.hpp"
#include "job_document.hpp"
#include "queue.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace certfleet::store::mongo {
namespace {

// An aggregation value that is the string itself even when it starts with "$" (a field path).
doc literal(std::string_view s) {
  doc d;
  d.str("$literal", s);
  return d;
}

class mongo_workers final : public worker_store {
 public:
  mongo_workers(connection& c, executor& ex, job_queue& queue) : c_(c), ex_(ex), queue_(queue) {}

  // The current time as a pipeline writes it: the server's ($$NOW) unless the store runs on the
  // caller's clock (tests that step a synthetic clock), exactly as the claim's lease.
  time_expr now_expr(time_ms now) const { return {c_.options().clock == lease_clock::server, now}; }
  // The caller's time moved onto the server's clock, for plain filters.
  time_ms due(time_ms now) const {
    return c_.options().clock == lease_clock::server ? now + c_.clock_offset_ms() : now;
  }

  task<void> beat(worker_presence w, time_ms now) override {
    return run<result<void>>(ex_, [this, w = std::move(w), now](mongoc_client_t* client) -> result<void> {
      // A dead worker's document does not match, so the upsert inserts a second _id and fails on
      // the key: that is the refusal (its jobs are gone; it must not look alive again).
      doc not_dead;
      not_dead.boolean("$exists", false);
      doc q;
      q.str("_id", w.id).sub("dead_at", not_dead);
      doc set;
      set.sub("host", literal(w.host)).sub("host_key", literal(w.host_key)).i64("pid", w.pid);
      set.sub("proc_start", literal(w.proc_start)).sub("version", literal(w.version)).sub("lanes", literal(w.lanes));
      set.i64("started_at", w.started_at).i64("running", w.running);
      now_expr(now).append_to(set, "last_seen");
      doc stage;
      stage.sub("$set", set);
      doc stmt;
      stmt.sub("q", q).array("u", {stage}).boolean("upsert", true);
      doc cmd;
      cmd.str("update", "workers").array("updates", {stmt}).sub("writeConcern", write_concern(c_));
      cmd.i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      // A heartbeat sent twice is harmless: an unknown outcome is sent again once.
      auto fail = c_.command(client, cmd, reply);
      if (fail && fail->network) fail = c_.command(client, cmd, reply);
      if (fail && is_duplicate_key(*fail))
        return make_error(errc::lease_lost,
                          fmt::format("worker {} was declared dead and its jobs were given to others", w.id), "worker");
      if (fail) return to_error(*fail, "worker heartbeat");
      return {};
    });
  }

  task<std::vector<worker_presence>> list_workers(time_ms now) override {
    return run<result<std::vector<worker_presence>>>(
        ex_, [this, now](mongoc_client_t* client) -> result<std::vector<worker_presence>> {
          // Ages by the server's clock, computed where last_seen was stamped.
          doc age;
          {
            list operands;
            now_expr(now).append_to(operands);
            operands.str("$last_seen");
            doc sub;
            sub.arr("$subtract", operands);
            list at_least;
            at_least.sub(sub).i64(0);
            age.arr("$max", at_least);
          }
          doc dead;
          {
            doc type;
            type.str("$type", "$dead_at");
            list eq;
            eq.sub(type).str("missing");
            doc is_missing;
            is_missing.arr("$eq", eq);
            list cond;
            cond.sub(is_missing).i64(0).i64(1);
            dead.arr("$cond", cond);
          }
          doc fields;
          fields.sub("age_ms", age).sub("dead", dead);
          doc add;
          add.sub("$set", fields);
          // Alive first, then the newest heartbeat, then the id (as the SQLite store orders).
          doc order;
          order.i32("dead", 1).i32("last_seen", -1).i32("_id", 1);
          doc sort;
          sort.sub("$sort", order);
          doc limit;
          limit.i64("$limit", max_listed);
          doc cursor;
          cursor.i64("batchSize", max_listed);
          doc cmd;
          cmd.str("aggregate", "workers").array("pipeline", {add, sort, limit}).sub("cursor", cursor);
          // The liveness verdict is taken on this list: read what a majority has.
          cmd.sub("readConcern", majority_read_concern()).i32("maxTimeMS", c_.max_time_ms());
          doc reply;
          if (auto f = c_.command(client, cmd, reply)) return to_error(*f, "list workers");
          std::vector<worker_presence> out;
          for (const auto& d : first_batch(reply)) {
            view v(d.get());
            worker_presence w;
            w.id = v.str("_id");
            w.host = v.str("host");
            w.host_key = v.str("host_key");
            w.pid = v.i64("pid");
            w.proc_start = v.str("proc_start");
            w.version = v.str("version");
            w.lanes = v.str("lanes");
            w.started_at = v.i64("started_at");
            w.running = v.i64("running");
            w.last_seen = v.i64("last_seen");
            w.age_ms = std::max<time_ms>(v.i64("age_ms"), 0);
            w.dead_at = v.i64("dead_at");
            w.dead_reason = v.str("dead_reason");
            w.released_jobs = v.i64("released_jobs");
            out.push_back(std::move(w));
          }
          return out;
        });
  }

  task<std::int64_t> declare_dead(std::string worker_id, std::string reason, time_ms min_age_ms, time_ms now) override {
    return run<result<std::int64_t>>(
        ex_, [this, worker_id = std::move(worker_id), reason = std::move(reason), min_age_ms,
              now](mongoc_client_t* client) -> result<std::int64_t> {
          std::int64_t n = 0;
          auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
            n = 0;
            doc reply;
            // The verdict holds only if the worker is still silent by the server's clock: a
            // heartbeat that landed since the caller looked wins over it.
            if (auto f = c_.command(client, mark_dead_command(worker_id, reason, min_age_ms, now), reply, s)) return f;
            if (view(reply.get()).i64("n") == 0) {
              failure f;
              f.err = make_error(errc::conflict,
                                 fmt::format("worker {} is not registered, already declared dead, or beat again", worker_id),
                                 "worker");
              return f;  // ends the attempt: the transaction is aborted, nothing changed
            }
            // Its jobs' leases end now and take the transitions of an expired lease: none stays
            // active under it, so a late heartbeat, log line or finish of that worker (filtered on
            // locked_by, status and fence) is refused; the next claim raises the fence.
            if (auto f = c_.command(client, end_leases_command(worker_id, now), reply, s)) return f;
            if (auto f = c_.command(client, find_in_txn("jobs", held_filter(worker_id), 0, c_.max_time_ms()), reply, s))
              return f;
            for (const auto& d : first_batch(reply)) {
              bool changed = false;
              if (auto f = queue_.release_lost(client, s, read_job(d.get()), now, changed)) return f;
              if (changed) ++n;
            }
            doc by_id;
            by_id.str("_id", worker_id);
            doc set;
            set.i64("released_jobs", n);
            doc update;
            update.sub("$set", set);
            doc stmt;
            stmt.sub("q", by_id).sub("u", update);
            doc cmd;
            cmd.str("update", "workers").array("updates", {stmt}).i32("maxTimeMS", c_.max_time_ms());
            if (auto f = c_.command(client, cmd, reply, s)) return f;
            return std::nullopt;
          });
          if (fail) return to_error(*fail, "declare worker dead");
          return n;
        });
  }

  task<std::int64_t> prune_workers(time_ms before) override {
    return run<result<std::int64_t>>(ex_, [this, before](mongoc_client_t* client) -> result<std::int64_t> {
      doc lt;
      lt.i64("$lt", due(before));
      doc q;
      q.sub("dead_at", lt);
      doc del;
      del.sub("q", q).i32("limit", 0);
      doc cmd;
      cmd.str("delete", "workers").array("deletes", {del}).sub("writeConcern", write_concern(c_));
      cmd.i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      // Deleting twice deletes nothing more: an unknown outcome is sent again once (the count
      // then says what the second send removed).
      auto fail = c_.command(client, cmd, reply);
      if (fail && fail->network) fail = c_.command(client, cmd, reply);
      if (fail) return to_error(*fail, "prune workers");
      return view(reply.get()).i64("n");
    });
  }

 private:
  // A bound on the list (dead workers are pruned; a few hundred at most in practice).
  static constexpr std::int64_t max_listed = 10'000;

  // {_id, not dead, last_seen <= now − min_age} → dead_at = now, dead_reason.
  doc mark_dead_command(const std::string& worker_id, const std::string& reason, time_ms min_age_ms, time_ms now) const {
    doc not_dead;
    not_dead.boolean("$exists", false);
    doc silent;
    {
      list since;
      now_expr(now).append_to(since);
      since.i64(min_age_ms);
      doc cutoff;
      cutoff.arr("$subtract", since);
      list lte;
      lte.str("$last_seen").sub(cutoff);
      silent.arr("$lte", lte);
    }
    doc q;
    q.str("_id", worker_id).sub("dead_at", not_dead).sub("$expr", silent);
    doc set;
    now_expr(now).append_to(set, "dead_at");
    set.sub("dead_reason", literal(reason));
    doc stage;
    stage.sub("$set", set);
    doc stmt;
    stmt.sub("q", q).array("u", {stage});
    doc cmd;
    cmd.str("update", "workers").array("updates", {stmt}).i32("maxTimeMS", c_.max_time_ms());
    return cmd;
  }

  // The jobs a worker holds. locked_until (every active job has it) lets the partial lease index
  // serve the read instead of a scan of every job.
  static doc held_filter(const std::string& worker_id) {
    doc has_lease;
    has_lease.boolean("$exists", true);
    doc f;
    f.str("status", "active").str("locked_by", worker_id).sub("locked_until", has_lease);
    return f;
  }

  // Ends every lease the worker holds now (ready_at: now, the place in line an expired lease
  // gives, without waiting out the lease). On the server's clock, as the reaper's due times.
  doc end_leases_command(const std::string& worker_id, time_ms now) const {
    doc set;
    set.i64("locked_until", due(now)).i64("ready_at", due(now));
    doc update;
    update.sub("$set", set);
    doc stmt;
    stmt.sub("q", held_filter(worker_id)).sub("u", update).boolean("multi", true);
    doc cmd;
    cmd.str("update", "jobs").array("updates", {stmt}).i32("maxTimeMS", c_.max_time_ms());
    return cmd;
  }

  connection& c_;
  executor& ex_;
  job_queue& queue_;
};

}  // namespace

std::unique_ptr<worker_store> make_worker_store(connection& c, executor& ex, job_queue& queue) {
  return std::make_unique<mongo_workers>(c, ex, queue);
}

}  // namespace certfleet::store::mongo
