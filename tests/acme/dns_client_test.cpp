// The DNS-01 operations against a real knot on 127.0.0.1 (tests/testbed/knot): records added and
// removed as our queries AND dig see them, two values at one name, every refusal named (BADKEY,
// BADSIG, BADTIME, an ACL without the key, a zone not served), a server that never answers, the
// TCP retry of a truncated answer, the SOA walk, the zone's name servers, and answers that are
// forged, split into single bytes or cut off by a reset.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "certfleet/acme/dns.hpp"
#include "certfleet/core/base64.hpp"
#include "certfleet/core/clock.hpp"
#include "knot.hpp"
#include "run_sync.hpp"
#include "sshd.hpp"  // closed_port
#include "tcp_proxy.hpp"
#include "temp_dir.hpp"

using namespace certfleet::acme::dns;
using certfleet::result;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

class DnsClient : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testbed::temp_dir("dns-client");
    testbed::knot_options o;
    o.zones = {"example.test", "sub.other.test"};
    o.zones_without_key = {"locked.test"};
    o.extra_records = {{"example.test", "@ NS ns2.example.test."},
                       {"example.test", "ns2 AAAA ::1"},
                       {"example.test", "@ NS ns.elsewhere.invalid."},
                       {"example.test", "deep.zone.cut NS ns1.example.test."}};
    knot_ = new testbed::knot(dir_->path() / "knot", o);
  }
  static void TearDownTestSuite() {
    delete knot_;
    delete dir_;
  }

  static testbed::knot& knot() { return *knot_; }
  static std::string server() { return knot_->server(); }
  static tsig_key key(std::string secret_b64 = {}) {
    auto k = make_tsig_key(knot_->key_name(), "hmac-sha256", secret_b64.empty() ? knot_->secret_base64() : secret_b64);
    if (!k) throw std::runtime_error(k.error().message);
    return *k;
  }
  static client_options options() {
    client_options o;
    o.timeout = milliseconds(15000);  // generous: a loaded 2-core machine
    o.nameserver_port = knot_->port();
    return o;
  }
  // A name no other test in the suite uses.
  static std::string fresh_name(const std::string& tag) {
    static int n = 0;
    return "_acme-challenge." + tag + std::to_string(n++) + ".example.test";
  }

  static std::vector<std::string> lookup(const std::string& fqdn) {
    auto r = testbed::run_sync(txt_lookup(server(), fqdn, options()));
    if (!r) throw std::runtime_error(r.error().message);
    return r->values;
  }

  static void expect_no_secret(const certfleet::error& e) {
    EXPECT_EQ(e.message.find(knot_->secret_base64()), std::string::npos) << e.message;
  }

 private:
  static inline testbed::temp_dir* dir_ = nullptr;
  static inline testbed::knot* knot_ = nullptr;
};

}  // namespace

TEST_F(DnsClient, PresentedRecordIsSeenByOurQueryAndByDigThenRemoved) {
  auto fqdn = fresh_name("present");
  auto zone = testbed::run_sync(present_txt(server(), "example.test", key(), fqdn, "token-one", 60, options()));
  ASSERT_TRUE(zone) << zone.error().message;
  EXPECT_EQ(*zone, "example.test");
  EXPECT_EQ(lookup(fqdn), std::vector<std::string>{"token-one"});
  EXPECT_EQ(knot().dig_txt(fqdn), std::vector<std::string>{"token-one"});
  auto answer = testbed::run_sync(txt_lookup(server(), fqdn, options()));
  ASSERT_TRUE(answer);
  EXPECT_TRUE(answer->authoritative);
  EXPECT_TRUE(answer->name_exists);
  EXPECT_EQ(answer->server, server());

  // Adding the same value again changes nothing (a retried job).
  ASSERT_TRUE(testbed::run_sync(present_txt(server(), "example.test", key(), fqdn, "token-one", 60, options())));
  EXPECT_EQ(knot().dig_txt(fqdn).size(), 1u);

  auto removed = testbed::run_sync(remove_txt(server(), "example.test.", key(), fqdn + ".", "token-one", options()));
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_TRUE(lookup(fqdn).empty());
  EXPECT_TRUE(knot().dig_txt(fqdn).empty());
  // Removing it again is not an error.
  EXPECT_TRUE(testbed::run_sync(remove_txt(server(), "example.test", key(), fqdn, "token-one", options())));
}

TEST_F(DnsClient, TwoValuesAtOneNameAndRemovingOneKeepsTheOther) {
  // A wildcard and its apex share _acme-challenge.<domain>.
  auto fqdn = fresh_name("shared");
  ASSERT_TRUE(testbed::run_sync(present_txt(server(), "example.test", key(), fqdn, "for-the-apex", 60, options())));
  ASSERT_TRUE(testbed::run_sync(present_txt(server(), "example.test", key(), fqdn, "for-the-wildcard", 60, options())));
  auto both = lookup(fqdn);
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, (std::vector<std::string>{"for-the-apex", "for-the-wildcard"}));
  ASSERT_TRUE(testbed::run_sync(remove_txt(server(), "example.test", key(), fqdn, "for-the-apex", options())));
  EXPECT_EQ(lookup(fqdn), std::vector<std::string>{"for-the-wildcard"});
  EXPECT_EQ(knot().dig_txt(fqdn), std::vector<std::string>{"for-the-wildcard"});
  ASSERT_TRUE(testbed::run_sync(remove_txt(server(), "example.test", key(), fqdn, "for-the-wildcard", options())));
  EXPECT_TRUE(knot().dig_txt(fqdn).empty());
}

TEST_F(DnsClient, WithoutAZoneTheSoaWalkFindsIt) {
  auto fqdn = fresh_name("walk");
  auto zone = testbed::run_sync(present_txt(server(), "", key(), fqdn, "found-the-zone", 60, options()));
  ASSERT_TRUE(zone) << zone.error().message;
  EXPECT_EQ(*zone, "example.test");
  EXPECT_EQ(knot().dig_txt(fqdn), std::vector<std::string>{"found-the-zone"});
  ASSERT_TRUE(testbed::run_sync(remove_txt(server(), "", key(), fqdn, "found-the-zone", options())));

  auto deep = testbed::run_sync(find_zone(server(), "_acme-challenge.a.b.c.sub.other.test", options()));
  ASSERT_TRUE(deep) << deep.error().message;
  EXPECT_EQ(*deep, "sub.other.test");
  auto apex = testbed::run_sync(find_zone(server(), "Example.Test.", options()));
  ASSERT_TRUE(apex);
  EXPECT_EQ(*apex, "example.test");

  // other.test itself is not served (only sub.other.test is): nothing contains x.other.test.
  auto none = testbed::run_sync(find_zone(server(), "_acme-challenge.x.other.test", options()));
  ASSERT_FALSE(none);
  EXPECT_EQ(dns_error_code(none.error()), dns_errc::zone_not_found);
  EXPECT_TRUE(dns_permanent(none.error()));
  EXPECT_NE(none.error().message.find("serves no zone containing _acme-challenge.x.other.test"), std::string::npos)
      << none.error().message;
  EXPECT_NE(none.error().message.find(server()), std::string::npos);

  // Below a delegation the zone is served elsewhere: a referral, not the parent zone.
  auto cut = testbed::run_sync(find_zone(server(), "_acme-challenge.deep.zone.cut.example.test", options()));
  ASSERT_FALSE(cut);
  EXPECT_EQ(dns_error_code(cut.error()), dns_errc::zone_not_found);
  EXPECT_NE(cut.error().message.find("referral"), std::string::npos) << cut.error().message;
}

TEST_F(DnsClient, WrongSecretIsBadsigNamedAndPermanent) {
  auto wrong = certfleet::base64_encode("thirty-two bytes of wrong secret");
  auto r = testbed::run_sync(present_txt(server(), "example.test", key(wrong), fresh_name("badsig"), "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::tsig_rejected);
  EXPECT_TRUE(dns_permanent(r.error()));
  EXPECT_NE(r.error().message.find("DNS server " + server() + " rejected TSIG key 'certfleet-key.' for zone example.test "
                                   "(NOTAUTH, TSIG error BADSIG)"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("must match the server's key and its update ACL"), std::string::npos);
  EXPECT_EQ(r.error().message.find(wrong), std::string::npos);
  expect_no_secret(r.error());
}

TEST_F(DnsClient, UnknownKeyNameIsBadkey) {
  auto k = *make_tsig_key("no-such-key", "hmac-sha256", knot().secret_base64());
  auto r = testbed::run_sync(present_txt(server(), "example.test", k, fresh_name("badkey"), "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::tsig_rejected);
  EXPECT_NE(r.error().message.find("rejected TSIG key 'no-such-key.' for zone example.test (NOTAUTH, TSIG error BADKEY)"),
            std::string::npos)
      << r.error().message;
  expect_no_secret(r.error());
}

TEST_F(DnsClient, ZoneWhoseAclLacksTheKeyIsRefusedNamingZoneAndKey) {
  auto r = testbed::run_sync(present_txt(server(), "locked.test", key(), "_acme-challenge.locked.test", "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::tsig_rejected);
  EXPECT_TRUE(dns_permanent(r.error()));
  EXPECT_NE(r.error().message.find("rejected TSIG key 'certfleet-key.' for zone locked.test (NOTAUTH, TSIG error BADKEY)"),
            std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("update ACL"), std::string::npos);
  expect_no_secret(r.error());
}

TEST_F(DnsClient, ClockSkewIsBadtimeWithTheFix) {
  certfleet::manual_clock skewed(certfleet::system_clock().now_ms() - 3'600'000);
  auto o = options();
  o.clock = &skewed;
  auto r = testbed::run_sync(present_txt(server(), "example.test", key(), fresh_name("badtime"), "v", 60, o));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::tsig_rejected);
  EXPECT_NE(r.error().message.find("(NOTAUTH, TSIG error BADTIME)"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("NTP"), std::string::npos);
}

TEST_F(DnsClient, ZoneTheServerDoesNotServeIsNotAuthoritative) {
  auto r = testbed::run_sync(present_txt(server(), "other.test", key(), "_acme-challenge.other.test", "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::not_authoritative);
  EXPECT_TRUE(dns_permanent(r.error()));
  EXPECT_NE(r.error().message.find(server() + " is not authoritative for zone other.test (NOTAUTH)"), std::string::npos)
      << r.error().message;

  auto q = testbed::run_sync(txt_lookup(server(), "_acme-challenge.other.test", options()));
  ASSERT_FALSE(q);
  EXPECT_TRUE(dns_permanent(q.error()));
  EXPECT_NE(q.error().message.find("REFUSED"), std::string::npos) << q.error().message;

  auto ns = testbed::run_sync(authoritative_servers(server(), "other.test", options()));
  ASSERT_FALSE(ns);
  EXPECT_TRUE(dns_permanent(ns.error()));
  EXPECT_NE(ns.error().message.find("other.test"), std::string::npos);
}

TEST_F(DnsClient, ANameOutsideTheGivenZoneIsBadInputBeforeAnythingIsSent) {
  auto r = testbed::run_sync(present_txt(server(), "example.test", key(), "_acme-challenge.other.test", "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "fqdn");
  EXPECT_TRUE(dns_permanent(r.error()));
  auto bad_server = testbed::run_sync(txt_lookup("127.0.0.1:99999", "x.example.test", options()));
  ASSERT_FALSE(bad_server);
  EXPECT_EQ(bad_server.error().field, "server");
}

TEST_F(DnsClient, NxdomainAndNodataAreAnswersWithoutValues) {
  auto missing = testbed::run_sync(txt_lookup(server(), "_acme-challenge.nothing-here.example.test", options()));
  ASSERT_TRUE(missing) << missing.error().message;
  EXPECT_TRUE(missing->values.empty());
  EXPECT_FALSE(missing->name_exists);
  EXPECT_TRUE(missing->authoritative);
  auto nodata = testbed::run_sync(txt_lookup(server(), "ns1.example.test", options()));
  ASSERT_TRUE(nodata);
  EXPECT_TRUE(nodata->values.empty());
  EXPECT_TRUE(nodata->name_exists);
}

TEST_F(DnsClient, TruncatedUdpAnswerIsAskedAgainOverTcp) {
  auto fqdn = fresh_name("big");
  std::vector<std::string> values;
  std::vector<std::string> commands;
  for (int i = 0; i < 12; ++i) {
    values.push_back("value-" + std::to_string(i) + "-" + std::string(50, static_cast<char>('a' + i)));
    commands.push_back("update add " + fqdn + " 60 TXT \"" + values.back() + "\"");
  }
  // Created the way an operator would, with nsupdate.
  auto [rc, out] = knot().nsupdate(commands, "example.test");
  ASSERT_EQ(rc, 0) << out;
  // The precondition: over UDP without EDNS the answer does not fit and comes back truncated.
  auto [drc, dig_out] = knot().dig({fqdn, "TXT", "+noedns", "+ignore"});
  ASSERT_EQ(drc, 0);
  EXPECT_NE(dig_out.find(" tc"), std::string::npos) << dig_out;
  auto got = lookup(fqdn);
  std::sort(got.begin(), got.end());
  std::sort(values.begin(), values.end());
  EXPECT_EQ(got, values);
}

TEST_F(DnsClient, AServerThatNeverAnswersTimesOutWithinTheDeadline) {
  testbed::silent_dns_server silent;
  auto o = options();
  o.timeout = milliseconds(1500);
  auto started = steady::now();
  auto q = testbed::run_sync(txt_lookup(silent.server(), "_acme-challenge.example.test", o));
  auto took = std::chrono::duration_cast<milliseconds>(steady::now() - started);
  ASSERT_FALSE(q);
  EXPECT_EQ(dns_error_code(q.error()), dns_errc::timeout);
  EXPECT_FALSE(dns_permanent(q.error()));
  EXPECT_NE(q.error().message.find("no answer from " + silent.server() + " within 1500 ms"), std::string::npos)
      << q.error().message;
  EXPECT_GE(took, milliseconds(1400));
  EXPECT_LT(took, milliseconds(6000));
  // It was asked more than once (retransmission inside the deadline).
  EXPECT_FALSE(silent.receive(milliseconds(100)).empty());
  EXPECT_FALSE(silent.receive(milliseconds(100)).empty());

  // An UPDATE: TCP connects (the kernel accepts) but no answer ever comes.
  started = steady::now();
  auto u = testbed::run_sync(present_txt(silent.server(), "example.test", key(), "_acme-challenge.example.test", "v", 60, o));
  took = std::chrono::duration_cast<milliseconds>(steady::now() - started);
  ASSERT_FALSE(u);
  EXPECT_EQ(dns_error_code(u.error()), dns_errc::timeout);
  EXPECT_NE(u.error().message.find("no answer from " + silent.server() + " within 1500 ms"), std::string::npos)
      << u.error().message;
  EXPECT_LT(took, milliseconds(6000));
}

TEST_F(DnsClient, NothingListeningIsANetworkErrorRetried) {
  testbed::closed_port closed;
  auto o = options();
  o.timeout = milliseconds(5000);
  auto where = "127.0.0.1:" + std::to_string(closed.port());
  auto u = testbed::run_sync(present_txt(where, "example.test", key(), "_acme-challenge.example.test", "v", 60, o));
  ASSERT_FALSE(u);
  EXPECT_EQ(dns_error_code(u.error()), dns_errc::network);
  EXPECT_FALSE(dns_permanent(u.error()));
  EXPECT_NE(u.error().message.find(where), std::string::npos);
}

TEST_F(DnsClient, AuthoritativeServersComeWithTheirAddresses) {
  auto ns = testbed::run_sync(authoritative_servers(server(), "example.test", options()));
  ASSERT_TRUE(ns) << ns.error().message;
  ASSERT_EQ(ns->size(), 3u);
  std::map<std::string, nameserver> by_name;
  for (auto& n : *ns) by_name[n.name] = n;
  const std::string port = std::to_string(knot().port());
  EXPECT_EQ(by_name["ns1.example.test"].addresses, std::vector<std::string>{"127.0.0.1:" + port});
  EXPECT_EQ(by_name["ns2.example.test"].addresses, std::vector<std::string>{"[::1]:" + port});
  EXPECT_TRUE(by_name["ns.elsewhere.invalid"].addresses.empty());
  EXPECT_NE(by_name["ns.elsewhere.invalid"].error.find("no address for name server ns.elsewhere.invalid"), std::string::npos)
      << by_name["ns.elsewhere.invalid"].error;
  auto targets = propagation_targets(server(), *ns);
  EXPECT_EQ(targets, (std::vector<std::string>{server(), "[::1]:" + port}));

  auto o = options();
  o.max_nameservers = 1;
  auto one = testbed::run_sync(authoritative_servers(server(), "example.test", o));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->size(), 1u);

  auto nx = testbed::run_sync(authoritative_servers(server(), "no-such-zone.example.test", options()));
  ASSERT_FALSE(nx);
  EXPECT_EQ(dns_error_code(nx.error()), dns_errc::name_error);
  EXPECT_TRUE(dns_permanent(nx.error()));
}

TEST_F(DnsClient, AServerGivenByNameIsResolvedOffTheLoop) {
  boost::asio::thread_pool pool(1);
  auto o = options();
  o.resolve_pool = &pool;
  auto r = testbed::run_sync(txt_lookup("localhost:" + std::to_string(knot().port()), "_testbed.example.test", o));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->values.size(), 1u);
  auto unknown = testbed::run_sync(txt_lookup("no-such-host.invalid:53", "x.example.test", o));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(dns_error_code(unknown.error()), dns_errc::network);
  EXPECT_NE(unknown.error().message.find("no-such-host.invalid"), std::string::npos);
  pool.join();
}

namespace {

// A TCP "DNS server" that answers every UPDATE with NOERROR, either unsigned or with a TSIG
// record whose MAC is garbage: what a proxy rewriting answers, or a server that does not hold
// the key, would send. One thread, stopped when the test ends.
class forging_server {
 public:
  explicit forging_server(bool with_bad_mac) : with_bad_mac_(with_bad_mac) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 4) != 0)
      throw std::runtime_error("forging_server: bind/listen failed");
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~forging_server() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  void serve() {
    for (;;) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      bytes in;
      std::size_t want = 2;
      while (in.size() < want) {
        std::uint8_t buf[4096];
        auto n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.insert(in.end(), buf, buf + n);
        if (in.size() >= 2) want = 2 + static_cast<std::size_t>(in[0] << 8 | in[1]);
      }
      auto request = decode(std::span<const std::uint8_t>(in).subspan(std::min<std::size_t>(2, in.size())));
      if (request) {
        message answer;
        answer.header = request->header;
        answer.header.qr = true;
        answer.questions = request->questions;
        if (with_bad_mac_ && request->tsig) {
          answer.tsig = *request->tsig;
          answer.tsig->mac = bytes(32, 0xab);
        }
        if (auto w = encode(answer)) {
          bytes framed;
          framed.reserve(w->size() + 2);
          framed.push_back(static_cast<std::uint8_t>(w->size() >> 8));
          framed.push_back(static_cast<std::uint8_t>(w->size()));
          framed.insert(framed.end(), w->begin(), w->end());
          (void)::send(c, framed.data(), framed.size(), MSG_NOSIGNAL);
        }
      }
      ::close(c);
    }
  }
  bool with_bad_mac_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_F(DnsClient, AnUnsignedOrForgedNoerrorIsNotBelieved) {
  for (bool bad_mac : {false, true}) {
    forging_server forger(bad_mac);
    auto r = testbed::run_sync(present_txt(forger.server(), "example.test", key(), "_acme-challenge.example.test", "v", 60,
                                           options()));
    ASSERT_FALSE(r) << "bad_mac=" << bad_mac;
    EXPECT_EQ(dns_error_code(r.error()), dns_errc::bad_answer_signature);
    EXPECT_TRUE(dns_permanent(r.error()));
    EXPECT_NE(r.error().message.find("answer's TSIG does not verify with key 'certfleet-key.'"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(bad_mac ? "MAC does not match" : "no TSIG record"), std::string::npos)
        << r.error().message;
  }
}

TEST_F(DnsClient, AnUpdateAnswerArrivingOneBytePerSegmentIsReadWhole) {
  testbed::tcp_proxy split(testbed::tcp_proxy::mode::byte_split, knot().port());
  auto fqdn = fresh_name("split");
  auto where = "127.0.0.1:" + std::to_string(split.port());
  auto r = testbed::run_sync(present_txt(where, "example.test", key(), fqdn, "through-the-proxy", 60, options()));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(knot().dig_txt(fqdn), std::vector<std::string>{"through-the-proxy"});
  ASSERT_TRUE(testbed::run_sync(remove_txt(where, "example.test", key(), fqdn, "through-the-proxy", options())));
  EXPECT_TRUE(knot().dig_txt(fqdn).empty());
}

TEST_F(DnsClient, AConnectionResetMidUpdateIsATransientNetworkError) {
  testbed::tcp_proxy reset(testbed::tcp_proxy::mode::reset_after, knot().port(), 10);
  auto where = "127.0.0.1:" + std::to_string(reset.port());
  auto r = testbed::run_sync(present_txt(where, "example.test", key(), fresh_name("reset"), "v", 60, options()));
  ASSERT_FALSE(r);
  EXPECT_EQ(dns_error_code(r.error()), dns_errc::network) << r.error().message;
  EXPECT_FALSE(dns_permanent(r.error()));
  EXPECT_NE(r.error().message.find(where), std::string::npos);
  EXPECT_GE(reset.resets(), 1u);
}
