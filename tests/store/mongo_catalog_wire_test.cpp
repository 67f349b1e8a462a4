// The MongoDB catalog (src/store/mongo/mongo_catalog.cpp) at the wire, against MongoDB's own
// wire-protocol test server (mockupdb, tests/testbed/mockupdb_server.py): the exact command
// documents of a representative set of catalog operations — every one inside the transaction
// `transact` or `read` opens (lsid, txnNumber, autocommit false, startTransaction on the first,
// no write concern of their own, the commit at w:majority) — and the fault paths: a WriteConflict
// reruns the body, an error from the body aborts and comes back unchanged, a throw aborts and is
// rethrown, the finalized-children guard answers true then false, a taken name is a conflict.
// What this does not prove: how a real replica set executes them (the conformance suite does,
// with CERTFLEET_TEST_MONGODB_URI).
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/mongodb.hpp"
#include "mockupdb.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include "mongo_catalog.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>


using namespace certfleet;
using namespace certfleet::store;
namespace json = boost::json;
using testbed::run_sync;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

using testbed::mongo_script::rule;
using testbed::mongo_script::script;
json::object cursor(std::string ns, json::array docs, std::int64_t id = 0, const char* batch = "firstBatch") {
  return json::object{{"ok", 1}, {"cursor", {{"id", id}, {"ns", "certfleet." + ns}, {batch, std::move(docs)}}}};
}
json::object doc_of(const json::object& logged) { return logged.at("doc").as_object(); }
std::string s(const json::value& v) { return json::serialize(v); }

// Inside a transaction: the session's id and number, no concern of the command's own.
void expect_in_transaction(const json::object& d) {
  EXPECT_TRUE(d.contains("lsid")) << s(d);
  EXPECT_TRUE(d.contains("txnNumber")) << s(d);
  ASSERT_TRUE(d.contains("autocommit")) << s(d);
  EXPECT_EQ(d.at("autocommit"), false) << s(d);
  EXPECT_FALSE(d.contains("writeConcern")) << s(d);
  EXPECT_TRUE(d.contains("maxTimeMS") || d.contains("getMore")) << s(d);
}

// The commands of the log other than the transaction's own (commit/abort), in order.
std::vector<json::object> data_commands(const testbed::mockupdb& db) {
  std::vector<json::object> out;
  for (auto& c : db.commands()) {
    const auto name = std::string(c.at("command").as_string());
    if (name == "commitTransaction" || name == "abortTransaction") continue;
    out.push_back(doc_of(c));
  }
  return out;
}

class mongo_catalog_wire : public ::testing::Test {
 protected:
  testbed::temp_dir dir;

  std::shared_ptr<catalog_store> open(testbed::mockupdb& db) {
    mongodb_options o;
    o.uri = db.uri();
    o.threads = 1;
    o.server_selection_timeout_ms = 3000;
    o.operation_timeout_ms = 2000;
    o.clock = lease_clock::caller;
    auto c = mongo::open_catalog_only(o);
    if (!c) ADD_FAILURE() << c.error().message;
    return c ? std::move(*c) : nullptr;
  }
  static result<void> transact(catalog_store& c, const tx_fn& fn) {
    tx_fn f = fn;
    return run_sync(c.transact(std::move(f)));
  }
  static result<void> read(catalog_store& c, const read_fn& fn) {
    read_fn f = fn;
    return run_sync(c.read(std::move(f)));
  }
};

TEST(mongo_catalog_indexes, each_collection_gets_the_indexes_its_queries_sort_on_with_a_majority_write) {
  const auto cmds = mongo::catalog_index_commands(2000);
  ASSERT_EQ(cmds.size(), 5u);
  std::vector<json::object> docs;
  for (const auto& c : cmds) docs.push_back(json::parse(c.json()).as_object());
  for (const auto& d : docs) {
    EXPECT_EQ(d.at("writeConcern").at("w"), "majority") << s(d);
    EXPECT_EQ(d.at("maxTimeMS").to_number<int>(), 2000);
  }
  EXPECT_EQ(docs[0].at("createIndexes"), "objects");
  const auto& objects = docs[0].at("indexes").as_array();
  EXPECT_EQ(objects.at(0).at("name"), "name");
  EXPECT_EQ(s(objects.at(0).at("key")), R"({"project_id":1,"kind":1,"name":1})");
  EXPECT_EQ(objects.at(0).at("unique"), true);
  EXPECT_EQ(s(objects.at(1).at("key")), R"({"project_id":1,"kind":1,"_id":1})");
  EXPECT_EQ(s(objects.at(2).at("key")), R"({"project_id":1,"kind":1,"ref_id":1,"_id":1})");
  EXPECT_EQ(s(objects.at(2).at("partialFilterExpression")), R"({"ref_id":{"$exists":true}})");
  EXPECT_EQ(s(objects.at(3).at("key")), R"({"kind":1,"not_after":1,"_id":1})");
  EXPECT_EQ(s(objects.at(4).at("key")), R"({"kind":1,"_id":1})");
  EXPECT_EQ(s(objects.at(4).at("partialFilterExpression")), R"({"sealed":{"$exists":true}})");

  EXPECT_EQ(docs[1].at("createIndexes"), "distributions");
  const auto& dists = docs[1].at("indexes").as_array();
  EXPECT_EQ(s(dists.at(0).at("key")), R"({"project_id":1,"name":1})");
  EXPECT_EQ(dists.at(0).at("unique"), true);
  EXPECT_EQ(s(dists.at(1).at("key")), R"({"project_id":1,"_id":-1})");
  EXPECT_EQ(s(dists.at(2).at("key")), R"({"project_id":1,"uses":1,"_id":1})");
  EXPECT_EQ(s(dists.at(3).at("key")), R"({"status":1,"updated_at":1,"_id":1})");
  EXPECT_EQ(s(dists.at(4).at("key")), R"({"auto_execute":1,"updated_at":1,"_id":1})");

  EXPECT_EQ(docs[2].at("createIndexes"), "target_results");
  const auto& results = docs[2].at("indexes").as_array();
  EXPECT_EQ(s(results.at(0).at("key")),
            R"({"distribution_id":1,"run_no":1,"target_id":1,"retry_attempt":1,"fence":1,"job_id":1})");
  EXPECT_EQ(s(results.at(1).at("key")),
            R"({"distribution_id":1,"run_no":1,"job_id":1,"target_id":1,"retry_attempt":1,"fence":1})");
  EXPECT_EQ(s(results.at(2).at("key")), R"({"distribution_id":1,"target_id":1,"status":1,"files_from_run":-1})");

  EXPECT_EQ(docs[3].at("createIndexes"), "distribution_finalized");
  EXPECT_EQ(s(docs[3].at("indexes").at(0).at("key")), R"({"distribution_id":1,"run_no":1,"job_id":1})");
  EXPECT_EQ(docs[4].at("createIndexes"), "dns_records");
  EXPECT_EQ(s(docs[4].at("indexes").at(0).at("key")), R"({"removed_at":1,"presented_at":1,"_id":1})");
  EXPECT_EQ(s(docs[4].at("indexes").at(1).at("key")), R"({"job_id":1,"fence":1,"presented_at":1,"_id":1})");
}

TEST_F(mongo_catalog_wire, insert_object_looks_the_name_up_then_inserts_in_one_transaction_committed_at_majority) {
  testbed::mockupdb db(dir, script({}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  catalog_object o;
  o.id = "650000000000000000000001";
  o.project_id = "p1";
  o.kind = std::string(kind_target);
  o.name = "web";
  o.doc = R"({"host":"a"})";
  o.sealed = "cfs1:1:AAAA";
  o.ref_id = "c1";
  o.not_after = t0 + 5;
  o.created_at = t0;
  int calls = 0;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    ++calls;
    auto ins = tx.insert_object(o);
    if (!ins) return std::move(ins).error();
    EXPECT_EQ(ins->id, o.id);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(calls, 1);
  auto cmds = data_commands(db);
  ASSERT_EQ(cmds.size(), 2u);
  const auto& find = cmds[0];
  EXPECT_EQ(find.at("find"), "objects");
  EXPECT_EQ(s(find.at("filter")), R"({"project_id":"p1","kind":"target","name":"web"})");
  EXPECT_EQ(s(find.at("projection")), R"({"_id":1})");
  EXPECT_EQ(find.at("limit").to_number<int>(), 1);
  expect_in_transaction(find);
  // The first command starts the transaction and carries its read concern.
  EXPECT_EQ(find.at("startTransaction"), true);
  EXPECT_EQ(find.at("readConcern").at("level"), "majority");
  const auto& ins = cmds[1];
  EXPECT_EQ(ins.at("insert"), "objects");
  EXPECT_EQ(s(ins.at("documents").at(0)),
            R"({"_id":"650000000000000000000001","project_id":"p1","kind":"target","name":"web",)"
            R"("doc":"{\"host\":\"a\"}","sealed":"cfs1:1:AAAA","ref_id":"c1","not_after":1700000000005,)"
            R"("created_at":1700000000000})");
  expect_in_transaction(ins);
  EXPECT_FALSE(ins.contains("startTransaction"));
  EXPECT_FALSE(ins.contains("readConcern"));
  EXPECT_EQ(ins.at("txnNumber"), find.at("txnNumber"));
  EXPECT_EQ(ins.at("lsid"), find.at("lsid"));
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("writeConcern").at("w"), "majority");
  EXPECT_EQ(doc_of(commits[0]).at("txnNumber"), find.at("txnNumber"));
  EXPECT_TRUE(db.commands("abortTransaction").empty());
}

TEST_F(mongo_catalog_wire, a_taken_name_is_a_conflict_naming_the_field_and_the_transaction_goes_on) {
  testbed::mockupdb db(
      dir, script({rule("find", cursor("objects", json::array{{{"_id", "650000000000000000000009"}}}), 1,
                        {{"find", "objects"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::optional<error> dup;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    catalog_object o;
    o.project_id = "p1";
    o.kind = std::string(kind_certificate);
    o.name = "www";
    auto again = tx.insert_object(o);
    if (!again) dup = again.error();
    return tx.set_meta("kek_fingerprint", "abc");  // the transaction is still usable
  });
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(dup);
  EXPECT_TRUE(dup->is(errc::conflict));
  EXPECT_EQ(dup->field, "name");
  EXPECT_NE(dup->message.find("www"), std::string::npos) << dup->message;
  EXPECT_TRUE(db.commands("insert").empty());  // never sent: no duplicate key inside the transaction
  auto updates = db.commands("update");
  ASSERT_EQ(updates.size(), 1u);
  const auto meta = doc_of(updates[0]);
  EXPECT_EQ(meta.at("update"), "store_meta");
  // Catalog keys beside schema.cpp's {_id: "schema"}.
  EXPECT_EQ(s(meta.at("updates").at(0)), R"({"q":{"_id":"meta:kek_fingerprint"},"u":{"$set":{"value":"abc"}},"upsert":true})");
  expect_in_transaction(meta);
  EXPECT_EQ(db.commands("commitTransaction").size(), 1u);
}

TEST_F(mongo_catalog_wire, a_write_conflict_runs_the_function_again_and_commits_once) {
  testbed::mockupdb db(dir, script({rule("insert",
                                         {{"ok", 0},
                                          {"code", 112},
                                          {"codeName", "WriteConflict"},
                                          {"errmsg", "WriteConflict error"},
                                          {"errorLabels", json::array{"TransientTransactionError"}}},
                                         1, {{"insert", "objects"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  int calls = 0;
  std::vector<bool> ok;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    ++calls;
    catalog_object o;
    o.project_id = "p1";
    o.kind = std::string(kind_target);
    o.name = "web";
    auto ins = tx.insert_object(o);
    ok.push_back(static_cast<bool>(ins));
    if (!ins) return std::move(ins).error();
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(ok, (std::vector<bool>{false, true}));
  auto finds = db.commands("find");
  ASSERT_EQ(finds.size(), 2u);
  // Each run of the body is a transaction of its own, started by its first command.
  EXPECT_EQ(doc_of(finds[0]).at("startTransaction"), true);
  EXPECT_EQ(doc_of(finds[1]).at("startTransaction"), true);
  EXPECT_NE(doc_of(finds[0]).at("txnNumber"), doc_of(finds[1]).at("txnNumber"));
  auto inserts = db.commands("insert");
  ASSERT_EQ(inserts.size(), 2u);
  EXPECT_EQ(doc_of(inserts[1]).at("txnNumber"), doc_of(finds[1]).at("txnNumber"));
  for (const auto& i : inserts) expect_in_transaction(doc_of(i));
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("txnNumber"), doc_of(finds[1]).at("txnNumber"));
}

TEST_F(mongo_catalog_wire, an_error_from_the_function_aborts_and_comes_back_unchanged) {
  testbed::mockupdb db(dir, script({}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  int calls = 0;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    ++calls;
    if (auto m = tx.set_meta("k", "v"); !m) return m;
    return make_error(errc::conflict, "changed my mind", "why");
  });
  ASSERT_FALSE(r);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(r.error().is(errc::conflict));
  EXPECT_EQ(r.error().message, "changed my mind");
  EXPECT_EQ(r.error().field, "why");
  EXPECT_TRUE(db.commands("commitTransaction").empty());
  auto aborts = db.commands("abortTransaction");
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_EQ(doc_of(aborts[0]).at("txnNumber"), doc_of(db.commands("update").at(0)).at("txnNumber"));
}

TEST_F(mongo_catalog_wire, a_throw_from_the_function_aborts_and_is_rethrown) {
  testbed::mockupdb db(dir, script({}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  EXPECT_THROW((void)transact(*cat,
                              [&](catalog_tx& tx) -> result<void> {
                                EXPECT_TRUE(tx.set_meta("k", "v"));
                                throw std::runtime_error("bug");
                              }),
               std::runtime_error);
  EXPECT_TRUE(db.commands("commitTransaction").empty());
  EXPECT_EQ(db.commands("abortTransaction").size(), 1u);
}

TEST_F(mongo_catalog_wire, a_store_failure_without_labels_ends_the_transaction_with_that_failure) {
  testbed::mockupdb db(dir, script({rule("update",
                                         {{"ok", 0}, {"code", 50}, {"codeName", "MaxTimeMSExpired"},
                                          {"errmsg", "operation exceeded time limit"}},
                                         1, {{"update", "store_meta"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  int calls = 0;
  bool swallowed = false;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    ++calls;
    swallowed = !tx.set_meta("k", "v");
    return {};  // even when the caller goes on, the failed command ends the transaction
  });
  ASSERT_FALSE(r);
  EXPECT_TRUE(swallowed);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error().message;
  EXPECT_TRUE(db.commands("commitTransaction").empty());
}

TEST_F(mongo_catalog_wire, add_finalized_is_an_insert_only_upsert_true_then_false_and_the_counter_moves_once) {
  json::object first_upsert{{"ok", 1},
                            {"n", 1},
                            {"nModified", 0},
                            {"upserted", json::array{{{"index", 0}, {"_id", {{"d", "d1"}, {"r", 1}, {"j", "j1"}}}}}}};
  testbed::mockupdb db(
      dir, script({rule("update", first_upsert, 1, {{"update", "distribution_finalized"}}),
                   rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 0}}, 1, {{"update", "distribution_finalized"}}),
                   rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}}, 5, {{"update", "distributions"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  distribution_record d;
  d.id = "d1";
  d.status = "running";
  d.run_no = 1;
  d.mode = "fan_out";
  d.run_target_ids = {"t1", "t2"};
  d.job_ids = {"j2", "j1"};
  d.fan_out_total = 2;
  d.updated_at = t0;
  std::vector<bool> added;
  auto report = [&] {
    return transact(*cat, [&](catalog_tx& tx) -> result<void> {
      auto a = tx.add_finalized("d1", 1, finalized_child{"j1", "succeeded", true});
      if (!a) return std::move(a).error();
      added.push_back(*a);
      if (!*a) return {};  // already counted: the counter is not touched
      auto next = d;
      ++next.fan_out_succeeded;
      return tx.update_distribution(next);
    });
  };
  ASSERT_TRUE(report());
  ASSERT_TRUE(report());
  EXPECT_EQ(added, (std::vector<bool>{true, false}));
  std::vector<json::object> guards, counters;
  for (auto& u : db.commands("update")) {
    auto d2 = doc_of(u);
    (d2.at("update") == "distribution_finalized" ? guards : counters).push_back(d2);
  }
  ASSERT_EQ(guards.size(), 2u);
  EXPECT_EQ(s(guards[0].at("updates").at(0)),
            R"({"q":{"_id":{"d":"d1","r":1,"j":"j1"}},"u":{"$setOnInsert":{"distribution_id":"d1","run_no":1,)"
            R"("job_id":"j1","outcome":"succeeded","batch":true}},"upsert":true})");
  EXPECT_EQ(guards[0].at("updates"), guards[1].at("updates"));  // the replay is the same statement
  for (const auto& g : guards) expect_in_transaction(g);
  ASSERT_EQ(counters.size(), 1u);
  expect_in_transaction(counters[0]);
  const auto& stmt = counters[0].at("updates").at(0).as_object();
  EXPECT_EQ(s(stmt.at("q")), R"({"_id":"d1"})");
  EXPECT_FALSE(stmt.contains("upsert"));
  EXPECT_EQ(s(stmt.at("u")),
            R"({"$set":{"status":"running","run_no":1,"mode":"fan_out","run_target_ids":["t1","t2"],)"
            R"("job_ids":["j2","j1"],"error":"","fan_out_total":2,"fan_out_succeeded":1,"fan_out_failed":0,)"
            R"("fan_out_partial":0,"fan_out_cancelled":0,"fan_out_retrying":0,"fan_out_retry_wave":0,)"
            R"("fail_fast_fired":false,"cancel_requested":false,"run_started_at":0,"run_finished_at":0,)"
            R"("updated_at":1700000000000,"run_certificate_version":0,"run_trigger":"",)"
            R"("run_redrives":0}})");
  EXPECT_EQ(db.commands("commitTransaction").size(), 2u);
}

TEST_F(mongo_catalog_wire, update_distribution_of_a_missing_one_is_not_found) {
  testbed::mockupdb db(dir, script({}));  // update: n 0
  auto cat = open(db);
  ASSERT_TRUE(cat);
  distribution_record d;
  d.id = "gone";
  auto r = transact(*cat, [&](catalog_tx& tx) { return tx.update_distribution(d); });
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::not_found));
  EXPECT_EQ(r.error().field, "id");
  EXPECT_EQ(db.commands("abortTransaction").size(), 1u);
}

TEST_F(mongo_catalog_wire, list_objects_reads_a_page_and_its_total_in_one_snapshot) {
  json::object obj{{"_id", "650000000000000000000003"}, {"project_id", "p1"}, {"kind", "target"},
                   {"name", "web"}, {"doc", "{}"}, {"not_after", 0}, {"created_at", t0}};
  testbed::mockupdb db(dir, script({rule("find", cursor("objects", json::array{obj}), 1, {{"find", "objects"}}),
                                    rule("aggregate", cursor("objects", json::array{{{"n", 12}}}), 1,
                                         {{"aggregate", "objects"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  object_page page;
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto p = rd.list_objects("p1", kind_target, 2, 10);
    if (!p) return std::move(p).error();
    page = std::move(*p);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(page.total, 12);
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.items[0].id, "650000000000000000000003");
  EXPECT_EQ(page.items[0].name, "web");
  EXPECT_EQ(page.items[0].sealed, "");
  auto cmds = data_commands(db);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(s(cmds[0].at("filter")), R"({"project_id":"p1","kind":"target"})");
  EXPECT_EQ(s(cmds[0].at("sort")), R"({"_id":-1})");
  EXPECT_EQ(cmds[0].at("skip").to_number<int>(), 10);
  EXPECT_EQ(cmds[0].at("limit").to_number<int>(), 10);
  EXPECT_EQ(cmds[0].at("startTransaction"), true);
  EXPECT_EQ(cmds[0].at("readConcern").at("level"), "majority");
  // count is not allowed in a transaction: an aggregate with $count.
  EXPECT_EQ(s(cmds[1].at("pipeline")), R"([{"$match":{"project_id":"p1","kind":"target"}},{"$count":"n"}])");
  for (const auto& c : cmds) expect_in_transaction(c);
  EXPECT_EQ(cmds[0].at("txnNumber"), cmds[1].at("txnNumber"));
}

TEST_F(mongo_catalog_wire, a_cursor_is_read_to_its_end_with_get_more_in_the_same_transaction) {
  auto row = [](std::string target, std::int64_t attempt) {
    return json::object{{"distribution_id", "d1"}, {"run_no", 1},  {"target_id", target}, {"job_id", "j1"},
                        {"retry_attempt", attempt}, {"fence", 1},  {"status", "failed"},  {"detail", "{}"}};
  };
  testbed::mockupdb db(
      dir, script({rule("find", cursor("target_results", json::array{row("t1", 0), row("t1", 1)}, 42), 1,
                        {{"find", "target_results"}}),
                   rule("getMore", cursor("target_results", json::array{row("t2", 0)}, 0, "nextBatch"))}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::vector<target_result> outcomes;
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto o = rd.run_outcomes("d1", 1);
    if (!o) return std::move(o).error();
    outcomes = std::move(*o);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  // The outcome of each target: its row with the highest (retry_attempt, fence).
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].target_id, "t1");
  EXPECT_EQ(outcomes[0].retry_attempt, 1);
  EXPECT_EQ(outcomes[1].target_id, "t2");
  auto cmds = data_commands(db);
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(s(cmds[0].at("filter")), R"({"distribution_id":"d1","run_no":1})");
  EXPECT_EQ(s(cmds[0].at("sort")), R"({"target_id":1,"retry_attempt":1,"fence":1,"job_id":1})");
  EXPECT_FALSE(cmds[0].contains("limit"));
  EXPECT_EQ(cmds[1].at("getMore").to_number<int>(), 42);
  EXPECT_EQ(cmds[1].at("collection"), "target_results");
  expect_in_transaction(cmds[1]);
  EXPECT_EQ(cmds[1].at("txnNumber"), cmds[0].at("txnNumber"));
}

TEST_F(mongo_catalog_wire, a_runs_waiting_children_are_found_by_key_prefix_and_cancelled_under_their_status) {
  json::object pending{{"_id", "j1"}, {"project_id", "p1"}, {"type", "distribution_execute"}, {"lane", "dist"},
                       {"status", "pending"}, {"held", true}, {"idempotency_key", "dist:d1:1:batch:1"}};
  json::object active{{"_id", "j2"}, {"project_id", "p1"}, {"type", "distribution_execute"}, {"lane", "dist"},
                      {"status", "active"}, {"held", false}, {"idempotency_key", "dist:d1:1:batch:0"}};
  auto cancelled = pending;
  cancelled["status"] = "cancelled";
  cancelled["held"] = false;
  cancelled["completed_at"] = t0 + 7;
  testbed::mockupdb db(
      dir, script({rule("find", cursor("distributions", json::array{{{"_id", "d1"}, {"project_id", "p1"}}}), 1,
                        {{"find", "distributions"}}),
                   rule("find", cursor("jobs", json::array{pending, active}), 1, {{"find", "jobs"}}),
                   rule("findAndModify", {{"ok", 1}, {"value", cancelled}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::vector<job_record> out;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    auto c = tx.cancel_waiting_children("d1", "dist:d1:1:", t0 + 7);
    if (!c) return std::move(c).error();
    out = std::move(*c);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].id, "j1");
  EXPECT_EQ(out[0].status, job_status::cancelled);
  EXPECT_EQ(out[0].completed_at, t0 + 7);
  auto cmds = data_commands(db);
  ASSERT_EQ(cmds.size(), 3u);  // only the waiting child is written
  EXPECT_EQ(s(cmds[0].at("filter")), R"({"_id":"d1"})");
  EXPECT_EQ(s(cmds[0].at("projection")), R"({"project_id":1})");
  EXPECT_EQ(cmds[1].at("find"), "jobs");
  // The run's keys: a literal prefix, one range of the (project_id, idempotency_key) index.
  EXPECT_EQ(s(cmds[1].at("filter")), R"({"project_id":"p1","idempotency_key":{"$regex":"^dist:d1:1:"}})");
  EXPECT_EQ(s(cmds[1].at("sort")), R"({"_id":1})");
  EXPECT_EQ(cmds[2].at("findAndModify"), "jobs");
  EXPECT_EQ(s(cmds[2].at("query")), R"({"_id":"j1","status":{"$in":["pending","failed"]}})");
  EXPECT_EQ(s(cmds[2].at("update")),
            R"({"$set":{"status":"cancelled","completed_at":1700000000007,"held":false,)"
            R"("error":"cancelled with its distribution","error_code":"cancelled"},"$unset":{"q":"","error_class":""}})");
  EXPECT_EQ(cmds[2].at("new"), true);
  for (const auto& c : cmds) expect_in_transaction(c);
}

TEST_F(mongo_catalog_wire, release_held_children_puts_them_back_in_the_claim_index_under_their_lane) {
  json::object held{{"_id", "j1"}, {"project_id", "p1"}, {"type", "distribution_execute"}, {"lane", "dist"},
                    {"status", "pending"}, {"held", true}, {"idempotency_key", "dist:d1:1:batch:1"}};
  testbed::mockupdb db(
      dir, script({rule("find", cursor("distributions", json::array{{{"_id", "d1"}, {"project_id", "p1"}}}), 1,
                        {{"find", "distributions"}}),
                   rule("find", cursor("jobs", json::array{held}), 1, {{"find", "jobs"}}),
                   rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}}, 1, {{"update", "jobs"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  int released = -1;
  auto r = transact(*cat, [&](catalog_tx& tx) -> result<void> {
    auto n = tx.release_held_children("d1", "dist:d1:1:", t0 + 5);
    if (!n) return std::move(n).error();
    released = *n;
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(released, 1);
  auto updates = db.commands("update");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(s(doc_of(updates[0]).at("updates").at(0)),
            R"({"q":{"_id":"j1","held":true,"status":"pending"},"u":{"$set":{"held":false,"ready_at":1700000000005,"q":"dist"}}})");
}

TEST_F(mongo_catalog_wire, dns_records_left_is_one_aggregate_joining_the_presenting_attempt) {
  json::object rec{{"_id", "r1"},           {"project_id", "p1"},   {"provider_id", "pr1"},
                   {"job_id", "j1"},        {"fence", 2},           {"zone", "example.test"},
                   {"fqdn", "_acme-challenge.a.example.test"}, {"value", "v"}, {"presented_at", t0 + 1},
                   {"removed_at", 0}};
  testbed::mockupdb db(dir, script({rule("aggregate", cursor("dns_records", json::array{rec}), 1,
                                         {{"aggregate", "dns_records"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::vector<dns_record> left;
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto l = rd.dns_records_left(50);
    if (!l) return std::move(l).error();
    left = std::move(*l);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].id, "r1");
  EXPECT_EQ(left[0].fence, 2);
  EXPECT_EQ(left[0].presented_at, t0 + 1);
  EXPECT_EQ(left[0].removed_at, 0);
  const auto agg = doc_of(db.commands("aggregate").at(0));
  expect_in_transaction(agg);
  EXPECT_EQ(s(agg.at("pipeline")),
            R"([{"$match":{"removed_at":0}},{"$sort":{"presented_at":1,"_id":1}},)"
            R"({"$lookup":{"from":"jobs","let":{"job":"$job_id","fence":"$fence"},"pipeline":[)"
            R"({"$match":{"$expr":{"$and":[{"$eq":["$_id","$$job"]},{"$eq":["$status","active"]},)"
            R"({"$eq":["$fence","$$fence"]}]}}},{"$project":{"_id":1}}],"as":"running"}},)"
            R"({"$match":{"running":{"$size":0}}},{"$limit":50},{"$project":{"running":0}}])");
}

TEST_F(mongo_catalog_wire, target_last_successes_are_grouped_on_the_server_by_target) {
  testbed::mockupdb db(dir, script({rule("aggregate",
                                         cursor("target_results", json::array{json::object{{"_id", "t1"}, {"at", t0 + 5}},
                                                                       json::object{{"_id", "t2"}, {"at", t0 + 9}}}),
                                         1, {{"aggregate", "target_results"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::vector<std::pair<std::string, certfleet::time_ms>> got;
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto v = rd.target_last_successes(1000);
    if (!v) return std::move(v).error();
    got = std::move(*v);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (std::pair<std::string, certfleet::time_ms>{"t1", t0 + 5}));
  EXPECT_EQ(got[1], (std::pair<std::string, certfleet::time_ms>{"t2", t0 + 9}));
  const auto agg = doc_of(db.commands("aggregate").at(0));
  expect_in_transaction(agg);
  EXPECT_EQ(s(agg.at("pipeline")),
            R"([{"$match":{"status":"succeeded"}},{"$group":{"_id":"$target_id","at":{"$max":"$finished_at"}}},)"
            R"({"$sort":{"_id":1}},{"$limit":1000}])");
}

TEST_F(mongo_catalog_wire, sealed_versions_are_grouped_on_the_server_and_merged_in_order) {
  auto group = [](std::string kind, std::string v, int n) {
    return json::object{{"_id", {{"kind", kind}, {"v", v}}}, {"n", n}};
  };
  testbed::mockupdb db(
      dir, script({rule("aggregate",
                        cursor("objects", json::array{group("credential", "2", 1), group("credential", "", 1),
                                                      group("certificate", "12", 1), group("credential", "1", 2),
                                                      group("credential", "9999999999", 3)}),
                        1, {{"aggregate", "objects"}})}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  std::vector<sealed_count> got;
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto v = rd.sealed_versions();
    if (!v) return std::move(v).error();
    got = std::move(*v);
    return {};
  });
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].kind, "certificate");
  EXPECT_EQ(got[0].version, 12u);
  EXPECT_EQ(got[1].kind, "credential");
  EXPECT_EQ(got[1].version, 0u);  // not an envelope, and a number past 32 bits: both 0
  EXPECT_EQ(got[1].count, 4);
  EXPECT_EQ(got[2].version, 1u);
  EXPECT_EQ(got[2].count, 2);
  EXPECT_EQ(got[3].version, 2u);
  const auto agg = doc_of(db.commands("aggregate").at(0));
  const auto& pipeline = agg.at("pipeline").as_array();
  ASSERT_EQ(pipeline.size(), 2u);
  EXPECT_EQ(s(pipeline[0]), R"({"$match":{"sealed":{"$exists":true}}})");
  EXPECT_EQ(s(pipeline[1].at("$group").at("_id").at("kind")), R"("$kind")");
  EXPECT_NE(s(pipeline[1]).find(R"("^[1-9][0-9]{0,9}$")"), std::string::npos) << s(pipeline[1]);
}

TEST_F(mongo_catalog_wire, sealed_page_skips_envelopes_already_at_the_new_version_by_a_literal_prefix) {
  testbed::mockupdb db(dir, script({}));
  auto cat = open(db);
  ASSERT_TRUE(cat);
  auto r = read(*cat, [&](catalog_read& rd) -> result<void> {
    auto p = rd.sealed_page(kind_credential, "cfs1:2:", "650000000000000000000001", 100);
    return p ? result<void>{} : std::move(p).error();
  });
  ASSERT_TRUE(r) << r.error().message;
  const auto f = doc_of(db.commands("find").at(0));
  EXPECT_EQ(s(f.at("filter")),
            R"({"kind":"credential","sealed":{"$exists":true,"$not":{"$regex":"^cfs1:2:"}},)"
            R"("_id":{"$gt":"650000000000000000000001"}})");
  EXPECT_EQ(s(f.at("sort")), R"({"_id":1})");
  EXPECT_EQ(s(f.at("projection")), R"({"sealed":1})");
  EXPECT_EQ(f.at("limit").to_number<int>(), 100);
}

}  // namespace
