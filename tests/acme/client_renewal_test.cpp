// ACME Renewal Information (pure): RFC 9773's certID example, the certID of a real certificate
// computed here another way, the renewalInfo document, and the renewal decision (a window in the
// past, in the future, no ARI, Retry-After, the seeded point).
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certfleet/acme/jose.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certs.hpp"

using namespace certfleet::acme;
using certfleet::time_ms;

namespace {

constexpr time_ms hour = 3600'000;
constexpr time_ms day = 24 * hour;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s += static_cast<char>(v);
  return s;
}

}  // namespace

TEST(acme_ari, rfc9773_cert_id_example) {
  // RFC 9773 §4.1: keyIdentifier 69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4,
  // serial 00:87:65:43:21 (DER content octets, sign byte kept).
  auto aki = bytes({0x69, 0x88, 0x5B, 0x6B, 0x87, 0x46, 0x40, 0x41, 0xE1, 0xB3, 0x7B, 0x84, 0x7B, 0xA0, 0xAE, 0x2C, 0xDE, 0x01,
                    0xC8, 0xD4});
  auto serial = bytes({0x00, 0x87, 0x65, 0x43, 0x21});
  EXPECT_EQ(ari_cert_id(aki, serial), "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
}

TEST(acme_ari, cert_id_of_a_certificate) {
  auto ca = testbed::make_certificate({.common_name = "ARI test CA", .is_ca = true});
  for (int i = 0; i < 8; ++i) {  // serials with and without the high bit set
    auto leaf = testbed::make_certificate({.common_name = "ari.example", .issuer = &ca});
    auto id = ari_cert_id_of(leaf.cert_pem);
    ASSERT_TRUE(id) << id.error().message;
    // The same ID, computed here from OpenSSL's parsed AKI and the serial as a number.
    BIO* b = BIO_new_mem_buf(leaf.cert_pem.data(), static_cast<int>(leaf.cert_pem.size()));
    X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    auto* akid = static_cast<AUTHORITY_KEYID*>(X509_get_ext_d2i(x, NID_authority_key_identifier, nullptr, nullptr));
    ASSERT_NE(akid, nullptr);
    std::string key_id(reinterpret_cast<const char*>(ASN1_STRING_get0_data(akid->keyid)),
                       static_cast<std::size_t>(ASN1_STRING_length(akid->keyid)));
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr);
    std::string serial(static_cast<std::size_t>(BN_num_bytes(bn)), '\0');
    BN_bn2bin(bn, reinterpret_cast<unsigned char*>(serial.data()));
    if (static_cast<unsigned char>(serial[0]) & 0x80) serial.insert(serial.begin(), '\0');
    EXPECT_EQ(*id, base64url_encode(key_id) + "." + base64url_encode(serial));
    BN_free(bn);
    AUTHORITY_KEYID_free(akid);
    X509_free(x);
  }
  // A self-signed certificate made without an AKI cannot be named.
  auto self = testbed::make_certificate({.common_name = "self.example"});
  auto none = ari_cert_id_of(self.cert_pem, "cert_pem");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().field, "cert_pem");
  EXPECT_NE(none.error().message.find("Authority Key Identifier"), std::string::npos);
  EXPECT_FALSE(ari_cert_id_of("not pem"));
}

TEST(acme_ari, renewal_info_document) {
  // RFC 9773 §4.2's example.
  auto r = parse_renewal_info(R"({
    "suggestedWindow": {"start": "2025-01-02T04:00:00Z", "end": "2025-01-03T04:00:00Z"},
    "explanationURL": "https://acme.example.com/docs/ari"
  })");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->suggested_window.start, 1735790400000LL);
  EXPECT_EQ(r->suggested_window.end, 1735790400000LL + day);
  EXPECT_EQ(r->explanation_url, "https://acme.example.com/docs/ari");
  struct row {
    const char* json;
    const char* field;
  };
  for (auto [json, field] : {
           row{R"({})", "renewalInfo.suggestedWindow"},
           row{R"({"suggestedWindow": {"start": "2025-01-02T04:00:00Z"}})", "renewalInfo.suggestedWindow.end"},
           row{R"({"suggestedWindow": {"start": "tomorrow", "end": "2025-01-03T04:00:00Z"}})", "renewalInfo.suggestedWindow.start"},
           row{R"({"suggestedWindow": {"start": "2025-01-03T04:00:00Z", "end": "2025-01-02T04:00:00Z"}})",
               "renewalInfo.suggestedWindow.end"},
           row{R"({"suggestedWindow": {"start": "2025-01-02T04:00:00Z", "end": "2025-01-03T04:00:00Z"}, "explanationURL": 1})",
               "renewalInfo.explanationURL"},
           row{R"("x")", "renewalInfo"},
       }) {
    auto bad = parse_renewal_info(json);
    ASSERT_FALSE(bad) << json;
    EXPECT_EQ(bad.error().field, field) << json << ": " << bad.error().message;
  }
}

TEST(acme_renewal, window_in_the_past_means_now) {
  renewal_inputs in;
  in.now = 1'800'000'000'000;
  in.not_before = in.now - 80 * day;
  in.not_after = in.now + 10 * day;
  in.ari = renewal_window{in.now - 3 * day, in.now - 2 * day};
  for (std::uint64_t seed : {0ull, 1ull, 42ull, ~0ull}) {
    in.seed = seed;
    auto d = decide_renewal(in);
    EXPECT_TRUE(d.renew_now);
    EXPECT_EQ(d.source, renewal_source::ari);
    EXPECT_NE(d.reason.find("in the past"), std::string::npos) << d.reason;
  }
}

TEST(acme_renewal, future_window_picks_a_seeded_point_and_checks_again_by_retry_after) {
  renewal_inputs in;
  in.now = 1'800'000'000'000;
  in.not_before = in.now - 30 * day;
  in.not_after = in.now + 60 * day;
  in.ari = renewal_window{in.now + 20 * day, in.now + 22 * day};
  in.seed = 7;
  in.retry_after_s = 6 * 3600;
  auto d = decide_renewal(in);
  EXPECT_FALSE(d.renew_now);
  EXPECT_GE(d.renew_at, in.ari->start);
  EXPECT_LT(d.renew_at, in.ari->end);
  // The next look is the CA's Retry-After (earlier than the chosen point).
  EXPECT_EQ(d.next_check_at, in.now + 6 * hour);
  // The same seed gives the same point; other seeds spread over the window.
  EXPECT_EQ(decide_renewal(in).renew_at, d.renew_at);
  time_ms lo = in.ari->end, hi = in.ari->start;
  for (std::uint64_t s = 0; s < 200; ++s) {
    in.seed = s;
    auto e = decide_renewal(in);
    ASSERT_GE(e.renew_at, in.ari->start);
    ASSERT_LT(e.renew_at, in.ari->end);
    lo = std::min(lo, e.renew_at);
    hi = std::max(hi, e.renew_at);
  }
  EXPECT_LT(lo, in.ari->start + 2 * hour);  // reaches both ends of a 48 h window
  EXPECT_GT(hi, in.ari->end - 2 * hour);

  // Retry-After is clamped (a minute to a day); without one, 6 hours.
  in.seed = 7;
  in.retry_after_s = 1;
  EXPECT_EQ(decide_renewal(in).next_check_at, in.now + 60'000);
  in.retry_after_s = 30 * 86400;
  EXPECT_EQ(decide_renewal(in).next_check_at, in.now + day);
  in.retry_after_s.reset();
  EXPECT_EQ(decide_renewal(in).next_check_at, in.now + 6 * hour);
  // A chosen point before the next fetch is the next check.
  in.ari = renewal_window{in.now + hour, in.now + hour + 1000};
  in.retry_after_s = 86400;
  auto soon = decide_renewal(in);
  EXPECT_FALSE(soon.renew_now);
  EXPECT_EQ(soon.next_check_at, soon.renew_at);
}

TEST(acme_renewal, inside_the_window_renews_once_the_point_has_come) {
  renewal_inputs in;
  in.now = 1'800'000'000'000;
  in.not_before = in.now - 60 * day;
  in.not_after = in.now + 30 * day;
  in.ari = renewal_window{in.now - day, in.now + day};
  int now_count = 0;
  for (std::uint64_t s = 0; s < 100; ++s) {
    in.seed = s;
    auto d = decide_renewal(in);
    EXPECT_EQ(d.renew_now, d.renew_at <= in.now);
    now_count += d.renew_now;
  }
  EXPECT_GT(now_count, 20);  // about half of the points are already past
  EXPECT_LT(now_count, 80);
}

TEST(acme_renewal, without_ari_the_last_third_of_the_lifetime) {
  renewal_inputs in;
  in.not_before = 1'800'000'000'000;
  in.not_after = in.not_before + 90 * day;
  in.now = in.not_before + 59 * day;
  auto d = decide_renewal(in);
  EXPECT_EQ(d.source, renewal_source::lifetime);
  EXPECT_FALSE(d.renew_now);
  EXPECT_EQ(d.window.start, in.not_before + 60 * day);
  EXPECT_EQ(d.window.end, in.not_after);
  EXPECT_EQ(d.renew_at, in.not_before + 60 * day);
  EXPECT_EQ(d.next_check_at, d.renew_at);
  EXPECT_EQ(renewal_source_name(d.source), "lifetime");
  in.now = in.not_before + 60 * day;
  EXPECT_TRUE(decide_renewal(in).renew_now);
  in.now = in.not_after + 1;
  auto expired = decide_renewal(in);
  EXPECT_TRUE(expired.renew_now);
  EXPECT_NE(expired.reason.find("expired"), std::string::npos);
  // Retry-After only matters with ARI.
  in.now = in.not_before + day;
  in.retry_after_s = 60;
  EXPECT_EQ(decide_renewal(in).next_check_at, in.not_before + 60 * day);
}
