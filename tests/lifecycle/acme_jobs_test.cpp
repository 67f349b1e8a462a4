// ACME certificates end to end (DESIGN §9) through a real certfleet process: a real pebble 2.4
// validating DNS-01 against a real knot that certfleet updates with TSIG-signed RFC 2136 UPDATEs;
// the issued version stored, renewed (by the route and by the scheduler's renewal sweep), and the
// new version delivered by the certificate's auto_execute distribution to a real sshd target.
// The CA's refusals, a TSIG key knot rejects, and bad API bodies end clearly, naming the cause.
#include "answer_times.hpp"
#include "dist_fixture.hpp"
#include "certfleet/acme/client.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/core/clock.hpp"
#include "knot.hpp"
#include "pdns.hpp"
#include "pebble.hpp"
#include "temp_dir.hpp"
#include "run_sync.hpp"

#include <fmt/ranges.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <unistd.h>

#include <functional>
#include <set>

namespace dist_test {
namespace {

using testbed::chains_to;

class acme_env {
 public:
  explicit acme_env(testbed::pebble_options po = {}, std::vector<std::string> sets = {},
                    std::map<std::string, std::string> environment = {}, testbed::knot_options ko = {})
      : env(1) {
    knot = std::make_unique<testbed::knot>(env.dir.path() / "knot", std::move(ko));
    if (po.dns_server.empty()) po.dns_server = knot->server();  // a test may have pebble ask another server
    ca = std::make_unique<testbed::pebble>(env.dir.path() / "pebble", std::move(po));
    env.start("all", std::move(sets), std::move(environment));
    // The zone's NS (ns1.example.test → 127.0.0.1) answers on knot's port, not 53. A manual
    // provider without check_server finds the zone through knot, never the host's resolver.
    // pebble, knot and the scripted CAs listen on 127.0.0.1: acme_allow_list reaches loopback only
    // when it lists it.
    env.set_settings(json::object{{"acme_dns_nameserver_port", knot->port()},
                                  {"acme_dns_propagation_timeout_s", 60},
                                  {"acme_dns_resolver", knot->server()},
                                  {"acme_allow_list", "127.0.0.1"}});
  }
  ~acme_env() {
    if (::testing::Test::HasFailure()) {
      auto log = ca->log();
      std::cerr << "pebble log tail:\n" << (log.size() > 4000 ? log.substr(log.size() - 4000) : log) << "\n";
    }
  }

  json::object account_body(const std::string& name) const {
    return json::object{{"name", name},
                        {"directory_url", ca->directory_url()},
                        {"contact_email", "ops@example.org"},
                        {"terms_agreed", true},
                        {"ca_bundle_pem", ca->tls_ca_pem()}};
  }
  json::object provider_body(const std::string& name, const std::string& secret = {}) const {
    return json::object{{"name", name},
                        {"kind", "rfc2136"},
                        {"rfc2136", json::object{{"server", knot->server()},
                                                 {"zone", knot->zone()},
                                                 {"tsig_key_name", knot->key_name()},
                                                 {"tsig_algorithm", "hmac-sha256"},
                                                 {"tsig_secret", secret.empty() ? knot->secret_base64() : secret}}}};
  }
  std::string create(const std::string& path, const json::object& body) {
    return str(env.ok("POST", path, json::serialize(body), 201), "id");
  }
  // POST …/certificates/issue → {certificate_id, job_id}.
  std::pair<std::string, std::string> issue(const std::string& name, const std::vector<std::string>& domains,
                                            const std::string& account, const std::string& provider) {
    json::array ds;
    for (const auto& d : domains) ds.emplace_back(d);
    auto r = env.ok("POST", "certificates/issue",
                    json::serialize(json::object{{"name", name}, {"domains", std::move(ds)}, {"acme_account_id", account},
                                                 {"dns_provider_id", provider}}),
                    202);
    return {str(r, "certificate_id"), str(r, "job_id")};
  }
  // Polls the job until it is terminal (completed, dead, cancelled).
  json::value wait_job(const std::string& id, std::chrono::seconds timeout = 180s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    json::value j;
    while (std::chrono::steady_clock::now() < until) {
      j = env.call("GET", "jobs/" + id).json();
      auto s = str(j, "status");
      if (s == "completed" || s == "dead" || s == "cancelled") return j;
      std::this_thread::sleep_for(200ms);
    }
    ADD_FAILURE() << "job " << id << " did not end: " << json::serialize(j) << "\n" << log_text(id);
    return j;
  }
  std::string log_text(const std::string& job) {
    auto r = env.call("GET", "jobs/" + job + "/logs?limit=500").json();
    std::string out;
    if (r.is_object())
      if (auto* lines = r.as_object().if_contains("lines"); lines && lines->is_array())
        for (const auto& l : lines->as_array()) out += str(l, "level") + " " + str(l, "message") + "\n";
    return out;
  }

  // The first cleanup_dns job once it has completed (null after a minute without one).
  json::value completed_cleanup() {
    for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(200ms)) {
      auto jobs = env.ok("GET", "jobs?type=cleanup_dns");
      if (num(jobs, "total") >= 1 && str(jobs.at("items").as_array()[0], "status") == "completed")
        return jobs.at("items").as_array()[0];
    }
    return nullptr;
  }

  // A worker armed with CERTFLEET_CRASH_AT kills itself at the point; then a fresh one (without
  // it) starts on the same data. False when the worker did not get there within a minute.
  bool restart_after_crash(testbed::process& armed, const std::vector<std::string>& sets) {
    for (auto until = std::chrono::steady_clock::now() + 60s; armed.running() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(50ms);
    if (armed.running()) return false;
    env.http.reset();
    env.start("all", sets);
    return true;
  }

  dist_env env;
  std::unique_ptr<testbed::knot> knot;
  std::unique_ptr<testbed::pebble> ca;
};

// The events a webhook sink received, each once (receivers dedupe by event id), by event name;
// every request's X-Certfleet-Event-Id header is its body's event_id.
std::map<std::string, std::vector<json::object>> events_by_name(const testbed::webhook_sink& sink) {
  std::map<std::string, std::vector<json::object>> out;
  std::set<std::string> seen;
  for (const auto& r : sink.requests()) {
    auto body = json::parse(r.body).as_object();
    auto id = std::string(body.at("event_id").as_string());
    EXPECT_EQ(r.header("x-certfleet-event-id"), id);
    if (seen.insert(id).second) out[std::string(body.at("event").as_string())].push_back(body);
  }
  return out;
}

std::string label() {
  static int n = 0;
  return fmt::format("t{}-{}", ::getpid() % 100000, n++);
}

TEST(acme_jobs, issue_stores_version_1_then_a_renewal_stores_version_2_and_delivers_it) {
  acme_env a;
  auto account_answer = a.env.ok("POST", "acme-accounts", json::serialize(a.account_body("pebble")), 201);
  auto account = str(account_answer, "id");
  EXPECT_NE(str(account_answer, "account_url").find("https://127.0.0.1:"), std::string::npos) << json::serialize(account_answer);
  EXPECT_EQ(str(account_answer, "status"), "valid");
  EXPECT_EQ(json::serialize(account_answer).find("PRIVATE KEY"), std::string::npos);
  auto provider_answer = a.env.ok("POST", "dns-providers", json::serialize(a.provider_body("knot")), 201);
  auto provider = str(provider_answer, "id");
  // The TSIG secret is sealed: never in an answer.
  EXPECT_EQ(json::serialize(provider_answer).find(a.knot->secret_base64()), std::string::npos);
  EXPECT_EQ(json::serialize(a.env.ok("GET", "dns-providers/" + provider)).find(a.knot->secret_base64()), std::string::npos);

  const std::string domain = "www." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("www", {domain}, account, provider);
  // Before the job ends the certificate exists with no issued version.
  auto issued = a.wait_job(job);
  ASSERT_EQ(str(issued, "status"), "completed") << json::serialize(issued) << "\n" << a.log_text(job);
  auto log = a.log_text(job);
  EXPECT_NE(log.find("workflow step: dns_propagating"), std::string::npos) << log;
  EXPECT_NE(log.find("DNS: every record answered by every server"), std::string::npos) << log;
  EXPECT_NE(log.find("workflow step: completed"), std::string::npos) << log;
  // The challenge record is gone from the zone once the job has ended.
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());
  // The job's workflow: at its last step, the record it presented listed with its removal.
  const auto& flow = issued.at("workflow");
  EXPECT_EQ(str(flow, "kind"), "acme");
  EXPECT_EQ(str(flow, "step"), "completed") << json::serialize(flow);
  EXPECT_EQ(flow.at("steps").as_array().size(), 9u);
  EXPECT_FALSE(flow.as_object().contains("failed_step"));
  EXPECT_EQ(flow.at("skipped_steps"), json::array{json::value("awaiting_validation")});
  EXPECT_TRUE(flow.at("manual_challenges").as_array().empty());
  ASSERT_EQ(flow.at("presented_records").as_array().size(), 1u) << json::serialize(flow);
  const auto& presented = flow.at("presented_records").as_array().at(0);
  EXPECT_EQ(str(presented, "fqdn"), "_acme-challenge." + domain);
  EXPECT_EQ(str(presented, "provider"), "knot");
  EXPECT_GT(time_of(presented, "removed_at"), 0) << json::serialize(presented);
  EXPECT_GE(time_of(presented, "removed_at"), time_of(presented, "at"));

  auto v1 = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v1, "version"), 1) << json::serialize(v1);
  EXPECT_EQ(str(v1, "source"), "acme");
  EXPECT_EQ(str(v1, "status"), "active");
  EXPECT_EQ(v1.at("domains"), json::array{json::value(domain)});
  EXPECT_EQ(str(v1, "key_type"), "ecdsa-p256");
  EXPECT_EQ(v1.at("sans"), json::array{json::value(domain)});
  // Signed by pebble's issuing CA: the leaf chains to the root its management interface serves.
  EXPECT_TRUE(chains_to(str(v1, "cert_pem"), str(v1, "chain_pem"), a.ca->root_pem()));
  EXPECT_EQ(a.ca->certificate_status(str(v1, "serial")).status, "Valid");

  // A distribution of an ACME certificate executes each new version by itself (default).
  auto cred = a.env.create_credential();
  auto target = a.env.create_target(a.env.ssh_target_body("web", 0, cred));
  auto dist = a.env.create_distribution("web", cert, {target});
  EXPECT_EQ(a.env.ok("GET", "distributions/" + dist).at("auto_execute"), true);
  a.env.execute(dist);
  ASSERT_EQ(str(a.env.wait_done(dist), "status"), "success");
  EXPECT_EQ(slurp(a.env.target_dir("web") / "cert.pem"), str(v1, "cert_pem"));

  auto renew = a.env.ok("POST", "certificates/" + cert + "/renew", "", 202);
  // The same version's renewal again: the same job (key renew:<cert>:<expires_at_unix>).
  auto again = a.env.ok("POST", "certificates/" + cert + "/renew", "", 202);
  EXPECT_EQ(str(again, "job_id"), str(renew, "job_id"));
  auto renewed = a.wait_job(str(renew, "job_id"));
  ASSERT_EQ(str(renewed, "status"), "completed") << json::serialize(renewed) << "\n" << a.log_text(str(renew, "job_id"));
  auto v2 = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v2, "version"), 2);
  EXPECT_NE(str(v2, "serial"), str(v1, "serial"));
  EXPECT_TRUE(chains_to(str(v2, "cert_pem"), str(v2, "chain_pem"), a.ca->root_pem()));
  EXPECT_EQ(v2.at("versions").as_array().size(), 2u);
  // The view: the last issue/renew job and the renewal window (pebble has no ARI: the lifetime's).
  EXPECT_EQ(str(v1, "last_job_id"), job);
  EXPECT_EQ(str(v2, "last_job_id"), str(renew, "job_id"));
  EXPECT_EQ(str(v2.at("renewal"), "source"), "lifetime");
  EXPECT_EQ(time_of(v2.at("renewal"), "window_end"), time_of(v2, "not_after"));

  // The renewal opened the distribution's run in its transaction; no API call since.
  auto done = a.env.wait_done(dist);
  EXPECT_EQ(str(done, "status"), "success") << json::serialize(done);
  EXPECT_EQ(num(done, "run_no"), 2);
  EXPECT_EQ(str(done, "run_trigger"), fmt::format("dist-renew:{}:2", dist));
  EXPECT_EQ(slurp(a.env.target_dir("web") / "cert.pem"), str(v2, "cert_pem"));
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());

  // In use: the account and the provider cannot be deleted under the certificate.
  EXPECT_EQ(a.env.call("DELETE", "acme-accounts/" + account).status, 409);
  EXPECT_EQ(a.env.call("DELETE", "dns-providers/" + provider).status, 409);
}

TEST(acme_jobs, the_renewal_sweep_renews_a_certificate_in_the_last_third_of_its_lifetime) {
  // 45-second certificates: the last third starts 30 s after issuance. One scheduler cycle a second.
  testbed::pebble_options po;
  po.validity_s = 45;
  acme_env a(po, {"scheduler_interval_ms=1000", "scheduler_lease_ms=3000"});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "api." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("api", {domain}, account, provider);
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  auto v1 = a.env.ok("GET", "certificates/" + cert);
  ASSERT_EQ(num(v1, "version"), 1);

  // Not before the window: the sweep leaves it alone while it is young.
  auto jobs = a.env.ok("GET", "jobs?type=renew_certificate&page_size=50");
  EXPECT_EQ(num(jobs, "total"), 0) << json::serialize(jobs);

  auto until = std::chrono::steady_clock::now() + 150s;
  json::value now;
  while (std::chrono::steady_clock::now() < until) {
    now = a.env.ok("GET", "certificates/" + cert);
    if (num(now, "version") >= 2) break;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_GE(num(now, "version"), 2) << json::serialize(now);
  auto renewals = a.env.ok("GET", "jobs?type=renew_certificate&page_size=50");
  ASSERT_GE(num(renewals, "total"), 1);
  bool by_sweep = false;
  for (const auto& j : renewals.at("items").as_array())
    by_sweep |= str(j, "triggered_by") == "renewal_sweep";
  EXPECT_TRUE(by_sweep) << json::serialize(renewals);
  // Version 2 was issued after version 1 entered its last third, not before.
  const auto& versions = now.at("versions").as_array();
  ASSERT_GE(versions.size(), 2u);
  EXPECT_NE(str(versions[0], "serial"), str(versions[1], "serial"));
}

// pebble 2.4 has no renewalInfo (RFC 9773 came in a later pebble): a testbed HTTPS server serves
// pebble's directory with a renewalInfo URL added, and the renewal information of the
// certificate. A 5-year certificate is then renewed when, and only when, the CA's window says so.
TEST(acme_jobs, the_renewal_sweep_follows_the_cas_renewal_information_when_the_directory_offers_it) {
  acme_env a({}, {"scheduler_interval_ms=1000", "scheduler_lease_ms=3000"});
  auto key = certfleet::acme::account_key::generate();
  ASSERT_TRUE(key);
  static const auto loopback = *certfleet::net::parse_egress_allow_list("127.0.0.1", "acme_allow_list");
  certfleet::acme::client_options co;
  co.directory_url = a.ca->directory_url();
  co.ca_pem = a.ca->tls_ca_pem();
  co.egress = &loopback;
  certfleet::acme::client plain(co, *key);
  auto pebble_dir = testbed::run_sync(plain.get_directory());
  ASSERT_TRUE(pebble_dir) << pebble_dir.failure().message;
  testbed::webhook_sink ari(true);
  json::object d{{"newNonce", pebble_dir->new_nonce},     {"newAccount", pebble_dir->new_account},
                 {"newOrder", pebble_dir->new_order},     {"revokeCert", pebble_dir->revoke_cert},
                 {"keyChange", pebble_dir->key_change},   {"renewalInfo", ari.url("/renewal-info")},
                 {"meta", {{"termsOfService", pebble_dir->meta.terms_of_service}}}};
  ari.serve("/directory", {200, {}, json::serialize(d)});

  auto body = a.account_body("ari-ca");
  body["directory_url"] = ari.url("/directory");
  body["ca_bundle_pem"] = a.ca->tls_ca_pem() + ari.ca_pem();
  auto account = a.create("acme-accounts", body);
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "ari." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("ari", {domain}, account, provider);
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  auto v1 = a.env.ok("GET", "certificates/" + cert);
  auto id = certfleet::acme::ari_cert_id_of(str(v1, "cert_pem"));
  ASSERT_TRUE(id) << id.error().message;
  const std::string info_path = "/renewal-info/" + *id;
  auto info_requests = [&] {
    std::size_t n = 0;
    for (const auto& r : ari.requests()) n += r.method == "GET" && r.target == info_path;
    return n;
  };

  // A window 20 days ahead: the sweep asks (again each cycle) and leaves the certificate alone.
  const auto now = certfleet::system_clock().now_ms();
  auto window = [](certfleet::time_ms start, certfleet::time_ms end) {
    return R"({"suggestedWindow": {"start": ")" + certfleet::format_iso8601(start) + R"(", "end": ")" +
           certfleet::format_iso8601(end) + R"("}})";
  };
  ari.serve(info_path, {200, {{"Retry-After", "60"}}, window(now + 20 * 86'400'000LL, now + 22 * 86'400'000LL)});
  ari.clear();
  for (auto until = std::chrono::steady_clock::now() + 30s; info_requests() < 3 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
  ASSERT_GE(info_requests(), 3u) << "the sweep did not ask for the renewal information";
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=renew_certificate"), "total"), 0);
  // The certificate's view shows the CA's window the sweep read (source ari, with when).
  auto seen = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(seen.at("renewal"), "source"), "ari") << json::serialize(seen.at("renewal"));
  EXPECT_EQ(time_of(seen.at("renewal"), "window_start"), now + 20 * 86'400'000LL);
  EXPECT_GE(time_of(seen.at("renewal"), "checked_at"), now);

  // The CA moves the window into the past (a mass revocation): the next sweep renews.
  ari.serve(info_path, {200, {{"Retry-After", "60"}}, window(now - 2 * 86'400'000LL, now - 86'400'000LL)});
  json::value current;
  for (auto until = std::chrono::steady_clock::now() + 90s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(300ms)) {
    current = a.env.ok("GET", "certificates/" + cert);
    if (num(current, "version") >= 2) break;
  }
  ASSERT_EQ(num(current, "version"), 2) << json::serialize(current);
  auto renewals = a.env.ok("GET", "jobs?type=renew_certificate");
  ASSERT_EQ(num(renewals, "total"), 1) << json::serialize(renewals);
  EXPECT_EQ(str(renewals.at("items").as_array()[0], "triggered_by"), "renewal_sweep");
  EXPECT_EQ(str(a.env.ok("GET", "certificates/" + cert), "last_job_id"), str(renewals.at("items").as_array()[0], "id"));
  auto log = a.log_text(str(renewals.at("items").as_array()[0], "id"));
  EXPECT_NE(log.find("workflow step: completed"), std::string::npos) << log;
}

TEST(acme_jobs, refusals_end_the_job_with_the_cause_and_bad_bodies_name_the_field) {
  testbed::pebble_options po;
  po.domain_blocklist = {"blocked.example.test"};
  acme_env a(po);
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));

  // The CA refuses the name: the job is dead at once with pebble's problem verbatim, and the
  // certificate that was never issued is failed with the same text.
  auto [blocked, blocked_job] = a.issue("blocked", {"blocked.example.test"}, account, provider);
  auto dead = a.wait_job(blocked_job);
  EXPECT_EQ(str(dead, "status"), "dead") << json::serialize(dead);
  EXPECT_EQ(num(dead, "attempts"), 1);
  EXPECT_NE(str(dead, "error").find("urn:ietf:params:acme:error:rejectedIdentifier"), std::string::npos)
      << json::serialize(dead);
  EXPECT_EQ(str(dead, "error").rfind("newOrder:", 0), 0u) << "the error names the step: " << json::serialize(dead);
  auto failed = a.env.ok("GET", "certificates/" + blocked);
  EXPECT_EQ(str(failed, "status"), "failed");
  EXPECT_EQ(num(failed, "version"), 0);
  EXPECT_EQ(str(failed, "last_error"), str(dead, "error"));

  // A TSIG secret knot does not know: dead at once, naming the provider and knot's answer.
  auto wrong = a.create("dns-providers", a.provider_body("wrong-key", "c2VjcmV0LXRoYXQta25vdC1kb2VzLW5vdC1rbm93IQ=="));
  const std::string domain = "tsig." + label() + "." + a.knot->zone();
  auto [tsig_cert, tsig_job] = a.issue("tsig", {domain}, account, wrong);
  auto tsig_dead = a.wait_job(tsig_job);
  EXPECT_EQ(str(tsig_dead, "status"), "dead") << json::serialize(tsig_dead);
  auto err = str(tsig_dead, "error");
  EXPECT_NE(err.find("DNS provider wrong-key"), std::string::npos) << err;
  EXPECT_NE(err.find("TSIG"), std::string::npos) << err;
  EXPECT_EQ(err.find("c2VjcmV0"), std::string::npos) << "the secret must never be quoted: " << err;
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());

  // A DNS server that never answers is transient: the job fails, to be retried with backoff, and
  // the certificate stays pending with the cause.
  testbed::silent_dns_server silent;
  auto silent_body = a.provider_body("silent");
  silent_body["rfc2136"].as_object()["server"] = silent.server();
  auto mute = a.create("dns-providers", silent_body);
  auto [slow_cert, slow_job] = a.issue("slow", {"slow." + label() + "." + a.knot->zone()}, account, mute);
  json::value slow;
  for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(200ms)) {
    slow = a.env.ok("GET", "jobs/" + slow_job);
    if (str(slow, "status") != "pending" && str(slow, "status") != "active") break;
  }
  EXPECT_EQ(str(slow, "status"), "failed") << json::serialize(slow) << "\n" << a.log_text(slow_job);
  EXPECT_NE(str(slow, "error").find("DNS provider silent"), std::string::npos) << json::serialize(slow);
  EXPECT_NE(str(slow, "error").find("no answer"), std::string::npos) << json::serialize(slow);
  auto pending = a.env.ok("GET", "certificates/" + slow_cert);
  EXPECT_EQ(str(pending, "status"), "pending");
  EXPECT_EQ(str(pending, "last_error"), str(slow, "error"));

  // Bad bodies: 400 naming the field; nothing stored.
  struct bad_body {
    std::string path;
    json::object body;
    std::string field;
  };
  auto acct = a.account_body("x");
  auto no_terms = acct;
  no_terms["terms_agreed"] = false;
  auto http_url = acct;
  http_url["directory_url"] = "http://127.0.0.1:1/dir";
  auto bad_mail = acct;
  bad_mail["contact_email"] = json::array{"ops@example.org", "not an address"};
  auto bad_eab = acct;
  bad_eab["eab"] = json::object{{"kid", "k"}, {"hmac_key", "not base64url!"}};
  auto prov = a.provider_body("y");
  auto bad_server = prov;
  bad_server["rfc2136"].as_object()["server"] = "127.0.0.1:99999";
  auto bad_secret = prov;
  bad_secret["rfc2136"].as_object()["tsig_secret"] = "%%%";
  auto bad_alg = prov;
  bad_alg["rfc2136"].as_object()["tsig_algorithm"] = "hmac-md5";
  auto manual = json::object{{"name", "m"}, {"kind", "manual"}, {"manual", json::object{{"check_server", "no port:x"}}}};
  auto issue = [&](json::array domains, std::string acc, std::string prv) {
    return json::object{{"name", "bad"}, {"domains", std::move(domains)}, {"acme_account_id", acc}, {"dns_provider_id", prv}};
  };
  auto bad_key_type = issue({"a.example.test"}, account, provider);
  bad_key_type["key_type"] = "dsa-1024";
  const std::vector<bad_body> bodies = {
      {"acme-accounts", no_terms, "terms_agreed"},
      {"acme-accounts", http_url, "directory_url"},
      {"acme-accounts", bad_mail, "contact_email[1]"},
      {"acme-accounts", bad_eab, "eab.hmac_key"},
      {"dns-providers", bad_server, "rfc2136.server"},
      {"dns-providers", bad_secret, "rfc2136.tsig_secret"},
      {"dns-providers", bad_alg, "rfc2136.tsig_algorithm"},
      {"dns-providers", manual, "manual.check_server"},
      {"certificates/issue", issue({"a.example.test", "bad name!"}, account, provider), "domains[1]"},
      {"certificates/issue", issue({}, account, provider), "domains"},
      {"certificates/issue", issue({"a.example.test"}, "0123456789abcdef01234567", provider), "acme_account_id"},
      {"certificates/issue", issue({"a.example.test"}, account, account), "dns_provider_id"},
      {"certificates/issue", bad_key_type, "key_type"},
  };
  for (const auto& b : bodies) {
    auto r = a.env.call("POST", b.path, json::serialize(b.body));
    EXPECT_EQ(r.status, 400) << b.path << " " << json::serialize(b.body) << " -> " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), b.field) << b.path << " -> " << r.body;
  }
  EXPECT_EQ(num(a.env.ok("GET", "acme-accounts"), "total"), 1);
  EXPECT_EQ(num(a.env.ok("GET", "dns-providers"), "total"), 3);
  EXPECT_EQ(num(a.env.ok("GET", "certificates"), "total"), 3);
}

TEST(acme_jobs, an_account_the_ca_refuses_is_not_stored_and_the_answer_carries_the_ca_problem) {
  // pebble requiring External Account Binding: an account with a wrong HMAC key is refused.
  testbed::pebble_options po;
  po.eab_keys = {{"kid-1", "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"}};
  acme_env a(po);
  auto body = a.account_body("eab");
  body["eab"] = json::object{{"kid", "kid-1"}, {"hmac_key", "c29tZS1vdGhlci1rZXktdGhhdC1wZWJibGUtZG9lcy1ub3Qtc2hhcmU"}};
  auto r = a.env.call("POST", "acme-accounts", json::serialize(body));
  EXPECT_GE(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("urn:ietf:params:acme:error:"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("c29tZS1vdGhlci1rZXk"), std::string::npos) << "the HMAC key must never be quoted: " << r.body;
  // Without EAB at all: the CA's externalAccountRequired.
  auto plain = a.env.call("POST", "acme-accounts", json::serialize(a.account_body("plain")));
  EXPECT_NE(plain.body.find("externalAccountRequired"), std::string::npos) << plain.body;
  EXPECT_EQ(num(a.env.ok("GET", "acme-accounts"), "total"), 0);
  // The right key registers.
  body["eab"] = json::object{{"kid", "kid-1"}, {"hmac_key", po.eab_keys.at("kid-1")}};
  auto ok = a.env.ok("POST", "acme-accounts", json::serialize(body), 201);
  EXPECT_EQ(str(ok, "status"), "valid");
  EXPECT_EQ(str(ok, "eab_kid"), "kid-1");
  EXPECT_EQ(json::serialize(ok).find(po.eab_keys.at("kid-1")), std::string::npos);
}

// Revocation (RFC 8555 §7.6) through the route, checked at pebble's management interface, and
// the four certificate lifecycle events received by a real webhook receiver: issued, renewed,
// revoked, and renewal_failed (a renew_certificate job that goes dead).
TEST(acme_jobs, revoke_is_seen_by_pebble_and_every_certificate_event_reaches_a_webhook) {
  testbed::pebble_options po;
  po.domain_blocklist = {"blocked.example.test"};
  acme_env a(po);
  testbed::webhook_sink sink;  // plain HTTP on 127.0.0.1
  a.env.set_settings(json::object{{"egress_allow_list", "127.0.0.1"}});
  auto channel = a.create("notification-channels",
                          json::object{{"name", "hook"}, {"kind", "webhook"}, {"url", sink.url("/events")}});
  for (const char* event : {"certificate.issued", "certificate.renewed", "certificate.renewal_failed", "certificate.revoked"})
    a.create("notification-rules", json::object{{"event", event}, {"channel_id", channel}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));

  const std::string domain = "rev." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("rev", {domain}, account, provider);
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  auto renew = a.env.ok("POST", "certificates/" + cert + "/renew", "", 202);
  ASSERT_EQ(str(a.wait_job(str(renew, "job_id")), "status"), "completed") << a.log_text(str(renew, "job_id"));
  auto v2 = a.env.ok("GET", "certificates/" + cert);
  ASSERT_EQ(num(v2, "version"), 2);
  const std::string serial = str(v2, "serial");
  ASSERT_EQ(a.ca->certificate_status(serial).status, "Valid");

  // Bad input: 400 naming the field, nothing enqueued. An uploaded certificate: 409, clearly.
  for (const char* body : {R"({"reason":"KeyCompromise"})", R"({"reason":7})", R"({"reason":"bogus"})", R"({"reason":[1]})"}) {
    auto r = a.env.call("POST", "certificates/" + cert + "/revoke", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), "reason") << r.body;
  }
  auto unknown_member = a.env.call("POST", "certificates/" + cert + "/revoke", R"({"reasons":"keyCompromise"})");
  EXPECT_EQ(unknown_member.status, 400) << unknown_member.body;
  auto uploaded = a.env.create_certificate("uploaded", testbed::make_certificate({}));
  auto refused = a.env.call("POST", "certificates/" + uploaded + "/revoke", R"({"reason":"superseded"})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("not obtained from an ACME CA"), std::string::npos) << refused.body;
  EXPECT_EQ(a.env.call("POST", "certificates/0123456789abcdef01234567/revoke", "").status, 404);
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=revoke_certificate"), "total"), 0);

  auto revoke = a.env.ok("POST", "certificates/" + cert + "/revoke", R"({"reason":"keyCompromise"})", 202);
  // Asked again for the same version: the same job.
  auto again = a.env.ok("POST", "certificates/" + cert + "/revoke", R"({"reason":"keyCompromise"})", 202);
  EXPECT_EQ(str(again, "job_id"), str(revoke, "job_id"));
  EXPECT_EQ(again.at("created"), false);
  auto revoked_job = a.wait_job(str(revoke, "job_id"));
  ASSERT_EQ(str(revoked_job, "status"), "completed") << json::serialize(revoked_job) << "\n" << a.log_text(str(revoke, "job_id"));
  // The CA's view, by serial (pebble's management interface): revoked, reason keyCompromise (1).
  auto at_ca = a.ca->certificate_status(serial);
  ASSERT_EQ(at_ca.http_status, 200) << at_ca.body;
  EXPECT_EQ(at_ca.status, "Revoked") << at_ca.body;
  EXPECT_EQ(at_ca.reason, 1) << at_ca.body;
  // The API's view.
  auto after = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(after, "status"), "revoked") << json::serialize(after);
  EXPECT_EQ(str(after.at("revocation"), "serial"), serial);
  EXPECT_EQ(str(after.at("revocation"), "reason"), "keyCompromise");
  EXPECT_EQ(str(after.at("revocation"), "job_id"), str(revoke, "job_id"));
  // Once revoked, the route says so instead of enqueueing.
  auto twice = a.env.call("POST", "certificates/" + cert + "/revoke", "");
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_NE(twice.body.find("already revoked"), std::string::npos) << twice.body;

  // A renewal that goes dead: a certificate the CA refused to issue, asked to renew through the
  // jobs API (the route refuses that; the job's handler ends it dead at once).
  auto [blocked, blocked_job] = a.issue("blocked", {"blocked.example.test"}, account, provider);
  ASSERT_EQ(str(a.wait_job(blocked_job), "status"), "dead");
  auto dead_renewal = a.env.ok("POST", "jobs",
                               json::serialize(json::object{{"type", "renew_certificate"},
                                                            {"payload", json::object{{"certificate_id", blocked}}}}),
                               201);
  ASSERT_EQ(str(a.wait_job(str(dead_renewal, "id")), "status"), "dead");

  // Every event once (receivers dedupe by event id: count distinct ids), as signed-off JSON.
  std::map<std::string, std::vector<json::object>> by_event;
  auto collect = [&] {
    by_event = events_by_name(sink);
    return by_event.size();
  };
  for (auto until = std::chrono::steady_clock::now() + 60s; collect() < 4 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(200ms);
  std::string got;
  for (const auto& [event, bodies] : by_event) got += event + " ";
  ASSERT_EQ(by_event.size(), 4u) << sink.requests().size() << " requests: " << got;
  ASSERT_EQ(by_event["certificate.issued"].size(), 1u);
  ASSERT_EQ(by_event["certificate.renewed"].size(), 1u);
  ASSERT_EQ(by_event["certificate.revoked"].size(), 1u);
  ASSERT_EQ(by_event["certificate.renewal_failed"].size(), 1u);
  const auto& issued = by_event["certificate.issued"][0].at("data");
  EXPECT_EQ(str(issued, "certificate_id"), cert);
  EXPECT_EQ(num(issued, "version"), 1);
  EXPECT_EQ(str(issued, "job_id"), job);
  EXPECT_EQ(issued.at("domains"), json::array{json::value(domain)});
  const auto& renewed = by_event["certificate.renewed"][0].at("data");
  EXPECT_EQ(num(renewed, "version"), 2);
  EXPECT_EQ(str(renewed, "serial"), serial);
  const auto& rev = by_event["certificate.revoked"][0].at("data");
  EXPECT_EQ(str(rev, "serial"), serial);
  EXPECT_EQ(str(rev, "reason"), "keyCompromise");
  EXPECT_EQ(str(rev, "source"), "request");
  EXPECT_EQ(by_event["certificate.revoked"][0].at("event_id"), json::value("certificate.revoked:" + cert + ":" + serial));
  const auto& failed = by_event["certificate.renewal_failed"][0].at("data");
  EXPECT_EQ(str(failed, "certificate_id"), blocked);
  EXPECT_EQ(str(failed, "job_id"), str(dead_renewal, "id"));
  EXPECT_NE(str(failed, "error").find("no issued version to renew"), std::string::npos) << json::serialize(failed);
  // Webhook bodies carry times as every answer does (DESIGN §6): not_after, revoked_at.
  for (const auto* d : {&issued, &renewed, &rev})
    EXPECT_EQ(testbed::expect_answer_times(*d, "webhook data"), 1) << json::serialize(*d);
  EXPECT_GT(time_of(issued, "not_after"), 0);
  EXPECT_GE(time_of(renewed, "not_after"), time_of(issued, "not_after"));
}

// The manual path (DESIGN §9): the issue job prepares the order and stops at awaiting_validation
// with the record to create; validate-dns before the record exists fails naming it; the operator
// creates it with nsupdate and validates again; the certificate is issued. Bad manual bodies name
// their field.
TEST(acme_jobs, a_manual_provider_waits_for_the_operators_record_then_validate_dns_issues) {
  acme_env a;
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  // Bad manual providers, each refused naming the field, nothing stored.
  struct bad_case {
    json::object body;
    std::string field;
  };
  const std::vector<bad_case> bad{
      {json::object{{"name", "m1"}, {"kind", "manual"}, {"rfc2136", json::object{}}}, "rfc2136"},
      {json::object{{"name", "m2"}, {"kind", "manual"}, {"manual", json::object{{"check_server", "127.0.0.1:99999"}}}},
       "manual.check_server"},
      {json::object{{"name", "m3"}, {"kind", "manual"}, {"manual", json::object{{"server", "127.0.0.1:53"}}}}, "manual.server"},
      {json::object{{"name", "m4"}, {"kind", "manual"}, {"manual", "yes"}}, "manual"},
      {json::object{{"name", "m5"}, {"kind", "carrier-pigeon"}}, "kind"},
  };
  for (const auto& b : bad) {
    auto r = a.env.call("POST", "dns-providers", json::serialize(b.body));
    EXPECT_EQ(r.status, 400) << json::serialize(b.body) << " " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), b.field) << r.body;
  }
  EXPECT_EQ(num(a.env.ok("GET", "dns-providers"), "total"), 0);
  auto provider = a.create("dns-providers", json::object{{"name", "by-hand"},
                                                         {"kind", "manual"},
                                                         {"manual", json::object{{"check_server", a.knot->server()}}}});

  const std::string domain = "manual." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("by-hand", {domain}, account, provider);
  auto prepared = a.wait_job(job);
  ASSERT_EQ(str(prepared, "status"), "completed") << json::serialize(prepared) << "\n" << a.log_text(job);
  const auto& flow = prepared.at("workflow");
  EXPECT_EQ(str(flow, "step"), "awaiting_validation") << json::serialize(flow);
  EXPECT_EQ(flow.at("skipped_steps"), json::array{json::value("dns_presenting")});
  EXPECT_TRUE(flow.at("presented_records").as_array().empty());
  ASSERT_EQ(flow.at("manual_challenges").as_array().size(), 1u) << json::serialize(flow);
  const auto& challenge = flow.at("manual_challenges").as_array().at(0);
  EXPECT_EQ(str(challenge, "fqdn"), "_acme-challenge." + domain);
  EXPECT_EQ(str(challenge, "value").size(), 43u);  // base64url of a SHA-256
  EXPECT_EQ(str(challenge, "status"), "pending");
  EXPECT_NE(a.log_text(job).find("DNS (manual): create TXT _acme-challenge." + domain), std::string::npos);
  // certfleet put nothing in the zone, and the certificate waits.
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());
  auto waiting = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(waiting, "status"), "pending");
  EXPECT_EQ(num(waiting, "version"), 0);

  // "Validate" before the record exists: the job fails naming the record and what to do.
  auto early = a.env.ok("POST", "jobs/" + job + "/validate-dns", "", 202);
  const std::string early_id = str(early, "job_id");
  EXPECT_EQ(early.at("created"), true);
  json::value early_job;
  for (int i = 0; i < 300; ++i) {
    early_job = a.env.call("GET", "jobs/" + early_id).json();
    if (str(early_job, "status") == "failed" || str(early_job, "status") == "dead") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(str(early_job, "status"), "failed") << json::serialize(early_job) << "\n" << a.log_text(early_id);
  EXPECT_NE(str(early_job, "error").find("_acme-challenge." + domain), std::string::npos) << str(early_job, "error");
  EXPECT_NE(str(early_job, "error").find("validate-dns"), std::string::npos) << str(early_job, "error");
  EXPECT_EQ(str(early_job, "parent_job_id"), job);
  EXPECT_EQ(str(early_job.at("workflow"), "failed_step"), "dns_propagating") << json::serialize(early_job);
  // Failing to find the record does not fail the certificate: it still waits.
  EXPECT_EQ(str(a.env.ok("GET", "certificates/" + cert), "status"), "pending");

  // The operator creates the record, as they would, and says so.
  auto [rc, out] = a.knot->nsupdate(
      {"update add _acme-challenge." + domain + " 60 TXT \"" + str(challenge, "value") + "\""}, a.knot->zone());
  ASSERT_EQ(rc, 0) << out;
  auto asked = a.env.ok("POST", "jobs/" + job + "/validate-dns", "", 202);
  EXPECT_EQ(asked.at("created"), true) << json::serialize(asked);
  EXPECT_NE(str(asked, "job_id"), early_id);
  auto validated = a.wait_job(str(asked, "job_id"));
  ASSERT_EQ(str(validated, "status"), "completed") << json::serialize(validated) << "\n" << a.log_text(str(asked, "job_id"));
  EXPECT_EQ(str(validated, "type"), "validate_manual_dns");
  EXPECT_EQ(str(validated.at("workflow"), "step"), "completed");
  EXPECT_EQ(str(validated.at("workflow").at("manual_challenges").as_array().at(0), "status"), "valid");
  // The preparing job's workflow shows the record validated too.
  EXPECT_EQ(str(a.env.ok("GET", "jobs/" + job).at("workflow").at("manual_challenges").as_array().at(0), "status"), "valid");

  auto v1 = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v1, "version"), 1) << json::serialize(v1);
  EXPECT_EQ(str(v1, "status"), "active");
  EXPECT_TRUE(chains_to(str(v1, "cert_pem"), str(v1, "chain_pem"), a.ca->root_pem()));
  // Validated: asking again is a conflict naming the job; so is asking on a job without an order.
  auto again = a.env.call("POST", "jobs/" + job + "/validate-dns");
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.body.find("was validated"), std::string::npos) << again.body;
  auto noop = str(a.env.ok("POST", "jobs", R"({"type":"noop"})", 201), "id");
  auto other = a.env.call("POST", "jobs/" + noop + "/validate-dns");
  EXPECT_EQ(other.status, 409) << other.body;
  EXPECT_EQ(str(other.json().at("error"), "field"), "id");
  EXPECT_EQ(a.env.call("POST", "jobs/0123456789abcdef01234567/validate-dns").status, 404);
}

// A CA that answers newOrder with rateLimited and Retry-After (a scripted HTTPS CA: pebble has no
// rate limits): the job fails transiently and waits what the CA asked before its next attempt,
// the CA's words reach the job error, its log and the certificate's last_error, and the error's
// hint is the CA row's. Nothing is stored.
TEST(acme_jobs, a_rate_limited_order_waits_the_cas_retry_after) {
  acme_env a;
  testbed::webhook_sink ca(true);
  json::object dir{{"newNonce", ca.url("/nonce")}, {"newAccount", ca.url("/account")}, {"newOrder", ca.url("/order")},
                   {"revokeCert", ca.url("/revoke")}};
  ca.serve("/directory", {200, {}, json::serialize(dir)});
  ca.serve("/nonce", {200, {{"Replay-Nonce", "nonce-from-fake-ca"}, {"Cache-Control", "no-store"}}, ""});
  ca.serve("/account", {201, {{"Location", ca.url("/acct/1")}, {"Replay-Nonce", "n2"}}, R"({"status":"valid"})"});
  ca.serve("/order", {429,
                      {{"Content-Type", "application/problem+json"}, {"Retry-After", "120"}, {"Replay-Nonce", "n3"}},
                      R"({"type":"urn:ietf:params:acme:error:rateLimited","detail":"too many new orders (300) from this account in the last 3h0m0s","status":429})"});
  auto account = a.create("acme-accounts", json::object{{"name", "limited"},
                                                        {"directory_url", ca.url("/directory")},
                                                        {"terms_agreed", true},
                                                        {"ca_bundle_pem", ca.ca_pem()}});
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  auto [cert, job] = a.issue("limited", {"limited." + label() + "." + a.knot->zone()}, account, provider);
  json::value j;
  for (int i = 0; i < 300; ++i) {
    j = a.env.call("GET", "jobs/" + job).json();
    if (str(j, "status") == "failed" || str(j, "status") == "dead") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(str(j, "status"), "failed") << json::serialize(j) << "\n" << a.log_text(job);
  const auto error = str(j, "error");
  EXPECT_NE(error.find("rateLimited"), std::string::npos) << error;
  EXPECT_NE(error.find("too many new orders (300)"), std::string::npos) << error;
  EXPECT_EQ(str(j, "error_class"), "acme_ca");
  // The next attempt waits the CA's Retry-After (120 s), not the queue's 30 s backoff.
  const auto ready = time_of(j.at("waiting"), "ready_at");
  const auto failed_at = certfleet::system_clock().now_ms();
  EXPECT_GT(ready, failed_at + 100'000) << json::serialize(j.at("waiting"));
  EXPECT_LT(ready, failed_at + 130'000) << json::serialize(j.at("waiting"));
  auto log = a.log_text(job);
  EXPECT_NE(log.find("rateLimited"), std::string::npos) << log;
  EXPECT_NE(log.find("Retry-After 120 s"), std::string::npos) << log;
  auto c = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(c, "status"), "pending");
  EXPECT_EQ(num(c, "version"), 0);
  EXPECT_NE(str(c, "last_error").find("rateLimited"), std::string::npos) << json::serialize(c);
}

// A record the job could not remove (the removal made to fail with CERTFLEET_FAIL_AT): the job
// still completes, says so in its log, and leaves it to the cleanup_dns job it enqueued itself
// (trigger acme_workflow, key cleanup_dns:<job>:<fence>), which removes it from knot.
TEST(acme_jobs, a_record_the_job_could_not_remove_is_removed_by_the_cleanup_dns_job_it_enqueued) {
  acme_env a({}, {}, {{"CERTFLEET_FAIL_AT", "acme_dns_remove"}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "left." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("left", {domain}, account, provider);
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(job);
  auto log = a.log_text(job);
  EXPECT_NE(log.find("could not remove TXT _acme-challenge." + domain), std::string::npos) << log;
  EXPECT_NE(log.find("cleanup_dns job"), std::string::npos) << log;
  json::value cleanup;
  for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(200ms)) {
    auto jobs = a.env.ok("GET", "jobs?type=cleanup_dns");
    if (num(jobs, "total") >= 1 && str(jobs.at("items").as_array().at(0), "status") == "completed") {
      cleanup = jobs.at("items").as_array().at(0);
      break;
    }
  }
  ASSERT_TRUE(cleanup.is_object()) << json::serialize(a.env.ok("GET", "jobs?type=cleanup_dns"));
  EXPECT_EQ(str(cleanup, "triggered_by"), "acme_workflow");
  EXPECT_EQ(str(cleanup, "parent_job_id"), job);
  EXPECT_EQ(str(cleanup, "idempotency_key"), "cleanup_dns:" + job + ":1");
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());
  // The issuing job's workflow lists the record with its removal (by the cleanup job).
  const auto detail = a.env.ok("GET", "jobs/" + job);
  const auto& rec = detail.at("workflow").at("presented_records").as_array().at(0);
  EXPECT_GT(time_of(rec, "removed_at"), 0) << json::serialize(rec);
}

// The exec provider (issue 33): a program run as lego's exec provider is, `PROGRAM present|cleanup
// FQDN. VALUE`, with the provider's sealed variables as its environment. Here a shell script an
// operator would write updates knot with nsupdate; pebble validates through knot. Two names in one
// zone: two presents, two cleanups, one certificate; nothing is left in DNS; the script printed
// the TSIG secret and the job log shows "[redacted]" instead. A second provider whose program hangs
// is killed at its timeout_s and the attempt fails with class dns_provider.
// A knot whose zone delegates `_acme-challenge.<kind>-delegated` to
// `<kind>-challenges.delegation.<zone>` with a CNAME (issue 33: CNAME delegation per kind).
testbed::knot_options delegating_knot(const std::string& kind) {
  testbed::knot_options ko;
  ko.extra_records = {{"example.test", "_acme-challenge." + kind + "-delegated 60 CNAME " + kind +
                                           "-challenges.delegation.example.test."}};
  return ko;
}

// A certificate for `name`, whose challenge name is a CNAME to `target`, issued through
// `provider`: the record is presented, checked and removed at `target` (`dig` reads its TXT
// values afterwards), and the CA validated through the CNAME.
void expect_delegated_issuance(acme_env& a, const std::string& account, const std::string& provider,
                               const std::string& name, const std::string& target,
                               const std::function<std::vector<std::string>(const std::string&)>& dig) {
  auto [cert, job] = a.issue(name, {name}, account, provider);
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(job);
  auto log = a.log_text(job);
  EXPECT_NE(log.find("_acme-challenge." + name + " is a CNAME to " + target), std::string::npos) << log;
  const auto& recs = done.at("workflow").at("presented_records").as_array();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(str(recs.at(0), "fqdn"), target);
  EXPECT_GT(time_of(recs.at(0), "removed_at"), 0);
  EXPECT_TRUE(dig(target).empty());
}

TEST(acme_jobs, an_exec_provider_runs_the_operators_script_for_present_and_cleanup) {
  acme_env a({}, {}, {}, delegating_knot("exec"));
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  const auto hook = a.env.dir.path() / "dns-hook.sh";
  const auto calls = a.env.dir.path() / "hook-calls.txt";
  {
    std::ofstream f(hook);
    f << "#!/bin/sh\n"
         "# lego's exec interface: $1 present|cleanup, $2 the FQDN with its dot, $3 the TXT value\n"
         "case \"$1\" in present) op=add ;; cleanup) op=delete ;; *) echo \"unknown action $1\" >&2; exit 2 ;; esac\n"
         "echo \"$1 $2 $3\" >> \"$CALLS\"\n"
         "echo \"updating with key $TSIG_NAME:$TSIG_SECRET\"\n"
         "printf 'server 127.0.0.1 %s\\nupdate %s %s 60 TXT \"%s\"\\nsend\\n' \"$DNS_PORT\" \"$op\" \"$2\" \"$3\" |\n"
         "  nsupdate -t 10 -y \"hmac-sha256:$TSIG_NAME:$TSIG_SECRET\"\n";
  }
  fs::permissions(hook, fs::perms::owner_all);
  auto provider = a.create("dns-providers",
                           json::object{{"name", "hook"},
                                        {"kind", "exec"},
                                        {"exec", json::object{{"program", hook.string()},
                                                              {"timeout_s", 20},
                                                              {"env", json::object{{"TSIG_NAME", a.knot->key_name()},
                                                                                   {"TSIG_SECRET", a.knot->secret_base64()},
                                                                                   {"DNS_PORT", std::to_string(a.knot->port())},
                                                                                   {"CALLS", calls.string()}}}}}});
  auto view = a.env.ok("GET", "dns-providers/" + provider);
  EXPECT_EQ(json::serialize(view).find(a.knot->secret_base64()), std::string::npos) << json::serialize(view);

  const std::string base = "exec." + label() + "." + a.knot->zone();
  const std::vector<std::string> domains{base, "www." + base};
  auto [cert, job] = a.issue("exec", domains, account, provider);
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(job);
  EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 1);
  auto log = a.log_text(job);
  EXPECT_EQ(log.find(a.knot->secret_base64()), std::string::npos) << log;
  EXPECT_NE(log.find("[redacted]"), std::string::npos) << log;
  EXPECT_NE(log.find("DNS (exec): zone " + a.knot->zone()), std::string::npos) << log;
  for (const auto& d : domains) EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + d).empty()) << d;
  std::string called = slurp(calls);
  for (const char* action : {"present", "cleanup"})
    for (const auto& d : domains)
      EXPECT_NE(called.find(std::string(action) + " _acme-challenge." + d + ". "), std::string::npos) << action << " " << d << "\n" << called;
  const auto& recs = done.at("workflow").at("presented_records").as_array();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(str(recs.at(0), "provider_kind"), "exec");
  EXPECT_GT(time_of(recs.at(0), "removed_at"), 0);
  {  // and a renewal through the same provider: version 2
    auto renew = str(a.env.ok("POST", "certificates/" + cert + "/renew", "", 202), "job_id");
    ASSERT_EQ(str(a.wait_job(renew), "status"), "completed") << a.log_text(renew);
    EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 2);
  }
  expect_delegated_issuance(a, account, provider, "exec-delegated." + a.knot->zone(),
                            "exec-challenges.delegation." + a.knot->zone(), [&](const std::string& n) { return a.knot->dig_txt(n); });

  // A program that hangs: killed at its timeout, the attempt fails as the provider's fault.
  const auto stuck = a.env.dir.path() / "stuck.sh";
  {
    std::ofstream f(stuck);
    f << "#!/bin/sh\necho \"waiting for $API_TOKEN\"\nsleep 60\n";
  }
  fs::permissions(stuck, fs::perms::owner_all);
  auto hanging = a.create("dns-providers",
                          json::object{{"name", "stuck"},
                                       {"kind", "exec"},
                                       {"exec", json::object{{"program", stuck.string()},
                                                             {"timeout_s", 1},
                                                             {"env", json::object{{"API_TOKEN", "tok-0123456789"}}}}}});
  auto [cert2, job2] = a.issue("stuck", {"stuck." + label() + "." + a.knot->zone()}, account, hanging);
  json::value j;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) {
    j = a.env.call("GET", "jobs/" + job2).json();
    if (str(j, "status") == "failed" || str(j, "status") == "dead") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(str(j, "status"), "failed") << json::serialize(j) << "\n" << a.log_text(job2);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 25s);
  EXPECT_NE(str(j, "error").find("did not finish within exec.timeout_s = 1 s"), std::string::npos) << str(j, "error");
  EXPECT_EQ(str(j, "error_class"), "dns_provider");
  auto log2 = a.log_text(job2);
  EXPECT_EQ(log2.find("tok-0123456789"), std::string::npos) << log2;
  EXPECT_NE(log2.find("waiting for [redacted]"), std::string::npos) << log2;
}

// A small HTTP API in front of the zone (tests/testbed/httpreq_server.py, which applies each
// request to knot with nsupdate), reached as lego's httpreq provider: POST {endpoint}/present and
// /cleanup with {"fqdn", "value"} and basic auth. Two names, one certificate, nothing left in
// DNS, the password never in the log. An API answering 500 fails the attempt for a retry; one
// answering 400 ends the job at once with the API's own words.
class httpreq_api {
 public:
  httpreq_api(const fs::path& dir, const testbed::knot& k, std::vector<std::string> extra = {}) {
    fs::create_directories(dir);
    log_ = dir / "requests.jsonl";
    std::vector<std::string> argv{"/usr/bin/python3", std::string(CERTFLEET_SOURCE_DIR) + "/tests/testbed/httpreq_server.py",
                                  "--knot-port", std::to_string(k.port()), "--tsig", k.tsig_arg(),
                                  "--user", "acme", "--password", "pw-0123456789", "--log", log_.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc_ = std::make_unique<testbed::process>(argv, std::map<std::string, std::string>{{"PYTHONDONTWRITEBYTECODE", "1"}},
                                               (dir / "httpreq").string());
    auto line = proc_->wait_for_stdout("listening 127.0.0.1:", std::chrono::seconds(30));
    if (line.empty()) throw std::runtime_error("httpreq_server did not start: " + proc_->stderr_text());
    port_ = std::stoi(line.substr(line.rfind(':') + 1));
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string requests() const { return slurp(log_); }
  json::object provider(const std::string& name) const {
    return json::object{{"name", name},
                        {"kind", "httpreq"},
                        {"httpreq", json::object{{"endpoint", endpoint()},
                                                 {"allow_plain_http", true},
                                                 {"username", "acme"},
                                                 {"password", "pw-0123456789"},
                                                 {"timeout_s", 20}}}};
  }

 private:
  fs::path log_;
  std::unique_ptr<testbed::process> proc_;
  int port_ = 0;
};

TEST(acme_jobs, an_httpreq_provider_presents_through_the_operators_api) {
  acme_env a({}, {}, {}, delegating_knot("httpreq"));
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  httpreq_api api(a.env.dir.path() / "api", *a.knot);
  auto provider = a.create("dns-providers", api.provider("api"));
  EXPECT_EQ(json::serialize(a.env.ok("GET", "dns-providers/" + provider)).find("pw-0123456789"), std::string::npos);
  const std::string base = "httpreq." + label() + "." + a.knot->zone();
  const std::vector<std::string> domains{base, "*." + base};  // two values at one name
  auto [cert, job] = a.issue("httpreq", domains, account, provider);
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(job) << "\n" << api.requests();
  EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 1);
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + base).empty());
  auto seen = api.requests();
  EXPECT_NE(seen.find("\"path\": \"/present\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"path\": \"/cleanup\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("_acme-challenge." + base + "."), std::string::npos) << seen;
  EXPECT_EQ(seen.find("\"authorized\": false"), std::string::npos) << seen;
  auto log = a.log_text(job);
  EXPECT_EQ(log.find("pw-0123456789"), std::string::npos) << log;
  EXPECT_NE(log.find("DNS (httpreq): zone " + a.knot->zone()), std::string::npos) << log;
  {  // and a renewal through the same provider: version 2
    auto renew = str(a.env.ok("POST", "certificates/" + cert + "/renew", "", 202), "job_id");
    ASSERT_EQ(str(a.wait_job(renew), "status"), "completed") << a.log_text(renew);
    EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 2);
  }
  expect_delegated_issuance(a, account, provider, "httpreq-delegated." + a.knot->zone(),
                            "httpreq-challenges.delegation." + a.knot->zone(), [&](const std::string& n) { return a.knot->dig_txt(n); });

  // 500: the attempt fails and waits for its retry (the job is not dead).
  httpreq_api failing(a.env.dir.path() / "api-500", *a.knot, {"--fail-status", "500", "--fail-count", "1000"});
  auto p500 = a.create("dns-providers", failing.provider("api-500"));
  auto [c500, j500] = a.issue("httpreq-500", {"h500." + label() + "." + a.knot->zone()}, account, p500);
  // 400: the request itself is wrong; retrying cannot help.
  httpreq_api refusing(a.env.dir.path() / "api-400", *a.knot, {"--fail-status", "400", "--fail-count", "1000"});
  auto p400 = a.create("dns-providers", refusing.provider("api-400"));
  auto [c400, j400] = a.issue("httpreq-400", {"h400." + label() + "." + a.knot->zone()}, account, p400);
  auto settle = [&](const std::string& id) {
    json::value j;
    for (int i = 0; i < 300; ++i) {
      j = a.env.call("GET", "jobs/" + id).json();
      if (str(j, "status") == "failed" || str(j, "status") == "dead") break;
      std::this_thread::sleep_for(100ms);
    }
    return j;
  };
  auto j5 = settle(j500);
  EXPECT_EQ(str(j5, "status"), "failed") << json::serialize(j5);
  EXPECT_NE(str(j5, "error").find("HTTP 500"), std::string::npos) << str(j5, "error");
  EXPECT_EQ(str(j5, "error_class"), "dns_provider");
  auto j4 = settle(j400);
  EXPECT_EQ(str(j4, "status"), "dead") << json::serialize(j4);
  EXPECT_NE(str(j4, "error").find("HTTP 400"), std::string::npos) << str(j4, "error");
  EXPECT_EQ(str(j4, "error_class"), "dns_provider");
}

// PowerDNS (issue 33): a real pdns_server (sqlite3 backend) that pebble validates against, reached
// through its HTTP API. A value already at the challenge name stays; a wildcard and its apex (two
// values at one name) and a second certificate of the same zone issued at the same time all
// complete; afterwards only the value that was there before is left. A wrong API key ends the job
// at once with the advice; a zone the server does not have, with PowerDNS's own words.
TEST(acme_jobs, a_powerdns_provider_patches_the_rrset_and_keeps_the_values_already_there) {
  testbed::temp_dir pdir("certfleet-pdns");
  testbed::pdns pdns(pdir.path() / "pdns");
  testbed::pebble_options po;
  po.dns_server = pdns.server();
  acme_env a(po);
  a.env.set_settings(json::object{{"acme_dns_nameserver_port", pdns.port()}, {"acme_dns_resolver", pdns.server()}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto body = [&](const std::string& name, const std::string& key, const std::string& zone) {
    json::object section{{"api_url", pdns.api_url()}, {"api_key", key}, {"allow_plain_http", true}, {"timeout_s", 20}};
    if (!zone.empty()) section["zone"] = zone;
    return json::object{{"name", name}, {"kind", "powerdns"}, {"powerdns", std::move(section)}};
  };
  auto provider = a.create("dns-providers", body("pdns", pdns.api_key(), ""));
  EXPECT_EQ(json::serialize(a.env.ok("GET", "dns-providers/" + provider)).find(pdns.api_key()), std::string::npos);

  const std::string base = "pdns-" + label() + "." + pdns.zone();
  const std::string other = "other-" + label() + "." + pdns.zone();
  // Somebody else's value at the name, which must survive.
  auto [st, answer] = pdns.api("PATCH", "/api/v1/servers/localhost/zones/" + pdns.zone() + ".",
                               certfleet::lifecycle::powerdns_patch_body("_acme-challenge." + base, {"\"keep-me\""}, 60));
  ASSERT_EQ(st, 204) << answer;
  auto [cert, job] = a.issue("pdns", {base, "*." + base}, account, provider);
  auto [cert2, job2] = a.issue("pdns-other", {other}, account, provider);
  for (const auto& id : {job, job2}) {
    auto done = a.wait_job(id);
    ASSERT_EQ(str(done, "status"), "completed") << a.log_text(id) << "\n" << pdns.log();
    const auto& recs = done.at("workflow").at("presented_records").as_array();
    ASSERT_FALSE(recs.empty());
    EXPECT_EQ(str(recs.at(0), "provider_kind"), "powerdns");
    for (const auto& r : recs) EXPECT_GT(time_of(r, "removed_at"), 0) << json::serialize(r);
  }
  EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 1);
  EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert2), "version"), 1);
  EXPECT_EQ(pdns.dig_txt("_acme-challenge." + base), (std::vector<std::string>{"keep-me"}));
  EXPECT_TRUE(pdns.dig_txt("_acme-challenge." + other).empty());
  auto log = a.log_text(job);
  EXPECT_EQ(log.find(pdns.api_key()), std::string::npos) << log;
  EXPECT_NE(log.find("DNS (powerdns): zone " + pdns.zone()), std::string::npos) << log;
  {  // and a renewal through the same provider: version 2
    auto renew = str(a.env.ok("POST", "certificates/" + cert2 + "/renew", "", 202), "job_id");
    ASSERT_EQ(str(a.wait_job(renew), "status"), "completed") << a.log_text(renew);
    EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert2), "version"), 2);
  }
  {  // a CNAME-delegated name, the CNAME made through the API as an operator would
    const std::string name = "pdns-delegated." + pdns.zone(), target = "pdns-challenges.delegation." + pdns.zone();
    json::object rrset{{"name", "_acme-challenge." + name + "."}, {"type", "CNAME"}, {"ttl", 60}, {"changetype", "REPLACE"},
                       {"records", json::array{json::object{{"content", target + "."}, {"disabled", false}}}}};
    auto [cst, cbody] = pdns.api("PATCH", "/api/v1/servers/localhost/zones/" + pdns.zone() + ".",
                                 json::serialize(json::object{{"rrsets", json::array{rrset}}}));
    ASSERT_EQ(cst, 204) << cbody;
    expect_delegated_issuance(a, account, provider, name, target, [&](const std::string& n) { return pdns.dig_txt(n); });
  }
  EXPECT_TRUE(pdns.dig_txt("_acme-challenge." + other).empty());

  auto settle = [&](const std::string& id) {
    json::value j;
    for (int i = 0; i < 300; ++i) {
      j = a.env.call("GET", "jobs/" + id).json();
      if (str(j, "status") == "failed" || str(j, "status") == "dead") break;
      std::this_thread::sleep_for(100ms);
    }
    return j;
  };
  auto wrong_key = a.create("dns-providers", body("wrong-key", "not-the-key", ""));
  auto [c1, j1] = a.issue("pdns-key", {"key-" + label() + "." + pdns.zone()}, account, wrong_key);
  auto k = settle(j1);
  EXPECT_EQ(str(k, "status"), "dead") << json::serialize(k);
  EXPECT_NE(str(k, "error").find("HTTP 401"), std::string::npos) << str(k, "error");
  EXPECT_NE(str(k, "error").find("check powerdns.api_key"), std::string::npos) << str(k, "error");
  EXPECT_EQ(str(k, "error_class"), "dns_provider");
  auto no_zone = a.create("dns-providers", body("no-zone", pdns.api_key(), "missing.test"));
  auto [c2, j2] = a.issue("pdns-zone", {"www.missing.test"}, account, no_zone);
  auto z = settle(j2);
  EXPECT_EQ(str(z, "status"), "dead") << json::serialize(z);
  EXPECT_NE(str(z, "error").find("zone missing.test."), std::string::npos) << str(z, "error");
  EXPECT_NE(str(z, "error").find("HTTP 4"), std::string::npos) << str(z, "error");  // PowerDNS's 404/422 and its words
}

// A worker killed right after PowerDNS took the record (crash point acme_dns_presented): the
// job's next attempt issues, and the scheduler's DNS cleanup sweep removes the killed attempt's
// value through the same API, leaving the RRset as it was.
TEST(acme_jobs, a_powerdns_record_left_by_a_killed_worker_is_removed_by_the_dns_cleanup_sweep) {
  testbed::temp_dir pdir("certfleet-pdns");
  testbed::pdns pdns(pdir.path() / "pdns");
  testbed::pebble_options po;
  po.dns_server = pdns.server();
  po.authz_reuse_percent = 0;  // the next attempt's record has another value: only the sweep removes this one
  const std::vector<std::string> sets{"lease_ms=2000", "scheduler_interval_ms=1000", "scheduler_lease_ms=3000"};
  acme_env a(po, sets, {{"CERTFLEET_CRASH_AT", "acme_dns_presented"}});
  a.env.set_settings(json::object{{"acme_dns_nameserver_port", pdns.port()}, {"acme_dns_resolver", pdns.server()}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers",
                           json::object{{"name", "pdns"},
                                        {"kind", "powerdns"},
                                        {"powerdns", json::object{{"api_url", pdns.api_url()},
                                                                  {"api_key", pdns.api_key()},
                                                                  {"allow_plain_http", true},
                                                                  {"zone", pdns.zone()}}}});
  const std::string domain = "crash-" + label() + "." + pdns.zone();
  auto [cert, job] = a.issue("crash", {domain}, account, provider);
  auto& first = *a.env.servers.front();
  for (auto until = std::chrono::steady_clock::now() + 60s; first.running() && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
  ASSERT_FALSE(first.running()) << "the worker did not reach acme_dns_presented";
  ASSERT_EQ(pdns.dig_txt("_acme-challenge." + domain).size(), 1u) << "the killed attempt's record is in the zone";
  a.env.http.reset();
  a.env.start("all", sets);
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  auto cleanup = a.completed_cleanup();
  ASSERT_TRUE(cleanup.is_object()) << json::serialize(a.env.ok("GET", "jobs?type=cleanup_dns"));
  EXPECT_EQ(str(cleanup, "triggered_by"), "dns_cleanup_sweep");
  auto log = a.log_text(str(cleanup, "id"));
  EXPECT_NE(log.find("DNS: removed TXT _acme-challenge." + domain), std::string::npos) << log;
  EXPECT_TRUE(pdns.dig_txt("_acme-challenge." + domain).empty());
}

// CNAME delegation (issue 33): `_acme-challenge.<name>` is a CNAME to a name certfleet can update;
// the record is presented, checked and removed there, and pebble validates through the CNAME.
TEST(acme_jobs, a_cname_delegated_challenge_is_presented_at_the_cnames_target) {
  testbed::knot_options ko;
  ko.extra_records = {{"example.test", "_acme-challenge.delegated 60 CNAME challenges.delegation-target.example.test."}};
  acme_env a({}, {}, {}, ko);
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "delegated." + a.knot->zone();
  const std::string target = "challenges.delegation-target." + a.knot->zone();
  expect_delegated_issuance(a, account, provider, domain, target, [&](const std::string& n) { return a.knot->dig_txt(n); });
}

// A manual provider without check_server (DESIGN §9's default): validate_manual_dns finds the
// record's zone and its authoritative servers through a resolver (acme_dns_resolver; knot here,
// which answers for its zone) and asks each of them; a missing record names the server.
TEST(acme_jobs, a_manual_provider_without_check_server_asks_the_zones_authoritative_servers) {
  acme_env a;  // acme_dns_resolver: knot
  // A resolver without a usable port is refused naming the setting.
  auto bad = a.env.http->put("/api/v1/settings", R"({"acme_dns_resolver":"127.0.0.1:0"})", a.env.token);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("acme_dns_resolver"), std::string::npos) << bad.body;
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", json::object{{"name", "by-hand"}, {"kind", "manual"}});
  const std::string domain = "zone-ns." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("zone-ns", {domain}, account, provider);
  auto prepared = a.wait_job(job);
  ASSERT_EQ(str(prepared, "status"), "completed") << a.log_text(job);
  const auto value = str(prepared.at("workflow").at("manual_challenges").as_array().at(0), "value");

  auto early = str(a.env.ok("POST", "jobs/" + job + "/validate-dns", "", 202), "job_id");
  json::value early_job;
  for (int i = 0; i < 300; ++i) {
    early_job = a.env.call("GET", "jobs/" + early).json();
    if (str(early_job, "status") == "failed" || str(early_job, "status") == "dead") break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(str(early_job, "status"), "failed") << json::serialize(early_job) << "\n" << a.log_text(early);
  // ns1.example.test → 127.0.0.1, asked at acme_dns_nameserver_port (knot's).
  const std::string ns = "127.0.0.1:" + std::to_string(a.knot->port());
  EXPECT_NE(str(early_job, "error").find("_acme-challenge." + domain + " = \"" + value + "\" at " + ns), std::string::npos)
      << str(early_job, "error");
  auto log = a.log_text(early);
  EXPECT_NE(log.find("DNS (manual): zone " + a.knot->zone() + " (found through " + a.knot->server() + "): asking " + ns),
            std::string::npos)
      << log;

  auto [rc, out] = a.knot->nsupdate({"update add _acme-challenge." + domain + " 60 TXT \"" + value + "\""}, a.knot->zone());
  ASSERT_EQ(rc, 0) << out;
  auto asked = str(a.env.ok("POST", "jobs/" + job + "/validate-dns", "", 202), "job_id");
  ASSERT_EQ(str(a.wait_job(asked), "status"), "completed") << a.log_text(asked);
  EXPECT_EQ(num(a.env.ok("GET", "certificates/" + cert), "version"), 1);
}

// A worker killed between putting a challenge record into the zone and removing it (the crash
// point acme_dns_presented): the record stays in knot; after a restart the scheduler's DNS
// cleanup sweep finds the attempt over and its cleanup_dns job removes the record (TSIG delete).
TEST(acme_jobs, a_record_left_by_a_worker_killed_after_presenting_it_is_removed_by_the_dns_cleanup_sweep) {
  testbed::pebble_options po;
  po.authz_reuse_percent = 0;  // the next attempt's record has another value: only the sweep removes this one
  const std::vector<std::string> sets{"lease_ms=2000", "scheduler_interval_ms=1000", "scheduler_lease_ms=3000"};
  acme_env a(po, sets, {{"CERTFLEET_CRASH_AT", "acme_dns_presented"}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "crash." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("crash", {domain}, account, provider);
  auto& first = *a.env.servers.front();
  for (auto until = std::chrono::steady_clock::now() + 60s; first.running() && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
  ASSERT_FALSE(first.running()) << "the worker did not reach acme_dns_presented";
  auto left = a.knot->dig_txt("_acme-challenge." + domain);
  ASSERT_EQ(left.size(), 1u) << "the killed attempt's record is in the zone";

  a.env.http.reset();
  a.env.start("all", sets);
  // The job's next attempt issues; the sweep's cleanup_dns removes what the killed one left.
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  auto cleanup = a.completed_cleanup();
  ASSERT_TRUE(cleanup.is_object()) << json::serialize(a.env.ok("GET", "jobs?type=cleanup_dns"));
  EXPECT_EQ(str(cleanup, "triggered_by"), "dns_cleanup_sweep");
  EXPECT_EQ(str(cleanup, "parent_job_id"), job);
  auto log = a.log_text(str(cleanup, "id"));
  EXPECT_NE(log.find("DNS: removed TXT _acme-challenge." + domain), std::string::npos) << log;
  EXPECT_TRUE(a.knot->dig_txt("_acme-challenge." + domain).empty());
  // One cleanup per attempt: later sweeps find nothing left.
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=cleanup_dns"), "total"), 1);
}

// A worker SIGKILLed at the start of each workflow step (crash points acme_step_<step>): after a
// restart the job's next attempt finishes the issuance, exactly one version is stored, and no
// challenge record stays in the zone (the next attempt removes its own; the DNS cleanup sweep
// removes the killed attempt's).
class acme_crash : public ::testing::TestWithParam<const char*> {};

TEST_P(acme_crash, a_worker_killed_at_the_step_issues_once_and_leaves_no_record) {
  const std::string step = GetParam();
  const std::vector<std::string> sets{"lease_ms=2000", "scheduler_interval_ms=1000", "scheduler_lease_ms=3000"};
  acme_env a({}, sets, {{"CERTFLEET_CRASH_AT", "acme_step_" + step}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  std::string domain = step + "." + label() + "." + a.knot->zone();
  std::replace(domain.begin(), domain.end(), '_', '-');
  // The worker of this same process may reach the first step, and die, before the API has
  // answered the request that enqueued it: then the job is looked up after the restart.
  auto issued = a.env.call("POST", "certificates/issue",
                           json::serialize(json::object{{"name", "crash"},
                                                        {"domains", json::array{domain}},
                                                        {"acme_account_id", account},
                                                        {"dns_provider_id", provider}}));
  ASSERT_TRUE(issued.status == 202 || issued.status == 0) << issued.status << " " << issued.body;
  ASSERT_TRUE(a.restart_after_crash(*a.env.servers.front(), sets)) << "the worker did not reach step " << step;
  std::string cert, job;
  if (issued.status == 202) {
    cert = str(issued.json(), "certificate_id");
    job = str(issued.json(), "job_id");
  } else {
    auto jobs = a.env.ok("GET", "jobs?type=issue_certificate");
    ASSERT_EQ(num(jobs, "total"), 1) << json::serialize(jobs);
    job = str(jobs.at("items").as_array()[0], "id");
    cert = str(jobs.at("items").as_array()[0], "certificate_id");
  }
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << json::serialize(done) << "\n" << a.log_text(job);
  EXPECT_EQ(num(done, "attempts"), 2);
  auto v = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v, "version"), 1) << json::serialize(v);
  EXPECT_EQ(v.at("versions").as_array().size(), 1u);
  EXPECT_EQ(str(v, "status"), "active");
  EXPECT_EQ(str(done.at("workflow"), "step"), "completed");
  std::vector<std::string> left;
  for (auto until = std::chrono::steady_clock::now() + 60s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(200ms)) {
    left = a.knot->dig_txt("_acme-challenge." + domain);
    if (left.empty()) break;
  }
  EXPECT_TRUE(left.empty()) << left.size() << " record(s) left at _acme-challenge." << domain;
}

INSTANTIATE_TEST_SUITE_P(acme_jobs, acme_crash,
                         ::testing::Values("initialized", "dns_presenting", "dns_propagating", "validating", "finalizing",
                                           "downloading", "storing", "completed"));

// A renewal whose worker is killed after storing the next version, before finishing the job: the
// next attempt sees the version its key was for is replaced and renews nothing (one key, one
// issuance).
TEST(acme_jobs, a_renewal_killed_after_storing_is_not_issued_twice) {
  const std::vector<std::string> sets{"lease_ms=2000"};
  acme_env a({}, sets);
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));
  const std::string domain = "renew-crash." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("renew-crash", {domain}, account, provider);
  ASSERT_EQ(str(a.wait_job(job), "status"), "completed") << a.log_text(job);
  a.env.servers.front()->signal(SIGTERM);
  EXPECT_EQ(a.env.servers.front()->wait(20s), 0);
  a.env.http.reset();
  a.env.start("all", sets, {{"CERTFLEET_CRASH_AT", "acme_step_completed"}});
  auto renew = str(a.env.ok("POST", "certificates/" + cert + "/renew", "", 202), "job_id");
  ASSERT_TRUE(a.restart_after_crash(*a.env.servers.back(), sets)) << "the worker did not reach the renewal's last step";
  auto done = a.wait_job(renew);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(renew);
  EXPECT_EQ(num(done, "attempts"), 2);
  EXPECT_NE(a.log_text(renew).find("nothing to renew"), std::string::npos) << a.log_text(renew);
  auto v = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v, "version"), 2) << json::serialize(v);
  EXPECT_EQ(v.at("versions").as_array().size(), 2u);
}

// The manual path killed right after handing the order over (crash point acme_manual_handed_over):
// the next attempt finds its own order waiting and ends at awaiting_validation, with one order and
// one validation job.
TEST(acme_jobs, a_manual_issue_killed_after_handing_over_keeps_one_order) {
  const std::vector<std::string> sets{"lease_ms=2000"};
  acme_env a({}, sets, {{"CERTFLEET_CRASH_AT", "acme_manual_handed_over"}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", json::object{{"name", "by-hand"}, {"kind", "manual"}});
  const std::string domain = "manual-crash." + label() + "." + a.knot->zone();
  auto [cert, job] = a.issue("manual-crash", {domain}, account, provider);
  ASSERT_TRUE(a.restart_after_crash(*a.env.servers.front(), sets)) << "the worker did not reach acme_manual_handed_over";
  auto done = a.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << a.log_text(job);
  EXPECT_EQ(num(done, "attempts"), 2);
  EXPECT_EQ(str(done.at("workflow"), "step"), "awaiting_validation");
  EXPECT_EQ(done.at("workflow").at("manual_challenges").as_array().size(), 1u);
  EXPECT_NE(a.log_text(job).find("already waits for the operator"), std::string::npos) << a.log_text(job);
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=validate_manual_dns"), "total"), 1);
}

// acme_allow_list through the API (docs/acme.md): a project's directory URL naming this host in
// any spelling is refused before anything connects (400 naming the setting). With loopback
// listed, a closed port, plain HTTP, an untrusted TLS server and a TLS page that is not JSON get
// one and the same answer; the causes are in the server's log only. A directory that sends the
// client to plain http is refused naming the member. Nothing is stored.
TEST(acme_jobs, accounts_are_held_to_acme_allow_list_and_port_failures_read_alike) {
  dist_env env(0);
  env.start();
  testbed::closed_port closed;
  const std::string port = std::to_string(closed.port());
  auto body = [](const std::string& url, const std::string& ca = {}) {
    json::object b{{"name", "ssrf"}, {"directory_url", url}, {"terms_agreed", true}};
    if (!ca.empty()) b["ca_bundle_pem"] = ca;
    return json::serialize(b);
  };
  for (std::string host : {"127.0.0.1", "localhost", "0x7f000001", "0.0.0.0", "[::ffff:127.0.0.1]", "[::1]", "2130706433",
                           "017700000001"}) {
    auto r = env.call("POST", "acme-accounts", body("https://" + host + ":" + port + "/dir"));
    EXPECT_EQ(r.status, 400) << host << " " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), "directory_url") << host << " " << r.body;
    if (host != "2130706433" && host != "017700000001")
      EXPECT_NE(r.body.find("refused by acme_allow_list"), std::string::npos) << host << " " << r.body;
  }

  env.set_settings(json::object{{"acme_allow_list", "127.0.0.1"}});
  testbed::webhook_sink plain(false), untrusted(true), page(true);
  page.serve("/dir", {200, {{"Content-Type", "text/html"}}, "<!DOCTYPE html><html><body>It works</body></html>"});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"https://127.0.0.1:" + port + "/dir", ""},
      {"https://" + plain.url("/dir").substr(7), ""},
      {untrusted.url("/dir"), ""},
      {page.url("/dir"), page.ca_pem()}};
  std::set<std::string> answers;
  for (const auto& [url, ca] : cases) {
    auto r = env.call("POST", "acme-accounts", body(url, ca));
    EXPECT_EQ(r.status, 504) << url << " " << r.body;
    auto message = str(r.json().at("error"), "message");
    auto url_port = url.substr(url.find(':', 8) + 1);
    url_port = url_port.substr(0, url_port.find('/'));
    auto at = message.find("127.0.0.1:" + url_port);
    ASSERT_NE(at, std::string::npos) << url << " " << message;
    message.replace(at, 10 + url_port.size(), "127.0.0.1:PORT");
    answers.insert(fmt::format("{} {} {}", r.status, str(r.json().at("error"), "field"), message));
    for (const char* leak : {"refused", "version", "JSON", "HTML", "trusted", "HTTP"})
      EXPECT_EQ(r.body.find(leak), std::string::npos) << url << " tells " << leak << ": " << r.body;
  }
  EXPECT_EQ(answers.size(), 1u) << fmt::format("{}", fmt::join(answers, "\n"));
  EXPECT_NE(answers.begin()->find("directory_url: could not fetch an ACME directory from 127.0.0.1:PORT"), std::string::npos)
      << *answers.begin();
  // The causes, for the operator: the server's log.
  auto log = env.servers.front()->stderr_text() + env.servers.front()->stdout_text();
  EXPECT_NE(log.find("Connection refused"), std::string::npos) << log.substr(0, 4000);
  EXPECT_NE(log.find("not an ACME directory"), std::string::npos) << log.substr(0, 4000);

  // A directory that sends newNonce to plain http on another port.
  testbed::webhook_sink ca(true);
  json::object dir{{"newNonce", "http://127.0.0.1:" + port + "/nonce"},
                   {"newAccount", ca.url("/account")},
                   {"newOrder", ca.url("/order")},
                   {"revokeCert", ca.url("/revoke")}};
  ca.serve("/directory", {200, {}, json::serialize(dir)});
  auto r = env.call("POST", "acme-accounts", body(ca.url("/directory"), ca.ca_pem()));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(r.json().at("error"), "field"), "directory_url") << r.body;
  EXPECT_NE(r.body.find("newNonce"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("https://"), std::string::npos) << r.body;
  EXPECT_EQ(ca.count(), 1u);
  EXPECT_EQ(num(env.ok("GET", "acme-accounts"), "total"), 0);
}


// Issuance approval (issue 31, docs/approval.md) through a real certfleet, pebble and knot: with the
// project's issuance_requires_approval on, an issue request waits (no job) until an admin other
// than the requester approves it, and then issues; a rejection needs a reason and issues nothing;
// the three events reach a webhook once each; a renewal does not wait; the setting's bad values
// are refused naming it; a project whose settings were changed is still deleted.
TEST(acme_jobs, an_issue_request_waits_for_another_admins_approval_or_rejection) {
  acme_env a;
  testbed::webhook_sink sink;
  a.env.set_settings(json::object{{"egress_allow_list", "127.0.0.1"}});
  auto channel = a.create("notification-channels",
                          json::object{{"name", "hook"}, {"kind", "webhook"}, {"url", sink.url("/events")}});
  for (const char* event : {"certificate.approval_requested", "certificate.approved", "certificate.rejected"})
    a.create("notification-rules", json::object{{"event", event}, {"channel_id", channel}});
  auto account = a.create("acme-accounts", a.account_body("pebble"));
  auto provider = a.create("dns-providers", a.provider_body("knot"));

  // The setting: off by default; a bad value or a setting of another scope changes nothing.
  EXPECT_EQ(str(a.env.ok("GET", "settings"), "issuance_requires_approval"), "off");
  for (const char* body : {R"({"issuance_requires_approval":"yes"})", R"({"issuance_requires_approval":true})",
                           R"({"jobs_page_size_default":30})", R"({"colour":"red"})", "{}"}) {
    auto r = a.env.call("PUT", "settings", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  auto bad = a.env.call("PUT", "settings", R"({"issuance_requires_approval":"yes"})");
  EXPECT_EQ(str(bad.json().at("error"), "field"), "issuance_requires_approval") << bad.body;
  EXPECT_EQ(str(a.env.ok("GET", "settings"), "issuance_requires_approval"), "off");
  EXPECT_EQ(str(a.env.ok("PUT", "settings", R"({"issuance_requires_approval":"on"})"), "issuance_requires_approval"), "on");

  // A second admin: the owner token asks, this one decides.
  auto made = a.env.ok("POST", "tokens", R"({"name":"approver","role":"admin","ttl_s":3600})", 201);
  const std::string approver = str(made, "token"), approver_id = str(made, "id");
  auto as_approver = [&](std::string_view method, const std::string& path, const std::string& body = {}) {
    return a.env.http->request(method, "/api/v1/projects/default/" + path, body, approver);
  };

  const std::string domain = "approved." + label() + "." + a.knot->zone();
  auto asked = a.env.ok("POST", "certificates/issue",
                        json::serialize(json::object{{"name", "approved"}, {"domains", json::array{json::value(domain)}},
                                                     {"acme_account_id", account}, {"dns_provider_id", provider}}),
                        202);
  const std::string cert = str(asked, "certificate_id");
  EXPECT_EQ(str(asked, "status"), "awaiting_approval");
  EXPECT_TRUE(asked.at("job_id").is_null()) << json::serialize(asked);
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=issue_certificate"), "total"), 0);
  auto waiting = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(waiting, "status"), "awaiting_approval");
  EXPECT_EQ(str(waiting.at("approval"), "decision"), "pending");
  EXPECT_EQ(str(waiting.at("approval"), "requested_by").rfind("token:", 0), 0u) << json::serialize(waiting);
  // Renewing what was never issued is refused as before.
  EXPECT_EQ(a.env.call("POST", "certificates/" + cert + "/renew").status, 409);

  // The requester may not approve their own request; nothing changes.
  auto own = a.env.call("POST", "certificates/" + cert + "/approve");
  EXPECT_EQ(own.status, 403) << own.body;
  EXPECT_EQ(str(own.json().at("error"), "field"), "actor") << own.body;
  EXPECT_EQ(str(a.env.ok("GET", "certificates/" + cert), "status"), "awaiting_approval");
  EXPECT_EQ(as_approver("POST", "certificates/0123456789abcdef01234567/approve").status, 404);
  // Nor does a job enqueued by hand go around the approval: it ends dead, the request still waits.
  auto by_hand = a.env.ok("POST", "jobs",
                          json::serialize(json::object{{"type", "issue_certificate"},
                                                       {"payload", json::object{{"certificate_id", cert}}}}),
                          201);
  auto bypass = a.wait_job(str(by_hand, "id"));
  EXPECT_EQ(str(bypass, "status"), "dead");
  EXPECT_NE(str(bypass, "error").find("awaits approval"), std::string::npos) << json::serialize(bypass);
  EXPECT_EQ(str(a.env.ok("GET", "certificates/" + cert), "status"), "awaiting_approval");

  auto approved = as_approver("POST", "certificates/" + cert + "/approve");
  ASSERT_EQ(approved.status, 202) << approved.body;
  const std::string job = str(approved.json(), "job_id");
  ASSERT_FALSE(job.empty()) << approved.body;
  auto twice = as_approver("POST", "certificates/" + cert + "/approve");
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_NE(twice.body.find("approved already"), std::string::npos) << twice.body;
  auto issued = a.wait_job(job);
  ASSERT_EQ(str(issued, "status"), "completed") << a.log_text(job);
  EXPECT_EQ(str(issued, "triggered_by"), "token:" + approver_id) << json::serialize(issued);
  auto after = a.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(after, "version"), 1);
  EXPECT_EQ(str(after, "status"), "active");
  EXPECT_EQ(str(after.at("approval"), "decision"), "approved");
  EXPECT_EQ(str(after.at("approval"), "decided_by"), "token:" + approver_id);
  // A renewal of the issued certificate does not wait for anyone.
  auto renew = a.env.ok("POST", "certificates/" + cert + "/renew", "", 202);
  EXPECT_FALSE(str(renew, "job_id").empty());

  // A rejection: a reason is required (named), then nothing is issued.
  auto second = a.env.ok("POST", "certificates/issue",
                         json::serialize(json::object{{"name", "rejected"},
                                                      {"domains", json::array{json::value("no." + label() + "." + a.knot->zone())}},
                                                      {"acme_account_id", account}, {"dns_provider_id", provider}}),
                         202);
  const std::string refused = str(second, "certificate_id");
  for (const char* body : {"", "{}", R"({"reason":""})", R"({"reason":"   "})", R"({"reason":"a\nb"})", R"({"reason":7})",
                           R"({"reason":"x","why":"y"})"}) {
    auto r = as_approver("POST", "certificates/" + refused + "/reject", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  EXPECT_EQ(str(as_approver("POST", "certificates/" + refused + "/reject", "{}").json().at("error"), "field"), "reason");
  EXPECT_EQ(a.env.call("POST", "certificates/" + refused + "/reject", R"({"reason":"mine"})").status, 403);
  auto rejected = as_approver("POST", "certificates/" + refused + "/reject", R"({"reason":"  not a name we serve  "})");
  ASSERT_EQ(rejected.status, 200) << rejected.body;
  EXPECT_EQ(str(rejected.json(), "status"), "rejected");
  EXPECT_EQ(str(rejected.json().at("approval"), "reason"), "not a name we serve");
  EXPECT_EQ(as_approver("POST", "certificates/" + refused + "/approve").status, 409);
  // The approved one and the dead one enqueued by hand; the rejection enqueued nothing.
  EXPECT_EQ(num(a.env.ok("GET", "jobs?type=issue_certificate"), "total"), 2);

  // Each event once per certificate (receivers dedupe by event id), with who asked and who decided.
  std::map<std::string, std::vector<json::object>> by_event;
  auto collect = [&] {
    by_event = events_by_name(sink);
    return by_event["certificate.approval_requested"].size() + by_event["certificate.approved"].size() +
           by_event["certificate.rejected"].size();
  };
  for (auto until = std::chrono::steady_clock::now() + 60s; collect() < 4 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(200ms);
  ASSERT_EQ(by_event["certificate.approval_requested"].size(), 2u);
  ASSERT_EQ(by_event["certificate.approved"].size(), 1u);
  ASSERT_EQ(by_event["certificate.rejected"].size(), 1u);
  const auto& ok_data = by_event["certificate.approved"][0].at("data");
  EXPECT_EQ(str(ok_data, "certificate_id"), cert);
  EXPECT_EQ(str(ok_data, "decided_by"), "token:" + approver_id);
  EXPECT_EQ(str(ok_data, "job_id"), job);
  const auto& no_data = by_event["certificate.rejected"][0].at("data");
  EXPECT_EQ(str(no_data, "reason"), "not a name we serve");
  EXPECT_EQ(str(no_data, "certificate_id"), refused);

  // Both decisions are audited under the certificate.
  auto audit = json::serialize(a.env.ok("GET", "audit?page_size=200"));
  EXPECT_NE(audit.find("certificate.approve"), std::string::npos);
  EXPECT_NE(audit.find("certificate.reject"), std::string::npos);
  EXPECT_NE(audit.find("project_settings.update"), std::string::npos);

  // A rejected request has no job: it is deleted. A certificate whose issue job has not ended is
  // not deleted from under it (the job would die for nothing): cancel it, then delete.
  EXPECT_EQ(a.env.call("DELETE", "certificates/" + refused).status, 200);
  a.env.ok("PUT", "settings", R"({"issuance_requires_approval":"off"})");
  testbed::closed_port closed;
  auto nowhere = a.create("dns-providers",
                          json::object{{"name", "nowhere"},
                                       {"kind", "rfc2136"},
                                       {"rfc2136", json::object{{"server", fmt::format("127.0.0.1:{}", closed.port())},
                                                                {"zone", a.knot->zone()},
                                                                {"tsig_key_name", a.knot->key_name()},
                                                                {"tsig_algorithm", "hmac-sha256"},
                                                                {"tsig_secret", a.knot->secret_base64()}}}});
  auto [stuck, stuck_job] = a.issue("stuck", {"stuck." + label() + "." + a.knot->zone()}, account, nowhere);
  auto busy = a.env.call("DELETE", "certificates/" + stuck);
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find(stuck_job), std::string::npos) << busy.body;
  EXPECT_NE(busy.body.find("cancel it"), std::string::npos) << busy.body;
  a.env.ok("POST", "jobs/" + stuck_job + "/cancel", "", 0);
  a.wait_job(stuck_job);
  EXPECT_EQ(a.env.call("DELETE", "certificates/" + stuck).status, 200);

  // A project's settings object is not content: the project is still deleted when empty.
  ASSERT_EQ(a.env.http->post("/api/v1/projects", R"({"name":"scratch"})", a.env.token).status, 201);
  ASSERT_EQ(a.env.http->request("PUT", "/api/v1/projects/scratch/settings", R"({"issuance_requires_approval":"on"})",
                                a.env.token).status, 200);
  auto gone = a.env.http->request("DELETE", "/api/v1/projects/scratch", "", a.env.token);
  EXPECT_EQ(gone.status, 200) << gone.body;
}

}  // namespace
}  // namespace dist_test
