// The ACME client against a real pebble 2.4 on 127.0.0.1 (tests/testbed/pebble), validating DNS-01
// records put into a real pebble-challtestsrv: accounts, EAB, issuance for every key type (one
// name; three with a wildcard), revocation confirmed by pebble's management API, ten issuances in
// a row through pebble's random badNonce and authorization reuse, the CA's problems verbatim, and
// renewal information served beside pebble's directory (pebble 2.4 has no renewalInfo).
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <boost/json.hpp>

#include <atomic>
#include <random>

#include "acme_flow.hpp"
#include "certs.hpp"
#include "certfleet/acme/client.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "pebble.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"
#include "webhook_sink.hpp"

using namespace certfleet::acme;
using namespace std::chrono_literals;
using boost::asio::awaitable;

namespace {

account_key new_key() {
  auto k = account_key::generate();
  if (!k) throw std::runtime_error(k.error().message);
  return std::move(*k);
}

// A label no earlier run used: pebble forgets everything between runs, but the names of one run
// must not collide across tests of the same pebble.
std::string unique_label() {
  static std::atomic<int> n{0};
  static const unsigned seed = std::random_device{}();
  return "t" + std::to_string(seed % 100000) + "-" + std::to_string(n++);
}

// Every protocol line the client logs, for assertions (and for a failing test's output).
struct protocol_log {
  std::vector<std::string> lines;
  protocol_logger logger() {
    return [this](std::string level, std::string message) -> awaitable<void> {
      lines.push_back(level + ": " + message);
      co_return;
    };
  }
  int count(std::string_view needle) const {
    int n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  std::string text() const {
    std::string t;
    for (const auto& l : lines) t += "  " + l + "\n";
    return t;
  }
};

using testbed::chains_to;

class acme_pebble : public ::testing::Test {
 protected:
  testbed::temp_dir dir{"certfleet-acme"};
  std::unique_ptr<testbed::challtestsrv> dns;
  std::unique_ptr<testbed::pebble> ca;
  protocol_log log;

  void start(testbed::pebble_options o = {}) {
    dns = std::make_unique<testbed::challtestsrv>(dir.path() / "dns");
    o.dns_server = dns->dns_address();
    ca = std::make_unique<testbed::pebble>(dir.path() / "pebble", std::move(o));
  }
  void SetUp() override { start(); }
  void TearDown() override {
    if (HasFailure()) std::cerr << "protocol log:\n" << log.text() << "pebble log tail:\n" << tail(ca ? ca->log() : "");
  }
  static std::string tail(const std::string& s) { return s.size() > 4000 ? s.substr(s.size() - 4000) : s; }

  client_options options() {
    // pebble (and the renewal-information server beside it) listen on 127.0.0.1: acme_allow_list
    // reaches loopback only when it lists it.
    static const auto loopback = *certfleet::net::parse_egress_allow_list("127.0.0.1", "acme_allow_list");
    client_options o;
    o.directory_url = ca->directory_url();
    o.ca_pem = ca->tls_ca_pem();
    o.egress = &loopback;
    o.request_timeout = 30s;
    o.log = log.logger();
    return o;
  }

  // A client with a registered account.
  std::unique_ptr<client> registered(const account_key& key, client_options o) {
    auto c = std::make_unique<client>(std::move(o), key);
    auto a = testbed::run_sync(c->new_account({{"mailto:ops@example.org"}, true, std::nullopt, false}));
    if (!a) throw std::runtime_error("newAccount: " + a.failure().message);
    return c;
  }

  // The order flow, checked end to end: SANs, key, chain to pebble's root.
  issued_certificate issue_and_check(client& c, const account_key& key, const std::vector<std::string>& domains,
                                     key_type type) {
    auto r = testbed::run_sync(acme_test::issue(c, key, *dns, domains, {.type = type}));
    if (!r) {
      ADD_FAILURE() << key_type_name(type) << " " << domains.front() << ": " << r.failure().message;
      return {};
    }
    EXPECT_EQ(r->cert.dns_names.size(), domains.size());
    for (const auto& d : domains)
      EXPECT_NE(std::find(r->cert.dns_names.begin(), r->cert.dns_names.end(), d), r->cert.dns_names.end()) << d;
    auto t = private_key_type(r->key_pem);
    EXPECT_TRUE(t && *t == type) << key_type_name(type);
    EXPECT_FALSE(r->cert.chain_pem.empty());
    EXPECT_TRUE(chains_to(r->cert.leaf_pem, r->cert.chain_pem, ca->root_pem())) << key_type_name(type);
    return r->cert;
  }
};

}  // namespace

TEST_F(acme_pebble, account_create_and_recreate_gives_the_same_url) {
  auto key = new_key();
  client c(options(), key);
  auto dir = testbed::run_sync(c.get_directory());
  ASSERT_TRUE(dir) << dir.failure().message;
  EXPECT_FALSE(dir->meta.terms_of_service.empty());
  EXPECT_TRUE(dir->renewal_info.empty());  // pebble 2.4 has no ACME Renewal Information
  auto first = testbed::run_sync(c.new_account({{"mailto:ops@example.org"}, true, std::nullopt, false}));
  ASSERT_TRUE(first) << first.failure().message;
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->account.status, "valid");
  EXPECT_EQ(c.account_url(), first->url);
  // The same key again (a new client, as a restarted job would have): the same account.
  client again(options(), key);
  auto second = testbed::run_sync(again.new_account({{"mailto:ops@example.org"}, true, std::nullopt, false}));
  ASSERT_TRUE(second) << second.failure().message;
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->url, first->url);
  // onlyReturnExisting for a key pebble has never seen: accountDoesNotExist, permanent.
  auto stranger = new_key();
  client lookup(options(), stranger);
  auto none = testbed::run_sync(lookup.new_account({{}, true, std::nullopt, true}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.failure().kind, failure_kind::ca_problem);
  ASSERT_TRUE(none.failure().problem);
  EXPECT_EQ(none.failure().problem->acme_type(), "accountDoesNotExist");
  EXPECT_TRUE(none.failure().permanent());
}

TEST_F(acme_pebble, eab_required_refused_without_accepted_with_refused_with_a_wrong_hmac) {
  const std::string mac = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
  ca.reset();
  dns.reset();
  start({.eab_keys = {{"kid-1", mac}}});

  auto key = new_key();
  client c(options(), key);
  auto dir = testbed::run_sync(c.get_directory());
  ASSERT_TRUE(dir);
  EXPECT_TRUE(dir->meta.external_account_required);

  // Without EAB: pebble's reason, verbatim, permanent.
  auto without = testbed::run_sync(c.new_account({{}, true, std::nullopt, false}));
  ASSERT_FALSE(without);
  const auto& f = without.failure();
  EXPECT_EQ(f.kind, failure_kind::ca_problem);
  EXPECT_TRUE(f.permanent());
  ASSERT_TRUE(f.problem);
  EXPECT_EQ(f.problem->type, "urn:ietf:params:acme:error:externalAccountRequired");
  EXPECT_NE(f.message.find(f.problem->text()), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("externalAccountBinding"), std::string::npos) << f.message;  // pebble's own words

  // A wrong HMAC key for the right kid, and an unknown kid: refused, permanent.
  auto wrong = testbed::run_sync(
      c.new_account({{}, true, eab_credentials{"kid-1", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, false}));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.failure().kind, failure_kind::ca_problem) << wrong.failure().message;
  EXPECT_TRUE(wrong.failure().permanent());
  ASSERT_TRUE(wrong.failure().problem);
  EXPECT_FALSE(wrong.failure().problem->detail.empty());
  auto unknown = testbed::run_sync(c.new_account({{}, true, eab_credentials{"kid-9", mac}, false}));
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(unknown.failure().permanent());

  // With the right one: accepted, and the account then orders certificates.
  auto with = testbed::run_sync(c.new_account({{"mailto:ops@example.org"}, true, eab_credentials{"kid-1", mac}, false}));
  ASSERT_TRUE(with) << with.failure().message;
  EXPECT_TRUE(with->created);
  issue_and_check(c, key, {unique_label() + ".eab.test"}, key_type::ecdsa_p256);

  // No line of the protocol log carries the EAB key or the account key.
  for (const auto& line : log.lines) {
    EXPECT_EQ(line.find(mac.substr(0, 20)), std::string::npos) << line;
    EXPECT_EQ(line.find("PRIVATE KEY"), std::string::npos) << line;
    EXPECT_EQ(line.find("\"signature\""), std::string::npos) << line;
  }
}

class acme_pebble_key_types : public acme_pebble, public ::testing::WithParamInterface<key_type> {};

TEST_P(acme_pebble_key_types, issues_one_name_and_three_with_a_wildcard) {
  auto key = new_key();
  auto c = registered(key, options());
  const std::string base = unique_label() + ".certfleet.test";
  auto one = issue_and_check(*c, key, {"www." + base}, GetParam());
  EXPECT_EQ(one.dns_names, std::vector<std::string>{"www." + base});
  auto three = issue_and_check(*c, key, {base, "*." + base, "api." + base}, GetParam());
  EXPECT_EQ(three.dns_names.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(each, acme_pebble_key_types,
                         ::testing::Values(key_type::ecdsa_p256, key_type::ecdsa_p384, key_type::rsa_2048, key_type::rsa_3072),
                         [](const auto& info) {
                           std::string n(key_type_name(info.param));
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST_F(acme_pebble, revoke_with_a_reason_is_seen_by_pebble) {
  auto key = new_key();
  auto c = registered(key, options());
  auto cert = issue_and_check(*c, key, {unique_label() + ".revoke.test"}, key_type::ecdsa_p256);
  ASSERT_FALSE(cert.serial_hex.empty());
  auto before = ca->certificate_status(cert.serial_hex);
  ASSERT_EQ(before.http_status, 200) << before.body;
  EXPECT_EQ(before.status, "Valid");

  auto der = certificate_der(cert.leaf_pem);
  ASSERT_TRUE(der);
  auto reason = revocation_reason_code("keyCompromise");
  auto r = testbed::run_sync(c->revoke(*der, reason));
  ASSERT_TRUE(r) << r.failure().message;
  auto after = ca->certificate_status(cert.serial_hex);
  ASSERT_EQ(after.http_status, 200) << after.body;
  EXPECT_EQ(after.status, "Revoked") << after.body;
  EXPECT_EQ(after.reason, 1) << after.body;

  // Revoking it again: the CA's problem (alreadyRevoked), verbatim and permanent.
  auto twice = testbed::run_sync(c->revoke(*der, reason));
  ASSERT_FALSE(twice);
  EXPECT_TRUE(twice.failure().permanent()) << twice.failure().message;
  ASSERT_TRUE(twice.failure().problem);
  EXPECT_NE(twice.failure().message.find(twice.failure().problem->text()), std::string::npos);
}

TEST_F(acme_pebble, ten_issuances_in_a_row_through_bad_nonces_and_authorization_reuse) {
  auto key = new_key();
  auto c = registered(key, options());
  const std::string base = unique_label() + ".row.test";
  int reused = 0;
  for (int i = 0; i < 10; ++i) {
    // The same names each time, so pebble can reuse authorizations (50%, at random).
    auto r = testbed::run_sync(acme_test::issue(*c, key, *dns, {base, "www." + base}));
    ASSERT_TRUE(r) << "issuance " << i + 1 << ": " << r.failure().message;
    reused += r->reused_authorizations;
  }
  std::cerr << "  10 issuances: " << log.count("badNonce") << " badNonce retries, " << reused
            << " reused authorizations\n";
}

TEST_F(acme_pebble, bad_nonces_are_retried_with_the_nonce_of_the_answer) {
  ca.reset();
  dns.reset();
  start({.nonce_reject_percent = 30});
  auto key = new_key();
  auto c = registered(key, options());
  for (int i = 0; i < 3; ++i) {
    auto r = testbed::run_sync(acme_test::issue(*c, key, *dns, {unique_label() + ".nonce.test"}));
    ASSERT_TRUE(r) << r.failure().message;
  }
  // 30% of about 40 requests: a run without a single retry is a 1-in-a-million event.
  EXPECT_GT(log.count("badNonce"), 0) << log.text();
}

TEST_F(acme_pebble, bad_nonces_beyond_the_bound_end_as_a_transient_problem) {
  ca.reset();
  dns.reset();
  start({.nonce_reject_percent = 100});
  auto key = new_key();
  auto o = options();
  o.bad_nonce_retries = 2;
  client c(o, key);
  auto r = testbed::run_sync(c.new_account({{}, true, std::nullopt, false}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.failure().kind, failure_kind::ca_problem);
  ASSERT_TRUE(r.failure().problem);
  EXPECT_EQ(r.failure().problem->acme_type(), "badNonce");
  EXPECT_FALSE(r.failure().permanent());
  EXPECT_EQ(log.count("retrying with the nonce"), 2) << log.text();
}

TEST_F(acme_pebble, reused_authorizations_need_no_challenge) {
  ca.reset();
  dns.reset();
  start({.authz_reuse_percent = 100});
  auto key = new_key();
  auto c = registered(key, options());
  const std::string name = unique_label() + ".reuse.test";
  auto first = testbed::run_sync(acme_test::issue(*c, key, *dns, {name}));
  ASSERT_TRUE(first) << first.failure().message;
  EXPECT_EQ(first->reused_authorizations, 0);
  auto second = testbed::run_sync(acme_test::issue(*c, key, *dns, {name}));
  ASSERT_TRUE(second) << second.failure().message;
  EXPECT_EQ(second->reused_authorizations, 1);
}

TEST_F(acme_pebble, a_wrong_txt_value_invalidates_the_order_with_the_cas_problem) {
  auto key = new_key();
  auto c = registered(key, options());
  auto r = testbed::run_sync(
      acme_test::issue(*c, key, *dns, {unique_label() + ".invalid.test"}, {.wrong_txt = "not-the-right-value"}));
  ASSERT_FALSE(r);
  const auto& f = r.failure();
  EXPECT_EQ(f.kind, failure_kind::order_invalid) << f.message;
  EXPECT_TRUE(f.permanent());
  ASSERT_TRUE(f.problem);
  EXPECT_EQ(f.problem->type.rfind("urn:ietf:params:acme:error:", 0), 0u) << f.problem->type;
  EXPECT_FALSE(f.problem->detail.empty());
  EXPECT_NE(f.message.find(f.problem->text()), std::string::npos) << f.message;  // verbatim
  EXPECT_NE(f.message.find("dns-01"), std::string::npos) << f.message;
}

TEST_F(acme_pebble, the_order_goes_invalid_and_says_why) {
  auto key = new_key();
  auto c = registered(key, options());
  auto o = testbed::run_sync(c->new_order({{unique_label() + ".order.test"}, {}, {}}));
  ASSERT_TRUE(o) << o.failure().message;
  auto z = testbed::run_sync(c->get_authorization(o->order.authorizations.front()));
  ASSERT_TRUE(z);
  if (z->authorization.status == authorization_status::pending) {
    dns->set_txt(dns01_record_name(z->authorization.ident.value), "wrong");
    ASSERT_TRUE(testbed::run_sync(c->respond_challenge(z->authorization.find("dns-01")->url)));
  }
  auto polled = testbed::run_sync(c->poll_order(o->url, 60s));
  ASSERT_FALSE(polled);
  EXPECT_EQ(polled.failure().kind, failure_kind::order_invalid) << polled.failure().message;
  EXPECT_TRUE(polled.failure().permanent());
  ASSERT_TRUE(polled.failure().problem) << polled.failure().message;
  EXPECT_NE(polled.failure().message.find(polled.failure().problem->text()), std::string::npos);
}

TEST_F(acme_pebble, refused_identifiers_and_a_wrong_csr_are_the_cas_words) {
  ca.reset();
  dns.reset();
  start({.domain_blocklist = {"blocked.test"}});
  auto key = new_key();
  auto c = registered(key, options());
  auto blocked = testbed::run_sync(c->new_order({{"www.blocked.test"}, {}, {}}));
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.failure().kind, failure_kind::ca_problem);
  ASSERT_TRUE(blocked.failure().problem);
  EXPECT_EQ(blocked.failure().problem->acme_type(), "rejectedIdentifier") << blocked.failure().message;
  EXPECT_TRUE(blocked.failure().permanent());
  EXPECT_EQ(blocked.failure().http_status, 400);

  // Finalize with a CSR for other names than the order's (pebble 2.4 calls it unauthorized).
  const std::string name = unique_label() + ".csr.test";
  auto o = testbed::run_sync(c->new_order({{name}, {}, {}}));
  ASSERT_TRUE(o) << o.failure().message;
  auto z = testbed::run_sync(c->get_authorization(o->order.authorizations.front()));
  ASSERT_TRUE(z);
  if (z->authorization.status == authorization_status::pending) {
    const auto* ch = z->authorization.find("dns-01");
    dns->set_txt(dns01_record_name(name), dns01_txt_value(key_authorization(ch->token, key.thumbprint())));
    ASSERT_TRUE(testbed::run_sync(c->respond_challenge(ch->url)));
    ASSERT_TRUE(testbed::run_sync(c->poll_authorization(o->order.authorizations.front(), 60s)));
  }
  auto ready = testbed::run_sync(c->poll_order(o->url, 60s));
  ASSERT_TRUE(ready) << ready.failure().message;
  auto cert_key = generate_private_key(key_type::ecdsa_p256);
  auto csr = make_csr(*cert_key, {"other." + name});
  auto fin = testbed::run_sync(c->finalize(*ready, *csr));
  ASSERT_FALSE(fin);
  ASSERT_TRUE(fin.failure().problem) << fin.failure().message;
  EXPECT_NE(fin.failure().problem->detail.find("CSR"), std::string::npos) << fin.failure().message;
  EXPECT_EQ(fin.failure().kind, failure_kind::ca_problem);
  EXPECT_TRUE(fin.failure().permanent());
  EXPECT_NE(fin.failure().message.find(fin.failure().problem->text()), std::string::npos);
  EXPECT_EQ(fin.failure().message.rfind("finalize: ", 0), 0u) << fin.failure().message;
}

// pebble 2.4 has no renewalInfo (ARI came in a later pebble): a testbed HTTPS server serves
// pebble's directory with a renewalInfo URL added, and RFC 9773 documents with Retry-After.
TEST_F(acme_pebble, renewal_information_beside_pebbles_directory) {
  auto key = new_key();
  client plain(options(), key);
  auto pebble_dir = testbed::run_sync(plain.get_directory());
  ASSERT_TRUE(pebble_dir);
  testbed::webhook_sink ari(true);
  boost::json::object d{{"newNonce", pebble_dir->new_nonce},
                        {"newAccount", pebble_dir->new_account},
                        {"newOrder", pebble_dir->new_order},
                        {"revokeCert", pebble_dir->revoke_cert},
                        {"keyChange", pebble_dir->key_change},
                        {"renewalInfo", ari.url("/renewal-info")},
                        {"meta", {{"termsOfService", pebble_dir->meta.terms_of_service}}}};
  ari.serve("/directory", {200, {}, boost::json::serialize(d)});

  auto o = options();
  o.directory_url = ari.url("/directory");
  o.ca_pem = ca->tls_ca_pem() + ari.ca_pem();
  auto c = registered(key, o);
  const std::string name = unique_label() + ".ari.test";
  auto first = testbed::run_sync(acme_test::issue(*c, key, *dns, {name}));
  ASSERT_TRUE(first) << first.failure().message;
  auto id = ari_cert_id_of(first->cert.leaf_pem);
  ASSERT_TRUE(id) << id.error().message;

  const auto now = certfleet::system_clock().now_ms();
  ari.serve("/renewal-info/" + *id,
            {200,
             {{"Retry-After", "21600"}},
             R"({"suggestedWindow": {"start": ")" + certfleet::format_iso8601(now + 20LL * 86400'000) + R"(", "end": ")" +
                 certfleet::format_iso8601(now + 22LL * 86400'000) +
                 R"("}, "explanationURL": "https://ca.example/docs/ari"})"});
  auto info = testbed::run_sync(c->get_renewal_info(*id));
  ASSERT_TRUE(info) << info.failure().message;
  EXPECT_EQ(info->retry_after_s, 21600);
  EXPECT_EQ(info->info.explanation_url, "https://ca.example/docs/ari");
  EXPECT_NEAR(static_cast<double>(info->info.suggested_window.start), static_cast<double>(now + 20LL * 86400'000), 1000);
  auto requests = ari.requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_EQ(requests.back().target, "/renewal-info/" + *id);
  EXPECT_EQ(requests.back().method, "GET");

  renewal_inputs in{now, first->cert.not_before_ms, first->cert.not_after_ms, info->info.suggested_window,
                    info->retry_after_s, 99};
  auto later = decide_renewal(in);
  EXPECT_FALSE(later.renew_now);
  EXPECT_EQ(later.next_check_at, now + 21600'000);

  // The CA moves the window into the past (e.g. a mass revocation): renew now, naming the
  // certificate it replaces in the order (pebble 2.4 ignores the field it does not know).
  ari.serve("/renewal-info/" + *id, {200, {{"Retry-After", "60"}},
                                     R"({"suggestedWindow": {"start": ")" + certfleet::format_iso8601(now - 2 * 86400'000LL) +
                                         R"(", "end": ")" + certfleet::format_iso8601(now - 86400'000LL) + R"("}})"});
  auto urgent = testbed::run_sync(c->get_renewal_info(*id));
  ASSERT_TRUE(urgent) << urgent.failure().message;
  in.ari = urgent->info.suggested_window;
  in.retry_after_s = urgent->retry_after_s;
  EXPECT_TRUE(decide_renewal(in).renew_now);
  auto renewed = testbed::run_sync(acme_test::issue(*c, key, *dns, {name}, {.replaces = *id}));
  ASSERT_TRUE(renewed) << renewed.failure().message;
  EXPECT_NE(renewed->cert.serial_hex, first->cert.serial_hex);
  EXPECT_EQ(log.count("replaces " + *id), 1) << log.text();

  // A document that is not RFC 9773: named.
  ari.serve("/renewal-info/" + *id, {200, {}, R"({"suggestedWindow": {"start": "soon"}})"});
  auto bad = testbed::run_sync(c->get_renewal_info(*id));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.failure().kind, failure_kind::not_acme);
  EXPECT_NE(bad.failure().detail.find("renewalInfo.suggestedWindow"), std::string::npos) << bad.failure().detail;
  EXPECT_EQ(bad.failure().message.find("suggestedWindow"), std::string::npos) << bad.failure().message;
  // pebble's own directory has no renewalInfo: said so, not attempted.
  auto none = testbed::run_sync(plain.get_renewal_info(*id));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.failure().kind, failure_kind::bad_input);
}
