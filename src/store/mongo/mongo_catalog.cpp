// The catalog on MongoDB (DESIGN §4, §10): objects, distributions, target results, the fan-out
// guard set, DNS-01 challenge records and catalog meta values. Every operation runs inside the
// transaction `transact` (or `read`) opened: commands carry the session's lsid/txnNumber and no
// read or write concern of their own (the transaction's: majority). A failed command is recorded
// with mongo_job_tx::keep so with_transaction sees its labels; a duplicate key aborts a MongoDB
// transaction, so uniqueness is checked by a lookup first, or writes upsert on a deterministic _id.
// Mirrors src/store/sqlite/sqlite_catalog.cpp method by method. Here: the write side of a
// transaction, the store and the indexes; the reads are mongo_catalog_reads.cpp's, the documents
// and command documents mongo_catalog_documents.cpp's (mongo_catalog_detail.hpp: what they share).
//
// Collections:
//   objects                {_id, project_id, kind, name, doc, sealed?, ref_id?, not_after (0: none), created_at}
//   distributions          {_id, project_id, name, certificate_id, target_ids[], uses[] (certificate + targets),
//                           canary, failure_tolerance, fail_fast, auto_execute, status, run_no, mode,
//                           run_target_ids[], job_ids[], error, fan_out_*, fail_fast_fired, cancel_requested,
//                           run_certificate_version, run_trigger, run_redrives, run_started_at, run_finished_at,
//                           created_at, updated_at}
//   target_results         {_id: {d, r, t, a, f, j}, distribution_id, run_no, target_id, job_id, retry_attempt,
//                           fence, status, error_class, error, started_at, finished_at, fingerprint,
//                           hash_skipped, files_from_run, detail}
//   distribution_finalized {_id: {d, r, j}, distribution_id, run_no, job_id, outcome, batch}
//   dns_records            {_id, project_id, provider_id, job_id, fence, zone, fqdn, value, presented_at,
//                           removed_at (0: still in the zone)}
//   store_meta             {_id: "meta:<key>", value}   (_id "schema" is schema.cpp's)
#include "mongo_catalog.hpp"
#include "mongo_catalog_detail.hpp"

#include "certfleet/store/job_policy.hpp"
#include "schema.hpp"

#include "certfleet/core/object_id.hpp"
#include "commands.hpp"
#include "job_document.hpp"

#include <fmt/format.h>

#include <exception>
#include <utility>

namespace certfleet::store::mongo {

using namespace detail;

namespace {

// ---- one transaction: the reads (mongo_catalog_reads.cpp) and the writes -----------------------

class read_impl final : public reads<catalog_read> {
 public:
  read_impl(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s) : reads(c, client, s, nullptr) {}
};

class tx_impl final : public reads<catalog_tx> {
 public:
  tx_impl(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs)
      : reads(c, client, s, &jobs), jobs_ref_(jobs) {}

  job_tx& jobs() override { return jobs_ref_; }

  result<catalog_object> insert_object(catalog_object o) override {
    // Looked up first: a duplicate key would abort the transaction, and a caller may go on
    // after a conflict.
    doc f;
    f.str("project_id", o.project_id).str("kind", o.kind).str("name", o.name);
    doc projection;
    projection.i32("_id", 1);
    auto taken = find(objects_coll, f, nullptr, 1, 0, &projection, "insert object");
    if (!taken) return std::move(taken).error();
    if (!taken->empty()) return name_taken(o.kind, o.name);
    if (o.id.empty()) o.id = new_object_id();
    doc reply;
    if (auto fail = c_.command(client_, insert_cmd(objects_coll, object_document(o), c_.max_time_ms()), reply, s_)) {
      // A concurrent transaction took the name after our snapshot: the transaction is over.
      if (is_duplicate_key(*fail) && !duplicate_on_id(*fail)) {
        auto f2 = *fail;
        f2.err = name_taken(o.kind, o.name);
        jobs_ref_.keep(f2, "insert object");
        return f2.err;
      }
      return keep(*fail, "insert object");
    }
    return o;
  }

  result<void> update_object_doc(std::string_view id, std::string_view d) override {
    doc set;
    set.str("doc", d);
    auto n = update_one(objects_coll, one("_id", id), with("$set", set), "update object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("object", id);
    return {};
  }

  result<void> update_object(const catalog_object& o) override {
    doc set;
    set.str("doc", o.doc);
    doc unset;
    bool unsets = false;
    if (!o.sealed.empty()) set.str("sealed", o.sealed);
    else unset.str("sealed", ""), unsets = true;
    if (!o.ref_id.empty()) set.str("ref_id", o.ref_id);
    else unset.str("ref_id", ""), unsets = true;
    set.i64("not_after", o.not_after);
    doc u;
    u.sub("$set", set);
    if (unsets) u.sub("$unset", unset);
    auto n = update_one(objects_coll, one("_id", o.id), u, "update object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found(o.kind, o.id);
    return {};
  }

  result<void> delete_object(std::string_view project_id, std::string_view kind, std::string_view id) override {
    doc q;
    q.str("_id", id).str("project_id", project_id).str("kind", kind);
    auto n = delete_one(objects_coll, q, "delete object");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found(kind, id);
    return {};
  }

  result<void> set_meta(std::string_view key, std::string_view value) override {
    doc set;
    set.str("value", value);
    auto n = update(meta_coll, one("_id", meta_id(key)), with("$set", set), true, "set meta");
    if (!n) return std::move(n).error();
    return {};
  }

  result<void> delete_meta(std::string_view key) override {
    auto n = delete_one(meta_coll, one("_id", meta_id(key)), "delete meta");
    if (!n) return std::move(n).error();
    return {};
  }

  result<bool> reseal_object(std::string_view id, std::string_view old_sealed, std::string_view new_sealed) override {
    doc q;
    q.str("_id", id).str("sealed", old_sealed);
    doc set;
    set.str("sealed", new_sealed);
    auto n = update_one(objects_coll, q, with("$set", set), "reseal object");
    if (!n) return std::move(n).error();
    return *n > 0;
  }

  result<distribution_record> insert_distribution(distribution_record d) override {
    doc f;
    f.str("project_id", d.project_id).str("name", d.name);
    doc projection;
    projection.i32("_id", 1);
    auto taken = find(distributions_coll, f, nullptr, 1, 0, &projection, "insert distribution");
    if (!taken) return std::move(taken).error();
    if (!taken->empty()) return distribution_name_taken(d.name);
    if (d.id.empty()) d.id = new_object_id();
    doc reply;
    if (auto fail =
            c_.command(client_, insert_cmd(distributions_coll, new_distribution_document(d), c_.max_time_ms()), reply, s_)) {
      if (is_duplicate_key(*fail) && !duplicate_on_id(*fail)) {
        auto f2 = *fail;
        f2.err = distribution_name_taken(d.name);
        jobs_ref_.keep(f2, "insert distribution");
        return f2.err;
      }
      return keep(*fail, "insert distribution");
    }
    d.status = to_string(run_status::idle);
    d.updated_at = d.created_at;
    return d;
  }

  result<void> update_distribution(const distribution_record& d) override {
    auto n = update_one(distributions_coll, one("_id", d.id), with("$set", distribution_run_fields(d)),
                        "update distribution");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("distribution", d.id);
    return {};
  }

  result<void> delete_distribution(std::string_view project_id, std::string_view id) override {
    doc q;
    q.str("_id", id).str("project_id", project_id);
    auto n = delete_one(distributions_coll, q, "delete distribution");
    if (!n) return std::move(n).error();
    if (*n == 0) return object_not_found("distribution", id);
    return {};
  }

  result<void> add_result(const target_result& r) override {
    // INSERT OR REPLACE on the attempt's key: a replacement upserted on a deterministic _id.
    doc q;
    q.sub("_id", result_id(r));
    auto n = update(results_coll, q, result_document(r), true, "add result");
    if (!n) return std::move(n).error();
    return {};
  }

  result<bool> add_finalized(std::string_view distribution_id, std::int64_t run_no, const finalized_child& c) override {
    // The guard: an upsert that only inserts, on the child's deterministic _id. A replayed report
    // matches the existing document and changes nothing (no duplicate key inside the transaction).
    doc q;
    q.sub("_id", finalized_id(distribution_id, run_no, c.job_id));
    doc ins;
    ins.str("distribution_id", distribution_id).i64("run_no", run_no).str("job_id", c.job_id);
    ins.str("outcome", c.outcome).boolean("batch", c.batch);
    doc reply;
    if (auto e = send(update_cmd(finalized_coll, q, with("$setOnInsert", ins), true, c_.max_time_ms()), reply,
                      "add finalized child"))
      return std::move(*e);
    return !view(reply.get()).docs("upserted").empty();
  }

  result<std::vector<job_record>> cancel_waiting_children(std::string_view distribution_id,
                                                          std::string_view run_key_prefix, time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<job_record> out;
    for (const auto& k : *kids) {
      if (k.status != job_status::pending && k.status != job_status::failed) continue;
      doc statuses;
      {
        list l;
        l.str("pending").str("failed");
        statuses.arr("$in", l);
      }
      doc q;
      q.str("_id", k.id).sub("status", statuses);
      doc set;
      set.str("status", "cancelled").i64("completed_at", now).boolean("held", false);
      set.str("error", "cancelled with its distribution").str("error_code", cancelled_code);
      doc unset;
      unset.str("q", "").str("error_class", "");
      doc u;
      u.sub("$set", set).sub("$unset", unset);
      doc cmd;
      cmd.str("findAndModify", "jobs").sub("query", q).sub("update", u).boolean("new", true);
      cmd.i32("maxTimeMS", c_.max_time_ms());
      doc reply;
      if (auto e = send(cmd, reply, "cancel a run's waiting children")) return std::move(*e);
      if (auto v = find_and_modify_value(reply)) out.push_back(read_job(v->get()));
    }
    return out;
  }

  result<std::vector<std::string>> request_cancel_children(std::string_view distribution_id,
                                                           std::string_view run_key_prefix) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    std::vector<std::string> out;
    for (const auto& k : *kids) {
      if (k.status != job_status::active) continue;
      doc q;
      q.str("_id", k.id).str("status", "active");
      doc set;
      set.boolean("cancel_requested", true);
      // A cancel request takes the job out of the claim index (claim_command's rule).
      doc u;
      u.sub("$set", set).sub("$unset", one("q", ""));
      auto n = update_one("jobs", q, u, "request cancel of a run's children");
      if (!n) return std::move(n).error();
      if (*n > 0) out.push_back(k.id);
    }
    return out;
  }

  result<int> release_held_children(std::string_view distribution_id, std::string_view run_key_prefix,
                                    time_ms now) override {
    auto kids = children_of(distribution_id, run_key_prefix);
    if (!kids) return std::move(kids).error();
    int released = 0;
    for (const auto& k : *kids) {
      if (!k.held) continue;
      doc q;
      q.str("_id", k.id).boolean("held", true).str("status", "pending");
      // Claimable again: back in the claim index under its lane.
      doc set;
      set.boolean("held", false).i64("ready_at", now).str("q", k.lane);
      auto n = update_one("jobs", q, with("$set", set), "release a run's held children");
      if (!n) return std::move(n).error();
      released += static_cast<int>(*n);
    }
    return released;
  }

  result<job_record> get_job(std::string_view id) override {
    auto docs = find("jobs", one("_id", id), nullptr, 1, 0, nullptr, "get job");
    if (!docs) return std::move(docs).error();
    if (docs->empty()) return job_not_found(std::string(id));
    return read_job(docs->front().get());
  }

  result<void> add_dns_record(const dns_record& r) override {
    doc reply;
    if (auto e = send(insert_cmd(dns_coll, dns_document(r), c_.max_time_ms()), reply, "add dns record"))
      return std::move(*e);
    return {};
  }

  result<void> mark_dns_record_removed(std::string_view id, time_ms now) override {
    doc q;
    q.str("_id", id).i64("removed_at", 0);
    doc set;
    set.i64("removed_at", now);
    auto n = update_one(dns_coll, q, with("$set", set), "mark dns record removed");
    if (!n) return std::move(n).error();
    return {};
  }

 private:
  static error name_taken(std::string_view kind, std::string_view name) {
    return make_error(errc::conflict, fmt::format("a {} named \"{}\" already exists in this project", kind, name),
                      "name");
  }
  static error distribution_name_taken(std::string_view name) {
    return make_error(errc::conflict, fmt::format("a distribution named \"{}\" already exists in this project", name),
                      "name");
  }

  // The number of documents the statement matched.
  result<std::int64_t> update(std::string_view coll, const doc& q, const doc& u, bool upsert, std::string_view doing) {
    doc reply;
    if (auto e = send(update_cmd(coll, q, u, upsert, c_.max_time_ms()), reply, doing)) return std::move(*e);
    return view(reply.get()).i64("n");
  }
  result<std::int64_t> update_one(std::string_view coll, const doc& q, const doc& u, std::string_view doing) {
    return update(coll, q, u, false, doing);
  }
  result<std::int64_t> delete_one(std::string_view coll, const doc& q, std::string_view doing) {
    doc reply;
    if (auto e = send(delete_cmd(coll, q, c_.max_time_ms()), reply, doing)) return std::move(*e);
    return view(reply.get()).i64("n");
  }

  mongo_job_tx& jobs_ref_;
};

// ---- the store: transactions on the store threads ---------------------------------------------

class store_impl final : public catalog_store {
 public:
  store_impl(connection& c, executor& ex, catalog_tx_factory factory) : c_(c), ex_(ex), factory_(std::move(factory)) {
    if (!factory_) {
      const connection* conn = &c_;
      factory_ = [conn](mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs) {
        return make_catalog_tx(*conn, client, s, jobs);
      };
    }
  }

  task<void> transact(tx_fn fn) override {
    return run<result<void>>(ex_, [this, fn = std::move(fn)](mongoc_client_t* client) -> result<void> {
      // The body may run several times (TransientTransactionError): fn is called afresh each
      // time, and only the last attempt's outcome counts.
      std::optional<error> fn_error;
      std::exception_ptr thrown;
      auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
        fn_error.reset();
        mongo_job_tx jobs(c_, client, s, &factory_);
        result<void> r;
        try {
          r = fn(jobs.catalog());
        } catch (...) {
          // A bug: the transaction is aborted (never thrown through the driver), then rethrown.
          thrown = std::current_exception();
          failure f;
          f.err = make_error(errc::store_failure, "the catalog transaction threw");
          return f;
        }
        if (!r) fn_error = r.error();
        if (jobs.failed) return jobs.failed;  // its labels decide whether the body runs again
        if (fn_error) {
          failure f;  // no labels: aborted, nothing commits
          f.err = *fn_error;
          return f;
        }
        return std::nullopt;
      });
      if (thrown) std::rethrow_exception(thrown);
      if (!fail) return {};
      // What fn returned, unchanged (a kept store failure reaches fn as its error too).
      if (fn_error) return *fn_error;
      return to_error(*fail, "catalog transaction");
    });
  }

  task<void> read(read_fn fn) override {
    return run<result<void>>(ex_, [this, fn = std::move(fn)](mongoc_client_t* client) -> result<void> {
      // One snapshot: a transaction at majority read concern that writes nothing.
      std::optional<error> fn_error;
      std::exception_ptr thrown;
      auto fail = c_.transaction(client, [&](mongoc_client_session_t* s) -> std::optional<failure> {
        fn_error.reset();
        read_impl rd(c_, client, s);
        result<void> r;
        try {
          r = fn(rd);
        } catch (...) {
          thrown = std::current_exception();
          failure f;
          f.err = make_error(errc::store_failure, "the catalog read threw");
          return f;
        }
        if (!r) fn_error = r.error();
        if (rd.own_failed) return rd.own_failed;
        if (fn_error) {
          failure f;
          f.err = *fn_error;
          return f;
        }
        return std::nullopt;
      });
      if (thrown) std::rethrow_exception(thrown);
      if (!fail) return {};
      if (fn_error) return *fn_error;
      return to_error(*fail, "catalog read");
    });
  }

 private:
  connection& c_;
  executor& ex_;
  catalog_tx_factory factory_;
};

// ---- indexes -----------------------------------------------------------------------------------


struct owned_catalog {
  std::unique_ptr<connection> c;
  catalog_tx_factory factory;
  std::unique_ptr<executor> ex;
  std::unique_ptr<catalog_store> store;
  ~owned_catalog() {
    store.reset();
    if (ex) ex->close();
  }
};

}  // namespace

std::unique_ptr<catalog_tx> make_catalog_tx(const connection& c, mongoc_client_t* client,
                                            mongoc_client_session_t* session, mongo_job_tx& jobs) {
  return std::make_unique<tx_impl>(c, client, session, jobs);
}

std::unique_ptr<catalog_store> make_catalog_store(connection& c, executor& ex, const catalog_tx_factory& catalog) {
  return std::make_unique<store_impl>(c, ex, catalog);
}

std::vector<doc> catalog_index_commands(std::int32_t max_time_ms) {
  std::vector<doc> out;
  out.push_back(create_indexes(
      objects_coll,
      {
          // One name per kind in a project; objects_named's prefix range, in name order.
          {"name", {{"project_id", 1}, {"kind", 1}, {"name", 1}}, true},
          // list_objects (newest first) and objects_by_ids (id order): one index, both directions.
          {"project_kind", {{"project_id", 1}, {"kind", 1}, {"_id", 1}}},
          // objects_referencing: only objects that reference something.
          {"ref", {{"project_id", 1}, {"kind", 1}, {"ref_id", 1}, {"_id", 1}}, false, "ref_id"},
          // certificates_expiring and objects_by_not_after: equality on kind, then their sort.
          {"not_after", {{"kind", 1}, {"not_after", 1}, {"_id", 1}}},
          // KEK rotation's pages: only objects that hold an envelope, by kind in id order.
          {"sealed", {{"kind", 1}, {"_id", 1}}, false, "sealed"},
      },
      max_time_ms));
  out.push_back(create_indexes(
      distributions_coll,
      {
          {"name", {{"project_id", 1}, {"name", 1}}, true},
          {"project", {{"project_id", 1}, {"_id", -1}}},
          // distributions_using: the certificate and targets (multikey).
          {"uses", {{"project_id", 1}, {"uses", 1}, {"_id", 1}}},
          {"status", {{"status", 1}, {"updated_at", 1}, {"_id", 1}}},
          {"auto_execute", {{"auto_execute", 1}, {"updated_at", 1}, {"_id", 1}}},
      },
      max_time_ms));
  out.push_back(create_indexes(
      results_coll,
      {
          // run_results / run_outcomes: the run, in (target, retry_attempt, fence) order.
          {"run", {{"distribution_id", 1}, {"run_no", 1}, {"target_id", 1}, {"retry_attempt", 1}, {"fence", 1},
                   {"job_id", 1}}},
          // job_results: a child's report reads only its own rows.
          {"job", {{"distribution_id", 1}, {"run_no", 1}, {"job_id", 1}, {"target_id", 1}, {"retry_attempt", 1},
                   {"fence", 1}}},
          // last_files_run.
          {"files", {{"distribution_id", 1}, {"target_id", 1}, {"status", 1}, {"files_from_run", -1}}},
      },
      max_time_ms));
  out.push_back(create_indexes(finalized_coll, {{"run", {{"distribution_id", 1}, {"run_no", 1}, {"job_id", 1}}}},
                               max_time_ms));
  out.push_back(create_indexes(dns_coll,
                               {
                                   {"left", {{"removed_at", 1}, {"presented_at", 1}, {"_id", 1}}},
                                   {"attempt", {{"job_id", 1}, {"fence", 1}, {"presented_at", 1}, {"_id", 1}}},
                               },
                               max_time_ms));
  return out;
}

result<std::shared_ptr<catalog_store>> open_catalog_only(const mongodb_options& o) {
  auto c = connection::open(o);
  if (!c) return std::move(c).error();
  auto owned = std::make_shared<owned_catalog>();
  owned->c = std::move(*c);
  const connection* conn = owned->c.get();
  owned->factory = [conn](mongoc_client_t* client, mongoc_client_session_t* s, mongo_job_tx& jobs) {
    return make_catalog_tx(*conn, client, s, jobs);
  };
  owned->ex = std::make_unique<executor>(*owned->c, o.threads);
  owned->store = make_catalog_store(*owned->c, *owned->ex, owned->factory);
  auto* store = owned->store.get();
  return std::shared_ptr<catalog_store>(std::move(owned), store);
}

}  // namespace certfleet::store::mongo
