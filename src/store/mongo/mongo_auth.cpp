// Tokens, UI sessions, the audit log and system settings (auth_store); the /metrics and live-log
// reads (observe_store) — on MongoDB, mirroring sqlite_auth.cpp method by method (DESIGN §10).
// The leader lease and retention are mongo_maintenance.cpp's, SSH session slots
// mongo_session_slots.cpp's; the indexes of all their collections are here.
//
// Collections (indexes in auth_index_commands):
//   tokens        {_id: id, project_id, role, system, name|null, hash, created_by|null, created_at,
//                  revoked_at (absent while active)}
//   ui_sessions   {_id: hash, token_id, created_at, expires_at}
//   audit_log     {_id: seq, project_id, actor, action, object, outcome, detail|null, at}
//   system_settings {_id: name, value, updated_at}
//   leases        {_id: name, holder, epoch, expires_at}
//   session_slots {_id: destination, v, slots: [{id, job_id, fence, acquired_at, expires_at}]}
//   store_meta    {_id: "audit_seq", n} (the audit counter), {_id: "first_token", token_id, at}
//
// Every write outside a transaction carries writeConcern {w: majority, wtimeout} and maxTimeMS;
// commands inside connection::transaction carry the session and maxTimeMS only. Token and session
// hashes are never logged and never read back (tokens are read with {hash: 0}).
#include "mongo_auth.hpp"
#include "auth_commands.hpp"
#include "schema.hpp"

#include "certfleet/core/object_id.hpp"
#include "commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <mutex>
#include <set>

namespace certfleet::store::mongo {

using namespace detail;

namespace detail {

doc op(const char* name, const doc& v) {
  doc d;
  d.sub(name, v);
  return d;
}

doc literal(std::string_view v) {
  doc d;
  d.str("$literal", v);
  return d;
}

doc exists(bool yes) {
  doc d;
  d.boolean("$exists", yes);
  return d;
}

doc i64_op(const char* name, std::int64_t v) {
  doc d;
  d.i64(name, v);
  return d;
}

doc str_in(const std::vector<std::string>& values) {
  doc d;
  d.str_array("$in", values);
  return d;
}

doc find_cmd(std::string_view coll, const doc& filter, const doc* sort, const doc* projection, std::int64_t limit,
             std::int64_t skip, bool majority, std::int32_t max_time_ms) {
  doc cmd;
  cmd.str("find", coll).sub("filter", filter);
  if (sort) cmd.sub("sort", *sort);
  if (projection) cmd.sub("projection", *projection);
  if (skip > 0) cmd.i64("skip", skip);
  if (limit > 0) cmd.i64("limit", limit);
  else cmd.i32("batchSize", whole_batch);
  cmd.boolean("singleBatch", true);
  if (majority) cmd.sub("readConcern", majority_read_concern());
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc find_txn(std::string_view coll, const doc& filter, const doc* sort, const doc* projection, std::int64_t limit,
             std::int32_t max_time_ms) {
  doc cmd;
  cmd.str("find", coll).sub("filter", filter);
  if (sort) cmd.sub("sort", *sort);
  if (projection) cmd.sub("projection", *projection);
  if (limit > 0) cmd.i64("limit", limit);
  else cmd.i32("batchSize", whole_batch);
  cmd.boolean("singleBatch", true);
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc delete_cmd(std::string_view coll, const doc& filter, bool many, const connection& c, bool in_txn) {
  doc stmt;
  stmt.sub("q", filter).i32("limit", many ? 0 : 1);
  doc cmd;
  cmd.str("delete", coll).array("deletes", {stmt});
  if (!in_txn) cmd.sub("writeConcern", write_concern(c));
  cmd.i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

doc insert_cmd(std::string_view coll, const doc& d, const connection& c, bool in_txn) {
  doc cmd;
  cmd.str("insert", coll).array("documents", {d});
  if (!in_txn) cmd.sub("writeConcern", write_concern(c));
  cmd.i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

}  // namespace detail

namespace {

doc no_hash() {
  doc p;
  p.i32("hash", 0);
  return p;
}

token_record read_token(const bson_t* b) {
  view v(b);
  token_record t;
  t.id = v.str("_id");
  t.project_id = v.str("project_id");
  // An unknown role (a newer build wrote it) grants the least.
  t.token_role = parse_role(v.str("role")).value_or(role::viewer);
  t.system = v.boolean("system");
  t.name = v.str("name");
  t.created_by = v.str("created_by");
  t.created_at = v.i64("created_at");
  t.revoked_at = v.i64("revoked_at");
  t.expires_at = v.i64("expires_at");
  t.last_used_at = v.i64("last_used_at");
  return t;
}

doc token_document(const new_token& t, const std::string& id, time_ms now) {
  doc d;
  d.str("_id", id).str("project_id", t.project_id).str("role", to_string(t.token_role)).boolean("system", t.system);
  d.str_or_null("name", t.name).str("hash", t.hash).str_or_null("created_by", t.created_by).i64("created_at", now);
  if (t.expires_at > 0) d.i64("expires_at", t.expires_at);
  return d;
}

audit_entry read_audit(const bson_t* b) {
  view v(b);
  return audit_entry{v.i64("_id"),    v.str("project_id"), v.str("actor"),  v.str("action"),
                     v.str("object"), v.str("outcome"),    v.str("detail"), v.i64("at")};
}

// The audit counter: {_id: "audit_seq", n} in store_meta, one $inc per entry (inside the
// transaction of put_system_settings, so a rolled-back entry takes its number back).
doc audit_seq_command(const connection& c, bool in_txn) {
  doc q;
  q.str("_id", "audit_seq");
  doc inc;
  inc.i64("n", 1);
  doc cmd;
  cmd.str("findAndModify", "store_meta").sub("query", q).sub("update", op("$inc", inc));
  cmd.boolean("upsert", true).boolean("new", true);
  if (!in_txn) cmd.sub("writeConcern", write_concern(c));
  cmd.i32("maxTimeMS", c.max_time_ms());
  return cmd;
}

doc audit_document(std::int64_t seq, const audit_entry& e) {
  doc d;
  d.i64("_id", seq).str("project_id", e.project_id).str("actor", e.actor).str("action", e.action);
  d.str("object", e.object).str("outcome", e.outcome).str_or_null("detail", e.detail).i64("at", e.at);
  return d;
}

// Numbers then inserts one audit entry; `session` null: outside a transaction (w:majority each).
std::optional<failure> insert_audit(const connection& c, mongoc_client_t* client, const audit_entry& e,
                                    mongoc_client_session_t* session) {
  const bool in_txn = session != nullptr;
  doc reply;
  if (auto f = c.command(client, audit_seq_command(c, in_txn), reply, session)) return f;
  auto v = find_and_modify_value(reply);
  if (!v) {
    failure f;
    f.err = make_error(errc::store_failure, "the audit counter returned no value");
    return f;
  }
  const auto seq = view(v->get()).i64("n");
  const auto cmd = insert_cmd("audit_log", audit_document(seq, e), c, in_txn);
  auto f = c.command(client, cmd, reply, session);
  // Outside a transaction the _id is ours: an insert whose reply was lost is sent again, and a
  // duplicate on _id then means the first one landed.
  if (f && f->network && !in_txn) {
    f = c.command(client, cmd, reply, session);
    if (f && is_duplicate_key(*f)) f.reset();
  }
  return f;
}

// ----------------------------------------------------------------------------------------------
class mongo_auth final : public auth_store, public observe_store {
 public:
  mongo_auth(connection& c, executor& ex) : c_(c), ex_(ex) {}

  task<token_record> create_token(new_token t, time_ms now) override {
    return run<result<token_record>>(ex_, [this, t = std::move(t), now](mongoc_client_t* client) -> result<token_record> {
      const auto id = new_object_id();
      auto d = token_document(t, id, now);
      const auto cmd = insert_cmd("tokens", d, c_);
      doc reply;
      auto f = c_.command(client, cmd, reply);
      if (f && f->network) {
        // Our own _id: a second copy fails on _id when the first landed.
        f = c_.command(client, cmd, reply);
        if (f && is_duplicate_key(*f) && duplicate_on_id(*f)) f.reset();
      }
      if (f) return to_error(*f, "create token");
      return read_token(d.get());
    });
  }

  task<std::optional<token_record>> create_first_token(new_token t, time_ms now) override {
    return run<result<std::optional<token_record>>>(
        ex_, [this, t = std::move(t), now](mongoc_client_t* client) -> result<std::optional<token_record>> {
          // In one transaction: no token at all, then a marker document every first start inserts
          // (two processes on an empty store both write it: one conflicts, runs again and sees
          // the other's token; a marker that exists is a duplicate key: not created), then the
          // token. A plain "is it empty, then insert" would let two transactions each insert one.
          const auto id = new_object_id();
          auto d = token_document(t, id, now);
          std::optional<token_record> out;
          auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
            out.reset();
            doc reply;
            doc any;
            doc proj;
            proj.i32("_id", 1);
            if (auto f = c_.command(client, find_txn("tokens", any, nullptr, &proj, 1, c_.max_time_ms()), reply, s))
              return f;
            if (!first_batch(reply).empty()) return std::nullopt;
            doc marker;
            marker.str("_id", "first_token").str("token_id", id).i64("at", now);
            if (auto f = c_.command(client, insert_cmd("store_meta", marker, c_, true), reply, s)) return f;
            if (auto f = c_.command(client, insert_cmd("tokens", d, c_, true), reply, s)) return f;
            out = read_token(d.get());
            return std::nullopt;
          });
          if (fail) {
            if (is_duplicate_key(*fail)) return std::optional<token_record>{};
            return to_error(*fail, "create the first token");
          }
          return out;
        });
  }

  task<token_record> find_token(std::string hash) override {
    return run<result<token_record>>(ex_, [this, hash = std::move(hash)](mongoc_client_t* client) -> result<token_record> {
      doc filter;
      filter.str("hash", hash).sub("revoked_at", exists(false));
      const auto proj = no_hash();
      doc reply;
      if (auto f = c_.command(client, find_cmd("tokens", filter, nullptr, &proj, 1, 0, true, c_.max_time_ms()), reply))
        return to_error(*f, "find token");
      auto batch = first_batch(reply);
      if (batch.empty()) return make_error(errc::not_found, "no such active token", "token");
      return read_token(batch.front().get());
    });
  }

  task<std::vector<token_record>> list_tokens(std::string project_id) override {
    return run<result<std::vector<token_record>>>(
        ex_, [this, p = std::move(project_id)](mongoc_client_t* client) -> result<std::vector<token_record>> {
          doc filter;
          if (!p.empty()) filter.str("project_id", p);
          doc sort;
          sort.i32("created_at", 1).i32("_id", 1);
          const auto proj = no_hash();
          doc reply;
          if (auto f = c_.command(client, find_cmd("tokens", filter, &sort, &proj, 0, 0, false, c_.max_time_ms()), reply))
            return to_error(*f, "list tokens");
          std::vector<token_record> out;
          for (const auto& d : first_batch(reply)) out.push_back(read_token(d.get()));
          return out;
        });
  }

  task<token_record> revoke_token(std::string id, time_ms now) override {
    return run<result<token_record>>(ex_, [this, id = std::move(id), now](mongoc_client_t* client) -> result<token_record> {
      doc q;
      q.str("_id", id).sub("revoked_at", exists(false));
      doc set;
      set.i64("revoked_at", now);
      doc cmd;
      cmd.str("findAndModify", "tokens").sub("query", q).sub("update", op("$set", set)).boolean("new", true);
      cmd.sub("fields", no_hash()).sub("writeConcern", write_concern(c_)).i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      if (auto f = c_.command(client, cmd, reply)) return to_error(*f, "revoke token");
      if (auto v = find_and_modify_value(reply)) return read_token(v->get());
      doc by_id;
      by_id.str("_id", id);
      doc proj;
      proj.i32("_id", 1);
      if (auto f = c_.command(client, find_cmd("tokens", by_id, nullptr, &proj, 1, 0, true, c_.max_time_ms()), reply))
        return to_error(*f, "revoke token");
      if (!first_batch(reply).empty())
        return make_error(errc::conflict, fmt::format("token {} is already revoked", id), "id");
      return make_error(errc::not_found, fmt::format("token {} not found", id), "id");
    });
  }

  task<void> touch_token(std::string id, time_ms now, time_ms min_interval) override {
    return run<result<void>>(ex_, [this, id = std::move(id), now, min_interval](mongoc_client_t* client) -> result<void> {
      doc unset;
      unset.sub("last_used_at", exists(false));
      doc stale;
      stale.sub("last_used_at", i64_op("$lte", now - min_interval));
      doc q;
      q.str("_id", id).array("$or", {unset, stale});
      doc set;
      set.i64("last_used_at", now);
      doc stmt;
      stmt.sub("q", q).sub("u", op("$set", set));
      doc cmd;
      cmd.str("update", "tokens").array("updates", {stmt});
      cmd.sub("writeConcern", write_concern(c_)).i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      // Idempotent (the filter holds the interval), so an unknown outcome is sent again once.
      auto f = c_.command(client, cmd, reply);
      if (f && f->network) f = c_.command(client, cmd, reply);
      if (f) return to_error(*f, "touch token");
      return {};
    });
  }

  task<void> create_session(std::string hash, std::string token_id, time_ms expires_at, time_ms now) override {
    return run<result<void>>(ex_, [this, h = std::move(hash), t = std::move(token_id), expires_at,
                                   now](mongoc_client_t* client) -> result<void> {
      doc expired;
      expired.sub("expires_at", i64_op("$lte", now));
      doc reply;
      if (auto f = c_.command(client, delete_cmd("ui_sessions", expired, true, c_), reply))
        return to_error(*f, "create session: deleting expired sessions");
      doc s;
      s.str("_id", h).str("token_id", t).i64("created_at", now).i64("expires_at", expires_at);
      const auto cmd = insert_cmd("ui_sessions", s, c_);
      auto f = c_.command(client, cmd, reply);
      if (f && f->network) {
        f = c_.command(client, cmd, reply);
        if (f && is_duplicate_key(*f)) f.reset();  // the first one landed (a 256-bit hash)
      }
      if (f) return to_error(*f, "create session");
      return {};
    });
  }

  task<ui_session> find_session(std::string hash, time_ms now) override {
    return run<result<ui_session>>(ex_, [this, h = std::move(hash), now](mongoc_client_t* client) -> result<ui_session> {
      auto gone = [] { return make_error(errc::not_found, "no such session, or it expired", "session"); };
      doc filter;
      filter.str("_id", h).sub("expires_at", i64_op("$gt", now));
      doc proj;
      proj.i32("token_id", 1).i32("expires_at", 1);
      doc reply;
      if (auto f = c_.command(client, find_cmd("ui_sessions", filter, nullptr, &proj, 1, 0, true, c_.max_time_ms()), reply))
        return to_error(*f, "find session");
      auto batch = first_batch(reply);
      if (batch.empty()) return gone();
      view s(batch.front().get());
      ui_session out;
      out.expires_at = s.i64("expires_at");
      doc tf;
      tf.str("_id", s.str("token_id")).sub("revoked_at", exists(false));
      const auto tp = no_hash();
      if (auto f = c_.command(client, find_cmd("tokens", tf, nullptr, &tp, 1, 0, true, c_.max_time_ms()), reply))
        return to_error(*f, "find session: its token");
      auto tokens = first_batch(reply);
      if (tokens.empty()) return gone();
      out.token = read_token(tokens.front().get());
      return out;
    });
  }

  task<void> delete_session(std::string hash) override {
    return run<result<void>>(ex_, [this, h = std::move(hash)](mongoc_client_t* client) -> result<void> {
      doc filter;
      filter.str("_id", h);
      doc reply;
      if (auto f = c_.command(client, delete_cmd("ui_sessions", filter, false, c_), reply))
        return to_error(*f, "delete session");
      return {};
    });
  }

  task<void> append_audit(audit_entry e) override {
    return run<result<void>>(ex_, [this, e = std::move(e)](mongoc_client_t* client) -> result<void> {
      if (auto f = insert_audit(c_, client, e, nullptr)) return to_error(*f, "append audit");
      return {};
    });
  }

  task<audit_page> list_audit(std::string project_id, int page, int page_size) override {
    return run<result<audit_page>>(
        ex_, [this, p = std::move(project_id), page, page_size](mongoc_client_t* client) -> result<audit_page> {
          audit_page out;
          doc filter;
          filter.str("project_id", p);
          doc reply;
          if (page_size > 0) {
            doc sort;
            sort.i32("_id", -1);
            const auto skip = static_cast<std::int64_t>(std::max(page, 1) - 1) * page_size;
            if (auto f = c_.command(client, find_cmd("audit_log", filter, &sort, nullptr, page_size, skip, false,
                                                     c_.max_time_ms()),
                                    reply))
              return to_error(*f, "list audit");
            for (const auto& d : first_batch(reply)) out.items.push_back(read_audit(d.get()));
          }
          doc count;
          count.str("count", "audit_log").sub("query", filter).i32("maxTimeMS", c_.max_time_ms());
          if (auto f = c_.command(client, count, reply)) return to_error(*f, "list audit: count");
          out.total = view(reply.get()).i64("n");
          return out;
        });
  }

  task<std::map<std::string, std::string>> system_settings() override {
    return run<result<std::map<std::string, std::string>>>(
        ex_, [this](mongoc_client_t* client) -> result<std::map<std::string, std::string>> {
          doc all;
          doc proj;
          proj.i32("value", 1);
          doc reply;
          if (auto f = c_.command(client, find_cmd("system_settings", all, nullptr, &proj, 0, 0, false, c_.max_time_ms()),
                                  reply))
            return to_error(*f, "read system settings");
          std::map<std::string, std::string> out;
          for (const auto& d : first_batch(reply)) {
            view v(d.get());
            out.emplace(v.str("_id"), v.str("value"));
          }
          return out;
        });
  }

  task<void> put_system_settings(std::map<std::string, std::string> values, audit_entry audit) override {
    return run<result<void>>(
        ex_, [this, values = std::move(values), audit = std::move(audit)](mongoc_client_t* client) -> result<void> {
          // One transaction: every value (one update command, an upsert per name) and the entry.
          std::vector<doc> stmts;
          for (const auto& [name, value] : values) {
            doc q;
            q.str("_id", name);
            doc set;
            set.str("value", value).i64("updated_at", audit.at);
            doc stmt;
            stmt.sub("q", q).sub("u", op("$set", set)).boolean("upsert", true);
            stmts.push_back(std::move(stmt));
          }
          auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
            doc reply;
            if (!stmts.empty()) {
              doc cmd;
              cmd.str("update", "system_settings").array("updates", stmts).i32("maxTimeMS", c_.max_time_ms());
              if (auto f = c_.command(client, cmd, reply, s)) return f;
            }
            return insert_audit(c_, client, audit, s);
          });
          if (fail) return to_error(*fail, "store system settings");
          return {};
        });
  }

  // observe_store ---------------------------------------------------------------------------
  task<std::vector<job_count>> job_counts() override {
    return run<result<std::vector<job_count>>>(ex_, [this](mongoc_client_t* client) -> result<std::vector<job_count>> {
      // Counted from the jobs themselves (the queue keeps no count documents): a $group over the
      // collection, by status and type.
      doc key;
      key.str("status", "$status").str("type", "$type");
      doc one;
      one.i32("$sum", 1);
      doc group;
      group.sub("_id", key).sub("n", one);
      doc sort;
      sort.i32("_id.status", 1).i32("_id.type", 1);
      std::vector<doc> pipeline;
      pipeline.push_back(op("$group", group));
      pipeline.push_back(op("$sort", sort));
      doc cursor;
      cursor.i32("batchSize", whole_batch);
      doc cmd;
      cmd.str("aggregate", "jobs").array("pipeline", pipeline).sub("cursor", cursor).i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      if (auto f = c_.command(client, cmd, reply)) return to_error(*f, "job counts");
      std::vector<job_count> out;
      for (const auto& d : first_batch(reply)) {
        view v(d.get());
        if (v.i64("n") > 0) out.push_back(job_count{v.str("_id.status"), v.str("_id.type"), v.i64("n")});
      }
      return out;
    });
  }

  task<duration_histogram> job_durations(std::vector<double> bounds_s) override {
    return run<result<duration_histogram>>(
        ex_, [this, bounds = std::move(bounds_s)](mongoc_client_t* client) -> result<duration_histogram> {
          duration_histogram h;
          h.bounds_s = bounds;
          h.cumulative.assign(bounds.size() + 1, 0);
          // The server buckets by the distinct bounds in ascending order (bucket i: the first
          // bound with ms / 1000 <= bound; N: above every bound), so the reply has at most N + 1
          // rows; cumulative[i] then sums the buckets up to bounds[i]'s place, whatever order the
          // caller gave them in (SQLite's: ms / 1000.0 <= bounds[i]).
          std::vector<double> sorted = bounds;
          std::sort(sorted.begin(), sorted.end());
          sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
          doc match;
          match.sub("completed_at", exists(true)).sub("started_at", exists(true));
          doc ms;
          {
            list l;
            l.str("$completed_at").str("$started_at");
            ms.arr("$subtract", l);
          }
          doc project;
          project.i32("_id", 0).sub("ms", ms);
          doc nonneg;
          nonneg.sub("ms", i64_op("$gte", 0));
          doc bucket;
          {
            std::vector<doc> branches;
            for (std::size_t i = 0; i < sorted.size(); ++i) {
              list secs;
              secs.str("$ms").i64(1000);
              doc div;
              div.arr("$divide", secs);
              // {$lte: [{$divide: ["$ms", 1000]}, bound]}: the bound is a double (list has no
              // double appender).
              doc lte;
              {
                bson_t arr;
                bson_append_array_begin(lte.get(), "$lte", -1, &arr);
                bson_append_document(&arr, "0", -1, div.get());
                bson_append_double(&arr, "1", -1, sorted[i]);
                bson_append_array_end(lte.get(), &arr);
              }
              doc branch;
              branch.sub("case", lte).i32("then", static_cast<std::int32_t>(i));
              branches.push_back(std::move(branch));
            }
            doc sw;
            sw.array("branches", branches).i32("default", static_cast<std::int32_t>(sorted.size()));
            if (branches.empty()) bucket.i32("$literal", 0);
            else bucket.sub("$switch", sw);
          }
          doc count;
          count.i32("$sum", 1);
          doc sum;
          sum.str("$sum", "$ms");
          doc group;
          group.sub("_id", bucket).sub("n", count).sub("ms", sum);
          std::vector<doc> pipeline;
          pipeline.push_back(op("$match", match));
          pipeline.push_back(op("$project", project));
          pipeline.push_back(op("$match", nonneg));
          pipeline.push_back(op("$group", group));
          doc cursor;
          cursor.i32("batchSize", whole_batch);
          doc cmd;
          cmd.str("aggregate", "jobs").array("pipeline", pipeline).sub("cursor", cursor).i32("maxTimeMS", c_.max_time_ms());
          doc reply;
          if (auto f = c_.command(client, cmd, reply)) return to_error(*f, "job durations");
          std::vector<std::int64_t> per_bucket(sorted.size() + 1, 0);
          std::int64_t sum_ms = 0;
          for (const auto& d : first_batch(reply)) {
            view v(d.get());
            const auto b = v.i64("_id");
            if (b < 0 || b > static_cast<std::int64_t>(sorted.size())) continue;
            per_bucket[static_cast<std::size_t>(b)] += v.i64("n");
            sum_ms += v.i64("ms");
          }
          for (std::size_t i = 0; i < bounds.size(); ++i) {
            const auto pos = static_cast<std::size_t>(std::lower_bound(sorted.begin(), sorted.end(), bounds[i]) - sorted.begin());
            for (std::size_t k = 0; k <= pos && k < sorted.size(); ++k) h.cumulative[i] += per_bucket[k];
          }
          for (auto n : per_bucket) h.cumulative.back() += n;
          h.sum_s = static_cast<double>(sum_ms) / 1000.0;
          return h;
        });
  }

  task<log_watch> watch_logs(std::string job_id, std::int64_t after_seq, int limit) override {
    return run<result<log_watch>>(
        ex_, [this, id = std::move(job_id), after_seq, limit](mongoc_client_t* client) -> result<log_watch> {
          // One snapshot (a read-only transaction): the job's status, its highest seq, the lines.
          std::optional<result<log_watch>> out;
          auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
            out.reset();
            log_watch w;
            doc reply;
            doc jf;
            jf.str("_id", id);
            doc jp;
            jp.i32("status", 1);
            if (auto f = c_.command(client, find_txn("jobs", jf, nullptr, &jp, 1, c_.max_time_ms()), reply, s)) return f;
            auto jobs = first_batch(reply);
            if (jobs.empty()) {
              out.emplace(job_not_found(id));
              return std::nullopt;
            }
            w.status = parse_job_status(view(jobs.front().get()).str("status")).value_or(job_status::dead);
            doc lf;
            lf.str("job_id", id);
            doc last;
            last.i32("job_id", 1).i32("seq", -1);
            doc lp;
            lp.i32("seq", 1).i32("_id", 0);
            if (auto f = c_.command(client, find_txn("job_logs", lf, &last, &lp, 1, c_.max_time_ms()), reply, s)) return f;
            auto top = first_batch(reply);
            if (!top.empty()) w.last_seq = view(top.front().get()).i64("seq");
            if (limit > 0 && after_seq < w.last_seq) {
              doc after;
              after.str("job_id", id).sub("seq", i64_op("$gt", after_seq));
              doc order;
              order.i32("job_id", 1).i32("seq", 1);
              if (auto f = c_.command(client, find_txn("job_logs", after, &order, nullptr, limit, c_.max_time_ms()), reply, s))
                return f;
              for (const auto& d : first_batch(reply)) {
                view v(d.get());
                w.lines.push_back(log_line{v.i64("seq"), v.i64("ts"), v.str("level"), v.str("message"), v.str("detail")});
              }
            }
            out.emplace(std::move(w));
            return std::nullopt;
          });
          if (fail) return to_error(*fail, "watch logs");
          return std::move(*out);
        });
  }

 private:
  connection& c_;
  executor& ex_;
};

}  // namespace

std::unique_ptr<auth_store> make_auth_store(connection& c, executor& ex) { return std::make_unique<mongo_auth>(c, ex); }
std::unique_ptr<observe_store> make_observe_store(connection& c, executor& ex) {
  return std::make_unique<mongo_auth>(c, ex);
}

std::vector<doc> auth_index_commands(std::int32_t max_time_ms) {
  std::vector<doc> out;
  // find_token: equality on hash (unique: one token per hash); list_tokens: a project's, oldest
  // first (the sort {created_at, _id} follows the equality); the retention sweep's purge: tokens
  // by expiry, oldest first, only those that expire at all (a token without expires_at never does).
  out.push_back(create_indexes("tokens",
                               {{"hash", {{"hash", 1}}, true},
                                {"project", {{"project_id", 1}, {"created_at", 1}, {"_id", 1}}},
                                {"expiry", {{"expires_at", 1}}, false, "expires_at"}},
                               max_time_ms));
  // Sessions are keyed by their hash (_id, unique by itself); the expired ones go by expiry.
  out.push_back(create_indexes("ui_sessions", {{"expiry", {{"expires_at", 1}}}}, max_time_ms));
  // list_audit: a project's entries newest first (_id is the seq).
  out.push_back(create_indexes("audit_log", {{"project", {{"project_id", 1}, {"_id", -1}}}}, max_time_ms));
  // Leases and system settings are keyed by name (_id): no index of their own.
  // Session slots: keyed by destination (_id); renew and release find a holder's slots.
  out.push_back(create_indexes("session_slots", {{"holder", {{"slots.job_id", 1}, {"slots.fence", 1}}}}, max_time_ms));
  // Retention and the duration histogram read finished jobs by the jobs index "retention"
  // (schema.cpp, with the jobs collection's other indexes).
  return out;
}

}  // namespace certfleet::store::mongo
