// The web UI's server side (DESIGN §8): sign-in sessions and their cookie, CSRF on cookie writes,
// the WebSocket with the cookie, the UI's pages and assets with their headers, and the list's
// tab counts and keyset pages.
#include "api_fixture.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/store/workers.hpp"

#include <future>
#include <set>
#include <thread>

using namespace api_test;
using namespace std::chrono_literals;

namespace {

class api_session : public api_fixture {};

TEST_F(api_session, sign_in_gives_an_http_only_strict_cookie_and_the_session_acts_as_the_token) {
  start();
  auto c = client();
  auto s = sign_in(c, "admin");
  const auto set = s.answer.header("set-cookie");
  EXPECT_EQ(set.rfind("certfleet_session=cs_", 0), 0u) << set;
  for (const char* attr : {"; Path=/", "; HttpOnly", "; SameSite=Strict", "; Max-Age=43200"})
    EXPECT_NE(set.find(attr), std::string::npos) << attr << " missing in " << set;
  EXPECT_EQ(set.find(tok["admin"]), std::string::npos);  // the cookie is not the token
  auto body = s.answer.json();
  EXPECT_EQ(body.at("role"), std::string("admin"));
  EXPECT_EQ(body.at("project"), std::string("default"));
  EXPECT_EQ(body.at("token_name"), std::string("admin"));
  EXPECT_EQ(body.at("system"), false);
  EXPECT_EQ(s.csrf.size(), 64u);
  EXPECT_EQ(s.answer.body.find(tok["admin"]), std::string::npos);
  // Stored hashed: the store finds the session by the hash of the value, not by the value.
  EXPECT_TRUE(run_sync(st->auth().find_session(api::hash_token(s.value), clock.now_ms())));
  EXPECT_FALSE(run_sync(st->auth().find_session(s.value, clock.now_ms())));

  auto again = c.request("GET", "/api/v1/session", {}, {}, with(s, false));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json().at("csrf_token"), s.csrf);
  EXPECT_EQ(again.json().at("expires_at"), body.at("expires_at"));
  // Reads with the cookie alone; a bearer token is no session.
  EXPECT_EQ(c.request("GET", jobs_path(), {}, {}, with(s, false)).status, 200);
  auto bearer = c.get("/api/v1/session", tok["admin"]);
  EXPECT_EQ(bearer.status, 401);
  EXPECT_EQ(error_field_of(bearer), "session");
  // The token's role decides: an admin may not read the settings.
  EXPECT_EQ(c.request("GET", "/api/v1/settings", {}, {}, with(s, false)).status, 403);
  // Another project's objects stay not found.
  EXPECT_EQ(c.request("GET", jobs_path("other"), {}, {}, with(s, false)).status, 404);
}

TEST_F(api_session, bad_sign_in_bodies_name_the_field_and_make_no_session) {
  start();
  auto c = client();
  struct bad {
    const char* body;
    int status;
    const char* field;
  };
  const bad cases[] = {
      {"", 400, "body"},
      {"{", 400, "body"},
      {"[]", 400, "body"},
      {"{}", 400, "token"},
      {R"({"token":5})", 400, "token"},
      {R"({"token":"cf_x","remember":true})", 400, "remember"},
      {R"({"token":"not-a-token"})", 401, "token"},
      {R"({"token":"cf_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})", 401, "token"},
  };
  for (const auto& b : cases) {
    auto r = c.post("/api/v1/session", b.body);
    EXPECT_EQ(r.status, b.status) << b.body << ": " << r.body;
    EXPECT_EQ(error_field_of(r), b.field) << b.body << ": " << r.body;
    EXPECT_TRUE(r.header("set-cookie").empty()) << b.body;
  }
  // A revoked token signs in no more, and its open sessions end with it.
  auto s = sign_in(c, "operator");
  ASSERT_TRUE(run_sync(st->auth().revoke_token(token_ids["operator"], clock.now_ms())));
  EXPECT_EQ(c.request("GET", jobs_path(), {}, {}, with(s, false)).status, 401);
  EXPECT_EQ(c.post("/api/v1/session", boost::json::serialize(boost::json::object{{"token", tok["operator"]}})).status, 401);
}

TEST_F(api_session, a_cookie_write_without_the_csrf_header_is_refused_and_changes_nothing) {
  start();
  auto c = client();
  auto s = sign_in(c, "admin");
  const auto before = count_jobs();
  auto no_header = c.request("POST", jobs_path(), R"({"type":"noop"})", {}, with(s, false));
  EXPECT_EQ(no_header.status, 403) << no_header.body;
  EXPECT_EQ(error_field_of(no_header), "csrf_token");
  auto wrong = with(s, true);
  wrong["X-CSRF-Token"] = std::string(64, 'a');
  EXPECT_EQ(c.request("POST", jobs_path(), R"({"type":"noop"})", {}, wrong).status, 403);
  // Another session's CSRF token is not this one's.
  auto other = sign_in(c, "admin");
  auto crossed = with(s, false);
  crossed["X-CSRF-Token"] = other.csrf;
  EXPECT_EQ(c.request("POST", jobs_path(), R"({"type":"noop"})", {}, crossed).status, 403);
  EXPECT_EQ(count_jobs(), before);
  auto dead = make_dead();
  EXPECT_EQ(c.request("POST", job_path(dead) + "/retry", {}, {}, with(s, false)).status, 403);
  EXPECT_EQ(run_sync(st->jobs().get(project_id, dead))->status, store::job_status::dead);
  // With the header, the same calls work.
  EXPECT_EQ(c.request("POST", jobs_path(), R"({"type":"noop"})", {}, with(s, true)).status, 201);
  EXPECT_EQ(count_jobs(), before + 2);  // the new job and the dead one
  EXPECT_EQ(c.request("POST", job_path(dead) + "/retry", {}, {}, with(s, true)).status, 200);
  // The refusal is audited, like any refused state change.
  auto audit = c.get("/api/v1/projects/default/audit", tok["admin"]).json();
  bool refused = false;
  for (const auto& e : audit.at("items").as_array())
    if (e.at("outcome") == std::string("forbidden") && e.at("action") == std::string("POST /api/v1/projects/{p}/jobs"))
      refused = true;
  EXPECT_TRUE(refused) << audit;
}

TEST_F(api_session, sign_out_ends_the_session_everywhere) {
  start();
  auto c = client();
  auto s = sign_in(c, "viewer");
  EXPECT_EQ(c.request("DELETE", "/api/v1/session", {}, {}, with(s, false)).status, 403);  // needs the CSRF token
  auto out = c.request("DELETE", "/api/v1/session", {}, {}, with(s, true));
  EXPECT_EQ(out.status, 204) << out.body;
  EXPECT_NE(out.header("set-cookie").find("certfleet_session=;"), std::string::npos) << out.header("set-cookie");
  EXPECT_NE(out.header("set-cookie").find("Max-Age=0"), std::string::npos);
  auto after = c.request("GET", "/api/v1/session", {}, {}, with(s, false));
  EXPECT_EQ(after.status, 401);
  EXPECT_EQ(error_field_of(after), "session");
  EXPECT_EQ(c.request("GET", jobs_path(), {}, {}, with(s, false)).status, 401);
}

TEST_F(api_session, an_expired_session_is_refused) {
  start();
  auto c = client();
  // A session made to expire in 300 ms (the API's shortest is ui_session_ttl_s = 300 s).
  const std::string value = "cs_expiring-session-value-for-the-test";
  ASSERT_TRUE(run_sync(st->auth().create_session(api::hash_token(value), token_ids["admin"], clock.now_ms() + 300,
                                                 clock.now_ms())));
  const std::map<std::string, std::string> h{{"Cookie", "certfleet_session=" + value}};
  EXPECT_EQ(c.request("GET", jobs_path(), {}, {}, h).status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto r = c.request("GET", jobs_path(), {}, {}, h);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("expired"), std::string::npos) << r.body;
  // The TTL is a setting with a range: out of it, refused with the field named, nothing stored.
  for (const char* bad : {"299", "2592001", "-1", "\"12h\""}) {
    auto put = c.put("/api/v1/settings", std::string(R"({"ui_session_ttl_s":)") + bad + "}", tok["system"]);
    EXPECT_EQ(put.status, 400) << bad << ": " << put.body;
    EXPECT_EQ(error_field_of(put), "ui_session_ttl_s") << bad;
  }
  ASSERT_EQ(c.put("/api/v1/settings", R"({"ui_session_ttl_s":300})", tok["system"]).status, 200);
  auto s = sign_in(c, "admin");
  EXPECT_NE(s.answer.header("set-cookie").find("Max-Age=300"), std::string::npos) << s.answer.header("set-cookie");
}

// The Settings page's descriptions come from the settings table: every system setting once, with
// its type, range or choices, default and doc; no process setting.
TEST_F(api_session, the_settings_schema_describes_every_system_setting) {
  start();
  auto c = client();
  auto r = c.get("/api/v1/settings/schema", tok["system"]);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto values = c.get("/api/v1/settings", tok["system"]).json().as_object();
  std::set<std::string> described;
  const auto schema = r.json();
  for (const auto& item : schema.at("items").as_array()) {
    const std::string name(item.at("name").as_string());
    EXPECT_TRUE(described.insert(name).second) << name;
    EXPECT_TRUE(values.contains(name)) << name << " is described but has no value";
    EXPECT_FALSE(item.at("doc").as_string().empty()) << name;
    if (item.at("type") == std::string("integer")) {
      EXPECT_LE(item.at("min").as_int64(), item.at("default").as_int64()) << name;
      EXPECT_GE(item.at("max").as_int64(), item.at("default").as_int64()) << name;
    }
    if (name == "ui_session_ttl_s") {
      EXPECT_EQ(item.at("min"), 300);
      EXPECT_EQ(item.at("max"), 2592000);
      EXPECT_EQ(item.at("default"), 43200);
    }
  }
  EXPECT_EQ(described.size(), values.size());
  EXPECT_TRUE(described.contains("ui_session_ttl_s"));
  EXPECT_FALSE(described.contains("listen"));  // a process setting: not the API's to show or change
}

TEST_F(api_session, the_log_websocket_takes_the_cookie_from_this_origin_only) {
  start();
  auto c = client();
  auto s = sign_in(c, "viewer");
  const auto target = job_path(enqueue()) + "/logs/stream";
  {
    testbed::ws_client ws("127.0.0.1", port);
    EXPECT_EQ(ws.connect(target, "", 0, {{"Cookie", s.cookie}, {"Origin", fmt::format("http://127.0.0.1:{}", port)}}), 101)
        << ws.rejection();
    ws.close();
  }
  {
    testbed::ws_client ws("127.0.0.1", port);
    EXPECT_EQ(ws.connect(target, "", 0, {{"Cookie", s.cookie}, {"Origin", "http://evil.example"}}), 403) << ws.rejection();
    EXPECT_NE(ws.rejection().find("origin"), std::string::npos) << ws.rejection();
  }
  {
    testbed::ws_client ws("127.0.0.1", port);
    EXPECT_EQ(ws.connect(target, "", 0, {{"Cookie", "certfleet_session=cs_forged"}}), 401);
  }
}

// The asset URL index.html points at ("/assets/<version>/main.js").
std::string asset_in(const std::string& html, const std::string& file) {
  auto end = html.find("/" + file + "\"");
  auto start = html.rfind("\"/assets/", end);
  if (end == std::string::npos || start == std::string::npos) return {};
  return html.substr(start + 1, end + file.size() + 1 - start - 1);
}

TEST_F(api_session, ui_pages_and_assets_carry_the_security_headers) {
  start();
  auto c = client();
  auto check_headers = [](const testbed::http_response& r, const std::string& what) {
    EXPECT_EQ(r.header("content-security-policy"), "default-src 'self'; frame-ancestors 'none'") << what;
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << what;
    EXPECT_EQ(r.header("referrer-policy"), "no-referrer") << what;
  };
  auto root = c.get("/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.header("location"), "/dashboard");
  for (const char* page : {"/jobs", "/jobs/0123456789abcdef01234567", "/distributions", "/distributions/x",
                           "/certificates", "/certificates/abc", "/settings", "/login"}) {
    auto r = c.get(page);
    EXPECT_EQ(r.status, 200) << page;
    EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8") << page;
    EXPECT_EQ(r.header("cache-control"), "no-store") << page;
    check_headers(r, page);
  }
  for (const char* unknown : {"/nope", "/jobs/a/b", "/settings/x", "/favicon.ico"}) {
    auto r = c.get(unknown);
    EXPECT_EQ(r.status, 404) << unknown;
    check_headers(r, unknown);
  }
  // /api/ stays JSON.
  auto api404 = c.get("/api/v1/nope");
  EXPECT_EQ(api404.status, 404);
  EXPECT_EQ(api404.header("content-type"), "application/json");
  // Assets: long-lived under their version; another version is not served.
  const auto html = c.get("/jobs").body;
  EXPECT_EQ(html.find("__ASSET_BASE__"), std::string::npos);
  const auto js = asset_in(html, "main.js");
  ASSERT_FALSE(js.empty()) << html;
  auto a = c.get(js);
  ASSERT_EQ(a.status, 200) << js;
  EXPECT_EQ(a.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(a.header("cache-control"), "public, max-age=31536000, immutable");
  check_headers(a, js);
  auto stale = js;
  stale.replace(std::string("/assets/").size(), 4, "zzzz");
  EXPECT_EQ(c.get(stale).status, 404);
  EXPECT_EQ(c.get(js.substr(0, js.rfind('/')) + "/index.html").status, 404);
  EXPECT_EQ(c.get(js.substr(0, js.rfind('/')) + "/../../api/v1/projects").status, 404);
  // Writes to UI paths: the page is there, not with that method (issue 28).
  auto w = c.post("/jobs", "");
  EXPECT_EQ(w.status, 405);
  EXPECT_EQ(w.header("allow"), "GET, HEAD");
  check_headers(w, "POST /jobs");
  EXPECT_EQ(c.post("/no/such/page", "").status, 404);
}

TEST_F(api_session, the_list_counts_every_tab_exactly_and_pages_by_cursor) {
  start();
  auto c = client();
  // 2 pending, 1 active, 1 completed, 1 dead, 1 cancelled; one more job in another project.
  enqueue();
  enqueue();
  auto active = make_active();
  finish(make_active(), store::finish_kind::completed);
  make_dead();
  auto to_cancel = enqueue();
  ASSERT_EQ(c.post(job_path(to_cancel) + "/cancel", "", tok["admin"]).status, 200);
  enqueue("{}", 0, other_id);
  auto page = c.get(jobs_path(), tok["viewer"]).json();
  const auto& n = page.at("counts");
  EXPECT_EQ(n.at("all"), 6);
  EXPECT_EQ(n.at("pending"), 2);
  EXPECT_EQ(n.at("active"), 1);
  EXPECT_EQ(n.at("completed"), 1);
  EXPECT_EQ(n.at("failed"), 0);
  EXPECT_EQ(n.at("dead"), 1);
  EXPECT_EQ(n.at("cancelled"), 1);
  EXPECT_EQ(page.at("total"), 6);
  // The counts follow the type filter; a status tab's total is its count.
  EXPECT_EQ(c.get(jobs_path() + "?type=other_type", tok["viewer"]).json().at("counts").at("all"), 0);
  EXPECT_EQ(c.get(jobs_path() + "?status=pending", tok["viewer"]).json().at("total"), 2);
  auto act = c.get(jobs_path() + "?status=active&type=noop", tok["viewer"]).json();
  ASSERT_EQ(act.at("items").as_array().size(), 1u);
  EXPECT_EQ(act.at("items").at(0).at("id"), active.id);
  // Cursor pages: every job once, newest first, then no cursor.
  std::vector<std::string> seen;
  std::string cursor;
  for (int guard = 0; guard < 10; ++guard) {
    auto p = c.get(jobs_path() + "?page_size=4" + (cursor.empty() ? "" : "&cursor=" + cursor), tok["viewer"]).json();
    for (const auto& j : p.at("items").as_array()) seen.emplace_back(j.at("id").as_string());
    if (p.at("next_cursor").is_null()) break;
    cursor = std::string(p.at("next_cursor").as_string());
  }
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 6u);
  EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend()));
  // page=N and the cursor agree.
  auto p2 = c.get(jobs_path() + "?page_size=4&page=2", tok["viewer"]).json();
  ASSERT_EQ(p2.at("items").as_array().size(), 2u);
  EXPECT_EQ(p2.at("items").at(0).at("id"), seen[4]);
  for (const char* bad : {"cursor=", "cursor=zz", "cursor=0123456789abcdef0123456g", "cursor=%27%20OR%201=1"}) {
    auto r = c.get(jobs_path() + "?" + bad, tok["viewer"]);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(error_field_of(r), "cursor") << bad;
  }
}

TEST_F(api_session, jobs_say_who_triggered_them_why_they_wait_and_what_their_error_means) {
  start();
  auto c = client();
  auto made = c.post(jobs_path(), R"({"type":"noop","run_at":"2100-01-01T00:00:00Z"})", tok["admin"]);
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(made.json().at("triggered_by_name"), std::string("admin"));
  const std::string id(made.json().at("id").as_string());
  auto j = c.get(job_path(id), tok["viewer"]).json();
  EXPECT_EQ(j.at("triggered_by_name"), std::string("admin"));
  const auto& w = j.at("waiting");
  EXPECT_EQ(w.at("lane"), std::string("main"));
  EXPECT_EQ(w.at("ready_at"), std::string("2100-01-01T00:00:00.000Z"));
  EXPECT_EQ(w.at("ready"), false);
  EXPECT_EQ(w.at("held"), false);
  EXPECT_TRUE(w.at("lane_concurrency").is_null());  // this test server runs no worker
  EXPECT_EQ(w.at("lane_active"), 0);
  // A dead job's error ("broken on purpose") has no hint; a lease loss has one.
  auto dead = c.get(job_path(make_dead()), tok["viewer"]).json();
  EXPECT_TRUE(dead.at("error_hint").is_null()) << dead;
  EXPECT_FALSE(dead.as_object().contains("waiting"));
  auto active = make_active();
  store::finish_request f;
  f.lease = {active.id, active.fence};
  f.worker_id = "test-w";
  f.kind = store::finish_kind::dead;
  f.error = "lost the job's lease while recording results";
  ASSERT_TRUE(run_sync(st->jobs().finish({f}, clock.now_ms())));
  auto lost = c.get(job_path(active.id), tok["viewer"]).json();
  EXPECT_EQ(lost.at("error_class"), std::string("lease_lost"));
  EXPECT_NE(std::string(lost.at("error_hint").as_string()).find("lease"), std::string::npos);
  EXPECT_TRUE(lost.at("error_code").is_null()) << lost;  // stored before codes: told by its words
  // A class stored with the error decides, whatever its words say; its code is shown.
  auto classed = make_active();
  f.lease = {classed.id, classed.fence};
  f.error = "the connection timed out";
  f.error_code = "invalid_argument";
  f.error_class = "msca_auth";
  ASSERT_TRUE(run_sync(st->jobs().finish({f}, clock.now_ms())));
  auto shown = c.get(job_path(classed.id), tok["viewer"]).json();
  EXPECT_EQ(shown.at("error_class"), std::string("msca_auth")) << shown;
  EXPECT_EQ(shown.at("error_code"), std::string("invalid_argument")) << shown;
  EXPECT_NE(std::string(shown.at("error_hint").as_string()).find("AD CS"), std::string::npos) << shown;
  // Classified when stored and no row fitted: no hint is guessed again from the words.
  auto unclassed = make_active();
  f.lease = {unclassed.id, unclassed.fence};
  f.error_class.clear();
  f.error_code = "store_failure";
  ASSERT_TRUE(run_sync(st->jobs().finish({f}, clock.now_ms())));
  auto plain = c.get(job_path(unclassed.id), tok["viewer"]).json();
  EXPECT_TRUE(plain.at("error_class").is_null()) << plain;
  EXPECT_TRUE(plain.at("error_hint").is_null()) << plain;
}

}  // namespace

namespace {

// Issue 28 (and 34): an active job whose lease ran out, or whose worker is dead, says so on its
// page whatever processes run; /readyz says when no worker is alive.
TEST_F(api_session, an_active_job_says_whether_its_lease_ran_out_and_whether_its_worker_lives) {
  start();
  auto c = client();
  // A worker of this host whose process is gone, holding a job whose lease has run out.
  store::worker_presence gone;
  gone.id = "vm:4000000:gone";
  gone.host = "vm";
  gone.host_key = queue::this_host().host_key;
  gone.pid = 4'000'000;  // above pid_max: never runs
  gone.proc_start = "1";
  gone.lanes = "main,dist";
  ASSERT_TRUE(run_sync(st->workers().beat(gone, clock.now_ms())));
  const auto held = enqueue("{}", 1);
  ASSERT_EQ(run_sync(st->jobs().claim("main", gone.id, clock.now_ms(), 1, 1))->size(), 1u);
  std::this_thread::sleep_for(20ms);
  auto j = c.get(job_path(held), tok["viewer"]).json();
  ASSERT_EQ(j.at("status"), std::string("active")) << j;
  const auto& lease = j.at("lease");
  EXPECT_EQ(lease.at("locked_by"), gone.id);
  EXPECT_EQ(lease.at("lease_expired"), true);
  EXPECT_EQ(lease.at("worker").at("alive"), false);
  EXPECT_NE(std::string(lease.at("worker").at("reason").as_string()).find("is gone"), std::string::npos) << lease;
  // A live lease of a worker the registry does not know: not expired, no verdict.
  auto fresh = make_active();
  auto f = c.get(job_path(fresh.id), tok["viewer"]).json();
  EXPECT_EQ(f.at("lease").at("lease_expired"), false);
  EXPECT_FALSE(f.at("lease").as_object().contains("worker"));

  // This API process's liveness watcher: it releases the dead worker's job and /readyz says no
  // worker is alive.
  queue::liveness_monitor watcher(ioc.get_executor(), *st, clock, queue::liveness_options{});
  on_loop([&] {
    srv->attach_liveness(&watcher);
    return 0;
  });
  std::promise<void> checked;
  asio::co_spawn(ioc, watcher.check_once(), [&](std::exception_ptr) { checked.set_value(); });
  checked.get_future().wait();
  auto ready = c.get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.json().at("workers_alive"), 0);
  EXPECT_NE(ready.body.find("no live worker"), std::string::npos) << ready.body;
  auto released = c.get(job_path(held), tok["viewer"]).json();
  EXPECT_EQ(released.at("status"), std::string("pending")) << released;
  auto workers = c.get("/api/v1/workers", tok["system"]);
  ASSERT_EQ(workers.status, 200) << workers.body;
  EXPECT_NE(workers.body.find("\"state\":\"dead\""), std::string::npos) << workers.body;
  EXPECT_NE(workers.body.find("\"released_jobs\":1"), std::string::npos) << workers.body;
  on_loop([&] {
    srv->attach_liveness(nullptr);
    return 0;
  });
}

}  // namespace
