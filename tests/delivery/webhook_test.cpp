// Egress allow-list parsing/matching (pure), URL parsing, HMAC, and webhook POSTs against a real
// HTTP/HTTPS receiver on 127.0.0.1 (tests/testbed/webhook_sink): signatures, egress refusal
// before any connection, status classes, deadlines, a closed port, a reset, TLS trust.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "certfleet/net/egress.hpp"
#include "certfleet/delivery/webhook.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "sshd.hpp"  // free_port
#include "tcp_proxy.hpp"
#include "temp_dir.hpp"
#include "webhook_sink.hpp"

using namespace certfleet::delivery;
using namespace certfleet::net;
namespace fs = std::filesystem;
namespace ip = boost::asio::ip;
using std::chrono::milliseconds;

namespace {

egress_policy policy(std::string_view text) {
  auto p = parse_egress_allow_list(text);
  if (!p) throw std::runtime_error("bad test policy: " + p.error().message);
  return *p;
}

ip::address addr(const char* s) { return ip::make_address(s); }

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A self-signed P-256 certificate and its key, made with the openssl CLI.
cert_bundle make_bundle(const fs::path& dir, const std::string& name) {
  fs::create_directories(dir);
  auto c = (dir / (name + ".crt")).string(), k = (dir / (name + ".key")).string();
  auto [rc, out] = testbed::run_command({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:P-256", "-nodes", "-keyout", k, "-out", c, "-days", "2",
                                         "-subj", "/CN=" + name + ".test"});
  if (rc != 0) throw std::runtime_error("openssl req failed: " + out);
  return {slurp(c), slurp(k), slurp(c)};
}

// The base64 body lines of a PEM key: none may show up in a log line or an error.
std::vector<std::string> secret_lines(const std::string& pem) {
  std::vector<std::string> v;
  std::istringstream in(pem);
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l.rfind("-----", 0) != 0 && l.size() >= 16) v.push_back(l.substr(0, 40));
  return v;
}

struct log_capture {
  std::ostringstream out;
  std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  log_capture() {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
    auto logger = std::make_shared<spdlog::logger>("capture", sink);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~log_capture() { spdlog::set_default_logger(previous); }
  std::string text() {
    spdlog::default_logger()->flush();
    return out.str();
  }
};

}  // namespace

// ---- egress allow-list -------------------------------------------------------------------

TEST(egress, parses_cidrs_addresses_names_and_patterns) {
  auto p = parse_egress_allow_list(" 10.0.0.0/8,192.0.2.7\n2001:db8::/32 ::1\tHooks.Example.COM., *.corp.example ");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->ranges.size(), 4u);
  EXPECT_EQ(p->names, std::vector<std::string>{"hooks.example.com"});
  EXPECT_EQ(p->suffixes, std::vector<std::string>{".corp.example"});
  EXPECT_EQ(p->to_string(), "10.0.0.0/8,192.0.2.7/32,2001:db8::/32,::1/128,hooks.example.com,*.corp.example");
  // The canonical text parses back to the same policy.
  auto again = parse_egress_allow_list(p->to_string());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->to_string(), p->to_string());
}

TEST(egress, empty_list_allows_nothing) {
  for (auto text : {"", "  ,, \n"}) {
    auto p = parse_egress_allow_list(text);
    ASSERT_TRUE(p);
    EXPECT_TRUE(p->empty());
    EXPECT_FALSE(p->allows("example.com", {addr("93.184.216.34")}));
    EXPECT_FALSE(p->allows("127.0.0.1", {}));
  }
}

TEST(egress, rejects_bad_entries_naming_the_field_and_entry) {
  for (auto text : {"10.0.0.0/33", "10.0.0.1/8", "::1/129", "10.0.0.0/", "10.0.0.0/x", "not_an/addr", "*",
                    "a.*.example.com", "*example.com", "-bad.example", "exa mple..com", "10.0.0.256", "fe80::1%eth0",
                    "http://x.example", "host.example:443", "[::1]"}) {
    auto p = parse_egress_allow_list(text);
    ASSERT_FALSE(p) << text;
    EXPECT_EQ(p.error().field, "egress_allow_list") << text;
    EXPECT_TRUE(p.error().is(certfleet::errc::invalid_argument));
  }
  auto p = parse_egress_allow_list("10.0.0.0/8, 10.1.2.3/8");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("\"10.1.2.3/8\""), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("10.0.0.0/8?"), std::string::npos) << p.error().message;
}

TEST(egress, every_resolved_address_must_be_inside_a_range) {
  auto p = policy("10.0.0.0/8, 2001:db8::/32");
  EXPECT_TRUE(p.allows("hooks.internal", {addr("10.1.2.3")}));
  EXPECT_TRUE(p.allows("hooks.internal", {addr("10.1.2.3"), addr("2001:db8::5")}));
  // One address outside is enough to refuse: the resolver could hand out either.
  EXPECT_FALSE(p.allows("hooks.internal", {addr("10.1.2.3"), addr("192.168.1.1")}));
  EXPECT_FALSE(p.allows("hooks.internal", {}));  // nothing resolved: nothing to vouch for
  EXPECT_TRUE(p.allows("10.9.9.9", {}));          // an IP literal is its own address
  EXPECT_TRUE(p.allows("[2001:db8::1]", {}));
  EXPECT_FALSE(p.allows("11.0.0.1", {}));
  // IPv4-mapped IPv6 is the same destination as its IPv4 address.
  EXPECT_TRUE(p.allows("x.internal", {addr("::ffff:10.0.0.1")}));
  EXPECT_TRUE(policy("::ffff:10.0.0.0/104").allows("x.internal", {addr("10.2.3.4")}));
  EXPECT_TRUE(policy("0.0.0.0/0").allows("anything.example", {addr("8.8.8.8")}));
  EXPECT_FALSE(policy("0.0.0.0/0").allows("anything.example", {addr("2001:db8::1")}));
}

TEST(egress, name_entries_vouch_for_the_name_whatever_it_resolves_to) {
  auto p = policy("hooks.example.com, *.corp.example");
  EXPECT_TRUE(p.allows("hooks.example.com", {addr("192.168.7.7")}));
  EXPECT_TRUE(p.allows("HOOKS.example.com.", {addr("10.0.0.1")}));
  EXPECT_FALSE(p.allows("evil-hooks.example.com", {addr("10.0.0.1")}));
  EXPECT_FALSE(p.allows("hooks.example.com.evil.net", {addr("10.0.0.1")}));
  EXPECT_TRUE(p.allows("a.corp.example", {addr("10.0.0.1")}));
  EXPECT_TRUE(p.allows("a.b.corp.example", {addr("10.0.0.1")}));
  EXPECT_FALSE(p.allows("corp.example", {addr("10.0.0.1")}));  // the pattern is strictly below
  EXPECT_FALSE(p.allows("xcorp.example", {addr("10.0.0.1")}));
  // A name entry never matches an IP literal (and numeric patterns are not names at all).
  EXPECT_FALSE(policy("localhost").allows("127.0.0.1", {addr("127.0.0.1")}));
  EXPECT_FALSE(parse_egress_allow_list("*.0.0.1"));
}

// A permissive list does not reach this host or its metadata service: loopback, link-local,
// 0.0.0.0 / :: and their IPv4-mapped forms need an entry inside that special range.
TEST(egress, special_addresses_need_an_explicit_entry) {
  auto open = policy("0.0.0.0/0, ::/0");
  for (const char* a : {"127.0.0.1", "127.8.9.10", "::1", "169.254.169.254", "169.254.0.1", "fe80::1", "0.0.0.0", "::",
                        "0.1.2.3", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:0.0.0.0"}) {
    EXPECT_FALSE(open.allows(a, {})) << a;
    EXPECT_FALSE(open.allows("metadata.example", {addr(a)})) << a;
    EXPECT_FALSE(open.allows_address(addr(a))) << a;
    EXPECT_TRUE(is_special_address(addr(a))) << a;
  }
  EXPECT_TRUE(open.allows("8.8.8.8", {}));
  EXPECT_TRUE(open.allows("x.example", {addr("2001:db8::1"), addr("10.0.0.1")}));
  // A name entry vouches for ordinary addresses only.
  auto named = policy("hooks.example.com, *.corp.example");
  EXPECT_FALSE(named.allows("hooks.example.com", {addr("127.0.0.1")}));
  EXPECT_FALSE(named.allows("a.corp.example", {addr("10.0.0.1"), addr("169.254.169.254")}));
  // Listed explicitly: the exact address, or a range inside the special one.
  EXPECT_TRUE(policy("127.0.0.1").allows("127.0.0.1", {}));
  EXPECT_TRUE(policy("127.0.0.1").allows("::ffff:127.0.0.1", {}));
  EXPECT_FALSE(policy("127.0.0.1").allows("127.0.0.2", {}));
  EXPECT_TRUE(policy("127.0.0.0/8").allows("localhost", {addr("127.0.0.1")}));
  EXPECT_TRUE(policy("localhost, 127.0.0.1").allows("localhost", {addr("127.0.0.1")}));
  EXPECT_TRUE(policy("169.254.169.254").allows("169.254.169.254", {}));
  EXPECT_TRUE(policy("::1").allows("[::1]", {}));
  EXPECT_TRUE(policy("fe80::/64").allows("fe80::1", {}));
  EXPECT_TRUE(policy("0.0.0.0").allows("0.0.0.0", {}));
  EXPECT_TRUE(policy("::ffff:127.0.0.0/104").allows("127.1.2.3", {}));
  // A range that merely contains a special range does not name it.
  EXPECT_FALSE(policy("0.0.0.0/1").allows("127.0.0.1", {}));
  EXPECT_FALSE(policy("169.0.0.0/8").allows("169.254.169.254", {}));
  EXPECT_TRUE(policy("169.0.0.0/8").allows("169.1.2.3", {}));
  EXPECT_FALSE(policy("fe80::/9").allows("fe80::1", {}));
  EXPECT_FALSE(policy("::/96").allows("::", {}));
}

// ---- URL, HMAC ---------------------------------------------------------------------------

TEST(webhook_url, parses_scheme_host_port_and_target) {
  auto u = parse_url("HTTPS://Hooks.Example.com/a/b?x=1#frag");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "hooks.example.com");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->target, "/a/b?x=1");
  EXPECT_EQ(u->authority(), "hooks.example.com");
  auto v = parse_url("http://127.0.0.1:8080");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->port, 8080);
  EXPECT_EQ(v->target, "/");
  EXPECT_EQ(v->authority(), "127.0.0.1:8080");
  EXPECT_TRUE(v->host_is_ip());
  auto w = parse_url("http://[::1]:9000?q");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->host, "::1");
  EXPECT_EQ(w->target, "/?q");
  EXPECT_EQ(w->authority(), "[::1]:9000");
}

TEST(webhook_url, rejects_bad_urls_without_quoting_them) {
  for (auto text : {"", "ftp://x.example/", "x.example/hook", "http://", "http:///path", "http://x.example:0/",
                    "http://x.example:65536/", "http://x.example:/", "http://x.example:12a/", "http://[::1/",
                    "http://[zz]/", "http://a b.example/", "http://x.example/\n", "http://-x.example/",
                    "http://10.0.0.256/", "http://x.example/\xc3\xa9"}) {
    auto u = parse_url(text);
    ASSERT_FALSE(u) << text;
    EXPECT_EQ(u.error().field, "url") << text;
  }
  auto u = parse_url("https://user:hunter2@x.example/hook", "webhook.url");
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().field, "webhook.url");
  EXPECT_EQ(u.error().message.find("hunter2"), std::string::npos);
}

TEST(webhook_hmac, matches_rfc_4231) {
  EXPECT_EQ(hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmac_sha256_hex("", "").size(), 64u);
}

// ---- POSTs against the sink --------------------------------------------------------------

class webhook_post : public ::testing::Test {
 protected:
  egress_policy loopback = policy("127.0.0.0/8");

  webhook_request request(const std::string& url, std::string body = R"({"event_id":"e1"})") {
    webhook_request r;
    r.url = url;
    r.body = std::move(body);
    r.timeout = milliseconds(3000);
    r.egress = &loopback;
    return r;
  }
  static webhook_result post(webhook_request r) {
    auto res = testbed::run_sync(post_json(std::move(r)));
    std::cerr << "  -> [" << error_class_name(res.cls) << "] HTTP " << res.status << " " << res.error << "\n";
    return res;
  }
};

TEST_F(webhook_post, signed_post_is_verifiable_by_the_receiver) {
  testbed::webhook_sink sink;
  auto req = request(sink.url("/hooks/certfleet?token=abc"), R"({"event_id":"ev-42","kind":"test"})");
  req.hmac_secret = "s3cret-key";
  req.headers = {{"X-Certfleet-Event-Id", "ev-42"}};
  auto r = post(req);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{}");
  ASSERT_EQ(sink.count(), 1u);
  auto got = sink.requests().front();
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/hooks/certfleet?token=abc");
  EXPECT_EQ(got.body, R"({"event_id":"ev-42","kind":"test"})");
  EXPECT_EQ(got.header("content-type"), "application/json");
  EXPECT_EQ(got.header("x-certfleet-event-id"), "ev-42");
  EXPECT_EQ(got.header("host"), "127.0.0.1:" + std::to_string(sink.port()));
  EXPECT_EQ(got.header("x-certfleet-signature"), "sha256=" + hmac_sha256_hex("s3cret-key", got.body));
  EXPECT_TRUE(got.signature_valid("s3cret-key"));
  EXPECT_FALSE(got.signature_valid("other-key"));
  // Timings name the phases in order.
  std::vector<std::string> phases;
  for (auto& t : r.timings) phases.push_back(t.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"check", "resolve", "egress", "connect", "write", "read", "status"}));
}

TEST_F(webhook_post, unsigned_post_has_no_signature_header) {
  testbed::webhook_sink sink;
  auto r = post(request(sink.url()));
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(sink.count(), 1u);
  EXPECT_EQ(sink.requests()[0].header("x-certfleet-signature"), "");
}

TEST_F(webhook_post, egress_refusal_connects_to_nothing) {
  testbed::webhook_sink sink;
  auto elsewhere = policy("10.0.0.0/8, hooks.example.com");
  auto req = request(sink.url());
  req.egress = &elsewhere;
  req.hmac_secret = "s3cret-key";
  auto r = post(req);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.error, "egress_allow_list does not allow 127.0.0.1");
  EXPECT_EQ(r.phase, "egress");
  EXPECT_EQ(r.status, 0);
  // An empty list and no list refuse as well, before resolving anything.
  auto none = policy("");
  req.egress = &none;
  EXPECT_EQ(post(req).error, "egress_allow_list does not allow 127.0.0.1");
  req.egress = nullptr;
  EXPECT_EQ(post(req).cls, error_class::validation);
  // A name that resolves to loopback is not let through by a pattern it does not match.
  auto pattern = policy("*.example.com");
  auto by_name = request("http://localhost:" + std::to_string(sink.port()) + "/hook");
  by_name.egress = &pattern;
  auto rn = post(by_name);
  EXPECT_EQ(rn.error, "egress_allow_list does not allow localhost");
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(sink.count(), 0u);
}

TEST_F(webhook_post, name_entry_allows_that_host) {
  testbed::webhook_sink sink;
  auto by_name = policy("localhost, 127.0.0.1");  // the name, and loopback listed by address
  auto req = request("http://localhost:" + std::to_string(sink.port()) + "/hook");
  req.egress = &by_name;
  auto r = post(req);
  EXPECT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(sink.count(), 1u);
  EXPECT_EQ(sink.requests()[0].header("host"), "localhost:" + std::to_string(sink.port()));
}

TEST_F(webhook_post, status_codes_map_to_error_classes) {
  testbed::webhook_sink sink;
  struct row {
    int status;
    error_class cls;
  };
  for (auto [status, cls] : {row{500, error_class::io_transient}, row{503, error_class::io_transient},
                             row{429, error_class::io_transient}, row{404, error_class::validation},
                             row{400, error_class::validation}, row{401, error_class::auth},
                             row{403, error_class::auth}, row{302, error_class::validation},
                             row{204, error_class::none}, row{201, error_class::none}}) {
    sink.respond_with(status);
    auto r = post(request(sink.url()));
    EXPECT_EQ(r.status, status);
    EXPECT_EQ(r.cls, cls) << status;
    if (cls != error_class::none) {
      EXPECT_EQ(r.phase, "status");
      EXPECT_NE(r.error.find("HTTP " + std::to_string(status)), std::string::npos) << r.error;
    }
  }
}

TEST_F(webhook_post, scripted_failures_then_success_for_retries) {
  testbed::webhook_sink sink;
  sink.respond_with(503, 2);
  EXPECT_EQ(post(request(sink.url())).cls, error_class::io_transient);
  EXPECT_EQ(post(request(sink.url())).cls, error_class::io_transient);
  EXPECT_TRUE(post(request(sink.url())).ok());
  EXPECT_TRUE(sink.wait_for(3, milliseconds(1000)));
  EXPECT_EQ(sink.count(), 3u);
}

TEST_F(webhook_post, hanging_receiver_times_out_as_network) {
  testbed::webhook_sink sink;
  sink.hang_next();
  auto req = request(sink.url());
  req.timeout = milliseconds(500);
  auto started = std::chrono::steady_clock::now();
  auto r = post(req);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.cls, error_class::network);
  EXPECT_EQ(r.phase, "read");
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(took, milliseconds(2500));
  EXPECT_GE(took, milliseconds(450));
  EXPECT_EQ(sink.count(), 1u);  // it did arrive; the answer never came
  // The next request is answered again.
  EXPECT_TRUE(post(request(sink.url())).ok());
}

TEST_F(webhook_post, closed_port_is_network) {
  testbed::closed_port closed;
  auto r = post(request("http://127.0.0.1:" + std::to_string(closed.port()) + "/hook"));
  EXPECT_EQ(r.cls, error_class::network);
  EXPECT_EQ(r.phase, "connect");
  EXPECT_NE(r.error.find("refused"), std::string::npos) << r.error;
}

TEST_F(webhook_post, unresolvable_name_is_network) {
  auto any = policy("*.invalid");
  auto req = request("http://certfleet-no-such-host.invalid/hook");
  req.egress = &any;
  auto r = post(req);
  EXPECT_EQ(r.cls, error_class::network);
  EXPECT_EQ(r.phase, "resolve");
}

TEST_F(webhook_post, reset_mid_exchange_is_io_transient) {
  testbed::webhook_sink sink;
  testbed::tcp_proxy proxy(testbed::tcp_proxy::mode::reset_after, sink.port(), 20);
  auto r = post(request("http://127.0.0.1:" + std::to_string(proxy.port()) + "/hook"));
  EXPECT_EQ(r.cls, error_class::io_transient) << r.error;
  EXPECT_EQ(sink.count(), 0u);
}

TEST_F(webhook_post, blackholed_connection_times_out) {
  testbed::tcp_proxy proxy(testbed::tcp_proxy::mode::blackhole, 0);
  auto req = request("http://127.0.0.1:" + std::to_string(proxy.port()) + "/hook");
  req.timeout = milliseconds(400);
  auto r = post(req);
  EXPECT_EQ(r.cls, error_class::network);
}

TEST_F(webhook_post, header_injection_is_refused_before_connecting) {
  testbed::webhook_sink sink;
  auto req = request(sink.url());
  req.headers = {{"X-Note", "a\r\nX-Evil: 1"}};
  auto r = post(req);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "check");
  EXPECT_EQ(r.error.find("X-Evil"), std::string::npos);  // values are never quoted back
  req.headers = {{"Content-Length", "5"}};
  EXPECT_EQ(post(req).cls, error_class::validation);
  req.headers = {{"Bad Name", "x"}};
  EXPECT_EQ(post(req).cls, error_class::validation);
  EXPECT_EQ(sink.count(), 0u);
}

TEST_F(webhook_post, https_with_the_test_ca) {
  testbed::webhook_sink sink(true);
  ASSERT_FALSE(sink.ca_pem().empty());
  auto req = request(sink.url());
  req.ca_pem = sink.ca_pem();
  req.hmac_secret = "k";
  auto r = post(req);
  EXPECT_TRUE(r.ok()) << r.error;
  ASSERT_EQ(sink.count(), 1u);
  EXPECT_TRUE(sink.requests()[0].signature_valid("k"));
  std::vector<std::string> phases;
  for (auto& t : r.timings) phases.push_back(t.phase);
  EXPECT_NE(std::find(phases.begin(), phases.end(), "tls"), phases.end());
  // By name too: the certificate names localhost, and SNI/host verification use the name.
  auto by_name = policy("localhost, 127.0.0.1");
  auto named = request("https://localhost:" + std::to_string(sink.port()) + "/hook");
  named.egress = &by_name;
  named.ca_pem = sink.ca_pem();
  EXPECT_TRUE(post(named).ok());
}

// The client keeps one TLS context per CA bundle (tls_client.cpp): a bundle that does not hold
// the server's CA is refused even right after the one that does was used, and back again.
TEST_F(webhook_post, each_ca_bundle_gets_its_own_trust) {
  testbed::webhook_sink a(true), b(true);
  ASSERT_NE(a.ca_pem(), b.ca_pem());
  auto req = request(a.url());
  req.ca_pem = a.ca_pem();
  EXPECT_TRUE(post(req).ok());
  req.ca_pem = b.ca_pem();
  auto r = post(req);
  EXPECT_EQ(r.cls, error_class::auth) << r.error;
  EXPECT_EQ(r.phase, "tls");
  req.ca_pem = a.ca_pem();
  EXPECT_TRUE(post(req).ok());
  auto to_b = request(b.url());
  to_b.ca_pem = b.ca_pem();
  EXPECT_TRUE(post(to_b).ok());
  EXPECT_EQ(a.count(), 2u);
  EXPECT_EQ(b.count(), 1u);
}

TEST_F(webhook_post, https_without_trust_is_auth_and_sends_nothing) {
  testbed::webhook_sink sink(true);
  auto r = post(request(sink.url()));
  EXPECT_EQ(r.cls, error_class::auth);
  EXPECT_EQ(r.phase, "tls");
  EXPECT_NE(r.error.find("not trusted"), std::string::npos) << r.error;
  // A CA that does not parse is a bad request.
  auto bad = request(sink.url());
  bad.ca_pem = "not a pem";
  EXPECT_EQ(post(bad).cls, error_class::validation);
  EXPECT_EQ(sink.count(), 0u);
}

TEST_F(webhook_post, plain_http_to_a_tls_port_fails_cleanly) {
  testbed::webhook_sink sink(true);
  auto req = request("http://127.0.0.1:" + std::to_string(sink.port()) + "/hook");
  req.timeout = milliseconds(1500);
  auto r = post(req);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status, 0);
}

// ---- webhook delivery module -------------------------------------------------------------

class webhook_delivery : public ::testing::Test {
 protected:
  testbed::temp_dir dir{"certfleet-webhook"};
  cert_bundle bundle = make_bundle(dir.path(), "leaf");
  egress_policy loopback = policy("127.0.0.0/8");
  log_capture logs;

  webhook_options options(const testbed::webhook_sink& sink) {
    webhook_options o;
    o.timeout = milliseconds(3000);
    o.egress = &loopback;
    o.ca_pem = sink.ca_pem();
    return o;
  }
  void expect_no_secret(const std::string& text, const std::string& secret) {
    for (const auto& line : secret_lines(bundle.key_pem)) EXPECT_EQ(text.find(line), std::string::npos) << text;
    EXPECT_EQ(text.find(secret), std::string::npos) << text;
  }
};

TEST_F(webhook_delivery, posts_the_bundle_signed_over_https) {
  testbed::webhook_sink sink(true);
  auto r = testbed::run_sync(deliver_webhook(sink.url("/deploy"), "hook-secret-1", bundle, "run-7", options(sink)));
  EXPECT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_EQ(r.cls, error_class::none);
  EXPECT_EQ(r.fingerprint_sha256.size(), 64u);
  ASSERT_EQ(sink.count(), 1u);
  auto got = sink.requests()[0];
  EXPECT_TRUE(got.signature_valid("hook-secret-1"));
  EXPECT_EQ(got.header("x-certfleet-event-id"), "run-7");
  auto doc = boost::json::parse(got.body).as_object();
  EXPECT_EQ(doc.at("certificate_pem").as_string(), bundle.cert_pem);
  EXPECT_EQ(doc.at("chain_pem").as_string(), bundle.chain_pem);
  EXPECT_EQ(doc.at("private_key_pem").as_string(), bundle.key_pem);
  EXPECT_EQ(doc.at("fingerprint_sha256").as_string(), r.fingerprint_sha256);
  EXPECT_EQ(doc.at("run_id").as_string(), "run-7");
  expect_no_secret(logs.text(), "hook-secret-1");
}

TEST_F(webhook_delivery, failures_are_classified_without_secrets) {
  testbed::webhook_sink sink(true);
  sink.respond_with(500);
  auto r = testbed::run_sync(deliver_webhook(sink.url(), "hook-secret-2", bundle, "run-8", options(sink)));
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::io_transient);
  EXPECT_EQ(r.phase, "status");
  EXPECT_EQ(r.error.rfind("status: ", 0), 0u) << r.error;
  expect_no_secret(r.error, "hook-secret-2");
  sink.respond_with(404);
  auto nf = testbed::run_sync(deliver_webhook(sink.url(), "hook-secret-2", bundle, "run-8", options(sink)));
  EXPECT_EQ(nf.cls, error_class::validation);
  expect_no_secret(logs.text(), "hook-secret-2");
}

TEST_F(webhook_delivery, refuses_plain_http_bad_input_and_egress) {
  testbed::webhook_sink sink;
  auto o = options(sink);
  auto r = testbed::run_sync(deliver_webhook(sink.url(), "s", bundle, "run-1", o));
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "check");
  EXPECT_NE(r.error.find("https://"), std::string::npos) << r.error;
  o.allow_plain_http = true;
  EXPECT_EQ(testbed::run_sync(deliver_webhook(sink.url(), "s", bundle, "run-1", o)).status, delivery_status::succeeded);
  EXPECT_EQ(sink.count(), 1u);

  auto mismatched = bundle;
  mismatched.key_pem = make_bundle(dir.path(), "other").key_pem;
  EXPECT_EQ(testbed::run_sync(deliver_webhook(sink.url(), "s", mismatched, "run-1", o)).cls, error_class::validation);
  EXPECT_EQ(testbed::run_sync(deliver_webhook(sink.url(), "s", bundle, "bad run/id", o)).cls, error_class::validation);
  EXPECT_EQ(testbed::run_sync(deliver_webhook("ftp://x", "s", bundle, "run-1", o)).cls, error_class::validation);

  auto elsewhere = policy("10.0.0.0/8");
  o.egress = &elsewhere;
  auto eg = testbed::run_sync(deliver_webhook(sink.url(), "s", bundle, "run-1", o));
  EXPECT_EQ(eg.cls, error_class::validation);
  EXPECT_EQ(eg.error, "egress: egress_allow_list does not allow 127.0.0.1");
  EXPECT_EQ(sink.count(), 1u);
}

TEST_F(webhook_delivery, timeout_and_closed_port_are_network) {
  testbed::webhook_sink sink(true);
  sink.hang_next();
  auto o = options(sink);
  o.timeout = milliseconds(500);
  auto r = testbed::run_sync(deliver_webhook(sink.url(), "s", bundle, "run-1", o));
  EXPECT_EQ(r.cls, error_class::network);
  testbed::closed_port port;
  auto closed = testbed::run_sync(
      deliver_webhook("https://127.0.0.1:" + std::to_string(port.port()) + "/", "s", bundle, "run-1", o));
  EXPECT_EQ(closed.cls, error_class::network);
  EXPECT_TRUE(retryable(closed.cls));
}
