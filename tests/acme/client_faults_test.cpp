// The ACME client against servers that are not (good) ACME servers, all real sockets on
// 127.0.0.1: a directory URL answering JSON without the fields and one answering HTML, an
// unreachable and a silent CA (within the deadline), an untrusted TLS certificate, and a scripted
// CA (tests/testbed/webhook_sink) answering rateLimited with Retry-After and a compound problem
// with subproblems — things pebble cannot be made to do. Every server here is on 127.0.0.1,
// which acme_allow_list reaches only when it lists it: each client is given that list.
// What no ACME server answered (a page, JSON that is not a directory, a closed port, an untrusted
// certificate) has one uniform message naming HOST:PORT; the cause is in `detail` (client.hpp).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "certfleet/acme/client.hpp"
#include "run_sync.hpp"
#include "sshd.hpp"  // closed_port
#include "tcp_proxy.hpp"
#include "webhook_sink.hpp"

using namespace certfleet::acme;
using namespace std::chrono_literals;
using boost::asio::awaitable;
using steady = std::chrono::steady_clock;

namespace {

// acme_allow_list = "127.0.0.1": the testbed's servers.
const certfleet::net::egress_policy* loopback() {
  static const auto p = *certfleet::net::parse_egress_allow_list("127.0.0.1", "acme_allow_list");
  return &p;
}

account_key new_key() {
  auto k = account_key::generate();
  if (!k) throw std::runtime_error(k.error().message);
  return std::move(*k);
}

struct fake_ca {
  testbed::webhook_sink sink{true};
  std::vector<std::string> lines;

  fake_ca() {
    boost::json::object d{{"newNonce", sink.url("/nonce")},
                          {"newAccount", sink.url("/account")},
                          {"newOrder", sink.url("/order")},
                          {"revokeCert", sink.url("/revoke")}};
    sink.serve("/directory", {200, {}, boost::json::serialize(d)});
    sink.serve("/nonce", {200, {{"Replay-Nonce", "nonce-from-fake-ca"}, {"Cache-Control", "no-store"}}, ""});
    sink.serve("/account", {201,
                            {{"Location", sink.url("/acct/1")}, {"Replay-Nonce", "n2"}},
                            R"({"status":"valid","contact":["mailto:ops@example.org"]})"});
  }
  client_options options() {
    client_options o;
    o.directory_url = sink.url("/directory");
    o.ca_pem = sink.ca_pem();
    o.egress = loopback();
    o.request_timeout = 10s;
    o.log = [this](std::string level, std::string message) -> awaitable<void> {
      lines.push_back(level + ": " + message);
      co_return;
    };
    return o;
  }
};

}  // namespace

TEST(acme_faults, a_json_directory_without_the_fields_is_named) {
  testbed::webhook_sink sink(true);
  sink.serve("/api", {200, {}, R"({"status":"ok","version":"1.2.3"})"});
  auto key = new_key();
  client_options o;
  o.directory_url = sink.url("/api");
  o.ca_pem = sink.ca_pem();
  o.egress = loopback();
  client c(o, key);
  auto d = testbed::run_sync(c.get_directory());
  ASSERT_FALSE(d);
  const auto& f = d.failure();
  EXPECT_EQ(f.kind, failure_kind::not_acme);
  EXPECT_FALSE(f.permanent());  // like a closed port: nothing tells them apart
  EXPECT_EQ(f.message.rfind("directory_url: could not fetch an ACME directory from 127.0.0.1:", 0), 0u) << f.message;
  EXPECT_EQ(f.message.find("/api"), std::string::npos) << f.message;
  // The cause, for the server's log.
  EXPECT_NE(f.detail.find(o.directory_url), std::string::npos) << f.detail;
  EXPECT_NE(f.detail.find("is not an ACME directory"), std::string::npos) << f.detail;
  EXPECT_NE(f.detail.find("directory.newNonce is missing"), std::string::npos) << f.detail;
  // Nothing else was asked of it.
  EXPECT_EQ(sink.count(), 1u);
}

TEST(acme_faults, an_html_page_is_named) {
  testbed::webhook_sink sink(true);
  sink.serve("/", {200, {{"Content-Type", "text/html; charset=utf-8"}},
                   "<!DOCTYPE html>\n<html><head><title>Welcome</title></head><body>It works</body></html>"});
  auto key = new_key();
  client_options o;
  o.directory_url = sink.url("/");
  o.ca_pem = sink.ca_pem();
  o.egress = loopback();
  client c(o, key);
  auto d = testbed::run_sync(c.get_directory());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.failure().kind, failure_kind::not_acme);
  EXPECT_FALSE(d.failure().permanent());
  EXPECT_NE(d.failure().message.find("directory_url"), std::string::npos) << d.failure().message;
  EXPECT_EQ(d.failure().message.find("HTML"), std::string::npos) << d.failure().message;
  EXPECT_NE(d.failure().detail.find("HTML"), std::string::npos) << d.failure().detail;
  EXPECT_NE(d.failure().detail.find("Content-Type text/html"), std::string::npos) << d.failure().detail;

  // A 404 page is the wrong URL too; a 503 may pass, and its Retry-After is honoured.
  sink.serve("/missing", {404, {{"Content-Type", "text/html"}}, "<h1>Not Found</h1>"});
  o.directory_url = sink.url("/missing");
  client c404(o, key);
  auto nf = testbed::run_sync(c404.get_directory());
  ASSERT_FALSE(nf);
  EXPECT_EQ(nf.failure().message, d.failure().message);
  EXPECT_NE(nf.failure().detail.find("HTTP 404"), std::string::npos) << nf.failure().detail;
  sink.serve("/down", {503, {{"Content-Type", "text/html"}, {"Retry-After", "120"}}, "<h1>Maintenance</h1>"});
  o.directory_url = sink.url("/down");
  client c503(o, key);
  auto down = testbed::run_sync(c503.get_directory());
  ASSERT_FALSE(down);
  EXPECT_FALSE(down.failure().permanent());
  EXPECT_EQ(down.failure().retry_after_s, 120);
}

TEST(acme_faults, unreachable_directory_is_a_network_error_within_the_deadline) {
  testbed::closed_port closed;
  auto key = new_key();
  client_options o;
  o.directory_url = "https://127.0.0.1:" + std::to_string(closed.port()) + "/directory";
  o.request_timeout = 5s;
  o.egress = loopback();
  client c(o, key);
  auto started = steady::now();
  auto d = testbed::run_sync(c.get_directory());
  ASSERT_FALSE(d);
  EXPECT_LT(steady::now() - started, 5s);
  EXPECT_EQ(d.failure().kind, failure_kind::network) << d.failure().message;
  EXPECT_FALSE(d.failure().permanent());
  EXPECT_EQ(d.failure().message.find("refused"), std::string::npos) << d.failure().message;
  EXPECT_NE(d.failure().detail.find("refused"), std::string::npos) << d.failure().detail;

  // A CA that accepts the connection and never answers: the deadline ends it.
  testbed::tcp_proxy silent(testbed::tcp_proxy::mode::blackhole, 0);
  o.directory_url = "https://127.0.0.1:" + std::to_string(silent.port()) + "/directory";
  o.request_timeout = 1500ms;
  client slow(o, key);
  started = steady::now();
  auto t = testbed::run_sync(slow.get_directory());
  auto took = steady::now() - started;
  ASSERT_FALSE(t);
  EXPECT_EQ(t.failure().kind, failure_kind::timeout) << t.failure().message;
  EXPECT_FALSE(t.failure().permanent());
  EXPECT_GE(took, 1400ms);
  EXPECT_LT(took, 6s);
}

TEST(acme_faults, an_untrusted_ca_certificate_is_named_in_the_detail) {
  testbed::webhook_sink sink(true);
  auto key = new_key();
  client_options o;
  o.directory_url = sink.url("/directory");  // no ca_pem: the sink's self-signed certificate is unknown
  o.egress = loopback();
  client c(o, key);
  auto d = testbed::run_sync(c.get_directory());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.failure().kind, failure_kind::untrusted) << d.failure().message;
  // An open TLS port must not read differently from a closed one.
  EXPECT_FALSE(d.failure().permanent());
  EXPECT_EQ(d.failure().message.find("ca_bundle_pem"), std::string::npos) << d.failure().message;
  EXPECT_NE(d.failure().detail.find("ca_bundle_pem"), std::string::npos) << d.failure().detail;
  EXPECT_EQ(sink.count(), 0u);
}

TEST(acme_faults, rate_limited_is_transient_with_its_retry_after_and_the_cas_words) {
  fake_ca ca;
  ca.sink.serve("/order", {429,
                           {{"Content-Type", "application/problem+json"}, {"Retry-After", "3600"}, {"Replay-Nonce", "n3"}},
                           R"({"type":"urn:ietf:params:acme:error:rateLimited","detail":"too many new orders (300) from this account in the last 3h0m0s, retry after 2026-12-03 00:00:00 UTC: see https://letsencrypt.org/docs/rate-limits/#new-orders-per-account","status":429})"});
  auto key = new_key();
  client c(ca.options(), key);
  auto acct = testbed::run_sync(c.new_account({{"mailto:ops@example.org"}, true, std::nullopt, false}));
  ASSERT_TRUE(acct) << acct.failure().message;
  EXPECT_EQ(acct->url, ca.sink.url("/acct/1"));
  auto o = testbed::run_sync(c.new_order({{"www.example.org"}, {}, {}}));
  ASSERT_FALSE(o);
  const auto& f = o.failure();
  EXPECT_EQ(f.kind, failure_kind::ca_problem);
  EXPECT_FALSE(f.permanent());
  EXPECT_EQ(f.retry_after_s, 3600);
  EXPECT_EQ(f.http_status, 429);
  EXPECT_NE(f.message.find("too many new orders (300) from this account"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("Retry-After 3600 s"), std::string::npos) << f.message;
  auto e = f.to_error();
  EXPECT_TRUE(e.is(certfleet::errc::rate_limited));
  EXPECT_EQ(e.retry_after_s, 3600);
  // The job log saw it.
  bool logged = false;
  for (const auto& l : ca.lines) logged = logged || (l.rfind("warn: ", 0) == 0 && l.find("rateLimited") != std::string::npos);
  EXPECT_TRUE(logged);
  // The JWS the fake CA received was signed with kid = the account URL and the CA's nonce.
  auto reqs = ca.sink.requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().target, "/order");
  EXPECT_EQ(reqs.back().header("content-type"), "application/jose+json");
}

TEST(acme_faults, a_compound_problem_keeps_its_subproblems) {
  fake_ca ca;
  ca.sink.serve("/order", {400,
                           {{"Content-Type", "application/problem+json"}, {"Replay-Nonce", "n3"}},
                           R"({"type":"urn:ietf:params:acme:error:compound","detail":"Error creating new order :: 2 identifiers were refused",
                               "status":400,"subproblems":[
                                 {"type":"urn:ietf:params:acme:error:rejectedIdentifier","detail":"Cannot issue for \"bank.example\": Domain name is blocked by policy","identifier":{"type":"dns","value":"bank.example"}},
                                 {"type":"urn:ietf:params:acme:error:caa","detail":"CAA record for shop.example prevents issuance","identifier":{"type":"dns","value":"shop.example"}}]})"});
  auto key = new_key();
  client c(ca.options(), key);
  ASSERT_TRUE(testbed::run_sync(c.new_account({{}, true, std::nullopt, false})));
  auto o = testbed::run_sync(c.new_order({{"bank.example", "shop.example", "ok.example"}, {}, {}}));
  ASSERT_FALSE(o);
  const auto& f = o.failure();
  EXPECT_TRUE(f.permanent());
  ASSERT_TRUE(f.problem);
  ASSERT_EQ(f.problem->subproblems.size(), 2u);
  EXPECT_EQ(f.problem->subproblems[1].acme_type(), "caa");
  EXPECT_EQ(f.problem->subproblems[0].ident->value, "bank.example");
  EXPECT_NE(f.message.find("dns bank.example: urn:ietf:params:acme:error:rejectedIdentifier: Cannot issue for \"bank.example\""),
            std::string::npos)
      << f.message;
  EXPECT_NE(f.message.find("dns shop.example: urn:ietf:params:acme:error:caa: CAA record"), std::string::npos) << f.message;
}

TEST(acme_faults, bad_arguments_are_refused_before_any_request) {
  fake_ca ca;
  auto key = new_key();
  client c(ca.options(), key);
  // No account yet: an order needs one.
  auto no_account = testbed::run_sync(c.new_order({{"www.example.org"}, {}, {}}));
  ASSERT_FALSE(no_account);
  EXPECT_EQ(no_account.failure().kind, failure_kind::bad_input);
  c.set_account_url(ca.sink.url("/acct/1"));
  auto bad_name = testbed::run_sync(c.new_order({{"www.example.org", "bad name"}, {}, {}}));
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.failure().field, "domains[1]");
  auto none = testbed::run_sync(c.new_order({{}, {}, {}}));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.failure().field, "domains");
  auto contact = testbed::run_sync(c.new_account({{"ops@example.org"}, true, std::nullopt, false}));
  ASSERT_FALSE(contact);
  EXPECT_EQ(contact.failure().field, "contact[0]");
  auto eab = testbed::run_sync(c.new_account({{}, true, eab_credentials{"kid", "!!"}, false}));
  ASSERT_FALSE(eab);
  EXPECT_EQ(eab.failure().field, "eab.hmac_key");
  EXPECT_EQ(ca.sink.count(), 1u);  // only the directory was fetched (for newAccount's URL)
}
