// Every route's success and error paths through a real client over a real socket, and bad input:
// a clear 4xx, nothing changed, the server keeps serving.
#include "api_fixture.hpp"
#include "certfleet/api/router.hpp"
#include "process.hpp"
#include "sshd.hpp"

#include <fstream>
#include <set>

using namespace api_test;

namespace {

class api_routes : public api_fixture {};

TEST_F(api_routes, health_ready_and_projects) {
  start();
  auto c = client();
  auto h = c.get("/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json().at("status"), "ok");
  EXPECT_EQ(h.header("content-type"), "application/json");
  EXPECT_EQ(c.get("/readyz").status, 200);

  auto p = c.get("/api/v1/projects", tok["viewer"]);
  ASSERT_EQ(p.status, 200) << p.body;
  ASSERT_EQ(p.json().at("items").as_array().size(), 1u);
  EXPECT_EQ(p.json().at("items").at(0).at("name"), "default");
  // A system-admin token sees every project.
  auto all = c.get("/api/v1/projects", tok["system"]);
  EXPECT_EQ(all.json().at("items").as_array().size(), 2u);
  // Keep-alive: all of the above went over one connection.
  EXPECT_TRUE(c.connected());
}

TEST_F(api_routes, unknown_routes_methods_and_tokens) {
  start();
  auto c = client();
  auto r = c.get("/api/v1/nope", tok["owner"]);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_code_of(r), "not_found");
  r = c.request("DELETE", jobs_path(), {}, tok["owner"]);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, POST");
  r = c.get(jobs_path(), "");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(error_code_of(r), "unauthorized");
  r = c.get(jobs_path(), "cf_not-a-real-token");
  EXPECT_EQ(r.status, 401);
  r = c.request("GET", jobs_path(), {}, {}, {{"Authorization", "Basic dXNlcjpwYXNz"}});
  EXPECT_EQ(r.status, 401);
  // A well-formed token that was never issued.
  r = c.get(jobs_path(), api::generate_token_text());
  EXPECT_EQ(r.status, 401);
  // A project that does not exist is 404, like a foreign one.
  r = c.get(jobs_path("nope"), tok["system"]);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_field_of(r), "project");
  // Trailing slash, double slash: not routes.
  EXPECT_EQ(c.get(jobs_path() + "/", tok["owner"]).status, 404);
  EXPECT_EQ(c.get("/api/v1//projects", tok["owner"]).status, 404);
}

TEST_F(api_routes, revoked_token_is_refused) {
  start();
  auto c = client();
  EXPECT_EQ(c.get(jobs_path(), tok["viewer"]).status, 200);
  ASSERT_TRUE(run_sync(st->auth().revoke_token(token_ids["viewer"], clock.now_ms())));
  EXPECT_EQ(c.get(jobs_path(), tok["viewer"]).status, 401);
}

TEST_F(api_routes, enqueue_and_idempotency) {
  start();
  auto c = client();
  auto r = c.post(jobs_path(), R"({"type":"noop","payload":{"lines":0},"idempotency_key":"k1"})", tok["admin"]);
  ASSERT_EQ(r.status, 201) << r.body;
  auto j = r.json();
  EXPECT_EQ(j.at("status"), "pending");
  EXPECT_EQ(j.at("created"), true);
  EXPECT_EQ(j.at("idempotency_key"), "k1");
  EXPECT_EQ(j.at("max_attempts"), 3);
  EXPECT_EQ(j.at("triggered_by"), "token:" + token_ids["admin"]);
  auto id = std::string(j.at("id").as_string());
  auto again = c.post(jobs_path(), R"({"type":"noop","payload":{"lines":5},"idempotency_key":"k1"})", tok["owner"]);
  EXPECT_EQ(again.status, 200);
  EXPECT_EQ(again.json().at("id"), id);
  EXPECT_EQ(again.json().at("created"), false);
  // run_at as ISO-8601 and as milliseconds.
  r = c.post(jobs_path(), R"({"type":"noop","run_at":"2099-01-02T03:04:05.250Z"})", tok["admin"]);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json().at("run_at"), "2099-01-02T03:04:05.250Z");
  r = c.post(jobs_path(), R"({"type":"noop","run_at":4070912645250})", tok["admin"]);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json().at("run_at"), "2099-01-01T01:04:05.250Z");
  EXPECT_EQ(count_jobs(), 3);
}

TEST_F(api_routes, enqueue_refusals_change_nothing) {
  start();
  auto c = client();
  struct bad_case {
    const char* body;
    const char* code;
    const char* field;
  };
  const bad_case cases[] = {
      {"{", "invalid_argument", "body"},
      {"[]", "invalid_argument", "body"},
      {"", "invalid_argument", "body"},
      {R"({"type":5})", "invalid_argument", "type"},
      {R"({"payload":{}})", "invalid_argument", "type"},
      {R"({"type":"noop","payload":[1]})", "invalid_argument", "payload"},
      {R"({"type":"noop","payload":"x"})", "invalid_argument", "payload"},
      {R"({"type":"noop","colour":"red"})", "invalid_argument", "colour"},
      {R"({"type":"noop","idempotency_key":7})", "invalid_argument", "idempotency_key"},
      {R"({"type":"noop","idempotency_key":""})", "invalid_argument", "idempotency_key"},
      {R"({"type":"noop","run_at":-1})", "invalid_argument", "run_at"},
      {R"({"type":"noop","run_at":"tomorrow"})", "invalid_argument", "run_at"},
      {R"({"type":"noop","run_at":"2026-11-29T09:05:18"})", "invalid_argument", "run_at"},
      {R"({"type":"noop","run_at":true})", "invalid_argument", "run_at"},
      {R"({"type":"no_such_type"})", "unknown_job_type", "type"},
      {R"({"type":"revoke_certificate"})", "unknown_job_type", "type"},  // no handler in this build
      {R"({"type":""})", "invalid_argument", "type"},
      // Duplicate keys, at any depth: refused naming the key's path.
      {R"({"type":"noop","payload":{"ms":1,"ms":-5}})", "invalid_argument", "payload.ms"},
      {R"({"type":"noop","type":"noop"})", "invalid_argument", "type"},
      {R"({"type":"noop","payload":{"a":{"b":[1,{"c":1,"c":1}]}}})", "invalid_argument", "payload.a.b[1].c"},
      {R"({"type":"noop","payload":null})", "invalid_argument", "payload"},
  };
  for (const auto& bc : cases) {
    auto r = c.post(jobs_path(), bc.body, tok["admin"]);
    EXPECT_EQ(r.status, 400) << bc.body << " -> " << r.body;
    EXPECT_EQ(error_code_of(r), bc.code) << bc.body << " -> " << r.body;
    EXPECT_EQ(error_field_of(r), bc.field) << bc.body << " -> " << r.body;
    EXPECT_FALSE(r.json().at("error").at("message").as_string().empty());
  }
  EXPECT_EQ(count_jobs(), 0);
  EXPECT_EQ(c.get("/healthz").status, 200);
}

TEST_F(api_routes, list_filters_pages_and_default_page_size) {
  start();
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(enqueue());
  auto dead = make_dead();
  enqueue("{}", 0, other_id);  // another project's job is never listed here
  auto c = client();
  auto r = c.get(jobs_path() + "?page_size=3", tok["viewer"]);
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = r.json();
  EXPECT_EQ(v.at("total"), 8);
  EXPECT_EQ(v.at("page"), 1);
  EXPECT_EQ(v.at("page_size"), 3);
  ASSERT_EQ(v.at("items").as_array().size(), 3u);
  EXPECT_EQ(v.at("items").at(0).at("id"), dead);  // newest first
  r = c.get(jobs_path() + "?page_size=3&page=3", tok["viewer"]);
  ASSERT_EQ(r.json().at("items").as_array().size(), 2u);
  EXPECT_EQ(r.json().at("items").at(1).at("id"), ids[0]);
  r = c.get(jobs_path() + "?status=dead", tok["viewer"]);
  EXPECT_EQ(r.json().at("total"), 1);
  r = c.get(jobs_path() + "?status=pending&type=noop", tok["viewer"]);
  EXPECT_EQ(r.json().at("total"), 7);
  r = c.get(jobs_path() + "?status=all&type=other_type", tok["viewer"]);
  EXPECT_EQ(r.json().at("total"), 0);
  for (const char* tab : {"active", "completed", "failed", "cancelled"})
    EXPECT_EQ(c.get(jobs_path() + "?status=" + tab, tok["viewer"]).status, 200) << tab;
  // Default page size: the system setting.
  EXPECT_EQ(c.get(jobs_path(), tok["viewer"]).json().at("page_size"), 25);
  ASSERT_EQ(c.put("/api/v1/settings", R"({"jobs_page_size_default":4})", tok["system"]).status, 200);
  r = c.get(jobs_path(), tok["viewer"]);
  EXPECT_EQ(r.json().at("page_size"), 4);
  EXPECT_EQ(r.json().at("items").as_array().size(), 4u);
}

TEST_F(api_routes, list_bad_queries) {
  start();
  auto c = client();
  for (const char* q : {"?page_size=0", "?page_size=-5", "?page_size=100000", "?page_size=abc", "?page=0", "?page=-1",
                        "?page=99999999999999999999", "?status=bogus", "?colour=red", "?page=1&page=2", "?page=%zz",
                        "?=x", "?page_size=1.5", "?page_size=%00"}) {
    auto r = c.get(jobs_path() + q, tok["viewer"]);
    EXPECT_EQ(r.status, 400) << q << " -> " << r.body;
    EXPECT_EQ(error_code_of(r), "invalid_argument") << q;
  }
  EXPECT_EQ(c.get(jobs_path() + "?page=1000000&page_size=200", tok["viewer"]).status, 200);
}

TEST_F(api_routes, job_detail_and_foreign_job) {
  start();
  auto id = enqueue(R"({"lines":2})");
  auto foreign = enqueue("{}", 0, other_id);
  auto c = client();
  auto r = c.get(job_path(id), tok["viewer"]);
  ASSERT_EQ(r.status, 200);
  auto j = r.json().as_object();
  for (const char* f : {"id", "type", "status", "result_status", "attempts", "max_attempts", "payload", "error",
                        "progress", "idempotency_key", "parent_job_id", "created_at", "started_at", "completed_at",
                        "duration_ms", "cancel_requested", "run_at", "lane", "fence"})
    EXPECT_TRUE(j.contains(f)) << f;
  EXPECT_EQ(j.at("payload").at("lines"), 2);
  // Another project's job through this project: not found, as if it did not exist.
  r = c.get(job_path(foreign), tok["owner"]);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(c.get(job_path("0123456789abcdef01234567"), tok["viewer"]).status, 404);
  for (const char* bad : {"123", "zzzzzzzzzzzzzzzzzzzzzzzz", "0123456789abcdef012345678", "%00"}) {
    r = c.get(job_path(bad), tok["viewer"]);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(error_field_of(r), "id") << bad;
  }
}

TEST_F(api_routes, retry_rules_and_rate_limit) {
  start();
  auto c = client();
  auto dead = make_dead();
  auto r = c.post(job_path(dead) + "/retry", "", tok["admin"]);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().at("status"), "pending");
  EXPECT_EQ(r.json().at("attempts"), 0);
  // Pending: wrong state.
  r = c.post(job_path(dead) + "/retry", "", tok["admin"]);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(error_code_of(r), "conflict");
  EXPECT_EQ(c.post(job_path("0123456789abcdef01234567") + "/retry", "", tok["admin"]).status, 404);
  // The per-project limit (a system setting) answers 429 with Retry-After.
  ASSERT_EQ(c.put("/api/v1/settings", R"({"job_retry_per_minute":2})", tok["system"]).status, 200);
  std::vector<int> codes;
  for (int i = 0; i < 3; ++i) codes.push_back(c.post(job_path(make_dead()) + "/retry", "", tok["admin"]).status);
  auto last = c.post(job_path(make_dead()) + "/retry", "", tok["admin"]);
  // Two of the three fit this minute's window with the first retry (unless the minute turned).
  EXPECT_EQ(last.status, 429) << last.body;
  EXPECT_EQ(error_code_of(last), "rate_limited");
  auto ra = last.header("retry-after");
  ASSERT_FALSE(ra.empty());
  EXPECT_GE(std::stoi(ra), 1);
  EXPECT_LE(std::stoi(ra), 60);
  EXPECT_EQ(codes[2], 429);
}

TEST_F(api_routes, cancel_pending_active_and_terminal) {
  start();
  auto c = client();
  auto pending = enqueue();
  auto r = c.post(job_path(pending) + "/cancel", "", tok["admin"]);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json().at("status"), "cancelled");
  EXPECT_EQ(r.json().at("message"), "Job cancelled");
  auto active = make_active();
  r = c.post(job_path(active.id) + "/cancel", "", tok["admin"]);
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(r.json().at("message"), "Job cancel requested");
  EXPECT_EQ(r.json().at("cancel_requested"), true);
  r = c.post(job_path(pending) + "/cancel", "", tok["admin"]);
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(c.post(job_path("0123456789abcdef01234567") + "/cancel", "", tok["admin"]).status, 404);
}

TEST_F(api_routes, logs_by_cursor) {
  start();
  auto c = client();
  auto job = make_active();
  for (int i = 1; i <= 5; ++i) append_line(job.id, fmt::format("hello {}", i));
  auto r = c.get(job_path(job.id) + "/logs?after=0&limit=2", tok["viewer"]);
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = r.json();
  ASSERT_EQ(v.at("lines").as_array().size(), 2u);
  EXPECT_EQ(v.at("lines").at(0).at("seq"), 1);
  EXPECT_EQ(v.at("lines").at(1).at("message"), "hello 2");
  EXPECT_EQ(v.at("next_cursor"), 2);
  EXPECT_EQ(v.at("done"), false);
  r = c.get(job_path(job.id) + "/logs?after=2", tok["viewer"]);
  EXPECT_EQ(r.json().at("lines").as_array().size(), 3u);
  EXPECT_EQ(r.json().at("next_cursor"), 5);
  EXPECT_EQ(r.json().at("done"), false);  // active: more may come
  finish(job, store::finish_kind::completed);
  r = c.get(job_path(job.id) + "/logs?after=5", tok["viewer"]);
  EXPECT_EQ(r.json().at("lines").as_array().size(), 0u);
  EXPECT_EQ(r.json().at("next_cursor"), 5);
  EXPECT_EQ(r.json().at("done"), true);
  // A page that is full is never "done": the client reads on.
  r = c.get(job_path(job.id) + "/logs?after=0&limit=5", tok["viewer"]);
  EXPECT_EQ(r.json().at("done"), false);
  for (const char* q : {"?after=-1", "?after=abc", "?after=1e3", "?limit=0", "?limit=1001", "?limit=-3", "?cursor=1"}) {
    auto b = c.get(job_path(job.id) + "/logs" + q, tok["viewer"]);
    EXPECT_EQ(b.status, 400) << q;
  }
  EXPECT_EQ(c.get(job_path("0123456789abcdef01234567") + "/logs", tok["viewer"]).status, 404);
  // The stream route over plain HTTP asks for an upgrade.
  EXPECT_EQ(c.get(job_path(job.id) + "/logs/stream", tok["viewer"]).status, 400);
}

TEST_F(api_routes, settings_get_put_all_or_nothing) {
  start();
  auto c = client();
  auto before = c.get("/api/v1/settings", tok["system"]);
  ASSERT_EQ(before.status, 200);
  auto o = before.json().as_object();
  EXPECT_EQ(o.at("jobs_page_size_default"), 25);
  EXPECT_EQ(o.at("egress_allow_list"), "");
  EXPECT_FALSE(o.contains("listen"));  // process settings are not exposed
  EXPECT_FALSE(o.contains("data"));
  struct bad_case {
    const char* body;
    const char* field;
  };
  const bad_case cases[] = {
      {R"({"jobs_page_size_default":0})", "jobs_page_size_default"},
      {R"({"jobs_page_size_default":201})", "jobs_page_size_default"},
      {R"({"jobs_page_size_default":"many"})", "jobs_page_size_default"},
      {R"({"jobs_page_size_default":2.5})", "jobs_page_size_default"},
      {R"({"jobs_page_size_default":true})", "jobs_page_size_default"},
      {R"({"distribution_fanout_threshold":501})", "distribution_fanout_threshold"},
      {R"({"egress_allow_list":5})", "egress_allow_list"},
      // All or nothing: one bad value refuses the good one with it.
      {R"({"job_retry_per_minute":5,"distribution_fanout_batch_size":-1})", "distribution_fanout_batch_size"},
      {R"({"listen":"0.0.0.0:1"})", "listen"},
      {R"({"no_such_setting":1})", "no_such_setting"},
      {R"({})", "body"},
      {R"([1])", "body"},
      {R"({"a":)", "body"},
      // A setting given twice (Boost.JSON would keep the last silently).
      {R"({"job_retry_per_minute":5,"job_retry_per_minute":7})", "job_retry_per_minute"},
  };
  for (const auto& bc : cases) {
    auto r = c.put("/api/v1/settings", bc.body, tok["system"]);
    EXPECT_EQ(r.status, 400) << bc.body << " -> " << r.body;
    EXPECT_EQ(error_field_of(r), bc.field) << bc.body << " -> " << r.body;
  }
  auto range = c.put("/api/v1/settings", R"({"jobs_page_size_default":0})", tok["system"]);
  EXPECT_NE(std::string(range.json().at("error").at("message").as_string()).find("from 1 to 200"), std::string::npos);
  EXPECT_EQ(c.get("/api/v1/settings", tok["system"]).body, before.body);
  auto ok = c.put("/api/v1/settings", R"({"job_retry_per_minute":5,"egress_allow_list":"10.0.0.0/8"})", tok["system"]);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json().at("job_retry_per_minute"), 5);
  EXPECT_EQ(ok.json().at("egress_allow_list"), "10.0.0.0/8");
  EXPECT_EQ(c.get("/api/v1/settings", tok["system"]).json().at("job_retry_per_minute"), 5);
}

TEST_F(api_routes, audit_records_state_changes) {
  start();
  auto c = client();
  auto r = c.post(jobs_path(), R"({"type":"noop"})", tok["admin"]);
  auto id = std::string(r.json().at("id").as_string());
  c.post(job_path(id) + "/cancel", "", tok["owner"]);
  c.post(jobs_path(), R"({"type":"nope"})", tok["admin"]);
  auto a = c.get("/api/v1/projects/default/audit?page_size=2", tok["admin"]);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json().at("total"), 3);
  auto items = a.json().at("items").as_array();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].at("action"), "job.enqueue");
  EXPECT_EQ(items[0].at("outcome"), "unknown_job_type");
  EXPECT_EQ(items[1].at("action"), "job.cancel");
  EXPECT_EQ(items[1].at("object"), "job/" + id);
  EXPECT_EQ(items[1].at("outcome"), "ok");
  EXPECT_EQ(items[1].at("actor"), "token:" + token_ids["owner"]);
  EXPECT_FALSE(items[1].at("at").as_string().empty());
  a = c.get("/api/v1/projects/default/audit?page=2&page_size=2", tok["admin"]);
  EXPECT_EQ(a.json().at("items").as_array().size(), 1u);
  for (const char* q : {"?page=0", "?page_size=0", "?page_size=201", "?x=1"})
    EXPECT_EQ(c.get(std::string("/api/v1/projects/default/audit") + q, tok["admin"]).status, 400) << q;
  // Another project's audit log is its own.
  EXPECT_EQ(c.get("/api/v1/projects/other/audit", tok["system"]).json().at("total"), 0);
}

TEST_F(api_routes, oversized_and_malformed_requests) {
  start();
  auto c = client();
  // A body over 1 MiB: 413, nothing stored, the connection ends, the server serves on.
  std::string big = R"({"type":"noop","payload":{"pad":")" + std::string((1u << 20) + 10, 'a') + R"("}})";
  auto r = c.post(jobs_path(), big, tok["admin"]);
  EXPECT_EQ(r.status, 413) << r.error;
  EXPECT_EQ(error_code_of(r), "payload_too_large");
  // A payload just under the limit is fine (the limit is the body's, not the payload's).
  std::string fits = R"({"type":"noop","payload":{"pad":")" + std::string(1000, 'a') + R"("}})";
  EXPECT_EQ(c.post(jobs_path(), fits, tok["admin"]).status, 201);
  // Headers over the limit: 431.
  r = c.request("GET", jobs_path(), {}, tok["viewer"], {{"X-Padding", std::string(20'000, 'p')}});
  EXPECT_EQ(r.status, 431);
  // Garbage instead of HTTP: 400 and close.
  auto raw = c.raw("HELLO THERE\r\n\r\n");
  EXPECT_NE(raw.find("400"), std::string::npos) << raw;
  raw = c.raw("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: -4\r\n\r\n");
  EXPECT_NE(raw.find("400"), std::string::npos) << raw;
  raw = c.raw("GET healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(raw.find(" 400 "), std::string::npos) << raw;
  // Pipelined requests are answered in order on one connection.
  raw = c.raw("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  auto first = raw.find("200 OK"), second = raw.find("404 Not Found");
  EXPECT_NE(first, std::string::npos) << raw;
  EXPECT_NE(second, std::string::npos) << raw;
  EXPECT_LT(first, second);
  // A request that stops half-way is cut off by the read deadline (2 s in tests): the server
  // closes the connection (raw() returns when it does, long before its own 10 s timeout).
  auto t0 = std::chrono::steady_clock::now();
  raw = c.raw("GET /healthz HTTP/1.1\r\nHost: x\r\n");
  EXPECT_EQ(raw, "");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(6));
  EXPECT_EQ(count_jobs(), 1);
  EXPECT_EQ(client().get("/healthz").status, 200);
}

TEST_F(api_routes, connection_limit_answers_503) {
  auto o = test_options();
  o.max_connections = 2;
  start(o);
  testbed::http_client a("127.0.0.1", port), b("127.0.0.1", port), c("127.0.0.1", port);
  EXPECT_EQ(a.get("/healthz").status, 200);
  EXPECT_EQ(b.get("/healthz").status, 200);
  // Issue 28: at the cap a newcomer takes the slot of the oldest idle connection (a's); only
  // busy connections make it 503 (api_http_hardening.global_connection_limit_says_too_many_connections).
  auto r = c.get("/healthz");
  EXPECT_EQ(r.status, 200);
  a.disconnect();
  // The slot frees once the server sees the close.
  int status = 0;
  for (int i = 0; i < 50 && status != 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    status = testbed::http_client("127.0.0.1", port).get("/healthz").status;
  }
  EXPECT_EQ(status, 200);
}

TEST_F(api_routes, worker_mode_serves_only_health_and_metrics) {
  auto o = test_options();
  o.serve_api = false;
  start(o);
  auto c = client();
  EXPECT_EQ(c.get("/healthz").status, 200);
  EXPECT_EQ(c.get("/readyz").status, 200);
  EXPECT_EQ(c.get("/metrics").status, 200);
  EXPECT_EQ(c.get(jobs_path(), tok["owner"]).status, 404);
}

TEST_F(api_routes, metrics_pass_promtool) {
  // Two deliveries' phases, as the engine records them; only the long-tail phases are kept.
  phases.observe({{"resolve", 1}, {"connect", 3}, {"handshake", 40}, {"auth", 12}, {"install", 1200}});
  phases.observe({{"hash_check", 2}, {"upload", 7}, {"install", 70'000}});
  start(test_options(), true);
  auto c = client();
  auto r = c.post(jobs_path(), R"({"type":"noop","payload":{"lines":3}})", tok["admin"]);
  ASSERT_EQ(r.status, 201);
  auto id = std::string(r.json().at("id").as_string());
  for (int i = 0; i < 100; ++i) {
    if (c.get(job_path(id), tok["viewer"]).json().at("status") == "completed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c.get(jobs_path() + "?page=0", tok["viewer"]);
  auto m = c.get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.header("content-type").rfind("text/plain; version=0.0.4", 0), 0u);
  for (const char* needle : {"certfleet_jobs{status=\"completed\",type=\"noop\"} 1",
                             "certfleet_lane_oldest_pending_age_seconds{lane=\"main\"}",
                             "certfleet_worker_claims_total 1", "certfleet_job_duration_seconds_count 1",
                             "certfleet_http_requests_total{route=\"/api/v1/projects/{p}/jobs\",code=\"400\"} 1",
                             "certfleet_http_request_duration_seconds_bucket{route=\"/api/v1/projects/{p}/jobs\",le=\"+Inf\"}",
                             "certfleet_websocket_subscribers 0", "certfleet_store_call_duration_seconds_count{op=\"job_get\"}",
                             "# TYPE certfleet_delivery_phase_duration_seconds histogram",
                             "certfleet_delivery_phase_duration_seconds_bucket{phase=\"connect\",le=\"0.005\"} 1",
                             "certfleet_delivery_phase_duration_seconds_bucket{phase=\"handshake\",le=\"0.025\"} 0",
                             "certfleet_delivery_phase_duration_seconds_bucket{phase=\"handshake\",le=\"0.05\"} 1",
                             "certfleet_delivery_phase_duration_seconds_count{phase=\"install\"} 2",
                             "certfleet_delivery_phase_duration_seconds_bucket{phase=\"install\",le=\"60\"} 1",
                             "certfleet_delivery_phase_duration_seconds_bucket{phase=\"install\",le=\"+Inf\"} 2",
                             "certfleet_delivery_phase_duration_seconds_sum{phase=\"install\"} 71.2",
                             "certfleet_delivery_phase_duration_seconds_count{phase=\"upload\"} 1",
                             "certfleet_delivery_phase_duration_seconds_count{phase=\"validate\"} 0"})
    EXPECT_NE(m.body.find(needle), std::string::npos) << needle << "\n" << m.body;
  EXPECT_EQ(m.body.find("phase=\"resolve\""), std::string::npos) << "not a long-tail phase";
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool is not installed";
  auto file = dir.file("metrics.txt");
  std::ofstream(file) << m.body;
  auto [status, out] = testbed::run_command({"/bin/sh", "-c", "promtool check metrics < " + file + " 2>&1"});
  EXPECT_EQ(status, 0) << out << "\n" << m.body;
}

TEST_F(api_routes, graceful_stop_finishes_in_flight_and_closes_idle) {
  start();
  auto c = client();
  EXPECT_EQ(c.get("/healthz").status, 200);  // an idle keep-alive connection now
  auto t0 = std::chrono::steady_clock::now();
  stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(testbed::http_client("127.0.0.1", port, std::chrono::milliseconds(500)).get("/healthz").status, 0);
}

}  // namespace

namespace {
// No response cache in front of the list: another writer's job shows at once, and every tab's
// count is exact (kept by the store with each status change).
TEST_F(api_routes, list_shows_other_writers_at_once_with_exact_counts) {
  start();
  auto c = client();
  EXPECT_EQ(c.get(jobs_path(), tok["viewer"]).json().at("total"), 0);
  ASSERT_EQ(c.post(jobs_path(), R"({"type":"noop"})", tok["admin"]).status, 201);
  EXPECT_EQ(c.get(jobs_path(), tok["viewer"]).json().at("total"), 1);
  enqueue();  // another writer
  auto all = c.get(jobs_path(), tok["viewer"]).json();
  EXPECT_EQ(all.at("total"), 2);
  EXPECT_EQ(all.at("counts").at("all"), 2);
  EXPECT_EQ(all.at("counts").at("pending"), 2);
  EXPECT_EQ(all.at("counts").at("completed"), 0);
}
}  // namespace

namespace {

class api_targets : public api_fixture {
 public:
  std::string credential(testbed::http_client& c, const std::string& body) {
    auto r = c.post("/api/v1/projects/default/credentials", body, tok["admin"]);
    EXPECT_EQ(r.status, 201) << r.body;
    return std::string(r.json().at("id").as_string());
  }
  // A new ssh_key credential's id.
  std::string key_credential(testbed::http_client& c) {
    auto key = testbed::make_ssh_key(dir.path() / "k", "login");
    return credential(c, boost::json::serialize(boost::json::object{
                             {"name", "key"}, {"kind", "ssh_key"}, {"private_key_pem", key.private_key}}));
  }
};

// ssh.auth: "key" (the default of a new target) or "password", and it must match the
// credential's kind; the stored target shows the effective value.
TEST_F(api_targets, ssh_auth_is_explicit_and_matches_the_credential) {
  start();
  auto c = client();
  auto host = testbed::make_ssh_key(dir.path() / "h", "host");
  const auto pw = credential(c, R"({"name":"pw","kind":"password","password":"secret"})");
  const auto kc = key_credential(c);
  auto body = [&](const std::string& name, const std::string& cred, const char* auth) {
    boost::json::object ssh{{"host", "127.0.0.1"}, {"user", "deploy"}, {"credential_id", cred}, {"host_key", host.public_line},
                            {"cert_path", "/srv/c.pem"}, {"key_path", "/srv/k.pem"}};
    if (auth) ssh["auth"] = auth;
    return boost::json::serialize(boost::json::object{{"name", name}, {"module", "ssh"}, {"ssh", std::move(ssh)}});
  };
  const std::string targets = "/api/v1/projects/default/targets";
  // 127.0.0.1 is refused by ssh_allow_list's default (no loopback unless listed).
  ASSERT_EQ(c.put("/api/v1/settings", R"({"ssh_allow_list":"127.0.0.0/8"})", tok["system"]).status, 200);
  struct row {
    const char* name;
    const std::string* cred;
    const char* auth;
    int status;
  };
  for (auto [name, cred, auth, status] : {row{"pw-implicit", &pw, nullptr, 400}, row{"pw-as-key", &pw, "key", 400},
                                          row{"key-as-pw", &kc, "password", 400}, row{"bad", &kc, "kerberos", 400},
                                          row{"pw", &pw, "password", 201}, row{"key", &kc, "key", 201},
                                          row{"key-implicit", &kc, nullptr, 201}}) {
    auto r = c.post(targets, body(name, *cred, auth), tok["admin"]);
    EXPECT_EQ(r.status, status) << name << ": " << r.body;
    if (status == 400) EXPECT_EQ(error_field_of(r), "ssh.auth") << name;
    if (status == 201) EXPECT_EQ(r.json().at("ssh").at("auth"), std::string(auth ? auth : "key")) << name;
  }
  EXPECT_EQ(c.get(targets, tok["viewer"]).json().at("total").as_int64(), 3);
}

// ssh_allow_list: checked when a target is created (and at delivery and scan time).
TEST_F(api_targets, ssh_allow_list_refuses_destinations_at_creation) {
  start();
  auto c = client();
  auto host = testbed::make_ssh_key(dir.path() / "h", "host");
  const auto kc = key_credential(c);
  auto body = [&](const std::string& name, const std::string& h) {
    return boost::json::serialize(boost::json::object{
        {"name", name}, {"module", "ssh"},
        {"ssh", boost::json::object{{"host", h}, {"user", "deploy"}, {"credential_id", kc}, {"host_key", host.public_line},
                                    {"cert_path", "/srv/c.pem"}, {"key_path", "/srv/k.pem"}}}});
  };
  auto bad = c.put("/api/v1/settings", R"({"ssh_allow_list":"10.0.0.1/8"})", tok["system"]);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(error_field_of(bad), "ssh_allow_list");
  ASSERT_EQ(c.put("/api/v1/settings", R"({"ssh_allow_list":"10.0.0.0/8, 0.0.0.0/0"})", tok["system"]).status, 200);
  const std::string targets = "/api/v1/projects/default/targets";
  for (const char* h : {"127.0.0.1", "169.254.169.254", "localhost", "no-such-host.invalid"}) {
    auto r = c.post(targets, body(std::string("t-") + h, h), tok["admin"]);
    EXPECT_EQ(r.status, 400) << h << ": " << r.body;
    EXPECT_EQ(error_field_of(r), "ssh.host") << h;
  }
  EXPECT_EQ(c.post(targets, body("public", "192.0.2.10"), tok["admin"]).status, 201);
  EXPECT_EQ(c.get(targets, tok["viewer"]).json().at("total").as_int64(), 1);
}

// POST …/targets:import: every row stored in one transaction, or none with every bad row named
// by its line; JSON lines and CSV; a body past 1 MiB only for a caller allowed the route.
TEST_F(api_targets, import_stores_every_row_or_none) {
  start();
  auto c = client();
  auto host = testbed::make_ssh_key(dir.path() / "h", "host");
  const auto kc = key_credential(c);
  const auto pw = credential(c, R"({"name":"pw","kind":"password","password":"secret"})");
  ASSERT_EQ(c.put("/api/v1/settings", R"({"ssh_allow_list":"10.0.0.0/8"})", tok["system"]).status, 200);
  auto line = [&](const std::string& name, const std::string& h, const std::string& cred, int port = 22) {
    return boost::json::serialize(boost::json::object{
               {"name", name}, {"module", "ssh"},
               {"ssh", boost::json::object{{"host", h}, {"port", port}, {"user", "deploy"}, {"credential_id", cred},
                                           {"host_key", host.public_line}, {"cert_path", "/srv/c.pem"},
                                           {"key_path", "/srv/k.pem"}}}}) +
           "\n";
  };
  const std::string import = "/api/v1/projects/default/targets:import", targets = "/api/v1/projects/default/targets";
  const std::map<std::string, std::string> ndjson{{"Content-Type", "application/x-ndjson"}};
  auto ok = c.request("POST", import, line("web-1", "10.0.0.1", kc) + line("web-2", "10.0.0.2", kc) + line("web-3", "10.0.0.2", kc, 2222),
                      tok["admin"], ndjson);
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.json().at("imported").as_int64(), 3);
  ASSERT_EQ(ok.json().at("ids").as_array().size(), 3u);
  auto third = c.get(targets + "/" + std::string(ok.json().at("ids").as_array()[2].as_string()), tok["viewer"]);
  EXPECT_EQ(third.json().at("name"), std::string("web-3"));
  EXPECT_EQ(third.json().at("ssh").at("auth"), std::string("key"));  // stamped as a created one is

  // Bad rows: each named, nothing stored — not even the good rows around them.
  const std::string mixed = line("db-1", "10.0.0.5", kc) + line("web-1", "10.0.0.6", kc) + line("db-2", "10.0.0.7", kc, 0) +
                            line("db-3", "127.0.0.1", kc) + line("db-4", "10.0.0.8", pw) + line("db-5", "10.0.0.9", kc);
  auto bad = c.request("POST", import, mixed, tok["admin"], ndjson);
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(error_field_of(bad), "line 3: ssh.port");  // the parse problems come first, alone
  EXPECT_EQ(bad.json().at("error_count").as_int64(), 1);
  auto fixed = line("db-1", "10.0.0.5", kc) + line("web-1", "10.0.0.6", kc) + line("db-2", "10.0.0.7", kc) +
               line("db-3", "127.0.0.1", kc) + line("db-4", "10.0.0.8", pw) + line("db-5", "10.0.0.9", kc);
  auto refused = c.request("POST", import, fixed, tok["admin"], ndjson);
  ASSERT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(error_field_of(refused), "line 4: ssh.host");  // the allow list: checked before the store
  fixed = line("db-1", "10.0.0.5", kc) + line("web-1", "10.0.0.6", kc) + line("db-2", "10.0.0.7", kc) +
          line("db-4", "10.0.0.8", pw) + line("db-5", "10.0.0.9", kc);
  auto taken = c.request("POST", import, fixed, tok["admin"], ndjson);
  ASSERT_EQ(taken.status, 400) << taken.body;
  const auto taken_answer = taken.json();
  const auto& errors = taken_answer.at("errors").as_array();
  ASSERT_EQ(errors.size(), 2u) << taken.body;
  EXPECT_EQ(errors[0].at("line").as_int64(), 2);
  EXPECT_EQ(errors[0].at("field"), std::string("name"));
  EXPECT_EQ(errors[1].at("line").as_int64(), 4);
  EXPECT_EQ(errors[1].at("field"), std::string("ssh.auth"));
  EXPECT_EQ(c.get(targets, tok["viewer"]).json().at("total").as_int64(), 3);

  // Another project's credential is unknown here, as it is to a single create.
  auto other_cred = run_sync(st->catalog().transact([&](store::catalog_tx& tx) -> result<void> {
    store::catalog_object o;
    o.id = "0123456789abcdef01234567";
    o.project_id = other_id;
    o.kind = std::string(store::kind_credential);
    o.name = "theirs";
    o.doc = R"({"kind":"ssh_key"})";
    o.created_at = 1;
    auto r = tx.insert_object(o);
    if (!r) return std::move(r).error();
    return {};
  }));
  ASSERT_TRUE(other_cred) << other_cred.error().message;
  auto foreign = c.request("POST", import, line("x-1", "10.0.0.1", "0123456789abcdef01234567"), tok["admin"], ndjson);
  ASSERT_EQ(foreign.status, 400) << foreign.body;
  EXPECT_EQ(error_field_of(foreign), "line 1: ssh.credential_id");

  // CSV: the same members as header cells.
  const std::string csv = "name,module,ssh.host,ssh.port,ssh.user,ssh.credential_id,ssh.host_key,ssh.cert_path,ssh.key_path,ssh.sudo\n" +
                          fmt::format("csv-1,ssh,10.0.0.11,2200,deploy,{},{},/srv/c.pem,/srv/k.pem,true\n", kc, host.public_line) +
                          fmt::format("csv-2,ssh,10.0.0.12,,deploy,{},\"{}\",/srv/c.pem,/srv/k.pem,\n", kc, host.public_line);
  auto from_csv = c.request("POST", import, csv, tok["admin"], {{"Content-Type", "text/csv; charset=utf-8"}});
  ASSERT_EQ(from_csv.status, 201) << from_csv.body;
  auto csv_1 = c.get(targets + "/" + std::string(from_csv.json().at("ids").as_array()[0].as_string()), tok["viewer"]);
  EXPECT_EQ(csv_1.json().at("ssh").at("port").as_int64(), 2200);
  EXPECT_EQ(csv_1.json().at("ssh").at("sudo").as_bool(), true);

  // Other media types: 415 naming the ones this route takes (a JSON body included).
  for (const char* type : {"application/json", "text/plain"}) {
    auto r = c.request("POST", import, line("m-1", "10.0.0.1", kc), tok["admin"], {{"Content-Type", type}});
    EXPECT_EQ(r.status, 415) << type;
    EXPECT_EQ(r.header("accept-post"), "application/x-ndjson, application/jsonl, text/csv") << type;
  }
  // A file target by a project admin: the whole import is forbidden.
  auto file = c.request("POST", import, R"({"name":"f","module":"file","file":{"cert_path":"/srv/a.pem","key_path":"/srv/b.pem"}})",
                        tok["admin"], ndjson);
  EXPECT_EQ(file.status, 403) << file.body;

  // Past 1 MiB: taken from an admin (the route's role), refused as too large from a viewer, whose
  // request never reaches the route.
  std::string big;
  for (int i = 0; big.size() < (3u << 19); ++i) big += line(fmt::format("bulk-{}", i), "10.0.0.1", kc);
  auto viewer = c.request("POST", import, big, tok["viewer"], ndjson);
  EXPECT_EQ(viewer.status, 413) << viewer.body.substr(0, 200);
  c.disconnect();
  auto admin = c.request("POST", import, big, tok["admin"], ndjson);
  ASSERT_EQ(admin.status, 201) << admin.body.substr(0, 300);
  const auto total = c.get(targets, tok["viewer"]).json().at("total").as_int64();
  EXPECT_EQ(total, 5 + admin.json().at("imported").as_int64());
  EXPECT_GT(admin.json().at("imported").as_int64(), 2000);
}

// Projects: created and deleted by system admins, names checked, duplicates and non-empty
// projects refused, every change audited.
TEST_F(api_targets, projects_create_list_delete) {
  start();
  auto c = client();
  for (const char* bad : {R"({"name":"Team A"})", R"({"name":""})", R"({"name":"-x"})", R"({"name":"a/b"})", R"({"name":7})",
                          R"({})", R"({"name":"ok","extra":1})", "[]"}) {
    auto r = c.post("/api/v1/projects", bad, tok["system"]);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  auto made = c.post("/api/v1/projects", R"({"name":"team-a"})", tok["system"]);
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.json().at("name"), "team-a");
  auto dup = c.post("/api/v1/projects", R"({"name":"team-a"})", tok["system"]);
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(error_code_of(dup), "conflict");
  auto list = c.get("/api/v1/projects", tok["system"]);
  EXPECT_EQ(list.json().at("items").as_array().size(), 3u);
  EXPECT_EQ(c.get("/api/v1/projects", tok["owner"]).json().at("items").as_array().size(), 1u);  // its own only

  // A project with a pending job and an object cannot go; after they are gone it can.
  auto team = run_sync(st->projects().find_by_name("team-a"));
  ASSERT_TRUE(team);
  auto job = enqueue("{}", 0, team->id);
  auto busy = c.request("DELETE", "/api/v1/projects/team-a", "", tok["system"]);
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find("not finished"), std::string::npos) << busy.body;
  ASSERT_EQ(c.post("/api/v1/projects/team-a/jobs/" + job + "/cancel", "", tok["system"]).status, 200);
  auto cred = c.post("/api/v1/projects/team-a/credentials", R"({"name":"pw","kind":"password","password":"x"})", tok["system"]);
  ASSERT_EQ(cred.status, 201);
  EXPECT_EQ(c.request("DELETE", "/api/v1/projects/team-a", "", tok["system"]).status, 409);
  ASSERT_EQ(c.request("DELETE", "/api/v1/projects/team-a/credentials/" + std::string(cred.json().at("id").as_string()), "",
                      tok["system"]).status, 200);
  // Its project token stops working with it.
  auto t = run_sync(api::issue_token(st->auth(), team->id, store::role::owner, false, "team", "test", clock));
  ASSERT_TRUE(t);
  EXPECT_EQ(c.get("/api/v1/projects/team-a/jobs", (*t)->text).status, 200);
  auto gone = c.request("DELETE", "/api/v1/projects/team-a", "", tok["system"]);
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.json().at("deleted"), true);
  EXPECT_EQ(c.get("/api/v1/projects/team-a/jobs", tok["system"]).status, 404);
  EXPECT_EQ(c.get("/api/v1/projects", (*t)->text).status, 401);  // revoked
  EXPECT_FALSE(run_sync(st->jobs().get(team->id, job)));  // its finished jobs went with it
  EXPECT_EQ(c.request("DELETE", "/api/v1/projects/team-a", "", tok["system"]).status, 404);
  // The same name again is a new project (a new id: nothing of the old one shows).
  auto again = c.post("/api/v1/projects", R"({"name":"team-a"})", tok["system"]);
  ASSERT_EQ(again.status, 201);
  EXPECT_NE(again.json().at("id"), made.json().at("id"));

  // Audited in the system admin's own project.
  auto audit = c.get("/api/v1/projects/other/audit?page_size=200", tok["system"]);
  ASSERT_EQ(audit.status, 200) << audit.body;
  const auto entries = audit.json();
  std::multiset<std::string> seen;
  for (const auto& e : entries.at("items").as_array())
    seen.insert(std::string(e.at("action").as_string()) + " " + std::string(e.at("outcome").as_string()));
  EXPECT_EQ(seen.count("project.create ok"), 2u);
  EXPECT_EQ(seen.count("project.create conflict"), 1u);
  EXPECT_EQ(seen.count("project.delete conflict"), 2u);
  EXPECT_EQ(seen.count("project.delete ok"), 1u);
}

}  // namespace
