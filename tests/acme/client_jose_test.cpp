// JOSE for ACME (pure): base64url, the RFC 7638 thumbprint example, ES256 JWS checked by OpenSSL
// against the JWK alone (not through the code that signed it), External Account Binding checked
// with an independent HMAC, key authorizations and DNS-01 values.
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include <boost/json.hpp>

#include "certfleet/acme/jose.hpp"

using namespace certfleet::acme;
namespace json = boost::json;

namespace {

// Independent base64url decoder (OpenSSL's EVP_DecodeBlock on the standard alphabet).
std::string b64u_decode(std::string s) {
  for (auto& c : s) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (s.size() % 4) s += '=';
  std::string out(s.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(s.data()),
                          static_cast<int>(s.size()));
  if (n < 0) throw std::runtime_error("bad base64");
  std::size_t pad = 0;
  for (auto it = s.rbegin(); it != s.rend() && *it == '='; ++it) ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// The public key a JWK describes, built by OpenSSL from x and y only.
EVP_PKEY* key_from_jwk(const json::object& jwk) {
  std::string x = b64u_decode(std::string(jwk.at("x").as_string()));
  std::string y = b64u_decode(std::string(jwk.at("y").as_string()));
  std::string point = "\x04" + x + y;
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0);
  OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(), point.size());
  OSSL_PARAM* params = OSSL_PARAM_BLD_to_param(bld);
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr);
  EVP_PKEY* key = nullptr;
  EVP_PKEY_fromdata_init(ctx);
  EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params);
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  return key;
}

// ES256 verification of `input` with the raw r||s signature, by OpenSSL.
bool es256_verifies(const json::object& jwk, const std::string& input, const std::string& raw_sig) {
  if (raw_sig.size() != 64) return false;
  EVP_PKEY* key = key_from_jwk(jwk);
  if (!key) return false;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  ECDSA_SIG_set0(sig, BN_bin2bn(reinterpret_cast<const unsigned char*>(raw_sig.data()), 32, nullptr),
                 BN_bin2bn(reinterpret_cast<const unsigned char*>(raw_sig.data()) + 32, 32, nullptr));
  unsigned char* der = nullptr;
  int der_len = i2d_ECDSA_SIG(sig, &der);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = EVP_DigestVerifyInit(md, nullptr, EVP_sha256(), nullptr, key) == 1 &&
            EVP_DigestVerify(md, der, static_cast<size_t>(der_len), reinterpret_cast<const unsigned char*>(input.data()),
                             input.size()) == 1;
  EVP_MD_CTX_free(md);
  OPENSSL_free(der);
  ECDSA_SIG_free(sig);
  EVP_PKEY_free(key);
  return ok;
}

account_key new_key() {
  auto k = account_key::generate();
  if (!k) throw std::runtime_error(k.error().message);
  return std::move(*k);
}

}  // namespace

TEST(acme_base64url, round_trips_and_is_strict) {
  for (const std::string& s : std::vector<std::string>{"", "f", "fo", "foo", "foob", "fooba", "foobar", std::string("\xff\xfe\x00\x01", 4)}) {
    auto e = base64url_encode(s);
    EXPECT_EQ(e.find('='), std::string::npos);
    EXPECT_EQ(e.find('+'), std::string::npos);
    EXPECT_EQ(e.find('/'), std::string::npos);
    auto d = base64url_decode(e);
    ASSERT_TRUE(d) << e;
    EXPECT_EQ(*d, s);
    EXPECT_EQ(b64u_decode(e), s);
  }
  EXPECT_EQ(base64url_encode("\xfb\xff"), "-_8");
  for (auto bad : {"a", "ab=", "a+b/", "Zh", "ab cd", "abc\n"}) EXPECT_FALSE(base64url_decode(bad)) << bad;
}

TEST(acme_jwk, rfc7638_thumbprint_example) {
  // RFC 7638 §3.1.
  json::object jwk{{"kty", "RSA"},
                   {"n", "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"},
                   {"e", "AQAB"},
                   {"alg", "RS256"},
                   {"kid", "2011-04-29"}};
  auto t = jwk_thumbprint(jwk);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(*t, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
  jwk.erase("e");
  auto bad = jwk_thumbprint(jwk);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "jwk");
  EXPECT_NE(bad.error().message.find("jwk.e"), std::string::npos);
}

TEST(acme_jwk, account_key_jwk_and_pem_round_trip) {
  auto key = new_key();
  auto jwk = key.jwk();
  EXPECT_EQ(jwk.at("kty").as_string(), "EC");
  EXPECT_EQ(jwk.at("crv").as_string(), "P-256");
  EXPECT_EQ(b64u_decode(std::string(jwk.at("x").as_string())).size(), 32u);
  EXPECT_EQ(b64u_decode(std::string(jwk.at("y").as_string())).size(), 32u);
  EXPECT_EQ(jwk.size(), 4u);  // public members only
  // The thumbprint is SHA-256 of the canonical JSON, computed here on its own.
  std::string canonical = R"({"crv":"P-256","kty":"EC","x":")" + std::string(jwk.at("x").as_string()) + R"(","y":")" +
                          std::string(jwk.at("y").as_string()) + R"("})";
  unsigned char md[32];
  SHA256(reinterpret_cast<const unsigned char*>(canonical.data()), canonical.size(), md);
  EXPECT_EQ(key.thumbprint(), base64url_encode(std::string(reinterpret_cast<char*>(md), 32)));

  auto pem = key.private_pem();
  EXPECT_EQ(pem.rfind("-----BEGIN PRIVATE KEY-----", 0), 0u);
  auto again = account_key::from_pem(pem);
  ASSERT_TRUE(again);
  EXPECT_EQ(json::serialize(again->jwk()), json::serialize(jwk));
  EXPECT_EQ(again->thumbprint(), key.thumbprint());
}

TEST(acme_jwk, from_pem_refuses_other_keys_without_quoting_them) {
  EVP_PKEY* p384 = EVP_EC_gen("P-384");
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, p384, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  std::string pem(data, static_cast<std::size_t>(n));
  BIO_free(b);
  EVP_PKEY_free(p384);
  auto r = account_key::from_pem(pem, "account.key");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "account.key");
  EXPECT_NE(r.error().message.find("P-256"), std::string::npos);
  EXPECT_EQ(r.error().message.find("BEGIN"), std::string::npos);
  auto junk = account_key::from_pem("not a key");
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().field, "account_key");
}

TEST(acme_jws, es256_jws_verifies_with_openssl_against_the_jwk) {
  auto key = new_key();
  const std::string payload = R"({"identifiers":[{"type":"dns","value":"www.example.org"}]})";
  // With kid (an account's requests).
  auto jws = sign_jws(key, {"https://ca.example/acme/new-order", "nonce-123_-", "https://ca.example/acme/acct/1"}, payload);
  ASSERT_TRUE(jws) << jws.error().message;
  auto doc = json::parse(*jws).as_object();
  ASSERT_EQ(doc.size(), 3u);
  auto prot = json::parse(b64u_decode(std::string(doc.at("protected").as_string()))).as_object();
  EXPECT_EQ(prot.at("alg").as_string(), "ES256");
  EXPECT_EQ(prot.at("nonce").as_string(), "nonce-123_-");
  EXPECT_EQ(prot.at("url").as_string(), "https://ca.example/acme/new-order");
  EXPECT_EQ(prot.at("kid").as_string(), "https://ca.example/acme/acct/1");
  EXPECT_FALSE(prot.contains("jwk"));
  EXPECT_EQ(b64u_decode(std::string(doc.at("payload").as_string())), payload);
  std::string input = std::string(doc.at("protected").as_string()) + "." + std::string(doc.at("payload").as_string());
  std::string sig = b64u_decode(std::string(doc.at("signature").as_string()));
  EXPECT_EQ(sig.size(), 64u);  // raw r||s, not DER
  EXPECT_TRUE(es256_verifies(key.jwk(), input, sig));
  // A changed payload or another key does not verify: the check can fail.
  EXPECT_FALSE(es256_verifies(key.jwk(), input + "x", sig));
  EXPECT_FALSE(es256_verifies(new_key().jwk(), input, sig));

  // With jwk (newAccount), and POST-as-GET's empty payload.
  auto get = sign_jws(key, {"https://ca.example/acme/order/7", "n2", ""}, std::nullopt);
  ASSERT_TRUE(get);
  auto gdoc = json::parse(*get).as_object();
  EXPECT_EQ(gdoc.at("payload").as_string(), "");
  auto gprot = json::parse(b64u_decode(std::string(gdoc.at("protected").as_string()))).as_object();
  EXPECT_FALSE(gprot.contains("kid"));
  EXPECT_EQ(json::serialize(gprot.at("jwk")), json::serialize(key.jwk()));
  EXPECT_TRUE(es256_verifies(gprot.at("jwk").as_object(), std::string(gdoc.at("protected").as_string()) + ".",
                             b64u_decode(std::string(gdoc.at("signature").as_string()))));
}

TEST(acme_eab, hs256_over_the_account_jwk_kid_and_url) {
  auto key = new_key();
  // A key as a CA hands it out (base64url of 48 random bytes).
  const std::string mac_b64u = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
  auto eab = external_account_binding(key, "kid-1", mac_b64u, "https://ca.example/acme/new-account");
  ASSERT_TRUE(eab) << eab.error().message;
  auto prot = json::parse(b64u_decode(std::string(eab->at("protected").as_string()))).as_object();
  EXPECT_EQ(prot.at("alg").as_string(), "HS256");
  EXPECT_EQ(prot.at("kid").as_string(), "kid-1");
  EXPECT_EQ(prot.at("url").as_string(), "https://ca.example/acme/new-account");
  EXPECT_FALSE(prot.contains("nonce"));  // §7.3.4: no nonce in the inner JWS
  EXPECT_EQ(json::serialize(json::parse(b64u_decode(std::string(eab->at("payload").as_string())))),
            json::serialize(key.jwk()));
  std::string input = std::string(eab->at("protected").as_string()) + "." + std::string(eab->at("payload").as_string());
  std::string mac_key = b64u_decode(mac_b64u);
  unsigned char md[32];
  unsigned len = 0;
  HMAC(EVP_sha256(), mac_key.data(), static_cast<int>(mac_key.size()), reinterpret_cast<const unsigned char*>(input.data()),
       input.size(), md, &len);
  EXPECT_EQ(b64u_decode(std::string(eab->at("signature").as_string())), std::string(reinterpret_cast<char*>(md), len));
  // The same key with '=' padding (as some CAs print it) gives the same binding.
  auto padded = external_account_binding(key, "kid-1", mac_b64u + "=", "https://ca.example/acme/new-account");
  ASSERT_TRUE(padded);
  EXPECT_EQ(padded->at("signature"), eab->at("signature"));

  auto bad_key = external_account_binding(key, "kid-1", "not base64url!", "https://x/");
  ASSERT_FALSE(bad_key);
  EXPECT_EQ(bad_key.error().field, "eab.hmac_key");
  EXPECT_EQ(bad_key.error().message.find("not base64url!"), std::string::npos);
  auto no_kid = external_account_binding(key, "", mac_b64u, "https://x/");
  ASSERT_FALSE(no_kid);
  EXPECT_EQ(no_kid.error().field, "eab.kid");
}

TEST(acme_challenge, key_authorization_and_dns01_value) {
  // RFC 8555 §8.1's token with RFC 7638's thumbprint; the value computed with
  // `openssl dgst -sha256 -binary | base64 | tr '+/' '-_' | tr -d '='`.
  auto ka = key_authorization("evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA", "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
  EXPECT_EQ(ka, "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA.NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
  EXPECT_EQ(dns01_txt_value(ka), "ZTRx1Ckl1-tM05o5zaizTTA0yUy5AGereMgSNWC6Ll8");
  EXPECT_EQ(dns01_record_name("www.example.org"), "_acme-challenge.www.example.org");
  EXPECT_EQ(dns01_record_name("*.example.org"), "_acme-challenge.example.org");
  EXPECT_EQ(dns01_record_name("example.org."), "_acme-challenge.example.org");
}
