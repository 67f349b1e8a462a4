// The scheduler's leader lease (lease_store) and retention (maintenance_store) on MongoDB,
// mirroring sqlite_maintenance.cpp (DESIGN §10). Collections: leases {_id: name, holder, epoch,
// expires_at}; retention reads jobs and job_logs.
#include "mongo_auth.hpp"
#include "auth_commands.hpp"
#include "commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <set>

namespace certfleet::store::mongo {

using namespace detail;

namespace {

doc acquire_command(const std::string& name, const std::string& holder, time_ms now, time_ms ttl,
                    std::int32_t max_time_ms) {
  doc mine;
  mine.str("holder", holder);
  doc expired;
  expired.sub("expires_at", i64_op("$lte", now));
  doc query;
  query.str("_id", name).array("$or", {mine, expired});
  doc same;
  {
    list l;
    l.str("$holder").sub(literal(holder));
    same.arr("$eq", l);
  }
  doc next_epoch;
  {
    list if_null;
    if_null.str("$epoch").i64(0);
    doc prev;
    prev.arr("$ifNull", if_null);
    list add;
    add.sub(prev).i64(1);
    next_epoch.arr("$add", add);
  }
  doc epoch;
  {
    list l;
    l.sub(same).str("$epoch").sub(next_epoch);
    epoch.arr("$cond", l);
  }
  doc set;
  set.sub("epoch", epoch).sub("holder", literal(holder)).i64("expires_at", now + ttl);
  std::vector<doc> pipeline;
  pipeline.push_back(op("$set", set));
  doc cmd;
  cmd.str("findAndModify", "leases").sub("query", query).array("update", pipeline);
  cmd.boolean("upsert", true).boolean("new", true);
  cmd.sub("writeConcern", majority_write_concern(max_time_ms)).i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc release_command(const std::string& name, const std::string& holder, std::int64_t epoch, std::int32_t max_time_ms) {
  doc q;
  q.str("_id", name).str("holder", holder).i64("epoch", epoch);
  doc set;
  set.i64("expires_at", 0);
  doc stmt;
  stmt.sub("q", q).sub("u", op("$set", set));
  doc cmd;
  cmd.str("update", "leases").array("updates", {stmt});
  cmd.sub("writeConcern", majority_write_concern(max_time_ms)).i32("maxTimeMS", max_time_ms);
  return cmd;
}

// ----------------------------------------------------------------------------------------------
class mongo_leases final : public lease_store {
 public:
  mongo_leases(connection& c, executor& ex) : c_(c), ex_(ex) {}

  task<leader_lease> acquire(std::string name, std::string holder, time_ms now, time_ms ttl) override {
    return run<result<leader_lease>>(
        ex_, [this, name = std::move(name), holder = std::move(holder), now, ttl](mongoc_client_t* client)
                 -> result<leader_lease> {
          // Free, expired or ours: one findAndModify (upsert) takes or renews it; a change of
          // holder bumps the epoch. Times are the caller's `now`, as in SQLite (the interface's
          // contract: every holder computes expiry on its own clock).
          doc reply;
          auto fail = c_.command(client, acquire_command(name, holder, now, ttl, c_.max_time_ms()), reply);
          // A duplicate key on the upsert: the lease exists and the filter did not match it (held
          // by another, unexpired) — or another process inserted it first. Not acquired.
          if (fail && !is_duplicate_key(*fail)) return to_error(*fail, "acquire lease");
          if (!fail) {
            if (auto v = find_and_modify_value(reply)) {
              view l(v->get());
              return leader_lease{name, l.str("holder"), l.i64("epoch"), l.i64("expires_at"), true};
            }
          }
          doc q;
          q.str("_id", name);
          if (auto f = c_.command(client, find_cmd("leases", q, nullptr, nullptr, 1, 0, true, c_.max_time_ms()), reply))
            return to_error(*f, "acquire lease: reading its holder");
          auto batch = first_batch(reply);
          if (batch.empty()) return leader_lease{name, "", 0, 0, false};
          view l(batch.front().get());
          return leader_lease{name, l.str("holder"), l.i64("epoch"), l.i64("expires_at"), false};
        });
  }

  task<void> release(std::string name, std::string holder, std::int64_t epoch) override {
    return run<result<void>>(
        ex_, [this, name = std::move(name), holder = std::move(holder), epoch](mongoc_client_t* client) -> result<void> {
          doc reply;
          if (auto f = c_.command(client, release_command(name, holder, epoch, c_.max_time_ms()), reply))
            return to_error(*f, "release lease");
          return {};
        });
  }

 private:
  connection& c_;
  executor& ex_;
};

// ----------------------------------------------------------------------------------------------
class mongo_maintenance final : public maintenance_store {
 public:
  mongo_maintenance(connection& c, executor& ex) : c_(c), ex_(ex) {}

  task<int> purge_finished(time_ms before, int limit) override {
    return run<result<int>>(ex_, [this, before, limit](mongoc_client_t* client) -> result<int> {
      if (limit <= 0) return 0;
      // Batched deletes, not one transaction (a batch's log lines can be far more than a
      // transaction should hold): the oldest finished jobs' ids, then their log lines, their
      // DNS-01 records that are out of the zone, then the jobs. Completed and cancelled jobs never
      // change again, so the three deletes see the same set; a stop between them leaves jobs
      // without lines, which the next run deletes — never lines without their job.
      const std::vector<std::string> finished{"completed", "cancelled"};
      doc filter;
      filter.sub("status", str_in(finished)).sub("completed_at", i64_op("$lt", before));
      doc sort;
      sort.i32("completed_at", 1);
      doc proj;
      proj.i32("_id", 1);
      doc reply;
      if (auto f = c_.command(client, find_cmd("jobs", filter, &sort, &proj, limit, 0, false, c_.max_time_ms()), reply))
        return to_error(*f, "purge finished jobs");
      std::vector<std::string> ids;
      for (const auto& d : first_batch(reply)) ids.push_back(view(d.get()).str("_id"));
      if (ids.empty()) return 0;
      doc logs;
      logs.sub("job_id", str_in(ids));
      if (auto f = send_delete(client, delete_cmd("job_logs", logs, true, c_), reply))
        return to_error(*f, "purge finished jobs: their logs");
      // The catalog's DNS-01 records (mongo_catalog.cpp: dns_records, removed_at 0 while the
      // record is still in the zone — one still there stays for the DNS cleanup sweep).
      doc records;
      records.sub("job_id", str_in(ids)).sub("removed_at", i64_op("$gt", 0));
      if (auto f = send_delete(client, delete_cmd("dns_records", records, true, c_), reply))
        return to_error(*f, "purge finished jobs: their DNS records");
      doc jobs;
      jobs.sub("_id", str_in(ids)).sub("status", str_in(finished));
      if (auto f = send_delete(client, delete_cmd("jobs", jobs, true, c_), reply))
        return to_error(*f, "purge finished jobs");
      return static_cast<int>(view(reply.get()).i64("n"));
    });
  }

  task<int> purge_audit(time_ms before, int limit) override {
    return run<result<int>>(ex_, [this, before, limit](mongoc_client_t* client) -> result<int> {
      if (limit <= 0) return 0;
      // Entries are numbered in time order: look at the oldest `limit` only and delete those
      // before the cutoff, up to the first that is not.
      doc all;
      doc sort;
      sort.i32("_id", 1);
      doc proj;
      proj.i32("at", 1);
      doc reply;
      if (auto f = c_.command(client, find_cmd("audit_log", all, &sort, &proj, limit, 0, false, c_.max_time_ms()), reply))
        return to_error(*f, "purge audit");
      std::int64_t last = -1;
      int n = 0;
      for (const auto& d : first_batch(reply)) {
        view v(d.get());
        if (v.i64("at") >= before) break;
        last = v.i64("_id");
        ++n;
      }
      if (n == 0) return 0;
      doc filter;
      filter.sub("_id", i64_op("$lte", last));
      if (auto f = send_delete(client, delete_cmd("audit_log", filter, true, c_), reply)) return to_error(*f, "purge audit");
      return n;
    });
  }

  task<int> purge_expired_tokens(time_ms before, int limit) override {
    return run<result<int>>(ex_, [this, before, limit](mongoc_client_t* client) -> result<int> {
      if (limit <= 0) return 0;
      doc filter;
      filter.sub("expires_at", i64_op("$lt", before));
      doc sort;
      sort.i32("expires_at", 1);
      doc proj;
      proj.i32("_id", 1);
      doc reply;
      if (auto f = c_.command(client, find_cmd("tokens", filter, &sort, &proj, limit, 0, false, c_.max_time_ms()), reply))
        return to_error(*f, "purge expired tokens");
      std::vector<std::string> ids;
      for (const auto& d : first_batch(reply)) ids.push_back(view(d.get()).str("_id"));
      if (ids.empty()) return 0;
      // Sessions first: a stop between the two deletes leaves tokens without sessions, which
      // the next run deletes — never a session whose token is gone.
      doc sessions;
      sessions.sub("token_id", str_in(ids));
      if (auto f = send_delete(client, delete_cmd("ui_sessions", sessions, true, c_), reply))
        return to_error(*f, "purge expired tokens: their sessions");
      doc tokens;
      tokens.sub("_id", str_in(ids)).sub("expires_at", i64_op("$lt", before));
      if (auto f = send_delete(client, delete_cmd("tokens", tokens, true, c_), reply))
        return to_error(*f, "purge expired tokens");
      return static_cast<int>(view(reply.get()).i64("n"));
    });
  }

  task<void> backup_to(std::string path) override {
    return run<result<void>>(ex_, [](mongoc_client_t*) -> result<void> {
      return make_error(errc::invalid_argument,
                        "backup of a MongoDB store: the embedded backup does not apply; use mongodump --uri <the store "
                        "URI> --archive=<file> (docs/operations-mongodb.md)",
                        "store");
    });
  }

 private:
  // A multi-document delete is not a retryable write: its filter makes it idempotent, so an
  // unknown outcome is sent again once.
  std::optional<failure> send_delete(mongoc_client_t* client, const doc& cmd, doc& reply) {
    auto f = c_.command(client, cmd, reply);
    if (f && f->network) f = c_.command(client, cmd, reply);
    return f;
  }

  connection& c_;
  executor& ex_;
};

}  // namespace

std::unique_ptr<lease_store> make_lease_store(connection& c, executor& ex) { return std::make_unique<mongo_leases>(c, ex); }
std::unique_ptr<maintenance_store> make_maintenance_store(connection& c, executor& ex) {
  return std::make_unique<mongo_maintenance>(c, ex);
}

}  // namespace certfleet::store::mongo
