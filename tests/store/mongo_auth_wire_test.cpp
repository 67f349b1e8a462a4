// The MongoDB auth, observe, leader-lease, maintenance and session-slot stores at the wire, against
// mockupdb (tests/testbed/mockupdb_server.py): for each operation class the exact command document
// the driver sent (filter, update, upsert, sort, projection, write/read concern, lsid and txnNumber
// inside transactions, index specs), and the fault paths with scripted replies and what the store
// does next. What this does not prove: how a real replica set executes them (see
// docs/operations-mongodb.md for the check an operator runs on a real cluster).
#include "schema.hpp"

#include <gtest/gtest.h>

#if __has_include(<mongoc/mongoc.h>)

#include "../../src/store/mongo/mongo_auth.hpp"
#include "mockupdb.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>

using namespace certfleet;
using namespace certfleet::store;
namespace json = boost::json;
using testbed::run_sync;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

using testbed::mongo_script::rule;
using testbed::mongo_script::script;

json::object batch(std::string coll, json::array docs) {
  return {{"ok", 1}, {"cursor", {{"id", 0}, {"ns", "certfleet." + coll}, {"firstBatch", std::move(docs)}}}};
}
json::object find_reply(std::string coll, json::array docs, int times = 1) {
  return rule("find", batch(coll, std::move(docs)), times, {{"find", coll}});
}

json::object token_doc(std::string id, std::string project = "p1") {
  return {{"_id", id},     {"project_id", project}, {"role", "admin"}, {"system", false},
          {"name", "ci"},  {"created_by", "cli"},   {"created_at", t0}};
}

std::string s(const json::value& v) { return json::serialize(v); }

void expect_majority_write(const json::object& d) {
  ASSERT_TRUE(d.contains("writeConcern")) << s(d);
  EXPECT_EQ(d.at("writeConcern").at("w"), "majority") << s(d);
  EXPECT_TRUE(d.at("writeConcern").as_object().contains("wtimeout")) << s(d);
  EXPECT_TRUE(d.contains("maxTimeMS")) << s(d);
  EXPECT_FALSE(d.contains("txnNumber")) << s(d);
}
void expect_majority_read(const json::object& d) {
  ASSERT_TRUE(d.contains("readConcern")) << s(d);
  EXPECT_EQ(d.at("readConcern").at("level"), "majority") << s(d);
  EXPECT_TRUE(d.contains("maxTimeMS")) << s(d);
}
// A command inside a transaction: the session and txnNumber, no concerns of its own.
void expect_in_transaction(const json::object& d) {
  EXPECT_TRUE(d.contains("lsid")) << s(d);
  EXPECT_TRUE(d.contains("txnNumber")) << s(d);
  EXPECT_EQ(d.at("autocommit"), false) << s(d);
  EXPECT_FALSE(d.contains("writeConcern")) << s(d);
  EXPECT_FALSE(d.contains("readConcern") && !d.contains("startTransaction")) << s(d);
  EXPECT_TRUE(d.contains("maxTimeMS")) << s(d);
}

class mongo_auth_wire : public ::testing::Test {
 protected:
  testbed::temp_dir dir;
  // Declared in this order so the store threads stop before the connection closes, and the
  // connection closes (endSessions) while the server still answers.
  std::unique_ptr<testbed::mockupdb> server;
  std::unique_ptr<mongo::connection> conn;
  std::unique_ptr<mongo::executor> ex;
  std::unique_ptr<auth_store> auth;
  std::unique_ptr<observe_store> observe;
  std::unique_ptr<lease_store> leases;
  std::unique_ptr<maintenance_store> maintenance;
  std::unique_ptr<session_slot_store> slots;

  void TearDown() override {
    auth.reset();
    observe.reset();
    leases.reset();
    maintenance.reset();
    slots.reset();
    ex.reset();
    conn.reset();
    server.reset();
  }

  testbed::mockupdb& start(const json::object& script) {
    server = std::make_unique<testbed::mockupdb>(dir, script);
    return *server;
  }

  bool open(testbed::mockupdb& db, lease_clock clock = lease_clock::caller) {
    mongodb_options o;
    o.uri = db.uri();
    o.threads = 1;
    o.server_selection_timeout_ms = 3000;
    o.operation_timeout_ms = 2000;
    o.clock = clock;
    auto c = mongo::connection::open(o);
    if (!c) {
      ADD_FAILURE() << c.error().message;
      return false;
    }
    conn = std::move(*c);
    ex = std::make_unique<mongo::executor>(*conn, 1);
    auth = mongo::make_auth_store(*conn, *ex);
    observe = mongo::make_observe_store(*conn, *ex);
    leases = mongo::make_lease_store(*conn, *ex);
    maintenance = mongo::make_maintenance_store(*conn, *ex);
    slots = mongo::make_session_slot_store(*conn, *ex);
    return auth && observe && leases && maintenance && slots;
  }
  static json::object doc_of(const json::object& logged) { return logged.at("doc").as_object(); }
  // The logged commands named `name` on collection `coll` (the command's first field).
  static std::vector<json::object> on(const testbed::mockupdb& db, std::string_view name, std::string_view coll) {
    std::vector<json::object> out;
    for (auto& c : db.commands(name)) {
      auto d = doc_of(c);
      for (auto& [k, v] : d) {
        if (v.is_string() && v.as_string() == coll) out.push_back(d);
        break;
      }
    }
    return out;
  }
};

// ---------------------------------------------------------------------------------------------
TEST(mongo_auth_indexes, each_query_has_an_index_whose_order_matches_its_sort) {
  auto cmds = mongo::auth_index_commands(2000);
  std::map<std::string, json::object> by_coll;
  for (const auto& c : cmds) {
    auto d = json::parse(c.json()).as_object();
    EXPECT_EQ(d.at("writeConcern").at("w"), "majority") << s(d);
    EXPECT_EQ(d.at("maxTimeMS").to_number<std::int64_t>(), 2000) << s(d);
    by_coll[std::string(d.at("createIndexes").as_string())] = d;
  }
  ASSERT_EQ(by_coll.size(), 4u);
  const auto& tokens = by_coll.at("tokens").at("indexes").as_array();
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_EQ(s(tokens[0]), R"({"key":{"hash":1},"name":"hash","unique":true})");
  EXPECT_EQ(s(tokens[1]), R"({"key":{"project_id":1,"created_at":1,"_id":1},"name":"project"})");
  // The purge's find {expires_at: {$lt}} sorted by expires_at: only expiring tokens are in it.
  EXPECT_EQ(s(tokens[2]), R"({"key":{"expires_at":1},"name":"expiry","partialFilterExpression":{"expires_at":{"$exists":true}}})");
  EXPECT_EQ(s(by_coll.at("ui_sessions").at("indexes")), R"([{"key":{"expires_at":1},"name":"expiry"}])");
  EXPECT_EQ(s(by_coll.at("audit_log").at("indexes")), R"([{"key":{"project_id":1,"_id":-1},"name":"project"}])");
  EXPECT_EQ(s(by_coll.at("session_slots").at("indexes")),
            R"([{"key":{"slots.job_id":1,"slots.fence":1},"name":"holder"}])");
  // Retention reads the jobs collection's "retention" index, created with the queue's indexes.
  bool retention = false;
  for (const auto& c : mongo::index_commands(2000)) {
    auto d = json::parse(c.json()).as_object();
    if (d.at("createIndexes") != "jobs") continue;
    for (const auto& i : d.at("indexes").as_array())
      if (i.at("name") == "retention")
        retention = s(i) == R"({"key":{"completed_at":1},"name":"retention","partialFilterExpression":{"completed_at":{"$exists":true}}})";
  }
  EXPECT_TRUE(retention);
}

// --- tokens ----------------------------------------------------------------------------------
TEST_F(mongo_auth_wire, create_token_inserts_the_hash_with_a_majority_write) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  new_token t;
  t.project_id = "p1";
  t.token_role = role::operator_;
  t.name = "deploy";
  t.hash = std::string(64, 'b');
  auto r = run_sync(auth->create_token(t, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->project_id, "p1");
  EXPECT_EQ(r->token_role, role::operator_);
  EXPECT_EQ(r->created_at, t0);
  EXPECT_EQ(r->revoked_at, 0);
  auto ins = on(db, "insert", "tokens");
  ASSERT_EQ(ins.size(), 1u);
  expect_majority_write(ins[0]);
  const auto& d = ins[0].at("documents").at(0).as_object();
  EXPECT_EQ(d.at("_id"), json::value(r->id));
  EXPECT_EQ(d.at("hash"), json::value(std::string(64, 'b')));
  EXPECT_EQ(d.at("role"), "operator");
  EXPECT_TRUE(d.at("created_by").is_null());  // empty: null, as SQLite's optional column
  EXPECT_FALSE(d.contains("revoked_at"));
}

TEST_F(mongo_auth_wire, find_token_reads_the_active_token_by_hash_with_majority_and_without_the_hash) {
  auto& db = start(script({find_reply("tokens", {token_doc("t1")}), find_reply("tokens", {})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->find_token(std::string(64, 'a')));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "t1");
  EXPECT_EQ(r->token_role, role::admin);
  auto missing = run_sync(auth->find_token("nope"));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));
  EXPECT_EQ(missing.error().field, "token");
  auto finds = on(db, "find", "tokens");
  ASSERT_EQ(finds.size(), 2u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"hash":")" + std::string(64, 'a') + R"(","revoked_at":{"$exists":false}})");
  EXPECT_EQ(s(finds[0].at("projection")), R"({"hash":0})");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 1);
  expect_majority_read(finds[0]);
}

TEST_F(mongo_auth_wire, list_tokens_sorts_oldest_first_and_asks_for_every_token_in_one_batch) {
  auto& db = start(script({find_reply("tokens", {token_doc("t1"), token_doc("t2")}), find_reply("tokens", {})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->list_tokens("p1"));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->at(1).id, "t2");
  ASSERT_TRUE(run_sync(auth->list_tokens("")));
  auto finds = on(db, "find", "tokens");
  ASSERT_EQ(finds.size(), 2u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"project_id":"p1"})");
  EXPECT_EQ(s(finds[1].at("filter")), R"({})");
  EXPECT_EQ(s(finds[0].at("sort")), R"({"created_at":1,"_id":1})");
  EXPECT_EQ(s(finds[0].at("projection")), R"({"hash":0})");
  // No limit: the first batch would stop at 101 documents without an explicit batchSize.
  EXPECT_FALSE(finds[0].contains("limit"));
  EXPECT_GE(finds[0].at("batchSize").to_number<std::int64_t>(), 10'000);
}

TEST_F(mongo_auth_wire, create_first_token_on_an_empty_store_inserts_a_marker_and_the_token_in_one_transaction) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  new_token t;
  t.project_id = "p1";
  t.token_role = role::owner;
  t.hash = std::string(64, 'c');
  auto r = run_sync(auth->create_first_token(t, t0));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->token_role, role::owner);
  auto finds = on(db, "find", "tokens");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), "{}");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 1);
  EXPECT_EQ(finds[0].at("startTransaction"), true);
  expect_in_transaction(finds[0]);
  auto marker = on(db, "insert", "store_meta");
  ASSERT_EQ(marker.size(), 1u);
  expect_in_transaction(marker[0]);
  EXPECT_EQ(marker[0].at("documents").at(0).at("_id"), "first_token");
  EXPECT_EQ(marker[0].at("documents").at(0).at("token_id"), json::value((*r)->id));
  auto ins = on(db, "insert", "tokens");
  ASSERT_EQ(ins.size(), 1u);
  expect_in_transaction(ins[0]);
  EXPECT_EQ(ins[0].at("txnNumber"), finds[0].at("txnNumber"));
  EXPECT_EQ(ins[0].at("lsid"), finds[0].at("lsid"));
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("writeConcern").at("w"), "majority");
}

TEST_F(mongo_auth_wire, create_first_token_when_a_token_exists_creates_nothing) {
  auto& db = start(script({find_reply("tokens", {{{"_id", "t0"}}})}));
  ASSERT_TRUE(open(db));
  new_token t;
  t.project_id = "p1";
  t.token_role = role::owner;
  t.hash = std::string(64, 'c');
  auto r = run_sync(auth->create_first_token(t, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->has_value());
  EXPECT_TRUE(db.commands("insert").empty());
}

TEST_F(mongo_auth_wire, create_first_token_losing_to_another_process_is_not_created) {
  // The other process committed its marker first: our insert of it is a duplicate key.
  auto& db = start(script({rule("insert",
                        {{"ok", 1},
                         {"n", 0},
                         {"writeErrors", json::array{{{"index", 0},
                                                      {"code", 11000},
                                                      {"keyPattern", {{"_id", 1}}},
                                                      {"errmsg", "E11000 duplicate key error _id_"}}}}},
                        1, {{"insert", "store_meta"}})}));
  ASSERT_TRUE(open(db));
  new_token t;
  t.project_id = "p1";
  t.token_role = role::owner;
  t.hash = std::string(64, 'c');
  auto r = run_sync(auth->create_first_token(t, t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->has_value());
  EXPECT_TRUE(on(db, "insert", "tokens").empty());
  EXPECT_TRUE(db.commands("commitTransaction").empty());
}

TEST_F(mongo_auth_wire, revoke_token_filters_on_active_and_tells_revoked_from_missing) {
  auto revoked = token_doc("t1");
  revoked["revoked_at"] = t0 + 5;
  auto& db = start(script({rule("findAndModify", {{"ok", 1}, {"value", revoked}}),
                                    rule("findAndModify", {{"ok", 1}, {"value", nullptr}}, 2),
                                    find_reply("tokens", {{{"_id", "t1"}}}), find_reply("tokens", {})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->revoke_token("t1", t0 + 5));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->revoked_at, t0 + 5);
  auto again = run_sync(auth->revoke_token("t1", t0 + 6));
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is(errc::conflict));
  EXPECT_EQ(again.error().message, "token t1 is already revoked");
  auto missing = run_sync(auth->revoke_token("t9", t0 + 6));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));
  EXPECT_EQ(missing.error().message, "token t9 not found");
  auto fams = on(db, "findAndModify", "tokens");
  ASSERT_EQ(fams.size(), 3u);
  EXPECT_EQ(s(fams[0].at("query")), R"({"_id":"t1","revoked_at":{"$exists":false}})");
  EXPECT_EQ(s(fams[0].at("update")), R"({"$set":{"revoked_at":)" + std::to_string(t0 + 5) + "}}");
  EXPECT_EQ(s(fams[0].at("fields")), R"({"hash":0})");
  EXPECT_EQ(fams[0].at("new"), true);
  expect_majority_write(fams[0]);
  auto finds = on(db, "find", "tokens");
  ASSERT_EQ(finds.size(), 2u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"_id":"t1"})");
  expect_majority_read(finds[0]);
}

// --- sessions --------------------------------------------------------------------------------
TEST_F(mongo_auth_wire, create_session_deletes_expired_ones_then_inserts_by_hash) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  ASSERT_TRUE(run_sync(auth->create_session("h1", "t1", t0 + 1000, t0)));
  auto cmds = db.commands();
  std::vector<json::object> writes;
  for (auto& c : cmds)
    if (c.at("command") == "delete" || c.at("command") == "insert") writes.push_back(doc_of(c));
  ASSERT_EQ(writes.size(), 2u);
  EXPECT_EQ(writes[0].at("delete"), "ui_sessions");
  EXPECT_EQ(s(writes[0].at("deletes")), R"([{"q":{"expires_at":{"$lte":)" + std::to_string(t0) + R"(}},"limit":0}])");
  expect_majority_write(writes[0]);
  EXPECT_EQ(writes[1].at("insert"), "ui_sessions");
  EXPECT_EQ(s(writes[1].at("documents")), R"([{"_id":"h1","token_id":"t1","created_at":)" + std::to_string(t0) +
                                              R"(,"expires_at":)" + std::to_string(t0 + 1000) + "}]");
  expect_majority_write(writes[1]);
}

TEST_F(mongo_auth_wire, find_session_reads_the_unexpired_session_then_its_active_token_with_majority) {
  auto& db = start(script({find_reply("ui_sessions", {{{"_id", "h1"}, {"token_id", "t1"}, {"expires_at", t0 + 1000}}}, 2),
                   find_reply("tokens", {token_doc("t1")}), find_reply("tokens", {})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->find_session("h1", t0));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->token.id, "t1");
  EXPECT_EQ(r->expires_at, t0 + 1000);
  // The token was revoked meanwhile: no session.
  auto revoked = run_sync(auth->find_session("h1", t0));
  ASSERT_FALSE(revoked);
  EXPECT_TRUE(revoked.error().is(errc::not_found));
  // No session at all (the default reply: an empty batch).
  auto none = run_sync(auth->find_session("h2", t0));
  ASSERT_FALSE(none);
  EXPECT_TRUE(none.error().is(errc::not_found));
  EXPECT_EQ(none.error().field, "session");
  auto sessions = on(db, "find", "ui_sessions");
  ASSERT_EQ(sessions.size(), 3u);
  EXPECT_EQ(s(sessions[0].at("filter")), R"({"_id":"h1","expires_at":{"$gt":)" + std::to_string(t0) + "}}");
  expect_majority_read(sessions[0]);
  auto tokens = on(db, "find", "tokens");
  ASSERT_EQ(tokens.size(), 2u);  // not read when there is no session
  EXPECT_EQ(s(tokens[0].at("filter")), R"({"_id":"t1","revoked_at":{"$exists":false}})");
  expect_majority_read(tokens[0]);
}

TEST_F(mongo_auth_wire, delete_session_deletes_one_by_hash) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  ASSERT_TRUE(run_sync(auth->delete_session("h1")));
  auto dels = on(db, "delete", "ui_sessions");
  ASSERT_EQ(dels.size(), 1u);
  EXPECT_EQ(s(dels[0].at("deletes")), R"([{"q":{"_id":"h1"},"limit":1}])");
  expect_majority_write(dels[0]);
}

// --- audit and settings ----------------------------------------------------------------------
TEST_F(mongo_auth_wire, append_audit_numbers_the_entry_from_the_counter_then_inserts_it) {
  auto& db = start(script({rule("findAndModify", {{"ok", 1}, {"value", {{"_id", "audit_seq"}, {"n", 42}}}})}));
  ASSERT_TRUE(open(db));
  audit_entry e{0, "p1", "t1", "job.enqueue", "job/j1", "ok", "", t0};
  ASSERT_TRUE(run_sync(auth->append_audit(e)));
  auto fams = on(db, "findAndModify", "store_meta");
  ASSERT_EQ(fams.size(), 1u);
  EXPECT_EQ(s(fams[0].at("query")), R"({"_id":"audit_seq"})");
  EXPECT_EQ(s(fams[0].at("update")), R"({"$inc":{"n":1}})");
  EXPECT_EQ(fams[0].at("upsert"), true);
  EXPECT_EQ(fams[0].at("new"), true);
  expect_majority_write(fams[0]);
  auto ins = on(db, "insert", "audit_log");
  ASSERT_EQ(ins.size(), 1u);
  expect_majority_write(ins[0]);
  EXPECT_EQ(s(ins[0].at("documents")), R"([{"_id":42,"project_id":"p1","actor":"t1","action":"job.enqueue",)"
                                       R"("object":"job/j1","outcome":"ok","detail":null,"at":)" +
                                           std::to_string(t0) + "}]");
}

TEST_F(mongo_auth_wire, list_audit_pages_newest_first_and_counts_the_project) {
  json::object e1{{"_id", 7}, {"project_id", "p1"}, {"actor", "t1"}, {"action", "a"}, {"object", "o"},
                  {"outcome", "ok"}, {"detail", nullptr}, {"at", t0}};
  auto& db = start(script({find_reply("audit_log", {e1}), rule("count", {{"ok", 1}, {"n", 31}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->list_audit("p1", 3, 10));
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->items.size(), 1u);
  EXPECT_EQ(r->items[0].seq, 7);
  EXPECT_EQ(r->items[0].detail, "");
  EXPECT_EQ(r->total, 31);
  auto finds = on(db, "find", "audit_log");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"project_id":"p1"})");
  EXPECT_EQ(s(finds[0].at("sort")), R"({"_id":-1})");
  EXPECT_EQ(finds[0].at("skip").to_number<std::int64_t>(), 20);
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 10);
  auto counts = db.commands("count");
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(s(doc_of(counts[0]).at("query")), R"({"project_id":"p1"})");
}

TEST_F(mongo_auth_wire, system_settings_reads_every_stored_value) {
  auto& db = start(script({find_reply("system_settings", {{{"_id", "a"}, {"value", "1"}}, {{"_id", "b"}, {"value", "x"}}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->system_settings());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, (std::map<std::string, std::string>{{"a", "1"}, {"b", "x"}}));
}

TEST_F(mongo_auth_wire, put_system_settings_reruns_after_a_write_conflict_and_commits_once) {
  auto& db = start(script({rule("update",
                        {{"ok", 0},
                         {"code", 112},
                         {"codeName", "WriteConflict"},
                         {"errmsg", "WriteConflict error"},
                         {"errorLabels", json::array{"TransientTransactionError"}}},
                        1, {{"update", "system_settings"}}),
                   rule("findAndModify", {{"ok", 1}, {"value", {{"_id", "audit_seq"}, {"n", 9}}}})}));
  ASSERT_TRUE(open(db));
  audit_entry e{0, "", "t1", "settings.update", "settings", "ok", R"({"a":"1"})", t0};
  auto r = run_sync(auth->put_system_settings({{"a", "1"}, {"b", "2"}}, e));
  ASSERT_TRUE(r) << r.error().message;
  auto updates = on(db, "update", "system_settings");
  ASSERT_EQ(updates.size(), 2u);  // attempt 1 conflicted; attempt 2
  EXPECT_NE(updates[0].at("txnNumber"), updates[1].at("txnNumber"));
  for (const auto& u : updates) {
    expect_in_transaction(u);
    EXPECT_EQ(u.at("startTransaction"), true);
    EXPECT_EQ(s(u.at("updates")),
              R"([{"q":{"_id":"a"},"u":{"$set":{"value":"1","updated_at":)" + std::to_string(t0) +
                  R"(}},"upsert":true},{"q":{"_id":"b"},"u":{"$set":{"value":"2","updated_at":)" + std::to_string(t0) +
                  R"(}},"upsert":true}])");
  }
  auto seqs = on(db, "findAndModify", "store_meta");
  ASSERT_EQ(seqs.size(), 1u);
  expect_in_transaction(seqs[0]);
  EXPECT_EQ(seqs[0].at("txnNumber"), updates[1].at("txnNumber"));
  auto audits = on(db, "insert", "audit_log");
  ASSERT_EQ(audits.size(), 1u);
  expect_in_transaction(audits[0]);
  EXPECT_EQ(audits[0].at("txnNumber"), updates[1].at("txnNumber"));
  EXPECT_EQ(audits[0].at("documents").at(0).at("_id").to_number<std::int64_t>(), 9);
  auto commits = db.commands("commitTransaction");
  ASSERT_EQ(commits.size(), 1u);
  EXPECT_EQ(doc_of(commits[0]).at("txnNumber"), updates[1].at("txnNumber"));
  EXPECT_EQ(doc_of(commits[0]).at("writeConcern").at("w"), "majority");
}

TEST_F(mongo_auth_wire, max_time_ms_exceeded_is_a_timeout) {
  auto& db = start(script({rule("find", {{"ok", 0},
                                                  {"code", 50},
                                                  {"codeName", "MaxTimeMSExpired"},
                                                  {"errmsg", "operation exceeded time limit"}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(auth->find_token("h"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error().message;
}

// --- observe ---------------------------------------------------------------------------------
TEST_F(mongo_auth_wire, job_counts_groups_jobs_by_status_and_type) {
  auto& db = start(script({rule("aggregate",
                                         batch("jobs", {{{"_id", {{"status", "active"}, {"type", "noop"}}}, {"n", 2}},
                                                        {{"_id", {{"status", "pending"}, {"type", "deploy"}}}, {"n", 5}}}))}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(observe->job_counts());
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->at(1).status, "pending");
  EXPECT_EQ(r->at(1).type, "deploy");
  EXPECT_EQ(r->at(1).count, 5);
  auto aggs = db.commands("aggregate");
  ASSERT_EQ(aggs.size(), 1u);
  const auto d = doc_of(aggs[0]);
  EXPECT_EQ(d.at("aggregate"), "jobs");
  EXPECT_EQ(s(d.at("pipeline")),
            R"([{"$group":{"_id":{"status":"$status","type":"$type"},"n":{"$sum":1}}},{"$sort":{"_id.status":1,"_id.type":1}}])");
}

TEST_F(mongo_auth_wire, job_durations_buckets_completed_minus_started_over_the_bounds) {
  // Buckets as the server groups them: 0: <= 0.5 s, 1: <= 2 s, 2: above.
  auto& db = start(script({rule("aggregate", batch("jobs", {{{"_id", 0}, {"n", 3}, {"ms", 600}},
                                                                     {{"_id", 1}, {"n", 1}, {"ms", 1500}},
                                                                     {{"_id", 2}, {"n", 2}, {"ms", 9000}}}))}));
  ASSERT_TRUE(open(db));
  // Unordered and repeated bounds count like SQLite's ms / 1000 <= bound.
  auto r = run_sync(observe->job_durations({2.0, 0.5, 2.0}));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cumulative, (std::vector<std::int64_t>{4, 3, 4, 6}));
  EXPECT_DOUBLE_EQ(r->sum_s, 11.1);
  const auto d = doc_of(db.commands("aggregate").at(0));
  const auto& p = d.at("pipeline").as_array();
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(s(p[0]), R"({"$match":{"completed_at":{"$exists":true},"started_at":{"$exists":true}}})");
  EXPECT_EQ(s(p[1]), R"({"$project":{"_id":0,"ms":{"$subtract":["$completed_at","$started_at"]}}})");
  EXPECT_EQ(s(p[2]), R"({"$match":{"ms":{"$gte":0}}})");
  EXPECT_EQ(s(p[3]),
            R"({"$group":{"_id":{"$switch":{"branches":[)"
            R"({"case":{"$lte":[{"$divide":["$ms",1000]},5E-1]},"then":0},)"
            R"({"case":{"$lte":[{"$divide":["$ms",1000]},2E0]},"then":1}],"default":2}},)"
            R"("n":{"$sum":1},"ms":{"$sum":"$ms"}}})");
}

TEST_F(mongo_auth_wire, watch_logs_reads_status_last_seq_and_lines_in_one_snapshot) {
  auto& db = start(script({find_reply("jobs", {{{"_id", "j1"}, {"status", "active"}}}),
                   rule("find", batch("job_logs", {{{"seq", 4}}}), 1, {{"find", "job_logs"}, {"limit", 1}}),
                   find_reply("job_logs", {{{"job_id", "j1"}, {"seq", 3}, {"ts", t0}, {"level", "info"}, {"message", "m3"}},
                                           {{"job_id", "j1"}, {"seq", 4}, {"ts", t0}, {"level", "warn"}, {"message", "m4"}}}),
                   find_reply("jobs", {})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(observe->watch_logs("j1", 2, 50));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, job_status::active);
  EXPECT_EQ(r->last_seq, 4);
  ASSERT_EQ(r->lines.size(), 2u);
  EXPECT_EQ(r->lines[1].message, "m4");
  auto missing = run_sync(observe->watch_logs("j2", 0, 50));
  ASSERT_FALSE(missing);
  EXPECT_TRUE(missing.error().is(errc::not_found));
  auto jobs = on(db, "find", "jobs");
  auto logs = on(db, "find", "job_logs");
  ASSERT_EQ(jobs.size(), 2u);
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(s(jobs[0].at("filter")), R"({"_id":"j1"})");
  EXPECT_EQ(s(logs[0].at("sort")), R"({"job_id":1,"seq":-1})");
  EXPECT_EQ(s(logs[1].at("filter")), R"({"job_id":"j1","seq":{"$gt":2}})");
  EXPECT_EQ(s(logs[1].at("sort")), R"({"job_id":1,"seq":1})");
  EXPECT_EQ(logs[1].at("limit").to_number<std::int64_t>(), 50);
  for (const auto& d : {jobs[0], logs[0], logs[1]}) {
    expect_in_transaction(d);
    EXPECT_EQ(d.at("txnNumber"), jobs[0].at("txnNumber"));
  }
}

// --- leader lease ----------------------------------------------------------------------------
TEST_F(mongo_auth_wire, acquire_is_one_find_and_modify_upsert_on_free_expired_or_mine) {
  auto& db = start(script({rule("findAndModify", {{"ok", 1},
                                                          {"value", {{"_id", "scheduler"}, {"holder", "me"}, {"epoch", 3},
                                                                     {"expires_at", t0 + 15'000}}}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(leases->acquire("scheduler", "me", t0, 15'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->held);
  EXPECT_EQ(r->epoch, 3);
  EXPECT_EQ(r->expires_at, t0 + 15'000);
  auto fams = on(db, "findAndModify", "leases");
  ASSERT_EQ(fams.size(), 1u);
  const auto& d = fams[0];
  EXPECT_EQ(s(d.at("query")),
            R"({"_id":"scheduler","$or":[{"holder":"me"},{"expires_at":{"$lte":)" + std::to_string(t0) + "}}]}");
  // The caller's clock, as SQLite: expiry = now + ttl.
  EXPECT_EQ(s(d.at("update")),
            R"([{"$set":{"epoch":{"$cond":[{"$eq":["$holder",{"$literal":"me"}]},"$epoch",)"
            R"({"$add":[{"$ifNull":["$epoch",0]},1]}]},"holder":{"$literal":"me"},"expires_at":)" +
                std::to_string(t0 + 15'000) + "}}]");
  EXPECT_EQ(d.at("upsert"), true);
  EXPECT_EQ(d.at("new"), true);
  expect_majority_write(d);
  EXPECT_TRUE(db.commands("find").empty());
}

TEST_F(mongo_auth_wire, acquire_losing_the_upsert_race_is_not_acquired_and_reads_the_winner) {
  auto& db = start(script({rule("findAndModify", {{"ok", 0},
                                                          {"code", 11000},
                                                          {"codeName", "DuplicateKey"},
                                                          {"errmsg", "E11000 duplicate key error _id_"}}),
                                    find_reply("leases", {{{"_id", "scheduler"}, {"holder", "other"}, {"epoch", 5},
                                                           {"expires_at", t0 + 9000}}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(leases->acquire("scheduler", "me", t0, 15'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->held);
  EXPECT_EQ(r->holder, "other");
  EXPECT_EQ(r->epoch, 5);
  EXPECT_EQ(r->expires_at, t0 + 9000);
  EXPECT_EQ(on(db, "findAndModify", "leases").size(), 1u);  // not sent again
  auto finds = on(db, "find", "leases");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"_id":"scheduler"})");
  expect_majority_read(finds[0]);
}

TEST_F(mongo_auth_wire, a_lease_held_by_another_is_not_acquired) {
  auto& db = start(script({rule("findAndModify", {{"ok", 1}, {"value", nullptr}}),
                                    find_reply("leases", {{{"_id", "scheduler"}, {"holder", "other"}, {"epoch", 2},
                                                           {"expires_at", t0 + 1}}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(leases->acquire("scheduler", "me", t0, 15'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->held);
  EXPECT_EQ(r->holder, "other");
  EXPECT_EQ(r->epoch, 2);
}

TEST_F(mongo_auth_wire, release_filters_on_holder_and_epoch_so_a_stale_epoch_changes_nothing) {
  auto& db = start(script({rule("update", {{"ok", 1}, {"n", 0}, {"nModified", 0}})}));
  ASSERT_TRUE(open(db));
  ASSERT_TRUE(run_sync(leases->release("scheduler", "me", 4)));
  auto all = db.commands();
  ASSERT_EQ(all.size(), 1u);  // one filtered update; no read, no second write
  const auto d = doc_of(all[0]);
  EXPECT_EQ(d.at("update"), "leases");
  EXPECT_EQ(s(d.at("updates")), R"([{"q":{"_id":"scheduler","holder":"me","epoch":4},"u":{"$set":{"expires_at":0}}}])");
  expect_majority_write(d);
}

// --- maintenance -----------------------------------------------------------------------------
TEST_F(mongo_auth_wire, purge_finished_deletes_the_oldest_finished_jobs_logs_first_then_the_jobs) {
  auto& db = start(script({find_reply("jobs", {{{"_id", "j1"}}, {{"_id", "j2"}}}),
                                    rule("delete", {{"ok", 1}, {"n", 2}}, 1, {{"delete", "jobs"}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(maintenance->purge_finished(t0, 100));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2);
  auto finds = on(db, "find", "jobs");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")),
            R"({"status":{"$in":["completed","cancelled"]},"completed_at":{"$lt":)" + std::to_string(t0) + "}}");
  EXPECT_EQ(s(finds[0].at("sort")), R"({"completed_at":1})");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 100);
  std::vector<json::object> dels;
  for (auto& c : db.commands("delete")) dels.push_back(doc_of(c));
  ASSERT_EQ(dels.size(), 3u);
  EXPECT_EQ(dels[0].at("delete"), "job_logs");
  EXPECT_EQ(s(dels[0].at("deletes")), R"([{"q":{"job_id":{"$in":["j1","j2"]}},"limit":0}])");
  // The catalog's DNS-01 records once out of the zone (removed_at 0: still in it).
  EXPECT_EQ(dels[1].at("delete"), "dns_records");
  EXPECT_EQ(s(dels[1].at("deletes")),
            R"([{"q":{"job_id":{"$in":["j1","j2"]},"removed_at":{"$gt":0}},"limit":0}])");
  EXPECT_EQ(dels[2].at("delete"), "jobs");
  EXPECT_EQ(s(dels[2].at("deletes")),
            R"([{"q":{"_id":{"$in":["j1","j2"]},"status":{"$in":["completed","cancelled"]}},"limit":0}])");
  for (const auto& d : dels) expect_majority_write(d);
}

TEST_F(mongo_auth_wire, a_purge_delete_whose_reply_was_lost_is_sent_again_once) {
  // A multi-document delete is not a retryable write; its filter makes it idempotent.
  auto& db = start(script({find_reply("jobs", {{{"_id", "j1"}}}),
                           rule("delete", {{"$hangup", true}}, 1, {{"delete", "job_logs"}}),
                           rule("delete", {{"ok", 1}, {"n", 1}}, 1, {{"delete", "jobs"}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(maintenance->purge_finished(t0, 10));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 1);
  auto logs = on(db, "delete", "job_logs");
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(s(logs[0].at("deletes")), s(logs[1].at("deletes")));
  EXPECT_EQ(on(db, "delete", "jobs").size(), 1u);
}

TEST_F(mongo_auth_wire, purge_audit_deletes_the_oldest_entries_up_to_the_first_after_the_cutoff) {
  auto& db = start(script({find_reply("audit_log", {{{"_id", 1}, {"at", t0 - 10}},
                                                             {{"_id", 2}, {"at", t0 - 5}},
                                                             {{"_id", 3}, {"at", t0}},
                                                             {{"_id", 4}, {"at", t0 - 1}}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(maintenance->purge_audit(t0, 4));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2);
  auto finds = on(db, "find", "audit_log");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("sort")), R"({"_id":1})");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 4);
  auto dels = on(db, "delete", "audit_log");
  ASSERT_EQ(dels.size(), 1u);
  EXPECT_EQ(s(dels[0].at("deletes")), R"([{"q":{"_id":{"$lte":2}},"limit":0}])");
  expect_majority_write(dels[0]);
}

TEST_F(mongo_auth_wire, purge_expired_tokens_deletes_their_sessions_then_them_by_a_filter_that_holds_the_cutoff) {
  auto& db = start(script({find_reply("tokens", {{{"_id", "t1"}}, {{"_id", "t2"}}}),
                           rule("delete", {{"ok", 1}, {"n", 3}}, 1, {{"delete", "ui_sessions"}}),
                           rule("delete", {{"ok", 1}, {"n", 2}}, 1, {{"delete", "tokens"}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(maintenance->purge_expired_tokens(t0, 50));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2);
  auto finds = on(db, "find", "tokens");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"expires_at":{"$lt":)" + std::to_string(t0) + "}}");
  EXPECT_EQ(s(finds[0].at("sort")), R"({"expires_at":1})");
  EXPECT_EQ(finds[0].at("limit").to_number<std::int64_t>(), 50);
  auto sessions = on(db, "delete", "ui_sessions");
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(s(sessions[0].at("deletes")), R"([{"q":{"token_id":{"$in":["t1","t2"]}},"limit":0}])");
  auto tokens = on(db, "delete", "tokens");
  ASSERT_EQ(tokens.size(), 1u);
  // The cutoff again: a token whose expiry was moved meanwhile is not deleted.
  EXPECT_EQ(s(tokens[0].at("deletes")),
            R"([{"q":{"_id":{"$in":["t1","t2"]},"expires_at":{"$lt":)" + std::to_string(t0) + R"(}},"limit":0}])");
  expect_majority_write(tokens[0]);
}

TEST_F(mongo_auth_wire, touch_token_sets_last_used_only_when_unset_or_older_than_the_interval) {
  auto& db = start(script({rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}})}));
  ASSERT_TRUE(open(db));
  ASSERT_TRUE(run_sync(auth->touch_token("t1", t0, 60'000)));
  auto ups = on(db, "update", "tokens");
  ASSERT_EQ(ups.size(), 1u);
  EXPECT_EQ(s(ups[0].at("updates")),
            R"([{"q":{"_id":"t1","$or":[{"last_used_at":{"$exists":false}},{"last_used_at":{"$lte":)" +
                std::to_string(t0 - 60'000) + R"(}}]},"u":{"$set":{"last_used_at":)" + std::to_string(t0) + "}}}]");
  expect_majority_write(ups[0]);
}

TEST_F(mongo_auth_wire, backup_points_to_mongodump) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(maintenance->backup_to((dir.path() / "b.db").string()));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "store");
  EXPECT_NE(r.error().message.find("mongodump --uri"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("--archive"), std::string::npos) << r.error().message;
  EXPECT_TRUE(db.commands().empty());
}

// --- session slots ---------------------------------------------------------------------------
json::object slot_json(std::int64_t id, std::string job, std::int64_t fence, time_ms expires_at) {
  return {{"id", id}, {"job_id", job}, {"fence", fence}, {"acquired_at", t0 - 1000}, {"expires_at", expires_at}};
}
json::object active_job(std::string id, std::int64_t fence, time_ms locked_until) {
  return {{"_id", id}, {"fence", fence}, {"status", "active"}, {"locked_until", locked_until}};
}

TEST_F(mongo_auth_wire, the_first_slot_of_a_destination_is_an_upsert_of_version_zero) {
  auto& db = start(script({rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 0}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->acquire("h:22", {"j1", 2}, 2, t0, 30'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->granted());
  EXPECT_EQ(r->in_use, 1);
  auto finds = on(db, "find", "session_slots");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"_id":"h:22"})");
  EXPECT_TRUE(on(db, "find", "jobs").empty());  // no slot, no job to look at
  auto ups = on(db, "update", "session_slots");
  ASSERT_EQ(ups.size(), 1u);
  expect_majority_write(ups[0]);
  const auto& u = ups[0].at("updates").at(0).as_object();
  EXPECT_EQ(s(u.at("q")), R"({"_id":"h:22","v":0})");
  EXPECT_EQ(u.at("upsert"), true);
  EXPECT_EQ(u.at("u").at("$set").at("v").to_number<std::int64_t>(), 1);
  const auto& mine = u.at("u").at("$set").at("slots").at(0).as_object();
  EXPECT_EQ(mine.at("id").to_number<std::int64_t>(), r->slot_id);
  EXPECT_EQ(mine.at("job_id"), "j1");
  EXPECT_EQ(mine.at("fence").to_number<std::int64_t>(), 2);
  EXPECT_EQ(mine.at("expires_at").to_number<std::int64_t>(), t0 + 30'000);
}

TEST_F(mongo_auth_wire, a_full_destination_grants_nothing_and_writes_nothing) {
  auto& db = start(script({find_reply("session_slots", {{{"_id", "h:22"}, {"v", 7},
                                                                  {"slots", json::array{slot_json(11, "j1", 1, t0 + 500),
                                                                                        slot_json(12, "j2", 3, t0 + 500)}}}}),
                                    find_reply("jobs", {active_job("j1", 1, t0 + 900), active_job("j2", 3, t0 + 900)})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->acquire("h:22", {"j3", 1}, 2, t0, 30'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->granted());
  EXPECT_EQ(r->in_use, 2);
  auto jobs = on(db, "find", "jobs");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(s(jobs[0].at("filter")), R"({"_id":{"$in":["j1","j2"]}})");
  EXPECT_EQ(s(jobs[0].at("projection")), R"({"fence":1,"status":1,"locked_until":1})");
  EXPECT_TRUE(db.commands("update").empty());
}

TEST_F(mongo_auth_wire, dead_slots_are_freed_by_the_next_acquire_and_a_lost_race_reads_again) {
  // j1's slot expired; j2's attempt moved on (fence 4 now); j3's lease ran out. Only j4's lives.
  json::object state{{"_id", "h:22"}, {"v", 7},
                     {"slots", json::array{slot_json(11, "j1", 1, t0), slot_json(12, "j2", 3, t0 + 500),
                                           slot_json(13, "j3", 1, t0 + 500), slot_json(14, "j4", 1, t0 + 500)}}};
  json::object jobs_reply = batch("jobs", {active_job("j2", 4, t0 + 900), active_job("j3", 1, t0), active_job("j4", 1, t0 + 900)});
  auto& db = start(script({find_reply("session_slots", {state}, 2), rule("find", jobs_reply, 2, {{"find", "jobs"}}),
                   // Another acquire wrote version 8 first: the upsert of version 7 hits _id.
                   rule("update", {{"ok", 1},
                                   {"n", 0},
                                   {"writeErrors", json::array{{{"index", 0},
                                                                {"code", 11000},
                                                                {"keyPattern", {{"_id", 1}}},
                                                                {"errmsg", "E11000 duplicate key error _id_"}}}}}),
                   rule("update", {{"ok", 1}, {"n", 1}, {"nModified", 1}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->acquire("h:22", {"j5", 1}, 2, t0, 30'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->granted());
  EXPECT_EQ(r->in_use, 2);
  EXPECT_EQ(on(db, "find", "session_slots").size(), 2u);
  auto ups = on(db, "update", "session_slots");
  ASSERT_EQ(ups.size(), 2u);
  const auto& u = ups[1].at("updates").at(0).as_object();
  EXPECT_EQ(s(u.at("q")), R"({"_id":"h:22","v":7})");
  const auto& kept = u.at("u").at("$set").at("slots").as_array();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].at("id").to_number<std::int64_t>(), 14);
  EXPECT_EQ(kept[1].at("job_id"), "j5");
  // Only unexpired slots' jobs are read.
  EXPECT_EQ(s(on(db, "find", "jobs").at(0).at("filter")), R"({"_id":{"$in":["j2","j3","j4"]}})");
}

TEST_F(mongo_auth_wire, renew_extends_the_holders_slots_and_bumps_the_version) {
  auto& db = start(script({find_reply("session_slots", {{{"_id", "a:22"}, {"v", 1},
                                                                  {"slots", json::array{slot_json(1, "j1", 2, t0)}}},
                                                                 {{"_id", "b:22"}, {"v", 4},
                                                                  {"slots", json::array{slot_json(2, "j1", 2, t0),
                                                                                        slot_json(3, "j9", 1, t0)}}}}),
                                    rule("update", {{"ok", 1}, {"n", 2}, {"nModified", 2}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->renew({"j1", 2}, t0, 30'000));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, 2);
  auto finds = on(db, "find", "session_slots");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"slots":{"$elemMatch":{"job_id":"j1","fence":2}}})");
  auto ups = on(db, "update", "session_slots");
  ASSERT_EQ(ups.size(), 1u);
  expect_majority_write(ups[0]);
  EXPECT_EQ(s(ups[0].at("updates")),
            R"([{"q":{"slots":{"$elemMatch":{"job_id":"j1","fence":2}}},"u":{"$set":{"slots.$[s].expires_at":)" +
                std::to_string(t0 + 30'000) +
                R"(},"$inc":{"v":1}},"arrayFilters":[{"s.job_id":"j1","s.fence":2}],"multi":true}])");
}

TEST_F(mongo_auth_wire, release_pulls_the_slot_only_from_its_holder) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  ASSERT_TRUE(run_sync(slots->release(14, {"j4", 1})));
  auto ups = on(db, "update", "session_slots");
  ASSERT_EQ(ups.size(), 1u);
  expect_majority_write(ups[0]);
  EXPECT_EQ(s(ups[0].at("updates")),
            R"([{"q":{"slots":{"$elemMatch":{"id":14,"job_id":"j4","fence":1}}},)"
            R"("u":{"$pull":{"slots":{"id":14,"job_id":"j4","fence":1}},"$inc":{"v":1}}}])");
}

TEST_F(mongo_auth_wire, live_counts_live_slots_per_destination) {
  auto& db = start(script({find_reply("session_slots",
                              {{{"_id", "a:22"}, {"v", 1}, {"slots", json::array{slot_json(1, "j1", 1, t0 + 5), slot_json(2, "j2", 1, t0 + 5)}}},
                               {{"_id", "b:22"}, {"v", 1}, {"slots", json::array{slot_json(3, "j3", 1, t0 + 5)}}}}),
                   rule("find", batch("jobs", {active_job("j1", 1, t0 + 9), active_job("j2", 2, t0 + 9)}), 1, {{"find", "jobs"}}),
                   rule("find", batch("jobs", {}), 1, {{"find", "jobs"}})}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->live(t0));
  ASSERT_TRUE(r) << r.error().message;
  // a:22 has one live slot (j2's fence moved on); b:22's job is gone: not listed.
  EXPECT_EQ(*r, (std::vector<std::pair<std::string, std::int64_t>>{{"a:22", 1}}));
  auto finds = on(db, "find", "session_slots");
  ASSERT_EQ(finds.size(), 1u);
  EXPECT_EQ(s(finds[0].at("filter")), R"({"slots.expires_at":{"$gt":)" + std::to_string(t0) + "}}");
  EXPECT_EQ(s(finds[0].at("sort")), R"({"_id":1})");
}

TEST_F(mongo_auth_wire, a_slot_limit_below_one_is_refused) {
  auto& db = start(script({}));
  ASSERT_TRUE(open(db));
  auto r = run_sync(slots->acquire("h:22", {"j1", 1}, 0, t0, 30'000));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_TRUE(db.commands().empty());
}

}  // namespace

#else

// The MongoDB headers are not on this target's include path: the wire tests need
//   target_link_libraries(mongo_auth_wire_tests PRIVATE mongo::mongoc_shared mongo::bson_shared)
// in tests/CMakeLists.txt. Until then this fails instead of passing with nothing tested.
TEST(mongo_auth_wire, needs_the_mongoc_include_directories) {
  FAIL() << "mongo_auth_wire_tests was built without <mongoc/mongoc.h> on its include path; add "
            "mongo::mongoc_shared and mongo::bson_shared to its target_link_libraries";
}

#endif
