// The DNS codec on its own (pure): names, the RFC 1035 compression example, bounds and pointer
// loops, TXT strings, UPDATE sections, TSIG sign/verify and its refusals, the key's fields.
#include <gtest/gtest.h>

#include <string>

#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/dns_message.hpp"
#include "certfleet/core/base64.hpp"

using namespace certfleet::acme::dns;
using certfleet::errc;

namespace {

domain_name name(std::string_view text) {
  auto n = domain_name::parse(text);
  if (!n) throw std::runtime_error(n.error().message);
  return *n;
}

bytes wire_of(const message& m) {
  auto w = encode(m);
  if (!w) throw std::runtime_error(w.error().message);
  return *w;
}

tsig_key test_key(std::string secret = "0123456789abcdef0123456789abcdef") {
  auto k = make_tsig_key("certfleet-key", "hmac-sha256", certfleet::base64_encode(secret));
  if (!k) throw std::runtime_error(k.error().message);
  return *k;
}

}  // namespace

TEST(DnsName, TrailingDotAndCaseDoNotMatter) {
  EXPECT_EQ(name("Example.TEST"), name("example.test."));
  EXPECT_EQ(name("example.test").text(), "example.test");
  EXPECT_EQ(name("example.test.").fqdn(), "example.test.");
  EXPECT_TRUE(name(".").is_root());
  EXPECT_EQ(name(".").text(), ".");
  EXPECT_FALSE(name("a.example.test") == name("example.test"));
  EXPECT_TRUE(name("_acme-challenge.WWW.example.test").is_at_or_below(name("EXAMPLE.test.")));
  EXPECT_TRUE(name("example.test").is_at_or_below(name("example.test")));
  EXPECT_FALSE(name("badexample.test").is_at_or_below(name("example.test")));
  EXPECT_TRUE(name("x.y").is_at_or_below(domain_name{}));
  EXPECT_EQ(name("a.b.c").parent(), name("b.c"));
  EXPECT_EQ(name("*.example.test").labels().front(), "*");
}

TEST(DnsName, LimitsAndBadTextNameTheField) {
  std::string label63(63, 'a'), label64(64, 'a');
  EXPECT_TRUE(domain_name::parse(label63 + ".test"));
  auto long_label = domain_name::parse(label64 + ".test", "fqdn");
  ASSERT_FALSE(long_label);
  EXPECT_EQ(long_label.error().field, "fqdn");
  EXPECT_NE(long_label.error().message.find("longer than 63"), std::string::npos);
  // 4 × 63-byte labels = 256 bytes on the wire with the root: one too many.
  std::string too_long = label63 + "." + label63 + "." + label63 + "." + label63;
  EXPECT_FALSE(domain_name::parse(too_long));
  std::string just_fits = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'a');  // 253 characters
  ASSERT_TRUE(domain_name::parse(just_fits));
  EXPECT_EQ(domain_name::parse(just_fits)->wire_length(), 255u);
  for (const char* bad : {"", "a..b", ".a", "a b.test", "exa$mple.test", "a.*b.test"}) {
    auto r = domain_name::parse(bad, "zone");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, certfleet::make_error_code(errc::invalid_argument));
    EXPECT_EQ(r.error().field, "zone");
  }
}

TEST(DnsName, WireLabelsAreEscapedInText) {
  auto n = domain_name::from_labels({std::string("a.b"), std::string("x\\y"), std::string("\x01z", 2), "test"});
  ASSERT_TRUE(n);
  EXPECT_EQ(n->text(), "a\\.b.x\\\\y.\\001z.test");
  EXPECT_FALSE(domain_name::from_labels({std::string(64, 'a')}));
  EXPECT_FALSE(domain_name::from_labels({""}));
}

TEST(DnsCodec, QueryEncodesAsRfc1035) {
  auto q = make_query(0xa77c, name("example.test"), rr_type::soa);
  bytes expected = {0xa7, 0x7c, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // header, RD=0
                    7,    'e',  'x',  'a',  'm',  'p',  'l',  'e',  4,    't',  'e',  's',  't', 0,
                    0x00, 0x06, 0x00, 0x01};  // SOA IN
  EXPECT_EQ(wire_of(q), expected);
  auto rd = make_query(1, name("example.test"), rr_type::a, true);
  EXPECT_EQ(wire_of(rd)[2], 0x01);
}

// RFC 1035 §4.1.4's example: F.ISI.ARPA, FOO.F.ISI.ARPA (FOO + a pointer), ARPA (a pointer
// into the middle of the first name) and the root.
TEST(DnsCodec, DecodesTheRfc1035CompressionExample) {
  bytes m = {0x12, 0x34, 0x84, 0x00, 0, 3, 0, 1, 0, 0, 0, 0};  // QR AA, 3 questions, 1 answer
  auto put_q = [&](std::initializer_list<std::uint8_t> name_bytes, std::uint16_t type) {
    m.insert(m.end(), name_bytes);
    m.push_back(static_cast<std::uint8_t>(type >> 8));
    m.push_back(static_cast<std::uint8_t>(type));
    m.push_back(0);
    m.push_back(1);
  };
  put_q({1, 'F', 3, 'I', 'S', 'I', 4, 'A', 'R', 'P', 'A', 0}, 1);  // at offset 12
  put_q({3, 'F', 'O', 'O', 0xC0, 12}, 1);                           // FOO.F.ISI.ARPA
  put_q({0xC0, 18}, 1);                                              // ARPA (offset 12 + 6)
  // An answer for the root (a single zero byte), type NS with a compressed name in its data.
  m.insert(m.end(), {0, 0, 2, 0, 1, 0, 0, 0x0e, 0x10, 0, 2, 0xC0, 12});
  auto d = decode(m);
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->questions.size(), 3u);
  EXPECT_EQ(d->questions[0].name.text(), "F.ISI.ARPA");
  EXPECT_EQ(d->questions[1].name.text(), "FOO.F.ISI.ARPA");
  EXPECT_EQ(d->questions[2].name.text(), "ARPA");
  ASSERT_EQ(d->answers.size(), 1u);
  EXPECT_TRUE(d->answers[0].owner.is_root());
  EXPECT_EQ(d->answers[0].ttl, 3600u);
  EXPECT_EQ(std::get<name_data>(d->answers[0].data).name.text(), "F.ISI.ARPA");
  // Re-encoded, it decodes to the same message (our compression makes the same pointers here).
  auto again = decode(wire_of(*d));
  ASSERT_TRUE(again);
  EXPECT_TRUE(identical(*d, *again));
  EXPECT_EQ(wire_of(*d), m);
}

TEST(DnsCodec, PointerLoopsAndForwardPointersAreRefused) {
  bytes header = {0, 1, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0};
  auto with_name = [&](bytes n) {
    bytes m = header;
    m.insert(m.end(), n.begin(), n.end());
    m.insert(m.end(), {0, 1, 0, 1});
    return m;
  };
  // A pointer to itself.
  auto self = decode(with_name({0xC0, 12}));
  ASSERT_FALSE(self);
  EXPECT_NE(self.error().message.find("backwards"), std::string::npos);
  // A pointer forwards.
  EXPECT_FALSE(decode(with_name({0xC0, 14, 1, 'a', 0})));
  // A label, then a pointer back to it: a loop through labels ends at the 255-byte cap.
  auto loop = decode(with_name({1, 'a', 0xC0, 12}));
  ASSERT_FALSE(loop);
  EXPECT_NE(loop.error().message.find("255"), std::string::npos);
  // Extended label types (0x40, 0x80) are not DNS names we accept.
  EXPECT_FALSE(decode(with_name({0x41, 'a', 0})));
  // A pointer into the header's bytes: backwards, but what it finds there (0x80) is no label.
  EXPECT_FALSE(decode(with_name({0xC0, 0x02})));
}

TEST(DnsCodec, EveryTruncationOfAValidMessageIsAnErrorNotACrash) {
  update_builder b(7, name("example.test"));
  ASSERT_TRUE(b.add_txt(name("_acme-challenge.example.test"), "value-one", 60));
  ASSERT_TRUE(b.delete_txt(name("_acme-challenge.example.test"), "value-two"));
  ASSERT_TRUE(b.delete_rrset(name("x.example.test"), rr_type::txt));
  auto signed_msg = tsig_sign(wire_of(b.msg), test_key(), 1'700'000'000);
  ASSERT_TRUE(signed_msg);
  const auto& w = signed_msg->wire;
  ASSERT_TRUE(decode(w));
  for (std::size_t n = 0; n < w.size(); ++n) {
    auto d = decode(std::span<const std::uint8_t>(w.data(), n));
    EXPECT_FALSE(d) << "a " << n << "-byte prefix decoded";
    if (!d) {
      EXPECT_EQ(d.error().field, "dns_message");
    }
  }
  bytes longer = w;
  longer.push_back(0);
  auto trailing = decode(longer);
  ASSERT_FALSE(trailing);
  EXPECT_NE(trailing.error().message.find("after the last record"), std::string::npos);
}

TEST(DnsCodec, CountsLargerThanTheMessageFailCleanly) {
  bytes m = {0, 1, 0x80, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  auto d = decode(m);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("question 1"), std::string::npos);
}

TEST(DnsCodec, TxtStringsAreSplitAt255BytesAndJoinedBack) {
  EXPECT_EQ(txt_value("abc").strings, std::vector<std::string>{"abc"});
  std::string long_value(600, 'x');
  auto t = txt_value(long_value);
  ASSERT_EQ(t.strings.size(), 3u);
  EXPECT_EQ(t.strings[0].size(), 255u);
  EXPECT_EQ(t.strings[2].size(), 90u);
  EXPECT_EQ(t.joined(), long_value);
  message m;
  m.header.qr = true;
  m.answers.push_back({name("t.example.test"), rr_type::txt, rr_class::in, 60, txt_data{{"one", "two", ""}}});
  auto d = decode(wire_of(m));
  ASSERT_TRUE(d);
  EXPECT_EQ(std::get<txt_data>(d->answers[0].data).strings, (std::vector<std::string>{"one", "two", ""}));
  // A hand-made string over 255 bytes has no encoding.
  m.answers[0].data = txt_data{{std::string(256, 'y')}};
  EXPECT_FALSE(encode(m));
}

TEST(DnsCodec, TypedRecordsRoundTrip) {
  message m;
  m.header = {0xbeef, true, opcode::query, true, false, false, false, false, false, false, 0};
  m.questions.push_back({name("example.test"), rr_type::soa, rr_class::in});
  m.answers.push_back({name("example.test"), rr_type::soa, rr_class::in, 300,
                       soa_data{name("ns1.example.test"), name("hostmaster.example.test"), 7, 3600, 600, 86400, 300}});
  m.authorities.push_back({name("example.test"), rr_type::ns, rr_class::in, 300, name_data{name("ns1.example.test")}});
  m.additionals.push_back({name("ns1.example.test"), rr_type::a, rr_class::in, 300, a_data{{127, 0, 0, 1}}});
  aaaa_data v6{};
  v6.address[15] = 1;
  m.additionals.push_back({name("ns1.example.test"), rr_type::aaaa, rr_class::in, 300, v6});
  m.additionals.push_back({name("x.example.test"), static_cast<rr_type>(99), rr_class::in, 1, raw_data{{1, 2, 3}}});
  auto w = wire_of(m);
  auto d = decode(w);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_TRUE(identical(m, *d));
  EXPECT_EQ(address_text(d->additionals[0]), "127.0.0.1");
  EXPECT_EQ(address_text(d->additionals[1]), "::1");
  EXPECT_EQ(rr_type_name(static_cast<rr_type>(99)), "TYPE99");
  EXPECT_EQ(rcode_name(9), "NOTAUTH");
  EXPECT_EQ(rcode_name(17), "BADKEY");
  EXPECT_EQ(rcode_name(42), "RCODE42");
  // Compression: every name after the question's is a pointer or ends in one (264 bytes
  // spelled out).
  EXPECT_EQ(w.size(), 156u);
}

TEST(DnsUpdate, SectionsFollowRfc2136) {
  update_builder b(1, name("example.test"));
  auto fqdn = name("_acme-challenge.example.test");
  ASSERT_TRUE(b.add_txt(fqdn, "v1", 60));
  ASSERT_TRUE(b.delete_txt(fqdn, "v2"));
  ASSERT_TRUE(b.delete_rrset(fqdn, rr_type::txt));
  EXPECT_EQ(b.msg.header.op, opcode::update);
  ASSERT_EQ(b.msg.questions.size(), 1u);
  EXPECT_EQ(b.msg.questions[0].type, rr_type::soa);
  const auto& up = b.msg.authorities;
  ASSERT_EQ(up.size(), 3u);
  EXPECT_EQ(up[0].cls, rr_class::in);
  EXPECT_EQ(up[0].ttl, 60u);
  EXPECT_EQ(up[1].cls, rr_class::none);
  EXPECT_EQ(up[1].ttl, 0u);
  EXPECT_EQ(std::get<txt_data>(up[1].data).joined(), "v2");
  EXPECT_EQ(up[2].cls, rr_class::any);
  EXPECT_TRUE(std::get<raw_data>(up[2].data).data.empty());
  auto d = decode(wire_of(b.msg));
  ASSERT_TRUE(d);
  EXPECT_TRUE(identical(b.msg, *d));

  auto outside = b.add_txt(name("_acme-challenge.other.test"), "v", 60);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().field, "fqdn");
  EXPECT_NE(outside.error().message.find("not inside zone example.test"), std::string::npos);
}

TEST(DnsTsig, SignedRequestVerifiesAndEveryAlterationIsCaught) {
  auto key = test_key();
  update_builder b(0x4242, name("example.test"));
  ASSERT_TRUE(b.add_txt(name("_acme-challenge.example.test"), "token", 60));
  const std::uint64_t t = 1'800'000'000;
  auto s = tsig_sign(wire_of(b.msg), key, t);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->mac.size(), 32u);
  auto d = decode(s->wire);
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->tsig);
  EXPECT_EQ(d->tsig->key_name.fqdn(), "certfleet-key.");
  EXPECT_EQ(d->tsig->algorithm.fqdn(), "hmac-sha256.");
  EXPECT_EQ(d->tsig->fudge, 300);
  EXPECT_EQ(d->tsig->original_id, 0x4242);
  EXPECT_EQ(d->tsig->mac, s->mac);

  EXPECT_TRUE(tsig_verify(s->wire, key, {}, t).ok());
  EXPECT_TRUE(tsig_verify(s->wire, key, {}, t + 300).ok());
  EXPECT_EQ(tsig_verify(s->wire, key, {}, t + 301).st, tsig_verdict::status::bad_time);
  EXPECT_EQ(tsig_verify(s->wire, key, {}, t - 301).st, tsig_verdict::status::bad_time);

  // The MAC's last byte, then a byte of the update section: both break the signature.
  auto flipped_mac = s->wire;
  auto mac_at = std::search(flipped_mac.begin(), flipped_mac.end(), s->mac.begin(), s->mac.end()) - flipped_mac.begin();
  flipped_mac[static_cast<std::size_t>(mac_at) + 31] ^= 0x01;
  EXPECT_EQ(tsig_verify(flipped_mac, key, {}, t).st, tsig_verdict::status::bad_mac);
  auto flipped_body = s->wire;
  flipped_body[40] ^= 0x20;  // inside the owner name of the update RR: still decodes
  ASSERT_TRUE(decode(flipped_body));
  EXPECT_EQ(tsig_verify(flipped_body, key, {}, t).st, tsig_verdict::status::bad_mac);
  // Another secret, another key name, a request MAC where there is none.
  EXPECT_EQ(tsig_verify(s->wire, test_key("another secret of some length.."), {}, t).st, tsig_verdict::status::bad_mac);
  auto other_name = *make_tsig_key("other-key", "hmac-sha256", certfleet::base64_encode("0123456789abcdef0123456789abcdef"));
  EXPECT_EQ(tsig_verify(s->wire, other_name, {}, t).st, tsig_verdict::status::wrong_key);
  EXPECT_EQ(tsig_verify(s->wire, key, s->mac, t).st, tsig_verdict::status::bad_mac);
  // Unsigned, and not DNS at all.
  EXPECT_EQ(tsig_verify(wire_of(b.msg), key, {}, t).st, tsig_verdict::status::unsigned_message);
  EXPECT_EQ(tsig_verify(bytes{1, 2, 3}, key, {}, t).st, tsig_verdict::status::malformed);
  // The key's name is matched without regard to case, as names are.
  auto upper = *make_tsig_key("CERTFLEET-KEY.", "HMAC-SHA256.", certfleet::base64_encode("0123456789abcdef0123456789abcdef"));
  EXPECT_TRUE(tsig_verify(s->wire, upper, {}, t).ok());
}

TEST(DnsTsig, AnAnswerChainsToTheRequestMac) {
  auto key = test_key();
  update_builder b(9, name("example.test"));
  ASSERT_TRUE(b.add_txt(name("a.example.test"), "v", 1));
  auto request = tsig_sign(wire_of(b.msg), key, 1000);
  ASSERT_TRUE(request);
  // The server's answer: the header with QR set, signed over the request MAC (RFC 8945 §4.3.1).
  // tsig_sign has no request-MAC input, so the answer is signed by hand here: MAC over
  // [len(request mac), request mac, answer, variables].
  message answer;
  answer.header = {9, true, opcode::update, false, false, false, false, false, false, false, 0};
  answer.questions = b.msg.questions;
  auto unsigned_answer = wire_of(answer);
  // Sign it as a request, then check that it does NOT verify as an answer to `request` (the
  // chain is part of the MAC), and does verify on its own.
  auto as_request = tsig_sign(unsigned_answer, key, 1000);
  ASSERT_TRUE(as_request);
  EXPECT_TRUE(tsig_verify(as_request->wire, key, {}, 1000).ok());
  EXPECT_EQ(tsig_verify(as_request->wire, key, request->mac, 1000).st, tsig_verdict::status::bad_mac);
}

TEST(DnsTsig, ServerErrorsAreReportedAsSuch) {
  message m;
  m.header = {5, true, opcode::update, false, false, false, false, false, false, false, 9};  // NOTAUTH
  m.questions.push_back({name("example.test"), rr_type::soa, rr_class::in});
  m.tsig = tsig_record{name("certfleet-key"), hmac_sha256_name(), 1000, 300, {}, 5, 17, {}};  // BADKEY, no MAC
  auto v = tsig_verify(wire_of(m), test_key(), bytes(32, 1), 1000);
  EXPECT_EQ(v.st, tsig_verdict::status::server_error);
  EXPECT_EQ(v.error, 17);
  EXPECT_NE(v.detail.find("BADKEY"), std::string::npos);
}

TEST(DnsTsig, KeyFieldsAreCheckedAndTheSecretIsNeverQuoted) {
  const std::string secret_b64 = certfleet::base64_encode("a secret that must not leak!");
  EXPECT_TRUE(make_tsig_key("certfleet-key.", "hmac-sha256.", secret_b64));
  auto bad_name = make_tsig_key("bad key", "hmac-sha256", secret_b64);
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().field, "tsig_key_name");
  auto bad_alg = make_tsig_key("k", "hmac-md5", secret_b64);
  ASSERT_FALSE(bad_alg);
  EXPECT_EQ(bad_alg.error().field, "tsig_algorithm");
  EXPECT_NE(bad_alg.error().message.find("hmac-sha256"), std::string::npos);
  for (std::string bad : {std::string(""), secret_b64 + " ", secret_b64.substr(1), std::string("not base64!!")}) {
    auto r = make_tsig_key("k", "hmac-sha256", bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "tsig_secret");
    if (!bad.empty()) {
      EXPECT_EQ(r.error().message.find(bad), std::string::npos);
    }
  }
}

TEST(DnsErrors, TheTableClassifiesEveryCode) {
  using certfleet::make_error;
  for (auto c : {dns_errc::tsig_rejected, dns_errc::not_authoritative, dns_errc::refused, dns_errc::zone_not_found,
                 dns_errc::name_error, dns_errc::update_failed, dns_errc::bad_answer_signature}) {
    EXPECT_TRUE(dns_errc_permanent(c)) << dns_errc_name(c);
    EXPECT_FALSE(dns_errc_hint(c).empty());
  }
  for (auto c : {dns_errc::server_failure, dns_errc::timeout, dns_errc::network, dns_errc::malformed_answer}) {
    EXPECT_FALSE(dns_errc_permanent(c)) << dns_errc_name(c);
    EXPECT_FALSE(dns_errc_hint(c).empty());
  }
  certfleet::error e{make_error_code(dns_errc::timeout), "x", {}, 0};
  EXPECT_FALSE(dns_permanent(e));
  EXPECT_EQ(dns_error_code(e), dns_errc::timeout);
  EXPECT_EQ(e.code.message(), "timeout");
  EXPECT_TRUE(dns_permanent(make_error(errc::invalid_argument, "bad", "server")));
  EXPECT_FALSE(dns_permanent(make_error(errc::timeout, "slow")));
  EXPECT_FALSE(dns_error_code(make_error(errc::timeout, "slow")));
}

TEST(DnsServer, AddressesParseAndNameTheField) {
  auto s = parse_server("127.0.0.1:5353");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->host, "127.0.0.1");
  EXPECT_EQ(s->port, 5353);
  EXPECT_TRUE(s->host_is_ip());
  EXPECT_EQ(parse_server("[::1]:53")->text(), "[::1]:53");
  EXPECT_EQ(parse_server("NS1.Example.NET.")->text(), "ns1.example.net:53");
  EXPECT_FALSE(parse_server("ns1.example.net:53")->host_is_ip());
  for (const char* bad : {"", "127.0.0.1:0", "127.0.0.1:65536", "::1:53", "[::1", "host name:53", ":53", "a:b"}) {
    auto r = parse_server(bad, "rfc2136.server");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "rfc2136.server");
    EXPECT_NE(r.error().message.find("host:port"), std::string::npos);
  }
}

TEST(DnsServer, PropagationTargetsStartWithTheServerAndHaveNoDuplicates) {
  std::vector<nameserver> ns{{"ns1.example.test", {"127.0.0.1:53", "[::1]:53"}, ""},
                             {"ns2.example.test", {"127.0.0.1:53", "192.0.2.1:53"}, ""},
                             {"ns.elsewhere.test", {}, "no address"}};
  EXPECT_EQ(propagation_targets("127.0.0.1:53", ns),
            (std::vector<std::string>{"127.0.0.1:53", "[::1]:53", "192.0.2.1:53"}));
  EXPECT_EQ(propagation_targets("127.0.0.1", {}), (std::vector<std::string>{"127.0.0.1:53"}));
}

// The manual DNS path's default resolver: the first usable `nameserver` line of resolv.conf.
TEST(resolv_conf, the_first_nameserver_with_port_53) {
  EXPECT_EQ(resolv_conf_nameserver("# generated\nsearch example.org\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"),
            "192.0.2.53:53");
  EXPECT_EQ(resolv_conf_nameserver("  nameserver\t2001:db8::53 # primary\r\n"), "[2001:db8::53]:53");
  EXPECT_EQ(resolv_conf_nameserver("nameserver fe80::1%eth0\n"), "[fe80::1]:53");
  // Not an address, a longer keyword, a comment: skipped.
  EXPECT_EQ(resolv_conf_nameserver("nameserver dns.example\nnameservers 192.0.2.1\n#nameserver 192.0.2.2\nnameserver 127.0.0.53"),
            "127.0.0.53:53");
  EXPECT_FALSE(resolv_conf_nameserver(""));
  EXPECT_FALSE(resolv_conf_nameserver("options edns0\nnameserver\n"));
}
