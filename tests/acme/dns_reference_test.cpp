// The codec against independent implementations: the exact bytes dig and nsupdate (BIND 9) send,
// nsupdate's TSIG signature reproduced byte for byte, and knot's signed answers to our signed
// UPDATEs verified (and refused once a byte of them is flipped).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <fstream>

#include "certfleet/acme/dns_message.hpp"
#include "certfleet/core/base64.hpp"
#include "knot.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

using namespace certfleet::acme::dns;
using std::chrono::milliseconds;

namespace {

domain_name name(std::string_view text) { return *domain_name::parse(text); }

bytes wire_of(const message& m) {
  auto w = encode(m);
  if (!w) throw std::runtime_error(w.error().message);
  return *w;
}

std::string hex(const bytes& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (auto c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// What `argv` sends to a silent server in its first datagram. `{PORT}` in any argument is
// replaced by the server's port; the tool is killed once the datagram is in.
bytes capture(std::vector<std::string> argv, const testbed::temp_dir& dir) {
  testbed::silent_dns_server server;
  for (auto& a : argv)
    if (auto at = a.find("{PORT}"); at != std::string::npos) a.replace(at, 6, std::to_string(server.port()));
  testbed::process tool(argv, {}, dir.file("tool"));
  auto got = server.receive(milliseconds(20000));
  tool.signal(SIGKILL);
  tool.wait(milliseconds(5000));
  if (got.empty()) throw std::runtime_error("no datagram from " + argv[0] + ": " + tool.stderr_text());
  return bytes(got.begin(), got.end());
}

std::string write_file(const testbed::temp_dir& dir, const std::string& file, const std::string& text) {
  std::ofstream(dir.file(file)) << text;
  return dir.file(file);
}

// One DNS message over TCP to 127.0.0.1:port and its answer (blocking; the test's own client,
// independent of dns_client.cpp).
bytes tcp_exchange(std::uint16_t port, const bytes& request) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("connect failed");
  }
  bytes framed;
  framed.reserve(request.size() + 2);
  framed.push_back(static_cast<std::uint8_t>(request.size() >> 8));
  framed.push_back(static_cast<std::uint8_t>(request.size()));
  framed.insert(framed.end(), request.begin(), request.end());
  if (::send(fd, framed.data(), framed.size(), 0) != static_cast<ssize_t>(framed.size())) {
    ::close(fd);
    throw std::runtime_error("send failed");
  }
  bytes in;
  std::size_t want = 2;
  while (in.size() < want) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20000) != 1) break;
    std::uint8_t buf[4096];
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    in.insert(in.end(), buf, buf + n);
    if (in.size() >= 2) want = 2 + static_cast<std::size_t>(in[0] << 8 | in[1]);
  }
  ::close(fd);
  if (in.size() < want) throw std::runtime_error("short answer");
  return bytes(in.begin() + 2, in.end());
}

std::uint64_t now_s() { return static_cast<std::uint64_t>(std::time(nullptr)); }

}  // namespace

TEST(DnsReference, OurQueryIsByteForByteWhatDigSends) {
  testbed::temp_dir dir("dns-ref");
  auto sent = capture({"/usr/bin/dig", "@127.0.0.1", "-p", "{PORT}", "+norec", "+noedns", "+noad", "+tries=1", "+time=30",
                       "_acme-challenge.Example.test", "TXT"},
                      dir);
  ASSERT_GE(sent.size(), 12u);
  std::uint16_t id = static_cast<std::uint16_t>(sent[0] << 8 | sent[1]);
  // dig keeps the case it was given; so does our encoder.
  EXPECT_EQ(hex(wire_of(make_query(id, name("_acme-challenge.Example.test"), rr_type::txt))), hex(sent));
}

TEST(DnsReference, OurSignedUpdateIsByteForByteWhatNsupdateSends) {
  testbed::temp_dir dir("dns-ref");
  const std::string secret_b64 = certfleet::base64_encode("certfleet reference secret bytes");
  auto key = make_tsig_key("certfleet-key.", "hmac-sha256", secret_b64);
  ASSERT_TRUE(key);
  testbed::silent_dns_server server;
  auto script = write_file(dir, "add.txt",
                           "server 127.0.0.1 " + std::to_string(server.port()) +
                               "\nzone example.test\n"
                               "update add _acme-challenge.example.test 60 TXT \"dGhlIEFDTUUgdmFsdWU\"\nsend\n");
  testbed::process tool({"/usr/bin/nsupdate", "-y", "hmac-sha256:certfleet-key.:" + secret_b64, script}, {},
                        dir.file("nsupdate"));
  auto got = server.receive(milliseconds(20000));
  tool.signal(SIGKILL);
  tool.wait(milliseconds(5000));
  ASSERT_FALSE(got.empty()) << tool.stderr_text();
  bytes sent(got.begin(), got.end());

  // nsupdate's signature verifies with our code…
  auto theirs = decode(sent);
  ASSERT_TRUE(theirs) << theirs.error().message;
  ASSERT_TRUE(theirs->tsig);
  EXPECT_TRUE(tsig_verify(sent, *key, {}, theirs->tsig->time_signed).ok());
  // …and our encoding of the same update, signed at the same second with the same id, is the
  // same message to the last byte of the MAC.
  update_builder b(theirs->header.id, name("example.test"));
  ASSERT_TRUE(b.add_txt(name("_acme-challenge.example.test"), "dGhlIEFDTUUgdmFsdWU", 60));
  auto ours = tsig_sign(wire_of(b.msg), *key, theirs->tsig->time_signed, theirs->tsig->fudge);
  ASSERT_TRUE(ours);
  EXPECT_EQ(hex(ours->wire), hex(sent));
  EXPECT_EQ(ours->mac, theirs->tsig->mac);
}

TEST(DnsReference, OurDeletesAreByteForByteWhatNsupdateSends) {
  testbed::temp_dir dir("dns-ref");
  testbed::silent_dns_server server;
  auto script = write_file(dir, "delete.txt",
                           "server 127.0.0.1 " + std::to_string(server.port()) +
                               "\nzone example.test\n"
                               "update delete _acme-challenge.example.test TXT \"v1\"\n"
                               "update delete _acme-challenge.example.test TXT\nsend\n");
  testbed::process tool({"/usr/bin/nsupdate", script}, {}, dir.file("nsupdate"));
  auto got = server.receive(milliseconds(20000));
  tool.signal(SIGKILL);
  tool.wait(milliseconds(5000));
  ASSERT_FALSE(got.empty()) << tool.stderr_text();
  bytes sent(got.begin(), got.end());
  std::uint16_t id = static_cast<std::uint16_t>(sent[0] << 8 | sent[1]);
  update_builder b(id, name("example.test"));
  ASSERT_TRUE(b.delete_txt(name("_acme-challenge.example.test"), "v1"));
  ASSERT_TRUE(b.delete_rrset(name("_acme-challenge.example.test"), rr_type::txt));
  EXPECT_EQ(hex(wire_of(b.msg)), hex(sent));
}

TEST(DnsReference, KnotAcceptsOurSignatureAndWeVerifyKnots) {
  testbed::temp_dir dir("dns-ref");
  testbed::knot server(dir.path() / "knot");
  auto key = make_tsig_key(server.key_name(), "hmac-sha256", server.secret_base64());
  ASSERT_TRUE(key);
  update_builder b(0x1234, name(server.zone()));
  ASSERT_TRUE(b.add_txt(name("_acme-challenge." + server.zone()), "signed-by-certfleet", 60));
  auto request = tsig_sign(wire_of(b.msg), *key, now_s());
  ASSERT_TRUE(request);
  auto answer = tcp_exchange(server.port(), request->wire);
  auto m = decode(answer);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->header.rcode, 0) << rcode_name(m->header.rcode) << "\n" << server.log();
  ASSERT_TRUE(m->tsig);
  EXPECT_EQ(m->tsig->error, 0);
  // knot's answer is signed over our request's MAC.
  auto verdict = tsig_verify(answer, *key, request->mac, now_s());
  EXPECT_TRUE(verdict.ok()) << verdict.detail;
  EXPECT_EQ(server.dig_txt("_acme-challenge." + server.zone()), std::vector<std::string>{"signed-by-certfleet"});

  // A flipped MAC byte, a flipped header bit, another request MAC: each refused.
  auto mac_at = static_cast<std::size_t>(std::search(answer.begin(), answer.end(), m->tsig->mac.begin(), m->tsig->mac.end()) -
                                         answer.begin());
  ASSERT_LT(mac_at, answer.size());
  auto bad_mac = answer;
  bad_mac[mac_at + 5] ^= 0x80;
  EXPECT_EQ(tsig_verify(bad_mac, *key, request->mac, now_s()).st, tsig_verdict::status::bad_mac);
  auto bad_header = answer;
  bad_header[2] ^= 0x04;  // the AA bit
  EXPECT_EQ(tsig_verify(bad_header, *key, request->mac, now_s()).st, tsig_verdict::status::bad_mac);
  bytes other_request_mac = request->mac;
  other_request_mac[0] ^= 1;
  EXPECT_EQ(tsig_verify(answer, *key, other_request_mac, now_s()).st, tsig_verdict::status::bad_mac);

  // A request with a flipped MAC byte is refused by knot: BADSIG.
  auto tampered = request->wire;
  tampered[tampered.size() - 10] ^= 0x01;  // inside the MAC (the last 6 bytes are id, error, other len)
  auto refused = decode(tcp_exchange(server.port(), tampered));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->header.rcode, 9);  // NOTAUTH
  ASSERT_TRUE(refused->tsig);
  EXPECT_EQ(rcode_name(refused->tsig->error), "BADSIG");
}

TEST(DnsReference, KnotsAnswersDecodeAndReencode) {
  testbed::temp_dir dir("dns-ref");
  testbed::knot server(dir.path() / "knot");
  for (auto [qname, type] : {std::pair{server.zone(), rr_type::soa}, std::pair{server.zone(), rr_type::ns},
                             std::pair{"ns1." + server.zone(), rr_type::a}, std::pair{"nope." + server.zone(), rr_type::txt}}) {
    auto q = make_query(77, name(qname), type);
    auto answer = tcp_exchange(server.port(), wire_of(q));
    auto m = decode(answer);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_TRUE(m->header.qr);
    EXPECT_TRUE(m->header.aa);
    auto again = decode(wire_of(*m));
    ASSERT_TRUE(again);
    EXPECT_TRUE(identical(*m, *again)) << qname;
  }
}
