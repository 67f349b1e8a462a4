// Notifications end to end with real parts: a certfleet process, an SMTP server with STARTTLS and
// AUTH (python3-aiosmtpd), an HTTPS sink standing in for Slack and Teams. A dead job is notified
// once to each channel, rendered for each kind (the mail parsed by Python's email package, the
// Slack and Teams payloads checked against their documented schema); delivery errors are
// classified (535 dead, a drop mid-DATA retried, 429 waits for Retry-After); a notification job
// that dies does not notify about itself; the test route answers what happened; bodies and
// templates are checked at creation; secrets never come back.
#include "dist_fixture.hpp"
#include "notify_schema.hpp"
#include "smtp_server.hpp"

#include <openssl/evp.h>

namespace dist_test {
namespace {

constexpr const char* smtp_user = "certfleet";
constexpr const char* smtp_password = "smtp-Pa55word-do-not-leak";
constexpr const char* slack_token_path = "/slack/services/T000/B000/s3cretSlackToken";
constexpr const char* teams_token_path = "/teams/workflows/abc/triggers/manual/paths/invoke?sig=s3cretTeamsSig";

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

std::string sha256_hex(std::string_view s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

// A certfleet process trusting the SMTP server's CA and the sink's certificate, egress to
// 127.0.0.1 allowed, links to a UI base URL.
class notify_env {
 public:
  explicit notify_env(testbed::smtp_server_options smtp_opts = {.user = smtp_user, .password = smtp_password},
                      std::optional<testbed::smtp_server_options> second = std::nullopt)
      : smtp(env.dir.path() / "smtp", smtp_opts) {
    if (second) smtp2 = std::make_unique<testbed::smtp_server>(env.dir.path() / "smtp2", *second);
    auto ca_file = env.dir.path() / "extra-ca.pem";
    write_file(ca_file, smtp.ca_pem() + (smtp2 ? smtp2->ca_pem() : std::string()) + sink.ca_pem());
    env.start("all", {}, {{"CERTFLEET_EXTRA_CA_FILE", ca_file.string()}});
    env.set_settings({{"egress_allow_list", "127.0.0.1"}, {"ui_base_url", "https://certfleet.example.com/"}});
  }

  std::string email_channel(const std::string& name, std::vector<std::string> to = {"ops@example.com", "oncall@example.com"},
                            std::string password = smtp_password, std::uint16_t port = 0) {
    json::array rcpt;
    for (auto& t : to) rcpt.emplace_back(t);
    json::object email{{"host", "127.0.0.1"},     {"port", port ? port : smtp.port()}, {"username", smtp_user},
                       {"password", password},    {"from", "certfleet@example.com"},   {"to", std::move(rcpt)}};
    return str(env.ok("POST", "notification-channels",
                      json::serialize(json::object{{"name", name}, {"kind", "email"}, {"email", std::move(email)}}), 201),
               "id");
  }
  std::string hook_channel(const std::string& name, const std::string& kind, const std::string& path) {
    return str(env.ok("POST", "notification-channels",
                      json::serialize(json::object{{"name", name}, {"kind", kind},
                                                   {kind, json::object{{"webhook_url", sink.url(path)}}}}),
                      201),
               "id");
  }
  void rule(const std::string& event, const std::string& channel, json::object tpl = {}) {
    json::object b{{"event", event}, {"channel_id", channel}};
    if (!tpl.empty()) b["template"] = std::move(tpl);
    env.ok("POST", "notification-rules", json::serialize(b), 201);
  }
  // A noop that fails for good at once: dead.
  std::string dead_job() {
    auto j = env.ok("POST", "jobs",
                    json::serialize(json::object{{"type", "noop"}, {"payload", json::object{{"fail_times", 1}, {"permanent", true}}}}),
                    201);
    auto id = str(j, "id");
    EXPECT_TRUE(wait_status(id, {"dead"})) << id;
    return id;
  }
  bool wait_status(const std::string& id, std::set<std::string> want, std::chrono::seconds timeout = 60s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      if (want.count(str(env.ok("GET", "jobs/" + id), "status"))) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  std::vector<json::object> notification_jobs() {
    auto page = env.ok("GET", "jobs?type=notification.send&page_size=100");
    std::vector<json::object> out;
    for (auto& j : page.at("items").as_array()) out.push_back(j.as_object());
    return out;
  }
  // Waits until `n` notification jobs exist and none is pending or active.
  std::vector<json::object> settled_notifications(std::size_t n, std::chrono::seconds timeout = 60s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    std::vector<json::object> jobs;
    while (std::chrono::steady_clock::now() < until) {
      jobs = notification_jobs();
      bool busy = std::any_of(jobs.begin(), jobs.end(), [](const json::object& j) {
        auto s = j.at("status").as_string();
        return s == "pending" || s == "active";
      });
      if (jobs.size() >= n && !busy) return jobs;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "notification jobs did not settle: " << jobs.size();
    return jobs;
  }
  json::object job(const std::string& id) { return env.ok("GET", "jobs/" + id).as_object(); }

  dist_env env{0};
  testbed::webhook_sink sink{true};
  testbed::smtp_server smtp;
  std::unique_ptr<testbed::smtp_server> smtp2;
};

TEST(notifications, a_dead_job_reaches_email_slack_and_teams_once_each_rendered_for_each) {
  notify_env n;
  auto mail = n.email_channel("ops-mail");
  auto slack = n.hook_channel("ops-slack", "slack", slack_token_path);
  auto teams = n.hook_channel("ops-teams", "teams", teams_token_path);
  n.rule("job.dead", mail, {{"subject", "[certfleet] {{type}} died in {{project}}"}});
  n.rule("job.dead", slack);
  n.rule("job.dead", teams);

  // Secrets are sealed: never in a view, only whether one is stored.
  for (const auto& id : {mail, slack, teams}) {
    auto body = n.env.call("GET", "notification-channels/" + id).body;
    EXPECT_EQ(body.find(smtp_password), std::string::npos) << body;
    EXPECT_EQ(body.find("s3cret"), std::string::npos) << body;
    EXPECT_NE(body.find(R"("secret_set":true)"), std::string::npos) << body;
  }
  auto list = n.env.call("GET", "notification-channels").body;
  EXPECT_EQ(list.find("s3cret"), std::string::npos) << list;
  EXPECT_EQ(list.find(smtp_password), std::string::npos);

  auto dead = n.dead_job();
  auto fence = n.job(dead).at("fence").as_int64();
  const std::string event_id = fmt::format("job.dead:{}:{}", dead, fence);
  ASSERT_TRUE(n.smtp.wait_for(1, 60s)) << n.smtp.log();
  ASSERT_TRUE(n.sink.wait_for(2, 60s));
  auto jobs = n.settled_notifications(3);
  ASSERT_EQ(jobs.size(), 3u);  // one per channel, not more
  for (const auto& j : jobs) {
    EXPECT_EQ(j.at("status"), "completed") << json::serialize(j);
    EXPECT_EQ(j.at("parent_job_id").as_string(), dead);
    EXPECT_EQ(j.at("triggered_by_name"), "dead job");
  }
  const std::string link = "https://certfleet.example.com/jobs/" + dead + "?project=default";

  // The email, as Python's email package reads it.
  ASSERT_EQ(n.smtp.count(), 1u);
  auto m = n.smtp.messages().at(0);
  EXPECT_TRUE(m.tls);
  EXPECT_TRUE(m.authenticated);
  EXPECT_EQ(m.mail_from, "certfleet@example.com");
  EXPECT_EQ(m.rcpt_tos, (std::vector<std::string>{"ops@example.com", "oncall@example.com"}));
  EXPECT_EQ(m.header("From"), "certfleet@example.com");
  EXPECT_EQ(m.header("To"), "ops@example.com, oncall@example.com");
  EXPECT_EQ(m.header("Subject"), "[certfleet] noop died in default");  // the rule's template
  EXPECT_EQ(m.header("X-Certfleet-Event-Id"), event_id);
  EXPECT_EQ(m.header("Message-ID"), "<certfleet." + sha256_hex(event_id).substr(0, 32) + "@example.com>");
  EXPECT_EQ(m.header("Auto-Submitted"), "auto-generated");
  EXPECT_EQ(m.content_type, "multipart/alternative");
  ASSERT_EQ(m.parts.size(), 2u);
  const auto* text = m.part_of("text/plain");
  const auto* html = m.part_of("text/html");
  ASSERT_TRUE(text && html);
  EXPECT_EQ(text->charset, "utf-8");
  EXPECT_NE(text->text.find("Job " + dead + " (noop) made 1 of 3 attempts"), std::string::npos) << text->text;
  EXPECT_NE(text->text.find("noop: failing on purpose"), std::string::npos);
  EXPECT_NE(text->text.find("Open in certfleet: " + link), std::string::npos) << text->text;
  EXPECT_NE(text->text.find("Event: " + event_id), std::string::npos);
  EXPECT_NE(html->text.find("<a href=\"" + link + "\">Open in certfleet</a>"), std::string::npos) << html->text;
  EXPECT_EQ(m.raw.find(smtp_password), std::string::npos);

  // Slack and Teams: each at its URL, each payload what its format documents.
  std::map<std::string, json::value> by_path;
  for (const auto& r : n.sink.requests()) {
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.header("content-type"), "application/json");
    EXPECT_EQ(r.header("x-certfleet-event-id"), event_id);
    by_path[r.target.substr(0, 6)] = json::parse(r.body);
  }
  ASSERT_TRUE(by_path.count("/slack") && by_path.count("/teams"));
  auto& s = by_path["/slack"];
  auto sp = notify_schema::slack_problems(s);
  EXPECT_TRUE(sp.empty()) << join(sp) << json::serialize(s);
  EXPECT_EQ(s.at("blocks").at(0).at("text").at("text"), "Job noop is dead");  // the default subject
  EXPECT_NE(json::serialize(s).find(link), std::string::npos);
  auto& t = by_path["/teams"];
  auto tp = notify_schema::teams_problems(t);
  EXPECT_TRUE(tp.empty()) << join(tp) << json::serialize(t);
  const auto& card = t.at("attachments").at(0).at("content");
  EXPECT_EQ(card.at("body").at(0).at("text"), "Job noop is dead");
  EXPECT_EQ(card.at("actions").at(0).at("url").as_string(), link);

  // Each channel's job log says where it went, and no log line holds a secret.
  for (const auto& j : jobs) {
    auto logs = n.env.call("GET", "jobs/" + std::string(j.at("id").as_string()) + "/logs").body;
    EXPECT_NE(logs.find("delivered to channel"), std::string::npos) << logs;
    EXPECT_EQ(logs.find("s3cret"), std::string::npos) << logs;
    EXPECT_EQ(logs.find(smtp_password), std::string::npos) << logs;
  }
}

TEST(notifications, a_notification_job_that_dies_does_not_notify_about_itself) {
  notify_env n;
  n.sink.set_default_status(404);  // "channel_not_found": final
  auto slack = n.hook_channel("gone", "slack", slack_token_path);
  n.rule("job.dead", slack);
  n.dead_job();
  auto jobs = n.settled_notifications(1);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].at("status"), "dead");
  EXPECT_NE(std::string(jobs[0].at("error").as_string()).find("answered HTTP 404"), std::string::npos) << json::serialize(jobs[0]);
  // Its death committed with whatever it fired: a job.dead about it would exist by now.
  EXPECT_EQ(n.notification_jobs().size(), 1u);
  EXPECT_EQ(n.sink.count(), 1u);
}

TEST(notifications, smtp_errors_are_classified_535_dead_a_drop_mid_data_retried) {
  notify_env n({.user = smtp_user, .password = smtp_password},
               testbed::smtp_server_options{.user = smtp_user, .password = smtp_password, .drop_data = true});
  auto& dropping = *n.smtp2;

  auto wrong = n.email_channel("wrong-password", {"ops@example.com"}, "not-the-password-42");
  auto drops = n.email_channel("drops", {"ops@example.com"}, smtp_password, dropping.port());
  n.rule("job.dead", wrong);
  n.rule("job.dead", drops);
  n.dead_job();
  auto jobs = n.settled_notifications(2);
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& j : jobs) {
    auto err = std::string(j.at("error").as_string());
    EXPECT_EQ(err.find("not-the-password-42"), std::string::npos) << err;
    // " with 535": the server's reply; a bare "535" can be part of the port (127.0.0.1:45351).
    if (err.find(" with 535") != std::string::npos) {
      EXPECT_EQ(j.at("status"), "dead") << json::serialize(j);  // a wrong password is not fixed by waiting
      EXPECT_EQ(j.at("attempts"), 1);
    } else {
      EXPECT_EQ(j.at("status"), "failed") << json::serialize(j);  // the queue tries again
      EXPECT_NE(err.find("broke while"), std::string::npos) << err;
    }
  }
  EXPECT_EQ(n.smtp.count(), 0u);
  EXPECT_EQ(dropping.count(), 0u);
}

TEST(notifications, a_429_makes_the_next_attempt_wait_for_retry_after) {
  notify_env n;
  n.sink.respond_with(429, 1, "600");
  auto teams = n.hook_channel("busy", "teams", teams_token_path);
  n.rule("job.dead", teams);
  n.dead_job();
  auto jobs = n.settled_notifications(1);
  ASSERT_EQ(jobs.size(), 1u);
  auto j = n.job(std::string(jobs[0].at("id").as_string()));
  EXPECT_EQ(j.at("status"), "failed") << json::serialize(j);
  EXPECT_NE(std::string(j.at("error").as_string()).find("rate limited: Retry-After 600 s"), std::string::npos)
      << json::serialize(j);
  // The backoff alone would be 30 s: the next attempt is at least the 600 s the receiver asked for.
  auto parse_ms = [](const json::value& v) {
    if (v.is_int64()) return v.as_int64();
    std::tm tm{};
    std::string s(v.as_string());
    strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
    return static_cast<std::int64_t>(timegm(&tm)) * 1000;
  };
  auto run_at = parse_ms(j.at("run_at"));
  auto started = parse_ms(j.at("started_at"));
  EXPECT_GE(run_at - started, 595'000) << json::serialize(j);
  EXPECT_LE(run_at - started, 700'000) << json::serialize(j);
}

TEST(notifications, the_test_route_answers_what_happened_without_secrets) {
  notify_env n({.user = smtp_user, .password = smtp_password, .refuse_rcpt_suffix = "@nowhere.example"});
  auto good = n.email_channel("good");
  auto test = [&](const std::string& id) {
    auto r = n.env.call("POST", "notification-channels/" + id + "/test");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body.find(smtp_password), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("s3cret"), std::string::npos) << r.body;
    return r.json();
  };
  auto ok = test(good);
  EXPECT_EQ(ok.at("delivered"), true) << json::serialize(ok);
  EXPECT_EQ(ok.at("kind"), "email");
  EXPECT_EQ(std::string(ok.at("reply").as_string()).rfind("250 2.0.0 Ok", 0), 0u) << json::serialize(ok);
  ASSERT_TRUE(n.smtp.wait_for(1, 10s));
  auto m = n.smtp.messages().at(0);
  EXPECT_EQ(m.header("Subject"), "certfleet test message for channel good");
  EXPECT_EQ(m.header("X-Certfleet-Event-Id"), std::string(ok.at("event_id").as_string()));

  auto wrong = n.email_channel("wrong", {"ops@example.com"}, "wrong-Password-77");
  auto auth = test(wrong);
  EXPECT_EQ(auth.at("delivered"), false);
  EXPECT_EQ(auth.at("error_class"), "auth");
  EXPECT_EQ(auth.at("retryable"), false);
  EXPECT_EQ(std::string(auth.at("reply").as_string()).rfind("535 ", 0), 0u) << json::serialize(auth);
  EXPECT_EQ(json::serialize(auth).find("wrong-Password-77"), std::string::npos);

  auto refused = n.email_channel("refused", {"ghost@nowhere.example"});
  auto r550 = test(refused);
  EXPECT_EQ(r550.at("error_class"), "validation");
  EXPECT_NE(std::string(r550.at("error").as_string()).find("refused the recipient ghost@nowhere.example: 550"),
            std::string::npos)
      << json::serialize(r550);

  n.sink.respond_with(429, 1, "42");
  auto slack = n.hook_channel("limited", "slack", slack_token_path);
  auto limited = test(slack);
  EXPECT_EQ(limited.at("delivered"), false);
  EXPECT_EQ(limited.at("http_status"), 429);
  EXPECT_EQ(limited.at("retry_after_s"), 42);
  EXPECT_EQ(limited.at("retryable"), true);
  auto delivered = test(slack);  // the sink answers 200 again
  EXPECT_EQ(delivered.at("delivered"), true);
  auto sp = notify_schema::slack_problems(json::parse(n.sink.requests().back().body));
  EXPECT_TRUE(sp.empty()) << join(sp);

  // Egress refusal: nothing is contacted, the answer says why.
  n.env.set_settings({{"egress_allow_list", "10.0.0.0/8"}});
  auto before = n.smtp.count();
  auto refused_egress = test(good);
  EXPECT_EQ(refused_egress.at("delivered"), false);
  EXPECT_EQ(refused_egress.at("error_class"), "validation");
  EXPECT_EQ(refused_egress.at("error"), "egress_allow_list does not allow 127.0.0.1");
  EXPECT_EQ(n.smtp.count(), before);

  EXPECT_EQ(n.env.call("POST", "notification-channels/6b0e8f0c1a2b3c4d5e6f7081/test").status, 404);
  // Audited.
  auto audit = n.env.call("GET", "audit").body;
  EXPECT_NE(audit.find("notification_channel.test"), std::string::npos) << audit.substr(0, 2000);
}

TEST(notifications, channel_and_rule_bodies_are_checked_naming_the_field) {
  dist_env env(0);
  env.start();
  auto refused = [&](const std::string& path, json::object body, const std::string& field, const std::string& words) {
    auto r = env.call("POST", path, json::serialize(body));
    EXPECT_EQ(r.status, 400) << r.body;
    auto e = r.json().at("error");
    EXPECT_EQ(str(e, "field"), field) << r.body;
    EXPECT_NE(str(e, "message").find(words), std::string::npos) << r.body;
  };
  json::object email{{"host", "smtp.example.com"}, {"from", "a@example.com"}, {"to", json::array{"b@example.com"}}};
  auto with = [&](json::object base, std::string_view k, json::value v) {
    base[k] = std::move(v);
    return json::object{{"name", "m"}, {"kind", "email"}, {"email", std::move(base)}};
  };
  refused("notification-channels", with(email, "starttls", false), "email.starttls", "only for a relay on this host");
  refused("notification-channels", with(email, "from", "Ops <a@example.com>"), "email.from", "plain address");
  refused("notification-channels", with(email, "to", json::array{}), "email.to", "non-empty array");
  refused("notification-channels", with(email, "username", "u"), "email.password", "required with email.username");
  refused("notification-channels", with(email, "port", 70000), "email.port", "1 to 65535");
  refused("notification-channels", with(email, "colour", "red"), "email.colour", "unknown field");
  refused("notification-channels", {{"name", "s"}, {"kind", "slack"}, {"slack", json::object{{"webhook_url", "http://hooks.example/x"}}}},
          "slack.webhook_url", "must be https://");
  refused("notification-channels", {{"name", "s"}, {"kind", "teams"}}, "teams", "teams must be an object");
  refused("notification-channels", {{"name", "s"}, {"kind", "pager"}}, "kind", "\"webhook\", \"email\", \"slack\" or \"teams\"");
  // Accepted: starttls off for a relay on this host.
  env.ok("POST", "notification-channels", json::serialize(with(with(email, "host", "127.0.0.1").at("email").as_object(), "starttls", false)), 201);

  auto hook = str(env.ok("POST", "notification-channels",
                         json::serialize(json::object{{"name", "hook"}, {"kind", "webhook"}, {"url", "https://hooks.example/x"}}), 201),
                  "id");
  auto mail = str(env.ok("POST", "notification-channels",
                         json::serialize(json::object{{"name", "mail"}, {"kind", "email"}, {"email", email}}), 201),
                  "id");
  refused("notification-rules",
          {{"event", "certificate.expiring"}, {"channel_id", mail}, {"template", json::object{{"body", "{{name}} {{colour}}"}}}},
          "template.body", "unknown placeholder {{colour}} in template.body");
  refused("notification-rules", {{"event", "job.dead"}, {"channel_id", mail}, {"template", json::object{{"subject", "{{type"}}}},
          "template.subject", "never closed");
  refused("notification-rules", {{"event", "job.dead"}, {"channel_id", hook}, {"template", json::object{{"subject", "{{type}}"}}}},
          "template", "webhook channel");
  refused("notification-rules", {{"event", "job.exploded"}, {"channel_id", mail}}, "event", "event must be one of");
  auto rule = env.ok("POST", "notification-rules",
                     json::serialize(json::object{{"event", "job.dead"}, {"channel_id", mail},
                                                  {"template", json::object{{"subject", "{{type}} died"}}}}),
                     201);
  EXPECT_EQ(rule.at("template").at("subject"), "{{type}} died");
  // Nothing refused was stored.
  EXPECT_EQ(env.ok("GET", "notification-channels").at("total"), 3);
  EXPECT_EQ(env.ok("GET", "notification-rules").at("total"), 1);
}

}  // namespace
}  // namespace dist_test
