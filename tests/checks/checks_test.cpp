// The checks of DESIGN §12 as jobs of a real certfleet process: revocation_check against a CRL
// served over HTTP by the testbed (the CRL made and signed in-process with OpenSSL), and
// domain_expiration_check against an RDAP server (the testbed's HTTP sink) and a WHOIS server
// (tests/testbed/registry_server.py), with notifications to a webhook sink.
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/checks/checks.hpp"
#include "dist_fixture.hpp"
#include "registry_server.hpp"
#include "run_sync.hpp"

#include <fstream>

namespace dist_test {
namespace {

using namespace certfleet;
constexpr std::int64_t day = 86'400'000;

json::value wait_job(dist_env& env, const std::string& id) {
  json::value j;
  for (int i = 0; i < 600; ++i) {
    j = env.ok("GET", "jobs/" + id);
    auto st = str(j, "status");
    if (st == "completed" || st == "dead" || st == "cancelled" || st == "failed") return j;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "job " << id << " did not finish: " << json::serialize(j);
  return j;
}

// The scheduler enqueues the hourly checks on its first cycle, right after start; one that runs
// after the test created its objects would do the test's work first (seen once in CI). Wait until
// the three have finished on the empty store.
void wait_for_startup_checks(dist_env& env) {
  const std::string q = "SELECT count(*) FROM jobs WHERE type IN ('certificate_expiration_check', "
                        "'revocation_check', 'domain_expiration_check') AND status = 'completed'";
  for (int i = 0; i < 600; ++i) {
    if (std::stoi(dist_test::sql(env, q)) >= 3) return;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "the scheduler's start-up checks did not finish";
}

// Enqueues a job of `type` and waits until it is terminal or waiting for a retry; returns it.
json::value run_job(dist_env& env, std::string_view type, const std::string& key, json::object payload = {}) {
  json::object body{{"type", type}, {"idempotency_key", key}};
  if (!payload.empty()) body["payload"] = std::move(payload);
  auto id = str(env.ok("POST", "jobs", json::serialize(body), 201), "id");
  return wait_job(env, id);
}

std::string log_text(dist_env& env, const std::string& job_id) {
  std::string out;
  auto page = env.ok("GET", "jobs/" + job_id + "/logs?after=0&limit=500");
  for (const auto& l : page.at("lines").as_array()) out += str(l, "message") + "\n";
  return out;
}

void notify_on(dist_env& env, testbed::webhook_sink& sink, std::string_view event) {
  auto channel = str(env.ok("POST", "notification-channels",
                            json::serialize(json::object{{"name", new_object_id()}, {"kind", "webhook"}, {"url", sink.url()}}),
                            201),
                     "id");
  env.ok("POST", "notification-rules", json::serialize(json::object{{"event", event}, {"channel_id", channel}}), 201);
}

TEST(revocation_check, a_certificate_in_its_crl_is_marked_revoked_and_notified_once) {
  dist_env env(0);
  env.start();
  wait_for_startup_checks(env);
  testbed::webhook_sink crl_server, hooks;
  env.set_settings({{"egress_allow_list", "127.0.0.1/32"}, {"check_allow_list", "127.0.0.1/32"}});
  notify_on(env, hooks, "certificate.revoked");

  auto ca = testbed::make_certificate({.common_name = "Check CA", .is_ca = true});
  const auto crl_url = crl_server.url("/ca.crl");
  auto good = testbed::make_certificate({.common_name = "good.test", .dns_sans = {"good.test"}, .issuer = &ca, .crl_url = crl_url});
  auto bad = testbed::make_certificate({.common_name = "bad.test", .dns_sans = {"bad.test"}, .issuer = &ca, .crl_url = crl_url});
  crl_server.serve("/ca.crl", {200, {{"Content-Type", "application/pkix-crl"}},
                               testbed::make_crl_der({.issuer = &ca, .revoked = {bad.cert_pem}})});
  auto good_id = env.create_certificate("good", good, ca.cert_pem);
  auto bad_id = env.create_certificate("bad", bad, ca.cert_pem);

  auto job = run_job(env, "revocation_check", "rev-1");
  EXPECT_EQ(str(job, "status"), "completed") << json::serialize(job);
  auto log = log_text(env, str(job, "id"));
  EXPECT_NE(log.find("REVOKED per crl"), std::string::npos) << log;

  auto b = env.ok("GET", "certificates/" + bad_id);
  EXPECT_EQ(str(b, "status"), "revoked") << json::serialize(b);
  EXPECT_EQ(str(b.at("revocation"), "source"), "crl");
  EXPECT_EQ(str(b.at("revocation"), "reason"), "keyCompromise");
  EXPECT_GT(time_of(b.at("revocation"), "revoked_at"), 0);
  EXPECT_EQ(str(b.at("revocation_check"), "status"), "revoked");
  auto g = env.ok("GET", "certificates/" + good_id);
  EXPECT_EQ(str(g, "status"), "active");
  EXPECT_EQ(str(g.at("revocation_check"), "status"), "good") << json::serialize(g);
  EXPECT_EQ(str(g.at("revocation_check"), "source"), "crl");
  EXPECT_GT(time_of(g.at("revocation_check"), "next_update"), testbed::unix_now_ms());

  ASSERT_TRUE(hooks.wait_for(1, 30s));
  auto ev = json::parse(hooks.requests().at(0).body);
  EXPECT_EQ(str(ev, "event"), "certificate.revoked");
  EXPECT_EQ(str(ev.at("data"), "certificate_id"), bad_id);
  EXPECT_EQ(str(ev.at("data"), "source"), "crl");

  // Again: the CRL comes from the cache (nextUpdate is a week away), nothing new is notified,
  // and the revoked certificate is not checked again.
  const auto fetched = crl_server.count();
  auto again = run_job(env, "revocation_check", "rev-2");
  EXPECT_EQ(str(again, "status"), "completed");
  EXPECT_EQ(crl_server.count(), fetched);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(hooks.count(), 1u);
  auto metrics = env.http->get("/metrics").body;
  EXPECT_NE(metrics.find("certfleet_certificates_revoked 1\n"), std::string::npos) << metrics;
}

TEST(revocation_check, an_unreachable_or_untrusted_crl_is_a_warning_never_a_revocation) {
  dist_env env(0);
  env.start();
  wait_for_startup_checks(env);
  testbed::webhook_sink crl_server;
  env.set_settings({{"check_allow_list", "127.0.0.1/32"}, {"check_fetch_timeout_s", 2}});
  auto ca = testbed::make_certificate({.common_name = "Check CA", .is_ca = true});
  auto other_ca = testbed::make_certificate({.common_name = "Check CA", .is_ca = true});  // same name, other key
  auto make_leaf = [&](std::string name, std::string url) {
    return testbed::make_certificate({.common_name = name, .dns_sans = {name}, .issuer = &ca, .crl_url = std::move(url)});
  };
  auto fine = make_leaf("fine.test", crl_server.url("/ca.crl"));
  auto closed = make_leaf("closed.test", "http://127.0.0.1:9/ca.crl");  // nothing listens on the discard port
  auto forged = make_leaf("forged.test", crl_server.url("/forged.crl"));
  auto stale = make_leaf("stale.test", crl_server.url("/stale.crl"));
  crl_server.serve("/ca.crl", {200, {{"Content-Type", "application/pkix-crl"}}, testbed::make_crl_der({.issuer = &ca})});
  // Signed by another key under the same name, listing the certificate: a forgery must not revoke it.
  crl_server.serve("/forged.crl", {200, {{"Content-Type", "application/pkix-crl"}},
                                   testbed::make_crl_der({.issuer = &other_ca, .revoked = {forged.cert_pem}})});
  const auto now = testbed::unix_now_ms();
  crl_server.serve("/stale.crl", {200, {{"Content-Type", "application/pkix-crl"}},
                                  testbed::make_crl_der({.issuer = &ca, .revoked = {stale.cert_pem},
                                                         .this_update_ms = now - 10 * day, .next_update_ms = now - day})});
  std::map<std::string, std::string> ids;
  for (auto& [name, c] : std::vector<std::pair<std::string, testbed::pem_cert*>>{
           {"fine", &fine}, {"closed", &closed}, {"forged", &forged}, {"stale", &stale}})
    ids[name] = env.create_certificate(name, *c, ca.cert_pem);

  auto job = run_job(env, "revocation_check", "rev-warn");
  // Some certificates could not be checked: partial, with the count, never failed or revoked.
  EXPECT_EQ(str(job, "status"), "completed") << json::serialize(job);
  EXPECT_EQ(str(job, "result_status"), "partial") << json::serialize(job);
  for (const auto& name : {"closed", "forged", "stale"}) {
    auto c = env.ok("GET", "certificates/" + ids[name]);
    EXPECT_EQ(str(c, "status"), "active") << name;
    EXPECT_EQ(str(c.at("revocation_check"), "status"), "error") << name << json::serialize(c);
  }
  auto detail = [&](const char* name) { return str(env.ok("GET", "certificates/" + ids[name]).at("revocation_check"), "detail"); };
  EXPECT_NE(detail("closed").find("http://127.0.0.1:9/ca.crl"), std::string::npos) << detail("closed");
  EXPECT_NE(detail("forged").find("signature"), std::string::npos) << detail("forged");
  EXPECT_NE(detail("stale").find("stale"), std::string::npos) << detail("stale");
  EXPECT_EQ(str(env.ok("GET", "certificates/" + ids["fine"]).at("revocation_check"), "status"), "good");
  auto log = log_text(env, str(job, "id"));
  EXPECT_NE(log.find("revocation not checked"), std::string::npos) << log;
  EXPECT_NE(log.find("could not be checked for 3 of 4 certificates"), std::string::npos) << log;
}

// ---- domains -------------------------------------------------------------------------------

std::string rdap_domain(const std::string& name, std::int64_t expires_ms) {
  json::array registrar_card{"vcard", json::array{json::array{"version", json::object{}, "text", "4.0"},
                                                  json::array{"fn", json::object{}, "text", "Example Registrar, Inc."}}};
  json::object registrar{{"objectClassName", "entity"}, {"roles", json::array{"registrar"}}, {"vcardArray", registrar_card}};
  json::array events{json::object{{"eventAction", "registration"}, {"eventDate", "2001-05-01T12:00:00Z"}},
                     json::object{{"eventAction", "expiration"}, {"eventDate", certfleet::json::time_value(expires_ms)}}};
  return json::serialize(json::object{{"objectClassName", "domain"},
                                      {"ldhName", name},
                                      {"status", json::array{"client transfer prohibited"}},
                                      {"events", std::move(events)},
                                      {"entities", json::array{std::move(registrar)}}});
}

TEST(domain_check, rdap_answers_are_stored_thresholds_notify_once_and_whois_answers_what_rdap_cannot) {
  testbed::temp_dir dir;
  testbed::webhook_sink rdap, hooks;
  const auto now = testbed::unix_now_ms();
  rdap.serve("/rdap/domain/soon.test", {200, {{"Content-Type", "application/rdap+json"}}, rdap_domain("soon.test", now + 20 * day)});
  rdap.serve("/rdap/domain/later.test", {200, {{"Content-Type", "application/rdap+json"}}, rdap_domain("later.test", now + 400 * day)});
  rdap.serve("/rdap/domain/gone.test", {404, {{"Content-Type", "application/rdap+json"}},
                                        R"({"errorCode":404,"title":"Not Found","description":["no such domain"]})"});
  // Only .test has an RDAP server; .whois is answered by WHOIS alone.
  const auto bootstrap = (dir.path() / "dns.json").string();
  // Spelled out as text: json::array{json::array{…}} is a copy, not a nesting, under clang.
  std::ofstream(bootstrap) << R"({"version":"1.0","publication":"2026-12-01T00:00:00Z","services":[[["test"],[")"
                           << rdap.url("/rdap/") << R"("]]]})";
  const auto whois_file = (dir.path() / "whois.txt").string();
  std::ofstream(whois_file) << "Domain Name: PARKED.WHOIS\r\nRegistrar: Whois Registrar Ltd\r\n"
                               "Registry Expiry Date: 2031-07-01T00:00:00Z\r\nDomain Status: ok https://icann.org/epp#ok\r\n";
  testbed::registry_server whois(dir, json::object{{"whois", json::object{{"registry", json::object{
                                                                 {"parked.whois", json::object{{"file", whois_file}}}}}}}});

  dist_env env(0);
  env.start("all", {"rdap_bootstrap_file=" + bootstrap});
  wait_for_startup_checks(env);
  env.set_settings({{"egress_allow_list", "127.0.0.1/32"},
                    {"check_allow_list", "127.0.0.1/32"},
                    {"domain_whois_server", fmt::format("127.0.0.1:{}", whois.whois_port("registry"))},
                    {"domain_expiry_thresholds_days", "60,30,7"}});
  notify_on(env, hooks, "domain.expiring");
  std::map<std::string, std::string> ids;
  for (const char* name : {"soon.test", "later.test", "gone.test", "parked.whois"})
    ids[name] = str(env.ok("POST", "domains", json::serialize(json::object{{"name", name}}), 201), "id");
  EXPECT_EQ(str(env.ok("GET", "domains/" + ids["soon.test"]), "state"), "unknown");

  auto job = run_job(env, "domain_expiration_check", "dom-1");
  EXPECT_EQ(str(job, "status"), "completed") << json::serialize(job);
  EXPECT_EQ(str(job, "result_status"), "partial") << json::serialize(job);  // gone.test: no such domain
  auto soon = env.ok("GET", "domains/" + ids["soon.test"]);
  EXPECT_EQ(str(soon, "state"), "expiring") << json::serialize(soon);
  EXPECT_EQ(str(soon, "source"), "rdap");
  EXPECT_EQ(str(soon, "registrar"), "Example Registrar, Inc.");
  EXPECT_NEAR(static_cast<double>(time_of(soon, "expires_at")), static_cast<double>(now + 20 * day), 2000.0);
  EXPECT_EQ(str(env.ok("GET", "domains/" + ids["later.test"]), "state"), "ok");
  auto parked = env.ok("GET", "domains/" + ids["parked.whois"]);
  EXPECT_EQ(str(parked, "source"), "whois") << json::serialize(parked);
  EXPECT_EQ(str(parked, "registrar"), "Whois Registrar Ltd");
  EXPECT_EQ(str(parked, "expires_at"), "2031-07-01T00:00:00.000Z");
  auto gone = env.ok("GET", "domains/" + ids["gone.test"]);
  EXPECT_EQ(str(gone, "state"), "error");
  EXPECT_NE(str(gone, "last_error").find("has no domain gone.test"), std::string::npos) << json::serialize(gone);

  // soon.test crossed 60 and 30: one notification, the tightest (30).
  ASSERT_TRUE(hooks.wait_for(1, 30s));
  auto ev = json::parse(hooks.requests().at(0).body);
  EXPECT_EQ(str(ev, "event"), "domain.expiring");
  EXPECT_EQ(str(ev.at("data"), "name"), "soon.test");
  EXPECT_EQ(num(ev.at("data"), "days_threshold"), 30);

  // "Check now" for one domain: only it is looked up, and nothing is notified twice. The two
  // requests share the minute's idempotency key: start them clear of a minute boundary (one pair
  // that straddled it made two jobs, a failure that had nothing to do with the code).
  {
    const auto ms_in_minute = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch()).count() % 60'000;
    if (ms_in_minute > 55'000) std::this_thread::sleep_for(std::chrono::milliseconds(60'500 - ms_in_minute));
  }
  const auto before = rdap.count();
  auto now_job = env.ok("POST", "domains/" + ids["soon.test"] + "/check", "", 202);
  auto again = env.ok("POST", "domains/" + ids["soon.test"] + "/check", "", 202);
  EXPECT_EQ(str(again, "job_id"), str(now_job, "job_id"));  // the same minute: the same job
  auto checked = wait_job(env, str(now_job, "job_id"));
  EXPECT_EQ(str(checked, "status"), "completed") << json::serialize(checked);
  EXPECT_EQ(rdap.count(), before + 1);
  std::this_thread::sleep_for(1s);
  EXPECT_EQ(hooks.count(), 1u);

  // Bad input names the field and changes nothing.
  auto bad = env.call("POST", "domains", R"({"name":"not a domain"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("\"name\""), std::string::npos) << bad.body;
  EXPECT_EQ(env.call("POST", "domains", R"({"name":"soon.test"})").status, 409);
  EXPECT_EQ(env.call("POST", "domains", R"({"name":"x.test","ttl":3})").status, 400);
  EXPECT_EQ(env.call("POST", "domains/" + new_object_id() + "/check").status, 404);
  EXPECT_EQ(env.call("POST", "jobs", R"({"type":"domain_expiration_check","payload":{"domain_id":"../x"}})").status, 400);
}

TEST(domain_plan, thresholds_are_crossed_once_and_a_renewal_starts_them_over) {
  const std::int64_t now = 1'000'000'000'000;
  std::vector<std::int64_t> th{60, 30, 7};
  checks::domain_doc d;
  auto s = checks::plan_domain_expiry(d, now + 20 * day, now, th);
  EXPECT_EQ(s.newly_crossed, (std::vector<std::int64_t>{60, 30}));
  EXPECT_EQ(s.notify_days, 30);
  d.expires_at = now + 20 * day;
  d.notified_days = s.newly_crossed;
  EXPECT_FALSE(checks::plan_domain_expiry(d, now + 20 * day, now, th).notify_days);
  EXPECT_EQ(checks::plan_domain_expiry(d, now + 20 * day, now + 14 * day, th).notify_days, 7);
  // Renewed for a year: nothing crossed, and the old thresholds are forgotten.
  auto renewed = checks::plan_domain_expiry(d, now + 385 * day, now, th);
  EXPECT_TRUE(renewed.renewed);
  EXPECT_TRUE(renewed.newly_crossed.empty());
  EXPECT_EQ(checks::domain_check_key(3'600'000 * 5 + 7), "domain_check:5");
  EXPECT_EQ(checks::revocation_check_key(3'600'000 * 5 + 7), "rev_check:5");
}

}  // namespace
}  // namespace dist_test
