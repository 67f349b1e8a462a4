// The MongoDB store at the wire, against MongoDB's own wire-protocol test server (mockupdb, run by
// tests/testbed/mockupdb_server.py): for each store operation, the exact command document the
// driver sent; for each fault path, scripted replies and what the store does next. What this does
// not prove: how a real replica set executes these commands (plans, locks, elections) — see
// docs/operations-mongodb.md for the check an operator runs on a real cluster.
#include "certfleet/store/mongodb.hpp"
#include "change_stream.hpp"
#include "client.hpp"
#include "mockupdb.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

using namespace certfleet;
using namespace certfleet::store;
namespace json = boost::json;
using testbed::run_sync;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

json::object job_doc(std::string id, std::string status, std::int64_t fence, std::string locked_by = "w1") {
  json::object d{{"_id", id},        {"project_id", "p1"}, {"type", "noop"},     {"lane", "main"},
                 {"payload", "{}"},  {"status", status},   {"attempts", 1},      {"max_attempts", 3},
                 {"fence", fence},   {"ready_at", t0},     {"held", false},      {"created_at", t0},
                 {"progress_current", 0}, {"progress_total", 0}, {"cancel_requested", false}, {"log_seq", 0}};
  if (!locked_by.empty()) d["locked_by"] = locked_by;
  return d;
}

using testbed::mongo_script::rule;
using testbed::mongo_script::script;

// What the store's commands carry outside a transaction.
void expect_majority(const json::object& d) {
  ASSERT_TRUE(d.contains("writeConcern")) << json::serialize(d);
  EXPECT_EQ(d.at("writeConcern").at("w"), "majority") << json::serialize(d);
  EXPECT_TRUE(d.contains("maxTimeMS")) << json::serialize(d);
}

class mongo_wire : public ::testing::Test {
 protected:
  testbed::temp_dir dir;

  std::unique_ptr<mongodb_queue> open(testbed::mockupdb& db, lease_clock clock = lease_clock::caller) {
    mongodb_options o;
    o.uri = db.uri();
    o.threads = 1;
    o.server_selection_timeout_ms = 3000;
    o.operation_timeout_ms = 2000;
    o.clock = clock;
    auto q = open_mongodb_queue(o);
    if (!q) ADD_FAILURE() << q.error().message;
    return q ? std::move(*q) : nullptr;
  }
  static json::object doc_of(const json::object& logged) { return logged.at("doc").as_object(); }
};

TEST_F(mongo_wire, start_creates_the_indexes_and_records_the_schema_version_with_majority_writes) {
  testbed::mockupdb db(dir, script({}));
  auto q = open(db);
  ASSERT_TRUE(q);
  EXPECT_EQ(q->database(), "certfleet");
  auto creates = db.commands("createIndexes");
  auto create_of = [&](std::string_view coll) {
    for (const auto& c : creates)
      if (doc_of(c).at("createIndexes").as_string() == coll) return doc_of(c);
    ADD_FAILURE() << "no createIndexes for " << coll;
    return json::object{};
  };
  // Every collection's indexes (the catalog's and auth's are asserted in their own wire tests).
  for (const char* coll : {"jobs", "job_logs", "projects", "objects", "distributions", "target_results",
                           "distribution_finalized", "dns_records", "tokens", "audit_log"})
    (void)create_of(coll);
  const auto jobs = create_of("jobs");
  EXPECT_EQ(jobs.at("createIndexes"), "jobs");
  expect_majority(jobs);
  const auto& indexes = jobs.at("indexes").as_array();
  // The claim index: equality on q, then the sort's order; partial on q existing.
  const auto& claim = indexes.at(0).as_object();
  EXPECT_EQ(claim.at("name"), "claim");
  EXPECT_EQ(json::serialize(claim.at("key")), R"({"q":1,"ready_at":1,"_id":1})");
  EXPECT_EQ(json::serialize(claim.at("partialFilterExpression")), R"({"q":{"$exists":true}})");
  // The idempotency index: unique, partial on the key existing (an absent key is not a duplicate).
  const auto& idem = indexes.at(1).as_object();
  EXPECT_EQ(idem.at("name"), "idempotency");
  EXPECT_EQ(json::serialize(idem.at("key")), R"({"project_id":1,"idempotency_key":1})");
  EXPECT_EQ(idem.at("unique"), true);
  EXPECT_EQ(json::serialize(idem.at("partialFilterExpression")), R"({"idempotency_key":{"$exists":true}})");
  const auto logs = create_of("job_logs");
  EXPECT_EQ(logs.at("createIndexes"), "job_logs");
  EXPECT_EQ(json::serialize(logs.at("indexes").at(0).at("key")), R"({"job_id":1,"seq":1})");
  EXPECT_EQ(logs.at("indexes").at(0).at("unique"), true);
  auto updates = db.commands("update");
  ASSERT_EQ(updates.size(), 1u);
  const auto meta = doc_of(updates[0]);
  EXPECT_EQ(meta.at("update"), "store_meta");
  expect_majority(meta);
  EXPECT_EQ(json::serialize(meta.at("updates").at(0).at("q")), R"({"_id":"schema"})");
  EXPECT_EQ(meta.at("updates").at(0).at("upsert"), true);
  auto finds = db.commands("find");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(doc_of(finds[0]).at("readConcern").at("level"), "majority");
}

TEST_F(mongo_wire, a_standalone_server_is_refused_naming_why) {
  testbed::mockupdb db(dir, script({}), {.standalone = true});
  mongodb_options o;
  o.uri = "mongodb://127.0.0.1:" + std::to_string(db.port()) + "/certfleet";
  o.server_selection_timeout_ms = 3000;
  auto q = open_mongodb_queue(o);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().field, "store");
  EXPECT_NE(q.error().message.find("standalone"), std::string::npos) << q.error().message;
  EXPECT_NE(q.error().message.find("replica set"), std::string::npos) << q.error().message;
  EXPECT_TRUE(db.commands("createIndexes").empty());  // nothing was written
}

TEST_F(mongo_wire, a_cluster_that_cannot_acknowledge_majority_writes_is_refused_at_start) {
  testbed::mockupdb db(
      dir, script({rule("update", {{"ok", 1},
                                   {"n", 1},
                                   {"writeConcernError",
                                    {{"code", 100},
                                     {"codeName", "UnsatisfiableWriteConcern"},
                                     {"errmsg", "Not enough data-bearing nodes"}}}})}));
  mongodb_options o;
  o.uri = db.uri();
  o.server_selection_timeout_ms = 3000;
  auto q = open_mongodb_queue(o);
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("w:majority"), std::string::npos) << q.error().message;
  EXPECT_NE(q.error().message.find("Not enough data-bearing nodes"), std::string::npos) << q.error().message;
}

TEST(mongo_uri, bad_uris_are_refused_naming_the_store_setting) {
  for (const char* bad : {"postgres://127.0.0.1/x", "mongodb://", "mongodb://127.0.0.1:99999/x",
                          "mongodb://127.0.0.1/?w=1", "mongodb://127.0.0.1/?readPreference=secondary",
                          "mongodb://127.0.0.1/bad.name", "mongodb://127.0.0.1/?replicaSet=rs0&bogusOption=%zz"}) {
    auto r = validate_mongodb_uri(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().field, "store") << bad;
      EXPECT_TRUE(r.error().is(errc::invalid_argument)) << bad;
    }
  }
  EXPECT_TRUE(validate_mongodb_uri("mongodb://a.example:27017,b.example:27017/certfleet?replicaSet=rs0"));
  EXPECT_TRUE(validate_mongodb_uri("mongodb://127.0.0.1/?w=majority"));
}

TEST(mongo_uri, an_unreachable_host_fails_within_the_selection_timeout_with_a_clear_message) {
  mongodb_options o;
  // Port 1 on loopback: nothing listens, the connection is refused at once and retried until
  // the timeout.
  o.uri = "mongodb://127.0.0.1:1/certfleet?replicaSet=rs0";
  o.server_selection_timeout_ms = 800;
  const auto start = std::chrono::steady_clock::now();
  auto q = open_mongodb_queue(o);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(q);
  EXPECT_NE(q.error().message.find("no MongoDB primary answered within 800 ms"), std::string::npos)
      << q.error().message;
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(mongo_wire, claim_is_one_find_and_modify_on_the_claim_index_with_the_lease_from_the_server_clock) {
  auto claimed = job_doc("650000000000000000000001", "active", 1);
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 1}, {"value", claimed}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", nullptr}})}));
  auto q = open(db, lease_clock::server);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().claim("main", "w1", t0, 30'000, 5));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);  // the second command found nothing: the loop stops
  EXPECT_EQ(r->at(0).id, "650000000000000000000001");
  EXPECT_EQ(r->at(0).status, job_status::active);
  auto cmds = db.commands("findAndModify");
  ASSERT_EQ(cmds.size(), 2u);
  const auto d = doc_of(cmds[0]);
  EXPECT_EQ(d.at("findAndModify"), "jobs");
  // Equality on the lane, a range on the due time moved onto the server's clock; no $or.
  EXPECT_EQ(d.at("query").at("q"), "main");
  const auto due = d.at("query").at("ready_at").at("$lte").to_number<std::int64_t>();
  EXPECT_EQ(due, t0 + q->clock_offset_ms());
  EXPECT_EQ(json::serialize(d.at("sort")), R"({"q":1,"ready_at":1,"_id":1})");
  EXPECT_EQ(d.at("new"), true);
  expect_majority(d);
  EXPECT_TRUE(d.contains("lsid"));  // an implicit session
  // The update is a pipeline: the lease from $$NOW, attempts and fence incremented.
  const auto& set = d.at("update").as_array().at(0).at("$set").as_object();
  EXPECT_EQ(set.at("status"), "active");
  EXPECT_EQ(json::serialize(set.at("locked_by")), R"({"$literal":"w1"})");
  EXPECT_EQ(json::serialize(set.at("fence")), R"({"$add":["$fence",1]})");
  EXPECT_EQ(json::serialize(set.at("attempts")), R"({"$add":["$attempts",1]})");
  EXPECT_EQ(json::serialize(set.at("locked_until")), R"({"$add":[{"$toLong":"$$NOW"},30000]})");
  EXPECT_EQ(json::serialize(set.at("started_at")), R"({"$toLong":"$$NOW"})");
  // Still claimable once the lease ends while attempts are left and no cancel was asked.
  EXPECT_NE(json::serialize(set.at("q")).find("$$REMOVE"), std::string::npos);
}

TEST_F(mongo_wire, a_claim_that_fails_is_never_sent_twice) {
  // NotWritablePrimary: the reply may or may not have followed a write elsewhere; a claim's
  // lost reply is recovered by its lease ending, not by a second claim.
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 0},
                                                          {"code", 10107},
                                                          {"codeName", "NotWritablePrimary"},
                                                          {"errmsg", "not primary"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().claim("main", "w1", t0, 30'000, 5));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not primary"), std::string::npos) << r.error().message;
  EXPECT_EQ(db.commands("findAndModify").size(), 1u);
}

TEST_F(mongo_wire, max_time_ms_exceeded_is_a_timeout) {
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 0},
                                                          {"code", 50},
                                                          {"codeName", "MaxTimeMSExpired"},
                                                          {"errmsg", "operation exceeded time limit"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().claim("main", "w1", t0, 30'000, 1));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error().message;
}

TEST_F(mongo_wire, a_duplicate_idempotency_key_returns_the_existing_job) {
  auto existing = job_doc("650000000000000000000009", "pending", 0, "");
  existing["idempotency_key"] = "renew:c1";
  testbed::mockupdb db(
      dir, script({rule("insert", {{"ok", 1},
                                   {"n", 0},
                                   {"writeErrors", json::array{{{"index", 0},
                                                                {"code", 11000},
                                                                {"keyPattern", {{"project_id", 1}, {"idempotency_key", 1}}},
                                                                {"errmsg", "E11000 duplicate key error index: idempotency"}}}}}),
                   rule("find", {{"ok", 1},
                                 {"cursor", {{"id", 0}, {"ns", "certfleet.jobs"}, {"firstBatch", json::array{existing}}}}},
                        1, {{"find", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  new_job j;
  j.project_id = "p1";
  j.type = "noop";
  j.lane = "main";
  j.idempotency_key = "renew:c1";
  auto r = run_sync(q->jobs().enqueue(j, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->job.id, "650000000000000000000009");
  auto inserts = db.commands("insert");
  ASSERT_EQ(inserts.size(), 1u);
  const auto ins = doc_of(inserts[0]);
  expect_majority(ins);
  EXPECT_EQ(ins.at("documents").at(0).at("idempotency_key"), "renew:c1");
  EXPECT_EQ(ins.at("documents").at(0).at("q"), "main");
  std::vector<json::object> job_finds;
  for (auto& f : db.commands("find"))
    if (doc_of(f).at("find") == "jobs") job_finds.push_back(doc_of(f));
  ASSERT_EQ(job_finds.size(), 1u);
  EXPECT_EQ(json::serialize(job_finds[0].at("filter")), R"({"project_id":"p1","idempotency_key":"renew:c1"})");
  EXPECT_EQ(job_finds[0].at("readConcern").at("level"), "majority");
}

TEST_F(mongo_wire, an_insert_whose_reply_was_lost_is_sent_again_with_the_same_id) {
  testbed::mockupdb db(dir, script({rule("insert", {{"$hangup", true}}, 1, {{"insert", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  new_job j;
  j.project_id = "p1";
  j.type = "noop";
  j.lane = "main";
  auto r = run_sync(q->jobs().enqueue(j, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->created);
  std::vector<json::object> job_inserts;
  for (auto& i : db.commands("insert"))
    if (doc_of(i).at("insert") == "jobs") job_inserts.push_back(doc_of(i));
  ASSERT_EQ(job_inserts.size(), 2u);
  EXPECT_EQ(job_inserts[0].at("documents").at(0).at("_id"), job_inserts[1].at("documents").at(0).at("_id"));
  EXPECT_EQ(std::string(job_inserts[1].at("documents").at(0).at("_id").as_string()), r->job.id);
}

TEST_F(mongo_wire, finish_filters_on_the_fence_and_a_lost_reply_is_read_back_not_repeated) {
  auto done = job_doc("650000000000000000000002", "completed", 4);
  done["result_status"] = "ok";
  testbed::mockupdb db(
      dir, script({rule("findAndModify", {{"$hangup", true}}),
                   rule("find", {{"ok", 1},
                                 {"cursor", {{"id", 0}, {"ns", "certfleet.jobs"}, {"firstBatch", json::array{done}}}}},
                        1, {{"find", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  finish_request req;
  req.lease = {"650000000000000000000002", 4};
  req.worker_id = "w1";
  req.kind = finish_kind::completed;
  req.result_status = "ok";
  auto r = run_sync(q->jobs().finish({req}, t0));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->at(0)) << r->at(0).error().message;
  EXPECT_EQ(r->at(0)->status, job_status::completed);
  auto fams = db.commands("findAndModify");
  ASSERT_EQ(fams.size(), 1u);  // it had landed: not sent again
  const auto d = doc_of(fams[0]);
  EXPECT_EQ(json::serialize(d.at("query")),
            R"({"_id":"650000000000000000000002","locked_by":"w1","fence":4,"status":"active"})");
  expect_majority(d);
  const auto& set = d.at("update").as_array().at(0).at("$set").as_object();
  EXPECT_EQ(set.at("status"), "completed");
  EXPECT_EQ(set.at("locked_until"), "$$REMOVE");
}

TEST_F(mongo_wire, a_finish_whose_fence_moved_on_is_lease_lost) {
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 1}, {"value", nullptr}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  finish_request req;
  req.lease = {"650000000000000000000003", 2};
  req.worker_id = "w1";
  req.kind = finish_kind::failed;
  req.error = "boom";
  req.error_code = "timeout";
  req.error_class = "$timeout";  // a class is data: never read as an operator
  req.retry_at = t0 + 5000;
  auto r = run_sync(q->jobs().finish({req}, t0));
  ASSERT_TRUE(r);
  ASSERT_FALSE(r->at(0));
  EXPECT_TRUE(r->at(0).error().is(errc::lease_lost));
  const auto d = doc_of(db.commands("findAndModify").at(0));
  const auto& set = d.at("update").as_array().at(0).at("$set").as_object();
  // Dead when no attempts are left, whatever the worker asked.
  EXPECT_EQ(json::serialize(set.at("status")),
            R"({"$cond":[{"$gte":["$attempts","$max_attempts"]},"dead","failed"]})");
  EXPECT_EQ(set.at("ready_at").to_number<std::int64_t>(), t0 + 5000);
  EXPECT_EQ(json::serialize(set.at("error")), R"({"$literal":"boom"})");
  // Its code and class are stored with it.
  EXPECT_EQ(json::serialize(set.at("error_code")), R"({"$literal":"timeout"})");
  EXPECT_EQ(json::serialize(set.at("error_class")), R"({"$literal":"$timeout"})");
}

TEST_F(mongo_wire, enqueue_many_runs_in_one_transaction_and_a_write_conflict_runs_it_again) {
  testbed::mockupdb db(
      dir, script({rule("insert",
                        {{"ok", 0},
                         {"code", 112},
                         {"codeName", "WriteConflict"},
                         {"errmsg", "WriteConflict error"},
                         {"errorLabels", json::array{"TransientTransactionError"}}},
                        1, {{"insert", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  std::vector<new_job> jobs(2);
  for (auto& j : jobs) {
    j.project_id = "p1";
    j.type = "noop";
    j.lane = "dist";
  }
  auto r = run_sync(q->jobs().enqueue_many(jobs, t0));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  std::vector<json::object> inserts;
  for (auto& i : db.commands("insert"))
    if (doc_of(i).at("insert") == "jobs") inserts.push_back(doc_of(i));
  // Attempt 1: the first insert conflicts (aborted); attempt 2: both inserts.
  ASSERT_EQ(inserts.size(), 3u);
  EXPECT_EQ(inserts[0].at("startTransaction"), true);
  EXPECT_EQ(inserts[1].at("startTransaction"), true);
  EXPECT_FALSE(inserts[2].contains("startTransaction"));
  for (const auto& i : inserts) {
    EXPECT_TRUE(i.contains("lsid"));
    EXPECT_TRUE(i.contains("txnNumber"));
    EXPECT_EQ(i.at("autocommit"), false);
    EXPECT_FALSE(i.contains("writeConcern"));  // the transaction's, given at commit
  }
  EXPECT_NE(inserts[0].at("txnNumber"), inserts[1].at("txnNumber"));
  EXPECT_EQ(inserts[1].at("txnNumber"), inserts[2].at("txnNumber"));
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("writeConcern").at("w"), "majority");
}

TEST_F(mongo_wire, an_unknown_commit_result_commits_again) {
  testbed::mockupdb db(dir, script({rule("commitTransaction",
                                         {{"ok", 0},
                                          {"code", 91},
                                          {"codeName", "ShutdownInProgress"},
                                          {"errmsg", "shutting down"},
                                          {"errorLabels", json::array{"UnknownTransactionCommitResult"}}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  new_job j;
  j.project_id = "p1";
  j.type = "noop";
  j.lane = "dist";
  auto r = run_sync(q->jobs().enqueue_many({j}, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(db.commands("commitTransaction").size(), 2u);
  std::size_t job_inserts = 0;
  for (auto& i : db.commands("insert"))
    if (doc_of(i).at("insert") == "jobs") ++job_inserts;
  EXPECT_EQ(job_inserts, 1u);  // the body did not run again: only the commit
}

TEST_F(mongo_wire, heartbeat_extends_under_the_fence_and_reports_a_cancel_request) {
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 1}, {"value", {{"_id", "j1"}, {"cancel_requested", true}}}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", nullptr}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().heartbeat({{"j1", 3}, {"j2", 7}}, "w1", t0, 30'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->at(0).state, lease_state::cancel_requested);
  EXPECT_EQ(r->at(1).state, lease_state::lost);
  const auto d = doc_of(db.commands("findAndModify").at(1));
  EXPECT_EQ(json::serialize(d.at("query")), R"({"_id":"j2","locked_by":"w1","fence":7,"status":"active"})");
  EXPECT_EQ(json::serialize(d.at("update").at(0).at("$set").at("locked_until")), R"({"$add":[1700000000000,30000]})");
}

TEST_F(mongo_wire, a_log_line_takes_its_seq_from_the_jobs_counter_under_the_fence) {
  testbed::mockupdb db(dir, script({rule("findAndModify", {{"ok", 1}, {"value", {{"_id", "j1"}, {"log_seq", 3}}}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().append_log("j1", lease_ref{"j1", 5}, "info", "hello", "", t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 3);
  const auto fam = doc_of(db.commands("findAndModify").at(0));
  EXPECT_EQ(json::serialize(fam.at("query")), R"({"_id":"j1","fence":5,"status":"active"})");
  EXPECT_EQ(json::serialize(fam.at("update")), R"({"$inc":{"log_seq":1}})");
  std::vector<json::object> log_inserts;
  for (auto& i : db.commands("insert"))
    if (doc_of(i).at("insert") == "job_logs") log_inserts.push_back(doc_of(i));
  ASSERT_EQ(log_inserts.size(), 1u);
  EXPECT_EQ(log_inserts[0].at("documents").at(0).at("seq").to_number<std::int64_t>(), 3);
  expect_majority(log_inserts[0]);
}

TEST_F(mongo_wire, a_change_stream_event_wakes_the_lane_it_names) {
  // One insert event and one update that put a job back in line; the driver resumes when the
  // scripted cursor ends (mockupdb answers getMore with an empty, closed cursor).
  json::array events{
      {{"_id", {{"_data", "8263A1"}}}, {"operationType", "insert"}, {"fullDocument", {{"q", "dist"}}}},
      {{"_id", {{"_data", "8263A2"}}},
       {"operationType", "update"},
       {"updateDescription", {{"updatedFields", {{"q", "main"}}}}}}};
  testbed::mockupdb db(
      dir, script({rule("aggregate",
                        {{"ok", 1}, {"cursor", {{"id", 0}, {"ns", "certfleet.jobs"}, {"firstBatch", events}}}}, 1,
                        {{"aggregate", "jobs"}})}));
  mongodb_options o;
  o.uri = db.uri();
  o.server_selection_timeout_ms = 3000;
  auto c = mongo::connection::open(o);
  ASSERT_TRUE(c) << c.error().message;
  std::mutex m;
  std::vector<std::string> lanes;
  {
    mongo::claimable_watcher w(**c, [&](std::string_view lane) {
      std::lock_guard lk(m);
      lanes.emplace_back(lane);
    }, 100);
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard lk(m);
        if (lanes.size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_GE(lanes.size(), 2u);
  EXPECT_EQ(lanes[0], "dist");
  EXPECT_EQ(lanes[1], "main");
  auto aggs = db.commands("aggregate");
  ASSERT_FALSE(aggs.empty());
  const auto d = doc_of(aggs[0]);
  EXPECT_EQ(d.at("aggregate"), "jobs");
  const auto& pipeline = d.at("pipeline").as_array();
  ASSERT_GE(pipeline.size(), 3u);
  EXPECT_TRUE(pipeline[0].as_object().contains("$changeStream"));
  // Claims keep q while attempts are left: an update that makes a job active wakes nobody.
  EXPECT_NE(json::serialize(pipeline[1]).find(R"("updateDescription.updatedFields.status":{"$ne":"active"})"),
            std::string::npos)
      << json::serialize(pipeline[1]);
}

json::object cursor_of(std::string ns, json::array batch) {
  return {{"ok", 1}, {"cursor", {{"id", 0}, {"ns", std::move(ns)}, {"firstBatch", std::move(batch)}}}};
}

TEST_F(mongo_wire, cancel_reads_and_writes_in_one_transaction_filtered_on_the_status_it_read) {
  auto pending = job_doc("650000000000000000000004", "pending", 0, "");
  auto cancelled = pending;
  cancelled["status"] = "cancelled";
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.jobs", {pending}), 1, {{"find", "jobs"}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", cancelled}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().cancel("p1", "650000000000000000000004", t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->immediate);
  EXPECT_EQ(r->job.status, job_status::cancelled);
  std::vector<json::object> finds;
  for (auto& f : db.commands("find"))
    if (doc_of(f).at("find") == "jobs") finds.push_back(doc_of(f));
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(json::serialize(finds[0].at("filter")), R"({"_id":"650000000000000000000004","project_id":"p1"})");
  EXPECT_EQ(finds[0].at("startTransaction"), true);
  const auto fam = doc_of(db.commands("findAndModify").at(0));
  EXPECT_EQ(json::serialize(fam.at("query")), R"({"_id":"650000000000000000000004","status":"pending"})");
  // Out of the claim index; a cancel has no error class.
  EXPECT_EQ(json::serialize(fam.at("update").at("$unset")), R"({"error_class":"","q":""})");
  EXPECT_EQ(fam.at("update").at("$set").at("status"), "cancelled");
  EXPECT_EQ(fam.at("update").at("$set").at("error_code"), "cancelled");
  EXPECT_EQ(fam.at("txnNumber"), finds[0].at("txnNumber"));
  EXPECT_FALSE(fam.contains("writeConcern"));
  ASSERT_EQ(db.commands("commitTransaction").size(), 1u);
}

TEST_F(mongo_wire, a_completed_job_cannot_be_cancelled_and_nothing_is_written) {
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.jobs", {job_doc("j9", "completed", 1)}), 1,
                                         {{"find", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().cancel("p1", "j9", t0));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::conflict));
  EXPECT_EQ(r.error().field, "status");
  EXPECT_TRUE(db.commands("findAndModify").empty());
}

TEST_F(mongo_wire, retry_counts_the_projects_minute_then_puts_the_job_back_in_line) {
  auto dead = job_doc("650000000000000000000005", "dead", 3);
  auto back = dead;
  back["status"] = "pending";
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.jobs", {dead}), 1, {{"find", "jobs"}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", back}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().retry("p1", "650000000000000000000005", t0, 10));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, job_status::pending);
  std::vector<json::object> windows;
  for (auto& i : db.commands("insert"))
    if (doc_of(i).at("insert") == "rate_windows") windows.push_back(doc_of(i));
  ASSERT_EQ(windows.size(), 1u);  // the first retry of this minute
  EXPECT_EQ(windows[0].at("documents").at(0).at("window").to_number<std::int64_t>(), t0 / 60'000);
  EXPECT_TRUE(windows[0].contains("txnNumber"));
  const auto fam = doc_of(db.commands("findAndModify").at(0));
  EXPECT_EQ(json::serialize(fam.at("query")), R"({"_id":"650000000000000000000005","status":"dead"})");
  EXPECT_EQ(fam.at("update").at("$set").at("q"), "main");  // claimable again
  EXPECT_EQ(fam.at("update").at("$set").at("attempts").to_number<std::int64_t>(), 0);
}

TEST_F(mongo_wire, retry_past_the_projects_limit_is_rate_limited_and_changes_nothing) {
  json::object window{{"_id", "p1:job_retry"}, {"window", t0 / 60'000}, {"count", 10}};
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.jobs", {job_doc("j5", "dead", 3)}), 1, {{"find", "jobs"}}),
                                    rule("find", cursor_of("certfleet.rate_windows", {window}), 1, {{"find", "rate_windows"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().retry("p1", "j5", t0, 10));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::rate_limited));
  EXPECT_GE(r.error().retry_after_s, 1);
  EXPECT_TRUE(db.commands("findAndModify").empty());
  EXPECT_TRUE(db.commands("update").size() <= 1u);  // the schema version at start only
}

TEST_F(mongo_wire, the_reaper_returns_a_job_with_attempts_left_and_ends_one_without) {
  auto left = job_doc("j1", "active", 2);
  left["locked_until"] = t0 - 1;
  auto spent = job_doc("j2", "active", 3);
  spent["attempts"] = 3;
  spent["locked_until"] = t0 - 1;
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.jobs", {left, spent}), 1, {{"find", "jobs"}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", left}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", spent}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto n = run_sync(q->jobs().reap_expired(t0, 50));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2);
  std::vector<json::object> finds;
  for (auto& f : db.commands("find"))
    if (doc_of(f).at("find") == "jobs") finds.push_back(doc_of(f));
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(json::serialize(finds[0].at("filter")), R"({"status":"active","locked_until":{"$lte":1700000000000}})");
  EXPECT_EQ(json::serialize(finds[0].at("sort")), R"({"locked_until":1})");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 50);
  auto fams = db.commands("findAndModify");
  ASSERT_EQ(fams.size(), 2u);
  const auto back = doc_of(fams[0]);
  EXPECT_EQ(json::serialize(back.at("query")), R"({"_id":"j1","fence":2,"status":"active"})");
  EXPECT_EQ(back.at("update").at("$set").at("status"), "pending");
  EXPECT_EQ(back.at("update").at("$set").at("q"), "main");
  const auto dead = doc_of(fams[1]);
  EXPECT_EQ(dead.at("update").at("$set").at("status"), "dead");
  EXPECT_TRUE(dead.at("update").at("$unset").as_object().contains("q"));
}

TEST_F(mongo_wire, the_job_list_counts_per_status_and_pages_newest_first) {
  json::array counts{{{"_id", "pending"}, {"n", 3}}, {{"_id", "completed"}, {"n", 40}}};
  testbed::mockupdb db(dir, script({rule("aggregate", cursor_of("certfleet.jobs", counts), 1, {{"aggregate", "jobs"}}),
                                    rule("find", cursor_of("certfleet.jobs", {job_doc("j3", "completed", 1),
                                                                              job_doc("j2", "completed", 1),
                                                                              job_doc("j1", "completed", 1)}),
                                         1, {{"find", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  job_filter f;
  f.project_id = "p1";
  f.status = job_status::completed;
  f.page_size = 2;
  f.page = 2;
  auto r = run_sync(q->jobs().list(f));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->total, 40);
  EXPECT_EQ(r->counts[static_cast<std::size_t>(job_status::pending)], 3);
  ASSERT_EQ(r->items.size(), 2u);
  EXPECT_EQ(r->next_cursor, "j2");
  const auto agg = doc_of(db.commands("aggregate").at(0));
  EXPECT_EQ(json::serialize(agg.at("pipeline")),
            R"([{"$match":{"project_id":"p1"}},{"$group":{"_id":"$status","n":{"$sum":1}}}])");
  std::vector<json::object> finds;
  for (auto& x : db.commands("find"))
    if (doc_of(x).at("find") == "jobs") finds.push_back(doc_of(x));
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(json::serialize(finds[0].at("filter")), R"({"project_id":"p1","status":"completed"})");
  EXPECT_EQ(json::serialize(finds[0].at("sort")), R"({"_id":-1})");
  EXPECT_EQ(finds[0].at("skip").to_number<std::int64_t>(), 2);
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 3);  // one more than the page: is there a next?
}

TEST_F(mongo_wire, lane_statistics_read_the_claim_index_in_one_aggregation) {
  json::array groups{{{"_id", "main"}, {"n", 7}, {"oldest", t0 - 5000}}};
  testbed::mockupdb db(dir, script({rule("aggregate", cursor_of("certfleet.jobs", groups), 1, {{"aggregate", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->jobs().lane_statistics(t0));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->at(0).lane, "main");
  EXPECT_EQ(r->at(0).pending, 7);
  EXPECT_EQ(r->at(0).oldest_ready_at, t0 - 5000);
  EXPECT_EQ(r->at(1).pending, 0);
  const auto agg = doc_of(db.commands("aggregate").at(0));
  EXPECT_EQ(json::serialize(agg.at("pipeline").at(0)),
            R"({"$match":{"q":{"$in":["main","dist"]},"status":{"$in":["pending","failed"]}}})");
}

TEST_F(mongo_wire, logs_are_read_by_cursor_and_progress_is_fenced) {
  json::array lines{{{"job_id", "j1"}, {"seq", 4}, {"ts", t0}, {"level", "info"}, {"message", "a"}},
                    {{"job_id", "j1"}, {"seq", 5}, {"ts", t0}, {"level", "info"}, {"message", "b"}}};
  testbed::mockupdb db(dir, script({rule("find", cursor_of("certfleet.job_logs", lines), 1, {{"find", "job_logs"}}),
                                    rule("update", {{"ok", 1}, {"n", 0}, {"nModified", 0}}, 1, {{"update", "jobs"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto page = run_sync(q->jobs().read_logs("j1", 3, 100));
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->lines.size(), 2u);
  EXPECT_EQ(page->next_cursor, 5);
  std::vector<json::object> finds;
  for (auto& x : db.commands("find"))
    if (doc_of(x).at("find") == "job_logs") finds.push_back(doc_of(x));
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(json::serialize(finds[0].at("filter")), R"({"job_id":"j1","seq":{"$gt":3}})");
  EXPECT_EQ(json::serialize(finds[0].at("sort")), R"({"seq":1})");
  auto progress = run_sync(q->jobs().set_progress({"j1", 6}, 3, 10));
  ASSERT_FALSE(progress);
  EXPECT_TRUE(progress.error().is(errc::lease_lost));  // n: 0, the fence moved on
  std::vector<json::object> updates;
  for (auto& x : db.commands("update"))
    if (doc_of(x).at("update") == "jobs") updates.push_back(doc_of(x));
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(json::serialize(updates[0].at("updates").at(0).at("q")), R"({"_id":"j1","fence":6,"status":"active"})");
  expect_majority(updates[0]);
}

TEST_F(mongo_wire, a_project_is_ensured_by_one_upsert_and_a_taken_name_is_a_conflict) {
  json::object p{{"_id", "650000000000000000000010"}, {"name", "default"}, {"created_at", t0}};
  testbed::mockupdb db(dir, script({rule("findAndModify",
                                         {{"ok", 1}, {"value", p}, {"lastErrorObject", {{"n", 1}, {"updatedExisting", false}}}}),
                                    rule("insert",
                                         {{"ok", 1},
                                          {"n", 0},
                                          {"writeErrors", json::array{{{"index", 0},
                                                                       {"code", 11000},
                                                                       {"keyPattern", {{"name", 1}}},
                                                                       {"errmsg", "E11000 duplicate key error index: name"}}}}},
                                         1, {{"insert", "projects"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->projects().ensure("default", t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->second);
  EXPECT_EQ(r->first.id, "650000000000000000000010");
  const auto fam = doc_of(db.commands("findAndModify").at(0));
  EXPECT_EQ(fam.at("findAndModify"), "projects");
  EXPECT_EQ(json::serialize(fam.at("query")), R"({"name":"default"})");
  EXPECT_EQ(fam.at("upsert"), true);
  EXPECT_TRUE(fam.at("update").as_object().contains("$setOnInsert"));
  expect_majority(fam);
  auto taken = run_sync(q->projects().create("default", t0));
  ASSERT_FALSE(taken);
  EXPECT_TRUE(taken.error().is(errc::conflict));
  EXPECT_EQ(taken.error().field, "name");
}

// Deleting a project is one transaction: the check for unfinished jobs, its jobs, logs and rate
// windows, its settings object (PUT …/projects/{p}/settings: not content, it goes with the
// project), then the project, committed once with a majority write concern.
TEST_F(mongo_wire, removing_a_project_deletes_its_settings_object_in_the_same_transaction) {
  const json::object project{{"_id", "650000000000000000000011"}, {"name", "scratch"}, {"created_at", t0}};
  testbed::mockupdb db(
      dir, script({rule("find",
                        {{"ok", 1},
                         {"cursor", {{"id", 0}, {"ns", "certfleet.projects"}, {"firstBatch", json::array{project}}}}},
                        1, {{"find", "projects"}})}));
  auto q = open(db);
  ASSERT_TRUE(q);
  auto r = run_sync(q->projects().remove("scratch", t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "650000000000000000000011");
  std::vector<std::string> order;
  json::value settings_filter;
  for (const auto& c : db.commands("delete")) {
    const auto d = doc_of(c);
    const std::string coll(d.at("delete").as_string());
    order.push_back(coll);
    EXPECT_EQ(d.at("autocommit"), false) << coll << " outside the transaction: " << json::serialize(d);
    EXPECT_TRUE(d.contains("txnNumber")) << json::serialize(d);
    if (coll == "objects") settings_filter = d.at("deletes").at(0).at("q");
  }
  EXPECT_EQ(order, (std::vector<std::string>{"job_logs", "jobs", "rate_windows", "objects", "projects"}));
  EXPECT_EQ(json::serialize(settings_filter), R"({"project_id":"650000000000000000000011","kind":"project_settings"})");
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("writeConcern").at("w"), "majority");
}

}  // namespace
