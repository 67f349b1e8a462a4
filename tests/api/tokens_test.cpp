// A project's tokens over the API (issue 35 §3): create with a role up to the caller's and an
// expiry, list without secrets, last use to the minute, revoke; expired tokens refused with a
// clear 401 and pruned by the retention sweep's store call. The real server on 127.0.0.1 over a
// SQLite file.
#include "api_fixture.hpp"
#include "certfleet/store/maintenance.hpp"

using namespace api_test;

namespace {

class api_tokens : public api_fixture {
 public:
  const std::string tokens = "/api/v1/projects/default/tokens";

  std::vector<store::token_record> stored(const std::string& pid) {
    auto r = run_sync(st->auth().list_tokens(pid));
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : std::vector<store::token_record>{};
  }
  std::optional<store::token_record> stored_by_id(const std::string& id) {
    for (auto& t : stored(""))
      if (t.id == id) return t;
    return std::nullopt;
  }
};

TEST_F(api_tokens, an_admin_creates_a_token_that_works_at_once_and_whose_text_is_never_shown_again) {
  start();
  auto c = client();
  const auto before = clock.now_ms();
  auto made = c.post(tokens, R"({"name":"ci-deploy","role":"operator","ttl_s":3600})", tok["admin"]);
  ASSERT_EQ(made.status, 201) << made.body;
  auto j = made.json().as_object();
  const std::string text(j.at("token").as_string());
  const std::string id(j.at("id").as_string());
  EXPECT_EQ(j.at("role"), "operator");
  EXPECT_EQ(j.at("status"), "active");
  EXPECT_EQ(j.at("created_by"), "token:" + token_ids["admin"]);
  EXPECT_TRUE(j.at("last_used_at").is_null());
  auto rec = stored_by_id(id);
  ASSERT_TRUE(rec);
  EXPECT_GE(rec->expires_at, before + 3'600'000);
  EXPECT_LE(rec->expires_at, clock.now_ms() + 3'600'000);
  EXPECT_EQ(rec->project_id, project_id);

  // It works, as an operator of this project only.
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", text).status, 200);
  EXPECT_EQ(c.post("/api/v1/projects/default/jobs", R"({"type":"noop"})", text).status, 403);
  EXPECT_EQ(c.get("/api/v1/projects/other/jobs", text).status, 404);

  // The listing: newest first, the new one with its last use; never a text or hash.
  auto list = c.get(tokens, tok["admin"]);
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.body.find(text), std::string::npos);
  EXPECT_EQ(list.body.find(text.substr(3)), std::string::npos);
  EXPECT_EQ(list.body.find("\"hash\""), std::string::npos);
  EXPECT_EQ(list.body.find("\"token\""), std::string::npos);
  const auto answer = list.json();
  const auto& items = answer.at("items").as_array();
  ASSERT_EQ(items.front().at("id"), id);
  EXPECT_TRUE(items.front().at("last_used_at").is_string()) << list.body;
  // Only this project's tokens (the fixture made four here; the foreign and system ones are not).
  for (const auto& t : items) EXPECT_EQ(t.at("project_id"), project_id);
  EXPECT_EQ(items.size(), 5u);

  // Audited, with who made it.
  auto audit = c.get("/api/v1/projects/default/audit", tok["owner"]);
  EXPECT_NE(audit.body.find("token.create"), std::string::npos);
  EXPECT_NE(audit.body.find("token/" + id), std::string::npos);
}

TEST_F(api_tokens, roles_up_to_the_callers_own_an_owner_or_system_admin_above) {
  start();
  auto c = client();
  auto owner_by_admin = c.post(tokens, R"({"name":"x","role":"owner"})", tok["admin"]);
  EXPECT_EQ(owner_by_admin.status, 403) << owner_by_admin.body;
  EXPECT_NE(owner_by_admin.body.find("\"field\":\"role\""), std::string::npos) << owner_by_admin.body;
  EXPECT_EQ(c.post(tokens, R"({"name":"x","role":"admin"})", tok["admin"]).status, 201);
  EXPECT_EQ(c.post(tokens, R"({"name":"x","role":"owner"})", tok["owner"]).status, 201);
  auto by_system = c.post(tokens, R"({"name":"x","role":"owner","ttl_s":0})", tok["system"]);
  ASSERT_EQ(by_system.status, 201) << by_system.body;
  EXPECT_TRUE(by_system.json().at("expires_at").is_null());
  EXPECT_EQ(by_system.json().at("system"), false);  // the API never makes system tokens

  // Revoking: an admin may not end an owner's token, nor anyone but a system admin a system token.
  auto refused = c.request("DELETE", tokens + "/" + token_ids["owner"], {}, tok["admin"]);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", tok["owner"]).status, 200) << "still active";
  // The system token lives in `other`: from `default` it does not exist.
  EXPECT_EQ(c.request("DELETE", tokens + "/" + token_ids["system"], {}, tok["owner"]).status, 404);
  EXPECT_EQ(c.request("DELETE", "/api/v1/projects/other/tokens/" + token_ids["system"], {}, tok["foreign"]).status, 403);
}

TEST_F(api_tokens, bad_bodies_name_the_field_and_create_nothing) {
  start();
  auto c = client();
  const auto n = stored("").size();
  struct bad {
    std::string body, field;
  };
  for (const auto& b : std::vector<bad>{{R"({"role":"viewer"})", "name"},
                                        {R"({"name":"","role":"viewer"})", "name"},
                                        {R"({"name":")" + std::string(101, 'a') + R"(","role":"viewer"})", "name"},
                                        {R"({"name":"a\u0007b","role":"viewer"})", "name"},
                                        {R"({"name":"x"})", "role"},
                                        {R"({"name":"x","role":"root"})", "role"},
                                        {R"({"name":"x","role":"viewer","ttl_s":59})", "ttl_s"},
                                        {R"({"name":"x","role":"viewer","ttl_s":-1})", "ttl_s"},
                                        {R"({"name":"x","role":"viewer","ttl_s":99999999999})", "ttl_s"},
                                        {R"({"name":"x","role":"viewer","ttl_s":"1h"})", "ttl_s"},
                                        {R"({"name":"x","role":"viewer","system":true})", "system"},
                                        {R"([])", "body"},
                                        {R"({"name":)", "body"}}) {
    auto r = c.post(tokens, b.body, tok["owner"]);
    EXPECT_EQ(r.status, 400) << b.body << " -> " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + b.field + "\""), std::string::npos) << b.body << " -> " << r.body;
  }
  EXPECT_EQ(stored("").size(), n);
}

TEST_F(api_tokens, a_token_cannot_make_one_that_outlives_it) {
  auto short_lived = run_sync(api::issue_token(st->auth(), project_id, store::role::admin, false, "short", "test", clock,
                                               false, clock.now_ms() + 600'000));
  ASSERT_TRUE(short_lived);
  const auto text = (*short_lived)->text;
  start();
  auto c = client();
  for (const auto* body : {R"({"name":"x","role":"viewer"})", R"({"name":"x","role":"viewer","ttl_s":0})",
                           R"({"name":"x","role":"viewer","ttl_s":3600})"}) {
    auto r = c.post(tokens, body, text);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"ttl_s\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("outlive"), std::string::npos) << r.body;
  }
  EXPECT_EQ(c.post(tokens, R"({"name":"x","role":"viewer","ttl_s":300})", text).status, 201);
}

TEST_F(api_tokens, an_expired_token_and_its_sessions_are_refused_with_a_clear_401_and_listed_as_expired) {
  auto soon = run_sync(api::issue_token(st->auth(), project_id, store::role::admin, false, "nightly", "test", clock,
                                        false, clock.now_ms() + 1500));
  ASSERT_TRUE(soon);
  const auto text = (*soon)->text;
  start();
  auto c = client();
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", text).status, 200);
  auto session = sign_in(c, "owner");  // a second client signs in with the short-lived token below
  ASSERT_EQ(session.answer.status, 201);
  auto c2 = client();
  auto signed_in = c2.post("/api/v1/session", R"({"token":")" + text + R"("})");
  ASSERT_EQ(signed_in.status, 201) << signed_in.body;
  auto set = signed_in.header("set-cookie");
  const std::string cookie = set.substr(0, set.find(';'));
  EXPECT_EQ(c2.request("GET", "/api/v1/session", {}, {}, {{"Cookie", cookie}}).status, 200);

  std::this_thread::sleep_for(std::chrono::milliseconds(1600));
  auto r = c.get("/api/v1/projects/default/jobs", text);
  EXPECT_EQ(r.status, 401) << r.body;
  EXPECT_NE(r.body.find("expired at"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("nightly"), std::string::npos) << r.body;
  auto by_session = c2.request("GET", "/api/v1/session", {}, {}, {{"Cookie", cookie}});
  EXPECT_EQ(by_session.status, 401) << by_session.body;
  EXPECT_NE(by_session.body.find("expired at"), std::string::npos) << by_session.body;

  auto list = c.get(tokens, tok["owner"]);
  ASSERT_EQ(list.status, 200);
  bool seen = false;
  const auto answer = list.json();
  for (const auto& t : answer.at("items").as_array())
    if (t.at("id") == (*soon)->record.id) {
      seen = true;
      EXPECT_EQ(t.at("status"), "expired");
    }
  EXPECT_TRUE(seen);
}

TEST_F(api_tokens, revoking_ends_the_token_and_its_sessions_at_once_and_again_is_a_conflict) {
  start();
  auto c = client();
  auto made = c.post(tokens, R"({"name":"rotate-me","role":"viewer"})", tok["admin"]);
  ASSERT_EQ(made.status, 201);
  const std::string text(made.json().at("token").as_string());
  const std::string id(made.json().at("id").as_string());
  // Rotation: a new one first, then the old one revoked.
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", text).status, 200);
  auto revoked = c.request("DELETE", tokens + "/" + id, {}, tok["admin"]);
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(revoked.json().at("status"), "revoked");
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", text).status, 401);
  EXPECT_EQ(c.request("DELETE", tokens + "/" + id, {}, tok["admin"]).status, 409);
  // Another project's token: 404, as if it did not exist.
  EXPECT_EQ(c.request("DELETE", tokens + "/" + token_ids["foreign"], {}, tok["owner"]).status, 404);
  EXPECT_EQ(c.get("/api/v1/projects/other/jobs", tok["foreign"]).status, 200);
}

TEST_F(api_tokens, a_use_is_written_at_most_once_a_minute) {
  start();
  auto c = client();
  ASSERT_EQ(c.get("/api/v1/projects/default/jobs", tok["viewer"]).status, 200);
  auto first = stored_by_id(token_ids["viewer"]);
  ASSERT_TRUE(first && first->last_used_at > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (int i = 0; i < 5; ++i) ASSERT_EQ(c.get("/api/v1/projects/default/jobs", tok["viewer"]).status, 200);
  EXPECT_EQ(stored_by_id(token_ids["viewer"])->last_used_at, first->last_used_at);

  // The store's rule, across processes: unset or older than the interval.
  const auto t = first->last_used_at;
  ASSERT_TRUE(run_sync(st->auth().touch_token(token_ids["viewer"], t + 30'000, 60'000)));
  EXPECT_EQ(stored_by_id(token_ids["viewer"])->last_used_at, t);
  ASSERT_TRUE(run_sync(st->auth().touch_token(token_ids["viewer"], t + 60'000, 60'000)));
  EXPECT_EQ(stored_by_id(token_ids["viewer"])->last_used_at, t + 60'000);
}

TEST_F(api_tokens, the_retention_sweep_deletes_tokens_expired_before_the_cutoff_with_their_sessions) {
  const auto now = clock.now_ms();
  auto old = run_sync(api::issue_token(st->auth(), project_id, store::role::viewer, false, "old", "test", clock, false,
                                       now - 10'000));
  auto recent = run_sync(api::issue_token(st->auth(), project_id, store::role::viewer, false, "recent", "test", clock,
                                          false, now - 10));
  ASSERT_TRUE(old && recent);
  ASSERT_TRUE(run_sync(st->auth().create_session(std::string(64, 'a'), (*old)->record.id, now + 60'000, now)));
  const auto before = stored("").size();
  auto n = run_sync(st->maintenance().purge_expired_tokens(now - 5'000, 100));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(stored("").size(), before - 1);
  EXPECT_FALSE(stored_by_id((*old)->record.id));
  EXPECT_TRUE(stored_by_id((*recent)->record.id));
  EXPECT_TRUE(stored_by_id(token_ids["owner"])) << "tokens without an expiry stay";
  EXPECT_FALSE(run_sync(st->auth().find_session(std::string(64, 'a'), now)));
  EXPECT_EQ(*run_sync(st->maintenance().purge_expired_tokens(now - 5'000, 100)), 0);
}

}  // namespace
