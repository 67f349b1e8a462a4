// acme_allow_list (docs/acme.md): the one egress policy of the ACME client and of DNS-01, checked
// on what a host resolved to before anything connects. The rule alone (pure), then the clients
// against real sockets on 127.0.0.0/8 that record whether anything reached them: directory URLs
// spelling this host in odd ways, a directory that sends the client to plain http or to an
// address the list refuses, DNS servers outside the list, and the one answer a project role
// gets whatever was (or was not) listening on a port.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <regex>
#include <set>
#include <stdexcept>

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "run_sync.hpp"
#include "sshd.hpp"  // closed_port
#include "webhook_sink.hpp"

using namespace certfleet::acme;
using namespace std::chrono_literals;
using boost::asio::awaitable;
using certfleet::net::egress_policy;
namespace ip = boost::asio::ip;

namespace {

egress_policy policy(std::string_view text) {
  auto p = certfleet::net::parse_egress_allow_list(text, "acme_allow_list");
  if (!p) throw std::runtime_error(p.error().message);
  return std::move(*p);
}

account_key new_key() {
  auto k = account_key::generate();
  if (!k) throw std::runtime_error(k.error().message);
  return std::move(*k);
}

// A socket that records whether anything reached it: a TCP listener that never accepts (a
// connection still completes into the kernel's backlog, which a non-blocking accept() then
// finds) or a UDP socket (a datagram waiting).
class tripwire {
 public:
  explicit tripwire(int type, const char* address = "127.0.0.1") : type_(type) {
    // Non-blocking: touched() only looks.
    fd_ = ::socket(AF_INET, type | SOCK_NONBLOCK, 0);
    if (fd_ < 0) throw std::runtime_error("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, address, &a.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("bind");
    if (type == SOCK_STREAM && ::listen(fd_, 16) != 0) throw std::runtime_error("listen");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~tripwire() { ::close(fd_); }
  tripwire(const tripwire&) = delete;
  tripwire& operator=(const tripwire&) = delete;

  std::uint16_t port() const { return port_; }
  bool touched() const {
    if (type_ == SOCK_DGRAM) {
      char b[1];
      return ::recv(fd_, b, sizeof b, MSG_PEEK | MSG_DONTWAIT) >= 0;
    }
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return false;
    ::close(c);
    return true;
  }

 private:
  int type_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

std::vector<std::string> captured;
protocol_logger capture() {
  return [](std::string level, std::string message) -> awaitable<void> {
    captured.push_back(level + ": " + message);
    co_return;
  };
}

}  // namespace

// The rule itself: acme_allow_list's default ("0.0.0.0/0, ::/0") reaches public and private
// addresses, never this host, link-local or a metadata service, however the address is spelled;
// listing the address is what reaches one.
TEST(acme_egress, the_rule_refuses_this_host_and_metadata_services_in_every_spelling) {
  using certfleet::net::egress_allows;
  const auto def = policy("0.0.0.0/0, ::/0");
  auto allows = [](const egress_policy& p, const std::string& a) { return egress_allows(p, a, {ip::make_address(a)}); };
  for (std::string a : {"127.0.0.1", "127.1.2.3", "0.0.0.0", "0.1.2.3", "::", "::1", "::ffff:127.0.0.1", "::127.0.0.1",
                        "::ffff:0.0.0.0", "64:ff9b::7f00:1", "169.254.169.254", "169.254.170.2", "fe80::1",
                        "::ffff:169.254.169.254", "::169.254.169.254", "fd00:ec2::254", "100.100.100.200",
                        "::ffff:100.100.100.200", "192.0.0.192"})
    EXPECT_FALSE(allows(def, a)) << a;
  for (std::string a : {"192.0.2.10", "10.1.2.3", "172.16.0.1", "2001:db8::1", "100.64.0.1", "::ffff:192.0.2.10", "::192.0.2.10"})
    EXPECT_TRUE(allows(def, a)) << a;

  const auto listed = policy("0.0.0.0/0, ::/0, 127.0.0.1, 100.100.100.200, fd00:ec2::254");
  for (std::string a : {"127.0.0.1", "::ffff:127.0.0.1", "::127.0.0.1", "100.100.100.200", "fd00:ec2::254"})
    EXPECT_TRUE(allows(listed, a)) << a;
  for (std::string a : {"127.0.0.2", "::1", "169.254.169.254", "0.0.0.0"}) EXPECT_FALSE(allows(listed, a)) << a;
  // A range around a metadata address is not naming it.
  EXPECT_FALSE(allows(policy("100.64.0.0/10"), "100.100.100.200"));
  // A name entry never vouches for this host; an IP literal needs no resolver to be judged.
  EXPECT_FALSE(egress_allows(policy("localhost"), "localhost", {ip::make_address("127.0.0.1")}));
  EXPECT_FALSE(egress_allows(def, "[::ffff:127.0.0.1]", {}));
  EXPECT_TRUE(egress_allows(listed, "[::ffff:127.0.0.1]", {}));
}

// Every spelling of this host in a directory URL is refused before anything connects: a TCP
// listener on that port sees nothing. Without a policy the client uses acme_allow_list's default.
TEST(acme_egress, directory_urls_naming_this_host_are_refused_before_connecting) {
  tripwire listener(SOCK_STREAM);
  const std::string port = std::to_string(listener.port());
  const auto def = policy("0.0.0.0/0, ::/0");
  auto key = new_key();
  // Those that do not parse as a host name or a dotted-quad are refused as URLs; the others
  // resolve (getaddrinfo reads 0x7f000001 as 127.0.0.1) and are refused on what they resolved to.
  const std::set<std::string> not_urls = {"2130706433", "017700000001", "127.1", "0177.0.0.1"};
  for (std::string host : {"127.0.0.1", "localhost", "LocalHost.", "0x7f000001", "0x7f.0x0.0x0.0x1", "2130706433",
                           "017700000001", "127.1", "0177.0.0.1", "0.0.0.0", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
                           "[::1]", "[::]"}) {
    for (const egress_policy* p : {static_cast<const egress_policy*>(nullptr), &def}) {
      client_options o;
      o.directory_url = "https://" + host + ":" + port + "/directory";
      o.egress = p;
      o.request_timeout = 3s;
      client c(o, key);
      auto a = testbed::run_sync(c.new_account({{}, true, std::nullopt, false}));
      ASSERT_FALSE(a) << host;
      const auto& f = a.failure();
      EXPECT_EQ(f.kind, failure_kind::bad_input) << host << ": " << f.message;
      EXPECT_EQ(f.field, "directory_url") << host;
      EXPECT_TRUE(f.permanent()) << host;
      if (!not_urls.count(host)) {
        EXPECT_NE(f.message.find("is refused by acme_allow_list"), std::string::npos) << host << ": " << f.message;
        EXPECT_EQ(f.message.rfind("directory_url: ", 0), 0u) << f.message;
      }
      EXPECT_FALSE(listener.touched()) << host << " reached the listener";
    }
  }
  // Listed by address, the same port is reached (and answers nothing: the deadline ends it).
  const auto loopback = policy("127.0.0.1");
  client_options o;
  o.directory_url = "https://127.0.0.1:" + port + "/directory";
  o.egress = &loopback;
  o.request_timeout = 1500ms;
  client c(o, key);
  auto a = testbed::run_sync(c.get_directory());
  ASSERT_FALSE(a);
  EXPECT_EQ(a.failure().kind, failure_kind::timeout) << a.failure().message;
  EXPECT_TRUE(listener.touched());
}

// A directory fetched over https (loopback listed) that sends the client to plain http, or to
// an address the list refuses: refused naming the directory member, and nothing reached there.
TEST(acme_egress, a_directory_naming_plain_http_or_a_refused_address_is_refused_naming_the_member) {
  const auto loopback = policy("127.0.0.1");
  tripwire http_target(SOCK_STREAM);
  tripwire other_host(SOCK_STREAM, "127.0.0.2");
  auto key = new_key();
  struct variant {
    std::string new_nonce;
    std::vector<std::string> said;
  };
  const std::vector<variant> variants = {
      {"http://127.0.0.1:" + std::to_string(http_target.port()) + "/nonce", {"newNonce", "https://"}},
      {"https://127.0.0.2:" + std::to_string(other_host.port()) + "/nonce", {"newNonce", "refused by acme_allow_list"}},
      // A name is judged on what it resolved to: 0x7f000002 is 127.0.0.2, not listed.
      {"https://0x7f000002:" + std::to_string(other_host.port()) + "/nonce", {"newNonce", "refused by acme_allow_list"}},
  };
  for (const auto& v : variants) {
    testbed::webhook_sink ca(true);
    boost::json::object d{{"newNonce", v.new_nonce},
                          {"newAccount", ca.url("/account")},
                          {"newOrder", ca.url("/order")},
                          {"revokeCert", ca.url("/revoke")}};
    ca.serve("/directory", {200, {}, boost::json::serialize(d)});
    client_options o;
    o.directory_url = ca.url("/directory");
    o.ca_pem = ca.ca_pem();
    o.egress = &loopback;
    o.request_timeout = 3s;
    client c(o, key);
    auto a = testbed::run_sync(c.new_account({{}, true, std::nullopt, false}));
    ASSERT_FALSE(a) << v.new_nonce;
    const auto& f = a.failure();
    EXPECT_EQ(f.kind, failure_kind::bad_input) << f.message;
    EXPECT_EQ(f.field, "directory_url");
    for (const auto& s : v.said) EXPECT_NE(f.message.find(s), std::string::npos) << v.new_nonce << ": " << f.message;
    EXPECT_EQ(ca.count(), 1u) << "only the directory was fetched";
    EXPECT_FALSE(http_target.touched()) << v.new_nonce;
    EXPECT_FALSE(other_host.touched()) << v.new_nonce;
  }
}

// What a project role reads must not tell a closed port from an open one: nothing listening,
// plain HTTP (a TLS "wrong version number"), TLS with an untrusted certificate, a trusted TLS
// server answering a page (not JSON) and one that never answers all give the same message and
// class; only `detail`, for the server's log, differs.
TEST(acme_egress, closed_open_and_tls_ports_give_one_answer) {
  const auto loopback = policy("127.0.0.1");
  testbed::closed_port closed;
  testbed::webhook_sink plain(false);
  testbed::webhook_sink untrusted(true);
  testbed::webhook_sink page(true);
  page.serve("/directory", {200, {{"Content-Type", "text/html"}}, "<!DOCTYPE html><html><body>It works</body></html>"});
  tripwire silent(SOCK_STREAM);
  struct port_case {
    std::string name, url, ca_pem, cause;
  };
  const std::vector<port_case> cases = {
      {"closed", "https://127.0.0.1:" + std::to_string(closed.port()) + "/directory", "", "refused"},
      {"plain HTTP", "https://" + plain.url("/directory").substr(7), "", "TLS"},
      {"untrusted TLS", untrusted.url("/directory"), "", "not trusted"},
      {"TLS page", page.url("/directory"), page.ca_pem(), "not an ACME directory"},
      {"silent", "https://127.0.0.1:" + std::to_string(silent.port()) + "/directory", "", "timed out"},
  };
  auto key = new_key();
  std::set<std::string> messages, details;
  std::set<bool> classes;
  std::set<int> codes;
  for (const auto& pc : cases) {
    captured.clear();
    client_options o;
    o.directory_url = pc.url;
    o.ca_pem = pc.ca_pem;
    o.egress = &loopback;
    o.request_timeout = 1500ms;
    o.log = capture();
    client c(o, key);
    auto a = testbed::run_sync(c.new_account({{}, true, std::nullopt, false}));
    ASSERT_FALSE(a) << pc.name;
    const auto& f = a.failure();
    auto port = std::regex_replace(pc.url, std::regex(R"(^https://127\.0\.0\.1:(\d+)/.*$)"), "$1");
    auto normalized = f.message;
    auto at = normalized.find("127.0.0.1:" + port);
    ASSERT_NE(at, std::string::npos) << pc.name << ": " << f.message;
    normalized.replace(at, 10 + port.size(), "127.0.0.1:PORT");
    messages.insert(normalized);
    classes.insert(f.permanent());
    codes.insert(f.to_error().code.value());
    EXPECT_NE(f.detail.find(pc.cause), std::string::npos) << pc.name << ": " << f.detail;
    details.insert(f.detail);
    for (const auto& l : captured)
      for (const char* leak : {"refused", "version", "JSON", "HTML", "trusted", "timed out"})
        EXPECT_EQ(l.find(leak), std::string::npos) << pc.name << ": the protocol log (job log) says " << l;
  }
  ASSERT_EQ(messages.size(), 1u) << [&] {
    std::string all;
    for (const auto& m : messages) all += "\n  " + m;
    return all;
  }();
  EXPECT_EQ(*messages.begin(),
            "directory_url: could not fetch an ACME directory from 127.0.0.1:PORT (the cause is in the certfleet server's log)");
  EXPECT_EQ(classes.size(), 1u);
  EXPECT_EQ(codes.size(), 1u);
  EXPECT_EQ(details.size(), cases.size());
}

// DNS-01 (docs/acme-dns.md): an rfc2136 provider's server, a manual check_server and the zone's
// NS addresses are held to the same acme_allow_list: outside it, no datagram and no connection.
TEST(acme_egress, dns_servers_outside_the_list_get_nothing) {
  tripwire tcp(SOCK_STREAM);
  tripwire udp(SOCK_DGRAM);
  const auto def = policy("0.0.0.0/0, ::/0");
  auto key = dns::make_tsig_key("k.", "hmac-sha256", "bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI=");
  ASSERT_TRUE(key) << key.error().message;
  dns::client_options o;
  o.timeout = 2000ms;
  o.egress = &def;
  auto update = testbed::run_sync(dns::present_txt("127.0.0.1:" + std::to_string(tcp.port()), "example.test", *key,
                                                   "_acme-challenge.example.test", "v", 60, o));
  ASSERT_FALSE(update);
  EXPECT_EQ(dns::dns_error_code(update.error()), dns::dns_errc::not_allowed) << update.error().message;
  EXPECT_TRUE(dns::dns_permanent(update.error()));
  EXPECT_NE(update.error().message.find("refused by acme_allow_list"), std::string::npos) << update.error().message;
  for (std::string server : {"localhost:" + std::to_string(udp.port()), "[::ffff:127.0.0.1]:" + std::to_string(udp.port()),
                             "0x7f000001:" + std::to_string(udp.port())}) {
    auto q = testbed::run_sync(dns::txt_lookup(server, "_acme-challenge.example.test", o));
    ASSERT_FALSE(q) << server;
    EXPECT_EQ(dns::dns_error_code(q.error()), dns::dns_errc::not_allowed) << server << ": " << q.error().message;
  }
  EXPECT_FALSE(tcp.touched());
  EXPECT_FALSE(udp.touched());

  // Listed by address: the query leaves (and, unanswered, times out).
  const auto loopback = policy("127.0.0.1");
  o.egress = &loopback;
  o.timeout = 600ms;
  auto q = testbed::run_sync(dns::txt_lookup("127.0.0.1:" + std::to_string(udp.port()), "_acme-challenge.example.test", o));
  ASSERT_FALSE(q);
  EXPECT_EQ(dns::dns_error_code(q.error()), dns::dns_errc::timeout) << q.error().message;
  EXPECT_TRUE(udp.touched());
}
