// The MongoDB worker registry (issue 34) at the wire, against mockupdb (tests/testbed/
// mockupdb_server.py): the heartbeat's upsert stamped with the server's clock, the refusal of a
// dead worker's beat, the list's aggregation, and declare_dead's one transaction — the age guard,
// the end of every lease the worker holds, the lost-worker transitions reap_expired applies
// (under the fence read) with the terminal hook inside, the commit at majority — and its abort
// when the verdict no longer holds. What this does not prove: how a real replica set runs them (the conformance
// suite does, with CERTFLEET_TEST_MONGODB_URI set).
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/workers.hpp"
#include "mockupdb.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

using namespace certfleet;
using namespace certfleet::store;
namespace json = boost::json;
using testbed::run_sync;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

using testbed::mongo_script::rule;
using testbed::mongo_script::script;

std::string s(const json::value& v) { return json::serialize(v); }

json::object batch(std::string coll, json::array docs) {
  return {{"ok", 1}, {"cursor", {{"id", 0}, {"ns", "certfleet." + coll}, {"firstBatch", std::move(docs)}}}};
}

json::object job_doc(std::string id, std::string status, std::int64_t fence, int attempts, int max_attempts) {
  return {{"_id", id},           {"project_id", "p1"},     {"type", "noop"},        {"lane", "main"},
          {"payload", "{}"},     {"status", status},       {"attempts", attempts},  {"max_attempts", max_attempts},
          {"fence", fence},      {"ready_at", t0},         {"held", false},         {"created_at", t0},
          {"locked_by", "w1"},   {"progress_current", 0},  {"progress_total", 0},   {"cancel_requested", false},
          {"log_seq", 0}};
}

worker_presence presence(std::string id) {
  worker_presence w;
  w.id = std::move(id);
  w.host = "vm1";
  w.host_key = "$vm1/boot";  // a leading "$" must stay a string, not become a field path
  w.pid = 4242;
  w.proc_start = "123456";
  w.version = "1.2.3";
  w.lanes = "main,dist";
  w.started_at = t0 - 60'000;
  w.running = 2;
  return w;
}

void expect_majority_write(const json::object& d) {
  ASSERT_TRUE(d.contains("writeConcern")) << s(d);
  EXPECT_EQ(d.at("writeConcern").at("w"), "majority") << s(d);
  EXPECT_TRUE(d.contains("maxTimeMS")) << s(d);
  EXPECT_FALSE(d.contains("txnNumber")) << s(d);
}

class mongo_workers_wire : public ::testing::Test {
 protected:
  testbed::temp_dir dir;

  std::unique_ptr<certfleet::store::store> open(testbed::mockupdb& db, lease_clock clock = lease_clock::server) {
    mongodb_options o;
    o.uri = db.uri();
    o.threads = 1;
    o.server_selection_timeout_ms = 3000;
    o.operation_timeout_ms = 2000;
    o.clock = clock;
    o.change_stream = false;
    auto st = open_mongodb(o);
    if (!st) ADD_FAILURE() << st.error().message;
    return st ? std::move(*st) : nullptr;
  }
  static json::object doc_of(const json::object& logged) { return logged.at("doc").as_object(); }
  // The commands sent on `coll` (the start's schema writes are on other collections).
  static std::vector<json::object> on(const testbed::mockupdb& db, std::string_view name, std::string_view coll) {
    std::vector<json::object> out;
    for (const auto& c : db.commands(name)) {
      auto d = doc_of(c);
      if (d.at(name).as_string() == coll) out.push_back(std::move(d));
    }
    return out;
  }
  // Every command of the transaction, after the store's start, in order.
  static std::vector<json::object> in_transactions(const testbed::mockupdb& db) {
    std::vector<json::object> out;
    for (const auto& c : db.commands()) {
      auto d = doc_of(c);
      if (d.contains("txnNumber")) out.push_back(std::move(d));
    }
    return out;
  }
};

TEST_F(mongo_workers_wire, a_beat_is_one_upsert_stamped_with_the_servers_clock_that_skips_a_dead_worker) {
  testbed::mockupdb db(dir, script({}));
  auto st = open(db);
  ASSERT_TRUE(st);
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1"), t0)));
  auto updates = on(db, "update", "workers");
  ASSERT_EQ(updates.size(), 1u);
  const auto& cmd = updates[0];
  expect_majority_write(cmd);
  const auto& stmt = cmd.at("updates").at(0).as_object();
  EXPECT_EQ(s(stmt.at("q")), R"({"_id":"w1","dead_at":{"$exists":false}})");
  EXPECT_EQ(stmt.at("upsert"), true);
  EXPECT_FALSE(stmt.contains("multi"));
  // A pipeline: last_seen is the server's $$NOW, every other field as the worker says.
  ASSERT_TRUE(stmt.at("u").is_array()) << s(stmt);
  ASSERT_EQ(stmt.at("u").as_array().size(), 1u);
  EXPECT_EQ(s(stmt.at("u").at(0)),
            R"({"$set":{"host":{"$literal":"vm1"},"host_key":{"$literal":"$vm1/boot"},"pid":4242,)"
            R"("proc_start":{"$literal":"123456"},"version":{"$literal":"1.2.3"},"lanes":{"$literal":"main,dist"},)"
            R"("started_at":1699999940000,"running":2,"last_seen":{"$toLong":"$$NOW"}}})");
}

TEST_F(mongo_workers_wire, a_dead_workers_beat_fails_on_its_id_and_is_lease_lost_sent_once) {
  // The filter excludes the dead document, so the upsert inserts a second _id: E11000.
  testbed::mockupdb db(dir, script({rule("update",
                                         {{"ok", 1},
                                          {"n", 0},
                                          {"writeErrors",
                                           {{{"index", 0},
                                             {"code", 11000},
                                             {"keyPattern", {{"_id", 1}}},
                                             {"errmsg", "E11000 duplicate key error collection: certfleet.workers "
                                                        "index: _id_ dup key: { _id: \"w1\" }"}}}}},
                                         1, {{"update", "workers"}})}));
  auto st = open(db);
  ASSERT_TRUE(st);
  auto r = run_sync(st->workers().beat(presence("w1"), t0));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::lease_lost)) << r.error().message;
  EXPECT_EQ(r.error().field, "worker");
  EXPECT_EQ(on(db, "update", "workers").size(), 1u);
}

TEST_F(mongo_workers_wire, the_list_is_one_aggregation_with_the_age_by_the_servers_clock_alive_first) {
  json::array docs{{{"_id", "w2"},
                    {"host", "vm2"},
                    {"host_key", "k2"},
                    {"pid", 7},
                    {"proc_start", "99"},
                    {"version", "1.2.3"},
                    {"lanes", "main"},
                    {"started_at", t0 - 5},
                    {"running", 4},
                    {"last_seen", t0 - 2'000},
                    {"age_ms", 2'000},
                    {"dead", 0}},
                   {{"_id", "w1"},
                    {"host", "vm1"},
                    {"last_seen", t0 - 90'000},
                    {"age_ms", 90'000},
                    {"dead", 1},
                    {"dead_at", t0 - 60'000},
                    {"dead_reason", "silent"},
                    {"released_jobs", 3}}};
  testbed::mockupdb db(dir, script({rule("aggregate", batch("workers", docs), 1, {{"aggregate", "workers"}})}));
  auto st = open(db);
  ASSERT_TRUE(st);
  auto l = run_sync(st->workers().list_workers(t0));
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "w2");
  EXPECT_EQ((*l)[0].host_key, "k2");
  EXPECT_EQ((*l)[0].pid, 7);
  EXPECT_EQ((*l)[0].running, 4);
  EXPECT_EQ((*l)[0].age_ms, 2'000);
  EXPECT_EQ((*l)[0].dead_at, 0);
  EXPECT_EQ((*l)[1].dead_at, t0 - 60'000);
  EXPECT_EQ((*l)[1].dead_reason, "silent");
  EXPECT_EQ((*l)[1].released_jobs, 3);
  auto aggs = on(db, "aggregate", "workers");
  ASSERT_EQ(aggs.size(), 1u);
  EXPECT_EQ(s(aggs[0].at("pipeline")),
            R"([{"$set":{"age_ms":{"$max":[{"$subtract":[{"$toLong":"$$NOW"},"$last_seen"]},0]},)"
            R"("dead":{"$cond":[{"$eq":[{"$type":"$dead_at"},"missing"]},0,1]}}},)"
            R"({"$sort":{"dead":1,"last_seen":-1,"_id":1}},{"$limit":10000}])");
  EXPECT_EQ(aggs[0].at("readConcern").at("level"), "majority");
  EXPECT_TRUE(aggs[0].contains("maxTimeMS"));
  EXPECT_FALSE(aggs[0].contains("txnNumber"));
}

TEST_F(mongo_workers_wire, declare_dead_is_one_transaction_that_releases_the_workers_jobs_under_their_fence_with_the_hook) {
  auto left = job_doc("j1", "active", 3, 1, 3);  // attempts left
  auto spent = job_doc("j2", "active", 5, 3, 3);  // its last attempt
  auto left_after = left;
  left_after["status"] = "pending";
  left_after.erase("locked_by");
  auto spent_after = spent;
  spent_after["status"] = "dead";
  spent_after["completed_at"] = t0;
  testbed::mockupdb db(
      dir, script({rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}}, 2, {{"update", "workers"}}),
                   rule("update", {{"ok", 1}, {"n", 2}, {"nModified", 2}}, 1, {{"update", "jobs"}}),
                   rule("find", batch("jobs", {left, spent}), 1, {{"find", "jobs"}}),
                   rule("findAndModify", {{"ok", 1}, {"value", left_after}}, 1),
                   rule("findAndModify", {{"ok", 1}, {"value", spent_after}}, 1)}));
  auto st = open(db, lease_clock::caller);
  ASSERT_TRUE(st);
  std::vector<std::string> hooked;
  st->jobs().set_terminal_hook({[&](job_tx& tx, const job_record& j) {
                                  hooked.push_back(j.id);
                                  new_job follow;
                                  follow.project_id = j.project_id;
                                  follow.type = "noop";
                                  follow.lane = "main";
                                  ASSERT_TRUE(tx.enqueue(follow, j.completed_at));
                                },
                                {}});
  auto n = run_sync(st->workers().declare_dead("w1", "no heartbeat for 25 s", 20'000, t0));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(hooked, std::vector<std::string>{"j2"});

  auto tx = in_transactions(db);
  // mark dead, end the leases, read them back, two transitions, the hook's insert, the count;
  // then the commit.
  ASSERT_EQ(tx.size(), 8u) << s(json::value_from(tx));
  const auto lsid = s(tx[0].at("lsid"));
  for (std::size_t i = 0; i < tx.size(); ++i) {
    EXPECT_EQ(s(tx[i].at("lsid")), lsid) << i;
    EXPECT_EQ(tx[i].at("txnNumber"), tx[0].at("txnNumber")) << i;
    EXPECT_EQ(tx[i].at("autocommit"), false) << i;
    EXPECT_EQ(tx[i].contains("startTransaction"), i == 0) << i;
    if (i + 1 < tx.size()) {
      EXPECT_FALSE(tx[i].contains("writeConcern")) << s(tx[i]);
      EXPECT_TRUE(tx[i].contains("maxTimeMS")) << s(tx[i]);
    }
  }
  EXPECT_EQ(tx[0].at("readConcern").at("level"), "majority");

  // 1. The verdict, guarded: not dead yet and silent for min_age by the store's clock.
  EXPECT_EQ(tx[0].at("update"), "workers");
  const auto& mark = tx[0].at("updates").at(0).as_object();
  EXPECT_EQ(s(mark.at("q")),
            R"({"_id":"w1","dead_at":{"$exists":false},"$expr":{"$lte":["$last_seen",{"$subtract":[1700000000000,20000]}]}})");
  EXPECT_EQ(s(mark.at("u")), R"([{"$set":{"dead_at":1700000000000,"dead_reason":{"$literal":"no heartbeat for 25 s"}}}])");
  EXPECT_FALSE(mark.contains("upsert"));
  // 2. Every lease the worker holds ends now (the fence is the next claim's to raise).
  EXPECT_EQ(tx[1].at("update"), "jobs");
  const auto& end = tx[1].at("updates").at(0).as_object();
  EXPECT_EQ(s(end.at("q")), R"({"status":"active","locked_by":"w1","locked_until":{"$exists":true}})");
  EXPECT_EQ(s(end.at("u")),
            R"({"$set":{"locked_until":1700000000000,"ready_at":1700000000000}})");
  EXPECT_EQ(end.at("multi"), true);
  // 3. Read back inside the transaction.
  EXPECT_EQ(tx[2].at("find"), "jobs");
  EXPECT_EQ(s(tx[2].at("filter")), R"({"status":"active","locked_by":"w1","locked_until":{"$exists":true}})");
  // 4. reap_expired's transitions, under the fence read.
  EXPECT_EQ(tx[3].at("findAndModify"), "jobs");
  EXPECT_EQ(s(tx[3].at("query")), R"({"_id":"j1","fence":3,"status":"active"})");
  EXPECT_EQ(s(tx[3].at("update")),
            R"({"$set":{"status":"pending","error":"lease expired: worker lost; returned to pending",)"
            R"("error_code":"lease_lost","error_class":"lease_lost","q":"main"},)"
            R"("$unset":{"locked_by":"","locked_until":""}})");
  EXPECT_EQ(s(tx[4].at("query")), R"({"_id":"j2","fence":5,"status":"active"})");
  EXPECT_EQ(s(tx[4].at("update")),
            R"({"$set":{"status":"dead","error":"lease expired: worker lost","error_code":"lease_lost",)"
            R"("error_class":"lease_lost","completed_at":1700000000000},)"
            R"("$unset":{"locked_until":"","q":""}})");
  // 5. The dead job's hook wrote in the same transaction.
  EXPECT_EQ(tx[5].at("insert"), "jobs");
  // 6. What it gave back, on the worker's document.
  EXPECT_EQ(tx[6].at("update"), "workers");
  EXPECT_EQ(s(tx[6].at("updates").at(0)), R"({"q":{"_id":"w1"},"u":{"$set":{"released_jobs":2}}})");
  EXPECT_EQ(tx[7].at("commitTransaction"), 1);
  EXPECT_EQ(tx[7].at("writeConcern").at("w"), "majority");
  EXPECT_TRUE(db.commands("abortTransaction").empty());
}

TEST_F(mongo_workers_wire, declare_dead_with_the_servers_clock_guards_on_now_and_runs_again_on_a_write_conflict) {
  testbed::mockupdb db(
      dir, script({rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}}, 3, {{"update", "workers"}}),
                   rule("update",
                        {{"ok", 0},
                         {"code", 112},
                         {"codeName", "WriteConflict"},
                         {"errmsg", "WriteConflict error"},
                         {"errorLabels", json::array{"TransientTransactionError"}}},
                        1, {{"update", "jobs"}})}));
  auto st = open(db);
  ASSERT_TRUE(st);
  auto n = run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 0);
  auto marks = on(db, "update", "workers");
  // The verdict, the verdict again (the first attempt was aborted), the count.
  ASSERT_EQ(marks.size(), 3u);
  EXPECT_NE(marks[0].at("txnNumber"), marks[1].at("txnNumber"));
  EXPECT_EQ(s(marks[1].at("updates").at(0).at("q").at("$expr")),
            R"({"$lte":["$last_seen",{"$subtract":[{"$toLong":"$$NOW"},20000]}]})");
  EXPECT_EQ(s(marks[1].at("updates").at(0).at("u").at(0).at("$set").at("dead_at")), R"({"$toLong":"$$NOW"})");
  EXPECT_EQ(on(db, "update", "jobs").size(), 2u);
  EXPECT_EQ(db.commands("abortTransaction").size(), 1u);
  EXPECT_EQ(db.commands("commitTransaction").size(), 1u);
}

TEST_F(mongo_workers_wire, declare_dead_that_matches_no_worker_is_a_conflict_and_the_transaction_is_aborted) {
  // The default update reply matches nothing: beat since, already dead, or never registered.
  testbed::mockupdb db(dir, script({}));
  auto st = open(db);
  ASSERT_TRUE(st);
  auto n = run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0));
  ASSERT_FALSE(n);
  EXPECT_TRUE(n.error().is(errc::conflict)) << n.error().message;
  EXPECT_EQ(n.error().field, "worker");
  EXPECT_EQ(on(db, "update", "workers").size(), 1u);  // not run again: a conflict has no label
  EXPECT_TRUE(on(db, "update", "jobs").empty());
  EXPECT_TRUE(on(db, "find", "jobs").empty());
  EXPECT_TRUE(db.commands("findAndModify").empty());
  EXPECT_EQ(db.commands("abortTransaction").size(), 1u);
  EXPECT_TRUE(db.commands("commitTransaction").empty());
}

TEST_F(mongo_workers_wire, prune_deletes_only_workers_dead_before_the_cutoff) {
  testbed::mockupdb db(dir, script({rule("delete", {{"ok", 1}, {"n", 2}}, 1, {{"delete", "workers"}})}));
  auto st = open(db, lease_clock::caller);
  ASSERT_TRUE(st);
  auto n = run_sync(st->workers().prune_workers(t0));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2);
  auto dels = on(db, "delete", "workers");
  ASSERT_EQ(dels.size(), 1u);
  expect_majority_write(dels[0]);
  EXPECT_EQ(s(dels[0].at("deletes").at(0)), R"({"q":{"dead_at":{"$lt":1700000000000}},"limit":0})");
}

}  // namespace

namespace {

// The dist lane's fair share reads two counts (issue 34): claimable now on the claim's own keys
// ({q, ready_at}), and active jobs of the lane.
TEST_F(mongo_workers_wire, lane_load_is_two_counts_on_the_claim_keys_and_the_active_jobs) {
  testbed::mockupdb db(dir, script({rule("count", {{"ok", 1}, {"n", 7}}, 1, {{"count", "jobs"}}),
                                    rule("count", {{"ok", 1}, {"n", 3}}, 1, {{"count", "jobs"}})}));
  auto st = open(db);
  ASSERT_TRUE(st);
  auto load = run_sync(st->jobs().load_of_lane("dist", t0));
  ASSERT_TRUE(load) << load.error().message;
  EXPECT_EQ(load->waiting, 7);
  EXPECT_EQ(load->running, 3);
  auto counts = on(db, "count", "jobs");
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(s(counts[0].at("query")),
            R"({"q":"dist","ready_at":{"$lte":1700000000000},"status":{"$in":["pending","failed"]}})");
  EXPECT_EQ(s(counts[1].at("query")), R"({"status":"active","lane":"dist"})");
  for (const auto& c : counts) EXPECT_TRUE(c.contains("maxTimeMS")) << s(c);
}

}  // namespace
