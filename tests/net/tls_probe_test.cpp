// Discovery (tls_probe.hpp): the spec parser and egress check (pure), assess_chain over chains
// made in-process, and probe_tls/scan against real `openssl s_server` processes and in-test
// listeners on 127.0.0.1, each stopped by PID when its test ends (pass or fail).
#include "certfleet/net/tls_probe.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <thread>

#include "certs.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "tcp_proxy.hpp"
#include "s_server.hpp"
#include "temp_dir.hpp"

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace certfleet;
using namespace certfleet::net;
using namespace std::chrono_literals;

namespace {

const std::string openssl_bin = "/usr/bin/openssl";
constexpr std::int64_t day_ms = 86'400'000;

std::vector<std::string> v(std::initializer_list<std::string> l) { return l; }

// ---- Certificates ----

std::string der_of(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  if (!x) throw std::runtime_error("test PEM does not parse");
  int n = i2d_X509(x, nullptr);
  std::string der(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(der.data());
  i2d_X509(x, &p);
  X509_free(x);
  return der;
}

// One private PKI for the whole binary: root → intermediate, leaves issued per test.
struct pki {
  testbed::pem_cert root, inter;
  pki() {
    testbed::cert_spec r;
    r.common_name = "Probe Test Root";
    r.is_ca = true;
    r.not_after_ms = testbed::unix_now_ms() + 3650 * day_ms;
    root = testbed::make_certificate(r);
    testbed::cert_spec i;
    i.common_name = "Probe Test Intermediate";
    i.is_ca = true;
    i.issuer = &root;
    i.not_after_ms = testbed::unix_now_ms() + 1825 * day_ms;
    inter = testbed::make_certificate(i);
  }
  testbed::pem_cert leaf(const std::string& name, std::int64_t not_after_ms = testbed::unix_now_ms() + 90 * day_ms,
                         std::int64_t not_before_ms = testbed::unix_now_ms() - 3600'000) const {
    testbed::cert_spec s;
    s.common_name = name;
    s.dns_sans = {name};
    s.issuer = &inter;
    s.not_after_ms = not_after_ms;
    s.not_before_ms = not_before_ms;
    return testbed::make_certificate(s);
  }
  std::string full_chain() const { return inter.cert_pem + root.cert_pem; }
};

const pki& test_pki() {
  static const pki p;
  return p;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

// ---- Servers ----

using testbed::s_server;
using testbed::start_s_server;

// A port nothing listens on: bound by the kernel, then released.
std::uint16_t closed_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto port = a.local_endpoint().port();
  a.close();
  return port;
}

// Accepts, reads the ClientHello and holds the connection for `hold` before closing it without a
// word: every probe of it is one handshake in flight for that long. Counts how many were in
// flight at once.
class holding_listener {
 public:
  explicit holding_listener(std::chrono::milliseconds hold) : hold_(hold) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen(64);
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(ioc_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~holding_listener() {
    ioc_.stop();
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  int peak() const { return peak_; }
  int accepted() const { return accepted_; }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, sock] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      ++accepted_;
      asio::co_spawn(ioc_, hold_one(std::move(sock)), asio::detached);
    }
  }
  asio::awaitable<void> hold_one(tcp::socket sock) {
    int now = ++in_flight_;
    int seen = peak_.load();
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    char buf[512];
    (void)co_await sock.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    asio::steady_timer t(ioc_, hold_);
    (void)co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    --in_flight_;  // before the close, so the probe's next connection is never counted with this one
    boost::system::error_code ignored;
    sock.close(ignored);
  }

  std::chrono::milliseconds hold_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  std::uint16_t port_ = 0;
  std::atomic<int> in_flight_{0}, peak_{0}, accepted_{0};
  std::thread thread_;
};

probe_outcome probe(const std::string& host, std::uint16_t port, const std::string& sni,
                    std::chrono::milliseconds timeout = 5s, const egress_policy* egress = nullptr) {
  return testbed::run_sync(probe_tls(probe_target{host, port, sni}, timeout, egress, nullptr));
}

chain_assessment assess(const probe_outcome& out, const std::string& expected, int expiring_days = 30) {
  auto a = assess_chain(out.chain_der, expected, out.protocol, testbed::unix_now_ms(), expiring_days);
  if (!a) throw std::runtime_error("assess_chain: " + a.error().message);
  return *a;
}

// What one s_server is found to be: probed with SNI `name` and assessed for it.
std::vector<std::string> findings_of(const s_server& s, const std::string& name, probe_outcome* keep = nullptr) {
  auto out = probe("127.0.0.1", s.port, name);
  if (!out.ok()) throw std::runtime_error("probe failed: " + out.error + " / s_server: " + s.proc->stderr_text());
  auto a = assess(out, name);
  if (keep) *keep = std::move(out);
  return a.findings;
}

}  // namespace

// ---- Spec parser ----------------------------------------------------------------------------

TEST(DiscoverySpec, EndpointsRangesAndPortsInOrder) {
  auto plan = parse_discovery_spec(v({"A.Example.:443", "[2001:db8::1]:8443", "192.0.2.1:443"}), v({"10.0.0.0/30"}), {443, 8443},
                                   {}, 65536);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->size(), 7u);  // 3 endpoints + 2 addresses (.1, .2) × 2 ports
  auto t0 = plan->at(0);
  EXPECT_EQ(t0.host, "a.example");
  EXPECT_EQ(t0.port, 443);
  EXPECT_EQ(t0.sni, "a.example");  // a named endpoint is asked for itself
  auto t1 = plan->at(1);
  EXPECT_EQ(t1.host, "2001:db8::1");
  EXPECT_EQ(t1.sni, "");  // never an address as SNI
  EXPECT_EQ(t1.endpoint_text(), "[2001:db8::1]:8443");
  EXPECT_EQ(plan->at(2).endpoint_text(), "192.0.2.1:443");
  EXPECT_EQ(plan->at(3).endpoint_text(), "10.0.0.1:443");
  EXPECT_EQ(plan->at(4).endpoint_text(), "10.0.0.1:8443");
  EXPECT_EQ(plan->at(5).endpoint_text(), "10.0.0.2:443");
  EXPECT_EQ(plan->at(6).endpoint_text(), "10.0.0.2:8443");
  EXPECT_EQ(plan->at(6).expected_name(), "10.0.0.2");
  EXPECT_THROW((void)plan->at(7), std::out_of_range);
}

TEST(DiscoverySpec, RangeSizesSkipNetworkAndBroadcast) {
  auto count = [](const std::string& cidr) {
    auto p = parse_discovery_spec({}, {cidr}, {}, {}, 1u << 20);
    if (!p) throw std::runtime_error(p.error().message);
    return p->size();
  };
  EXPECT_EQ(count("10.0.0.0/24"), 254u);
  EXPECT_EQ(count("10.0.0.0/30"), 2u);
  EXPECT_EQ(count("10.0.0.0/31"), 2u);  // RFC 3021: both are hosts
  EXPECT_EQ(count("10.0.0.7/32"), 1u);
  EXPECT_EQ(count("10.0.0.7"), 1u);
  EXPECT_EQ(count("2001:db8::/120"), 256u);  // IPv6 has no broadcast
  auto p = parse_discovery_spec({}, v({"10.0.0.0/24"}), {}, {}, 1000);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->at(0).host, "10.0.0.1");
  EXPECT_EQ(p->at(253).host, "10.0.0.254");
  EXPECT_EQ(p->at(0).port, 443);  // no ports: 443
}

TEST(DiscoverySpec, Slash20IsComputedNotStored) {
  auto p = parse_discovery_spec({}, v({"10.20.0.0/20"}), {443}, {}, 65536);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->size(), 4094u);
  EXPECT_EQ(p->at(0).host, "10.20.0.1");
  EXPECT_EQ(p->at(255).host, "10.20.1.0");  // carries into the third byte
  EXPECT_EQ(p->at(4093).host, "10.20.15.254");
  EXPECT_EQ(p->ranges().size(), 1u);
  EXPECT_TRUE(p->listed_targets().empty());
  auto v6 = parse_discovery_spec({}, v({"2001:db8::ff00/120"}), {443}, {}, 65536);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->at(255).host, "2001:db8::ffff");
}

TEST(DiscoverySpec, EachTargetOncePerSniName) {
  auto p = parse_discovery_spec(v({"192.0.2.1:443", "host.example:8443"}), {}, {}, v({"a.test", "B.test."}), 100);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 4u);
  EXPECT_EQ(p->at(0).sni, "a.test");
  EXPECT_EQ(p->at(1).sni, "b.test");
  EXPECT_EQ(p->at(1).host, "192.0.2.1");
  EXPECT_EQ(p->at(2).host, "host.example");
  EXPECT_EQ(p->at(3).sni, "b.test");
  EXPECT_EQ(p->sni_names(), v({"a.test", "b.test"}));
}

TEST(DiscoverySpec, ErrorsNameTheField) {
  auto field_of = [](const std::vector<std::string>& e, const std::vector<std::string>& c, const std::vector<std::int64_t>& ports,
                     const std::vector<std::string>& sni, std::uint64_t max = 65536) -> std::string {
    auto p = parse_discovery_spec(e, c, ports, sni, max);
    if (p) return "(accepted)";
    EXPECT_TRUE(p.error().is(errc::invalid_argument));
    EXPECT_FALSE(p.error().message.empty());
    return p.error().field;
  };
  EXPECT_EQ(field_of({}, {}, {}, {}), "endpoints");
  EXPECT_EQ(field_of(v({"ok.test:443", "noport.test"}), {}, {}, {}), "endpoints[1]");
  EXPECT_EQ(field_of(v({"ok.test:0"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"ok.test:65536"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"::1:443"}), {}, {}, {}), "endpoints[0]");  // IPv6 needs brackets
  EXPECT_EQ(field_of(v({"[::1:443"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"[fe80::1%eth0]:443"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"bad_name!:443"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"10.0.0.256:443"}), {}, {}, {}), "endpoints[0]");
  EXPECT_EQ(field_of(v({"a.test:443", "A.test.:443"}), {}, {}, {}), "endpoints[1]");  // the same endpoint twice
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24", "10.0.1.0/24", "10.0.0.0/8"}), {}, {}), "cidrs[2]");  // 16M addresses
  EXPECT_EQ(field_of({}, v({"10.0.0.1/24"}), {}, {}), "cidrs[0]");                                // host bits set
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24,10.0.1.0/24"}), {}, {}), "cidrs[0]");
  EXPECT_EQ(field_of({}, v({"example.com"}), {}, {}), "cidrs[0]");
  EXPECT_EQ(field_of({}, v({"2001:db8::/64"}), {}, {}), "cidrs[0]");  // 2^64 addresses
  EXPECT_EQ(field_of({}, v({"10.0.0.0/17", "10.1.0.0/17"}), {}, {}, 40000), "cidrs[1]");  // the running total
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {0}, {}), "ports[0]");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {443, 70000}, {}), "ports[1]");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {443, 443}, {}), "ports[1]");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {}, v({"ok.test", "1.2.3.4"})), "sni[1]");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {}, v({"*.test"})), "sni[0]");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/24"}), {}, v({"a.test", "A.test"})), "sni[1]");
  // /20 × 1 port fits 65536; × 20 SNI names it does not.
  std::vector<std::string> names;
  for (int i = 0; i < 20; ++i) names.push_back("n" + std::to_string(i) + ".test");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/20"}), {443}, {}), "(accepted)");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/20"}), {443}, names), "sni");
  EXPECT_EQ(field_of({}, v({"10.0.0.0/20"}), {443, 8443}, {}, 8000), "cidrs[0]");  // addresses × ports
}

// ---- Egress ---------------------------------------------------------------------------------

TEST(DiscoveryEgress, RangePartlyOutsideIsRefusedAsAWhole) {
  auto policy = parse_egress_allow_list("10.0.0.0/16, names.example");
  ASSERT_TRUE(policy);
  auto plan = parse_discovery_spec({}, v({"10.0.0.0/24", "10.0.0.0/15"}), {}, {}, 1u << 20);
  ASSERT_TRUE(plan);
  auto r = check_discovery_egress(*plan, *policy);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "cidrs[1]");
  EXPECT_NE(r.error().message.find("10.1.0.0"), std::string::npos) << r.error().message;  // the first address outside

  auto inside = parse_discovery_spec(v({"10.0.3.4:443", "names.example:443", "other.example:443"}), v({"10.0.0.0/24"}), {}, {}, 1000);
  ASSERT_TRUE(inside);
  EXPECT_TRUE(check_discovery_egress(*inside, *policy));  // other.example: judged when resolved

  auto ip_out = parse_discovery_spec(v({"10.0.3.4:443", "192.0.2.1:443"}), {}, {}, {}, 1000);
  ASSERT_TRUE(ip_out);
  auto r2 = check_discovery_egress(*ip_out, *policy);
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().field, "endpoints[1]");
}

TEST(DiscoveryEgress, SpecialAddressesNeedTheirOwnEntry) {
  auto everything = parse_egress_allow_list("0.0.0.0/0");
  ASSERT_TRUE(everything);
  auto loop = parse_discovery_spec({}, v({"10.0.0.0/30", "127.0.0.0/30"}), {}, {}, 1000);
  ASSERT_TRUE(loop);
  auto r = check_discovery_egress(*loop, *everything);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "cidrs[1]");
  auto loopback = parse_egress_allow_list("127.0.0.0/8, 10.0.0.0/8");
  ASSERT_TRUE(loopback);
  EXPECT_TRUE(check_discovery_egress(*loop, *loopback));
  EXPECT_TRUE(egress_allows_address(*loopback, asio::ip::make_address("127.0.0.1")));
  EXPECT_FALSE(egress_allows_address(*everything, asio::ip::make_address("::ffff:127.0.0.1")));

  // A policy without ranges can never hold what a name resolves to: refused now.
  auto names_only = parse_egress_allow_list("allowed.example");
  ASSERT_TRUE(names_only);
  auto named = parse_discovery_spec(v({"allowed.example:443", "other.example:443"}), {}, {}, {}, 10);
  ASSERT_TRUE(named);
  auto r2 = check_discovery_egress(*named, *names_only);
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().field, "endpoints[1]");
}

// ---- assess_chain (pure) --------------------------------------------------------------------

TEST(AssessChain, FindingTableIsTheOneList) {
  EXPECT_EQ(finding_table.size(), 7u);
  for (const auto& row : finding_table) {
    EXPECT_EQ(&finding_row(row.id), &row);
    EXPECT_EQ(find_finding(row.name), &row);
    EXPECT_TRUE(row.severity == "critical" || row.severity == "warning");
    EXPECT_FALSE(row.text.empty());
  }
  EXPECT_EQ(find_finding("expired")->id, finding::expired);
  EXPECT_EQ(find_finding("nonsense"), nullptr);
}

TEST(AssessChain, FieldsOfAGoodChain) {
  const auto& p = test_pki();
  auto leaf = p.leaf("good.test");
  auto a = assess_chain({der_of(leaf.cert_pem), der_of(p.inter.cert_pem), der_of(p.root.cert_pem)}, "good.test", "TLSv1.3",
                        testbed::unix_now_ms(), 30);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->findings.empty()) << a->findings.front();
  EXPECT_EQ(a->sha256.size(), 64u);
  EXPECT_EQ(a->subject, "CN=good.test");
  EXPECT_EQ(a->issuer, "CN=Probe Test Intermediate");
  EXPECT_EQ(a->sans, v({"good.test"}));
  EXPECT_EQ(a->key_type, "ec");
  EXPECT_EQ(a->key_bits, 256);
  EXPECT_EQ(a->chain_length, 3u);
  EXPECT_NEAR(static_cast<double>(a->not_after_ms), static_cast<double>(testbed::unix_now_ms() + 90 * day_ms), 60'000.0);
}

TEST(AssessChain, ChainSentOutOfOrderStillLinks) {
  const auto& p = test_pki();
  auto leaf = p.leaf("good.test");
  auto a = assess_chain({der_of(leaf.cert_pem), der_of(p.root.cert_pem), der_of(p.inter.cert_pem)}, "good.test", "TLSv1.2",
                        testbed::unix_now_ms(), 30);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->has(finding::incomplete_chain));
  // Without the root the private intermediate's issuer is neither sent nor in the system store.
  auto b = assess_chain({der_of(leaf.cert_pem), der_of(p.inter.cert_pem)}, "good.test", "TLSv1.2", testbed::unix_now_ms(), 30);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->findings, v({"incomplete_chain"}));
  // A root that did not sign the leaf links nothing.
  auto c = assess_chain({der_of(leaf.cert_pem), der_of(p.root.cert_pem)}, "good.test", "TLSv1.2", testbed::unix_now_ms(), 30);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->has(finding::incomplete_chain));
}

TEST(AssessChain, NamesByTheSanRules) {
  const auto& p = test_pki();
  testbed::cert_spec s;
  s.common_name = "cn-only.test";
  s.dns_sans = {"*.wild.test", "exact.test"};
  s.ip_sans = {"127.0.0.1", "::1"};
  s.issuer = &p.inter;
  auto leaf = testbed::make_certificate(s);
  std::vector<std::string> chain{der_of(leaf.cert_pem), der_of(p.inter.cert_pem), der_of(p.root.cert_pem)};
  auto mismatch = [&](const std::string& name) {
    auto a = assess_chain(chain, name, "TLSv1.3", testbed::unix_now_ms(), 30);
    if (!a) throw std::runtime_error(a.error().message);
    return a->has(finding::name_mismatch);
  };
  EXPECT_FALSE(mismatch("exact.test"));
  EXPECT_FALSE(mismatch("EXACT.test."));
  EXPECT_FALSE(mismatch("a.wild.test"));
  EXPECT_TRUE(mismatch("wild.test"));      // the wildcard needs a label
  EXPECT_TRUE(mismatch("a.b.wild.test"));  // and stands for one only
  EXPECT_TRUE(mismatch("cn-only.test"));   // the CN is not looked at
  EXPECT_FALSE(mismatch("127.0.0.1"));
  EXPECT_FALSE(mismatch("[::1]"));
  EXPECT_TRUE(mismatch("127.0.0.2"));
  EXPECT_FALSE(mismatch(""));  // no name: not checked
  auto a = assess_chain(chain, "", "", 0, 30);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->sans, v({"*.wild.test", "exact.test", "127.0.0.1", "::1"}));
}

TEST(AssessChain, DatesAgainstNow) {
  const auto& p = test_pki();
  auto now = testbed::unix_now_ms();
  auto leaf = p.leaf("d.test", now + 10 * day_ms);
  std::vector<std::string> chain{der_of(leaf.cert_pem), der_of(p.inter.cert_pem), der_of(p.root.cert_pem)};
  auto at = [&](std::int64_t t, int days) { return assess_chain(chain, "d.test", "TLSv1.3", t, days)->findings; };
  EXPECT_EQ(at(now, 30), v({"expiring"}));
  EXPECT_EQ(at(now, 5), v({}));
  EXPECT_EQ(at(now + 11 * day_ms, 30), v({"expired"}));
  EXPECT_EQ(at(now, 0), v({}));
}

TEST(AssessChain, ProtocolsAndBadInput) {
  const auto& p = test_pki();
  auto leaf = p.leaf("p.test");
  std::vector<std::string> chain{der_of(leaf.cert_pem), der_of(p.inter.cert_pem), der_of(p.root.cert_pem)};
  for (const char* old : {"TLSv1", "TLSv1.1", "SSLv3"})
    EXPECT_EQ(assess_chain(chain, "p.test", old, testbed::unix_now_ms(), 30)->findings, v({"deprecated_protocol"})) << old;
  EXPECT_EQ(assess_chain(chain, "p.test", "TLSv1.2", testbed::unix_now_ms(), 30)->findings, v({}));

  auto empty = assess_chain({}, "x", "", 0, 30);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().field, "chain[0]");
  auto junk = assess_chain({chain[0], "not DER"}, "x", "", 0, 30);
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().field, "chain[1]");
  auto trailing = assess_chain({chain[0] + "x"}, "x", "", 0, 30);
  ASSERT_FALSE(trailing);
  EXPECT_EQ(trailing.error().field, "chain[0]");
}

// ---- probe_tls against openssl s_server -------------------------------------------------------

TEST(ProbeTls, ValidChainHasNoFindings) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto leaf = p.leaf("good.test");
  auto s = start_s_server(dir, "good", leaf, p.full_chain());
  probe_outcome out;
  // The private root is sent in full, so the chain links: incomplete_chain is about what the
  // server sends, not whether anyone trusts the root.
  EXPECT_EQ(findings_of(s, "good.test", &out), v({}));
  EXPECT_EQ(out.chain_der.size(), 3u);
  EXPECT_EQ(out.chain_der[0], der_of(leaf.cert_pem));
  EXPECT_EQ(out.protocol, "TLSv1.3");
  EXPECT_FALSE(out.cipher.empty());
  EXPECT_EQ(out.address, "127.0.0.1");
  EXPECT_GE(out.handshake_ms, 0);
}

TEST(ProbeTls, ExpiredLeaf) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto now = testbed::unix_now_ms();
  auto s = start_s_server(dir, "expired", p.leaf("old.test", now - day_ms, now - 30 * day_ms), p.full_chain());
  EXPECT_EQ(findings_of(s, "old.test"), v({"expired"}));
}

TEST(ProbeTls, ExpiringLeaf) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "expiring", p.leaf("soon.test", testbed::unix_now_ms() + 5 * day_ms), p.full_chain());
  EXPECT_EQ(findings_of(s, "soon.test"), v({"expiring"}));
}

TEST(ProbeTls, SelfSignedLeaf) {
  testbed::temp_dir dir("tls-probe");
  testbed::cert_spec spec;
  spec.common_name = "self.test";
  spec.dns_sans = {"self.test"};
  auto s = start_s_server(dir, "self", testbed::make_certificate(spec), "");
  EXPECT_EQ(findings_of(s, "self.test"), v({"self_signed"}));  // linked to itself: not incomplete
}

TEST(ProbeTls, NameMismatch) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "mismatch", p.leaf("other.test"), p.full_chain());
  EXPECT_EQ(findings_of(s, "good.test"), v({"name_mismatch"}));
  // The same server reached by address: the address is the name, and no IP SAN has it.
  auto out = probe("127.0.0.1", s.port, "");
  ASSERT_TRUE(out.ok()) << out.error;
  EXPECT_EQ(assess(out, "127.0.0.1").findings, v({"name_mismatch"}));
}

TEST(ProbeTls, LeafWithoutItsIntermediate) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "incomplete", p.leaf("alone.test"), "");
  probe_outcome out;
  EXPECT_EQ(findings_of(s, "alone.test", &out), v({"incomplete_chain"}));
  EXPECT_EQ(out.chain_der.size(), 1u);
}

TEST(ProbeTls, Rsa1024IsWeak) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  // certs.hpp makes EC and Ed25519 keys only; the CLI makes the small RSA key, signed by the test
  // intermediate so that weak_key is the only finding.
  write_file(dir.file("inter.crt"), p.inter.cert_pem);
  write_file(dir.file("inter.key"), p.inter.key_pem);
  write_file(dir.file("weak.ext"), "subjectAltName=DNS:weak.test\n");
  auto [rc1, out1] = testbed::run_command({openssl_bin, "req", "-new", "-newkey", "rsa:1024", "-nodes", "-keyout", dir.file("weak.key"),
                                           "-subj", "/CN=weak.test", "-out", dir.file("weak.csr")});
  ASSERT_EQ(rc1, 0) << out1;
  auto [rc2, out2] = testbed::run_command({openssl_bin, "x509", "-req", "-in", dir.file("weak.csr"), "-CA", dir.file("inter.crt"),
                                           "-CAkey", dir.file("inter.key"), "-set_serial", "4242", "-days", "365", "-extfile",
                                           dir.file("weak.ext"), "-out", dir.file("weak.crt")});
  ASSERT_EQ(rc2, 0) << out2;
  // OpenSSL 3 refuses a 1024-bit key at its default security level: level 0 on this server.
  auto s = start_s_server(dir, "weak", dir.file("weak.crt"), dir.file("weak.key"), p.full_chain(), {"-cipher", "DEFAULT@SECLEVEL=0"});
  probe_outcome out;
  EXPECT_EQ(findings_of(s, "weak.test", &out), v({"weak_key"}));
  auto a = assess(out, "weak.test");
  EXPECT_EQ(a.key_type, "rsa");
  EXPECT_EQ(a.key_bits, 1024);
}

TEST(ProbeTls, Tls10OnlyIsDeprecated) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "tls10", p.leaf("legacy.test"), p.full_chain(), {"-tls1", "-cipher", "DEFAULT@SECLEVEL=0"});
  probe_outcome out;
  EXPECT_EQ(findings_of(s, "legacy.test", &out), v({"deprecated_protocol"}));
  EXPECT_EQ(out.protocol, "TLSv1");
}

TEST(ProbeTls, ClosedPortIsRefused) {
  auto out = probe("127.0.0.1", closed_port(), "");
  EXPECT_EQ(out.failure, probe_failure::refused) << out.error;
  EXPECT_STREQ(probe_failure_name(out.failure), "refused");
  EXPECT_TRUE(out.chain_der.empty());
}

TEST(ProbeTls, SilentListenerTimesOutWithinTheDeadline) {
  testbed::tcp_proxy silent(testbed::tcp_proxy::mode::blackhole, 0);
  auto started = std::chrono::steady_clock::now();
  auto out = probe("127.0.0.1", silent.port(), "x.test", 400ms);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(out.failure, probe_failure::timeout) << out.error;
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 1400ms);
  EXPECT_EQ(silent.connections(), 1u);
}

TEST(ProbeTls, ResetDuringHandshakeIsATlsError) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "reset", p.leaf("r.test"), p.full_chain());
  testbed::tcp_proxy cut(testbed::tcp_proxy::mode::reset_after, s.port, 10);
  auto out = probe("127.0.0.1", cut.port(), "r.test");
  EXPECT_EQ(out.failure, probe_failure::tls_error) << out.error;
  EXPECT_NE(out.error.find("TLS handshake"), std::string::npos) << out.error;
}

TEST(ProbeTls, EgressCheckedBeforeConnecting) {
  testbed::tcp_proxy silent(testbed::tcp_proxy::mode::blackhole, 0);
  auto elsewhere = parse_egress_allow_list("10.0.0.0/8");
  ASSERT_TRUE(elsewhere);
  auto out = probe("127.0.0.1", silent.port(), "", 2s, &*elsewhere);
  EXPECT_EQ(out.failure, probe_failure::not_allowed) << out.error;
  EXPECT_EQ(silent.connections(), 0u);  // nothing left the host
}

// ---- scan -----------------------------------------------------------------------------------

TEST(Scan, TwentyTargetsAtConcurrencyFive) {
  constexpr auto hold = 150ms;
  holding_listener listener(hold);
  const std::uint16_t closed = closed_port();
  // Every fourth target is a closed port (refused at once); the others hold a handshake open.
  std::vector<probe_target> targets;
  for (int i = 0; i < 20; ++i)
    targets.push_back({"127.0.0.1", i % 4 == 3 ? closed : listener.port(), "t" + std::to_string(i) + ".test"});
  auto allow = parse_egress_allow_list("127.0.0.1");
  ASSERT_TRUE(allow);
  scan_options opt;
  opt.concurrency = 5;
  opt.per_endpoint_timeout = 3s;
  opt.egress = &*allow;
  auto plan = discovery_plan::from_targets(targets);
  ASSERT_TRUE(check_discovery_egress(plan, *allow));
  auto started = std::chrono::steady_clock::now();
  auto report = testbed::run_sync(scan_all(plan, opt));
  auto took = std::chrono::steady_clock::now() - started;

  ASSERT_EQ(report.results.size(), 20u);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(report.results[i].failure, i % 4 == 3 ? probe_failure::refused : probe_failure::tls_error)
        << i << ": " << report.results[i].error;
  EXPECT_EQ(report.counts.total, 20u);
  EXPECT_EQ(report.counts.refused, 5u);
  EXPECT_EQ(report.counts.tls_error, 15u);
  EXPECT_EQ(report.counts.failed(), 20u);
  EXPECT_EQ(report.counts.skipped, 0u);
  EXPECT_EQ(listener.accepted(), 15);
  EXPECT_LE(listener.peak(), 5);
  EXPECT_EQ(listener.peak(), 5);  // the limit is used, not just respected
  // 15 held handshakes, 5 at a time: three rounds, far from fifteen.
  EXPECT_GE(took, 3 * hold);
  EXPECT_LT(took, 10 * hold);
}

TEST(Scan, OutcomesPerTargetWithRealServers) {
  testbed::temp_dir dir("tls-probe");
  const auto& p = test_pki();
  auto s = start_s_server(dir, "scan", p.leaf("good.test"), p.full_chain());
  auto plan = discovery_plan::from_targets(
      {{"127.0.0.1", s.port, "good.test"}, {"127.0.0.1", closed_port(), ""}, {"127.0.0.2", s.port, ""}, {"127.0.0.1", s.port, "good.test"}});
  auto allow = parse_egress_allow_list("127.0.0.1");
  ASSERT_TRUE(allow);
  scan_options opt;
  opt.concurrency = 2;
  opt.per_endpoint_timeout = 5s;
  opt.egress = &*allow;
  std::vector<std::uint64_t> seen;
  auto counts = testbed::run_sync(scan(plan, opt, [&](std::uint64_t index, const probe_target& t, probe_outcome out) -> asio::awaitable<void> {
    seen.push_back(index);
    EXPECT_EQ(t.endpoint_text(), plan.at(index).endpoint_text());
    if (index == 0 || index == 3) {
      EXPECT_TRUE(out.ok()) << out.error;
      EXPECT_EQ(out.chain_der.size(), 3u);
    }
    if (index == 1) EXPECT_EQ(out.failure, probe_failure::refused);
    if (index == 2) EXPECT_EQ(out.failure, probe_failure::not_allowed);
    co_return;
  }));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(counts.ok, 2u);
  EXPECT_EQ(counts.refused, 1u);
  EXPECT_EQ(counts.not_allowed, 1u);
}

TEST(Scan, StopRequestedLeavesTheRestSkipped) {
  const std::uint16_t closed = closed_port();
  std::vector<probe_target> targets(10, probe_target{"127.0.0.1", closed, ""});
  int done = 0;
  scan_options opt;
  opt.concurrency = 1;
  opt.per_endpoint_timeout = 2s;
  opt.stop_requested = [&] { return done >= 3; };
  auto plan = discovery_plan::from_targets(targets);
  auto counts = testbed::run_sync(scan(plan, opt, [&](std::uint64_t, const probe_target&, probe_outcome) -> asio::awaitable<void> {
    ++done;
    co_return;
  }));
  EXPECT_EQ(counts.refused, 3u);
  EXPECT_EQ(counts.skipped, 7u);
  auto report = testbed::run_sync(scan_all(discovery_plan::from_targets({}), opt));
  EXPECT_TRUE(report.results.empty());
  EXPECT_EQ(report.counts.total, 0u);
}
