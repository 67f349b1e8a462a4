// JOSE for ACME (jose.hpp): base64url, the P-256 account key, JWS (ES256) and EAB (HS256).
#include "certfleet/acme/jose.hpp"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <array>
#include <cstring>

#include "openssl_util.hpp"

namespace certfleet::acme {

namespace {

constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

std::string json_string(std::string_view s) { return boost::json::serialize(boost::json::string(s)); }

std::string sha256(std::string_view data) {
  unsigned char md[32];
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md), len);
}

// A JWK member that must be a non-empty string.
result<std::string> member(const boost::json::object& jwk, std::string_view name) {
  auto* v = jwk.if_contains(name);
  if (!v || !v->is_string() || v->as_string().empty())
    return make_error(errc::invalid_argument, "jwk." + std::string(name) + " must be a non-empty string", "jwk");
  return std::string(v->as_string());
}

bool is_p256(EVP_PKEY* k) {
  if (EVP_PKEY_get_base_id(k) != EVP_PKEY_EC) return false;
  char group[64] = {};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1) return false;
  return std::string_view(group) == "prime256v1" || std::string_view(group) == "P-256";
}

std::string coordinate(EVP_PKEY* k, const char* which) {
  BIGNUM* bn = nullptr;
  if (EVP_PKEY_get_bn_param(k, which, &bn) != 1) return {};
  std::array<unsigned char, 32> out{};
  int n = BN_bn2binpad(bn, out.data(), static_cast<int>(out.size()));
  BN_free(bn);
  if (n != 32) return {};
  return std::string(reinterpret_cast<const char*>(out.data()), out.size());
}

}  // namespace

std::string base64url_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
    out += alphabet[v & 63];
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    std::uint32_t v = p[i] << 16;
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
  } else if (rest == 2) {
    std::uint32_t v = (p[i] << 16) | (p[i + 1] << 8);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += alphabet[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = b64_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // The leftover bits of a short last group must be zero (one encoding per byte string).
  if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

result<std::string> jwk_thumbprint(const boost::json::object& jwk) {
  auto kty = member(jwk, "kty");
  if (!kty) return std::move(kty).error();
  std::string canonical;
  if (*kty == "EC") {
    auto crv = member(jwk, "crv"), x = member(jwk, "x"), y = member(jwk, "y");
    if (!crv) return std::move(crv).error();
    if (!x) return std::move(x).error();
    if (!y) return std::move(y).error();
    canonical = "{\"crv\":" + json_string(*crv) + ",\"kty\":\"EC\",\"x\":" + json_string(*x) + ",\"y\":" + json_string(*y) + "}";
  } else if (*kty == "RSA") {
    auto e = member(jwk, "e"), n = member(jwk, "n");
    if (!e) return std::move(e).error();
    if (!n) return std::move(n).error();
    canonical = "{\"e\":" + json_string(*e) + ",\"kty\":\"RSA\",\"n\":" + json_string(*n) + "}";
  } else if (*kty == "oct") {
    auto k = member(jwk, "k");
    if (!k) return std::move(k).error();
    canonical = "{\"k\":" + json_string(*k) + ",\"kty\":\"oct\"}";
  } else {
    return make_error(errc::invalid_argument, "jwk.kty must be EC, RSA or oct", "jwk");
  }
  return base64url_encode(sha256(canonical));
}

// ---- account_key -----------------------------------------------------------------------------

struct account_key::impl {
  pkey_ptr key;
};

account_key::account_key(std::unique_ptr<impl> p) : p_(std::move(p)) {}
account_key::account_key(account_key&&) noexcept = default;
account_key& account_key::operator=(account_key&&) noexcept = default;
account_key::~account_key() = default;

result<account_key> account_key::generate() {
  pkey_ptr k(EVP_EC_gen("P-256"));
  if (!k) {
    ERR_clear_error();
    return make_error(errc::invalid_argument, "the account key could not be generated (OpenSSL)", "account_key");
  }
  auto p = std::make_unique<impl>();
  p->key = std::move(k);
  return account_key(std::move(p));
}

result<account_key> account_key::from_pem(std::string_view pem, std::string_view field) {
  auto k = read_private_key(pem);
  if (!k) return make_error(errc::invalid_argument, "is not an unencrypted PEM private key", std::string(field));
  if (!is_p256(k.get()))
    return make_error(errc::invalid_argument, "must be an ECDSA P-256 key (ACME accounts sign ES256)", std::string(field));
  auto p = std::make_unique<impl>();
  p->key = std::move(k);
  return account_key(std::move(p));
}

std::string account_key::private_pem() const { return write_private_key(p_->key.get()); }

boost::json::object account_key::jwk() const {
  boost::json::object o;
  o["crv"] = "P-256";
  o["kty"] = "EC";
  o["x"] = base64url_encode(coordinate(p_->key.get(), OSSL_PKEY_PARAM_EC_PUB_X));
  o["y"] = base64url_encode(coordinate(p_->key.get(), OSSL_PKEY_PARAM_EC_PUB_Y));
  return o;
}

std::string account_key::thumbprint() const {
  auto t = jwk_thumbprint(jwk());
  return t ? *t : std::string();
}

result<std::string> account_key::sign(std::string_view data) const {
  auto raw = sign_digest(p_->key.get(), EVP_sha256(), data);
  if (!raw) return make_error(errc::invalid_argument, "signing with the account key failed (OpenSSL)", "account_key");
  // DER ECDSA-Sig-Value → fixed-width r||s.
  const auto* der = reinterpret_cast<const unsigned char*>(raw->data());
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &der, static_cast<long>(raw->size()));
  if (!sig) return make_error(errc::invalid_argument, "signing with the account key failed (DER)", "account_key");
  const BIGNUM *r = nullptr, *s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  std::array<unsigned char, 64> out{};
  bool ok = BN_bn2binpad(r, out.data(), 32) == 32 && BN_bn2binpad(s, out.data() + 32, 32) == 32;
  ECDSA_SIG_free(sig);
  if (!ok) return make_error(errc::invalid_argument, "signing with the account key failed (size)", "account_key");
  return std::string(reinterpret_cast<const char*>(out.data()), out.size());
}

// ---- JWS --------------------------------------------------------------------------------------

result<std::string> sign_jws(const account_key& key, const jws_protected& header, const std::optional<std::string>& payload) {
  boost::json::object prot;
  prot["alg"] = "ES256";
  if (header.kid.empty()) prot["jwk"] = key.jwk();
  else prot["kid"] = header.kid;
  if (!header.nonce.empty()) prot["nonce"] = header.nonce;
  prot["url"] = header.url;
  std::string prot_b64 = base64url_encode(boost::json::serialize(prot));
  std::string payload_b64 = payload ? base64url_encode(*payload) : std::string();
  auto sig = key.sign(prot_b64 + "." + payload_b64);
  if (!sig) return std::move(sig).error();
  boost::json::object jws;
  jws["protected"] = prot_b64;
  jws["payload"] = payload_b64;
  jws["signature"] = base64url_encode(*sig);
  return boost::json::serialize(jws);
}

result<boost::json::object> external_account_binding(const account_key& key, std::string_view eab_kid,
                                                     std::string_view hmac_key_base64url,
                                                     std::string_view new_account_url) {
  if (eab_kid.empty() || eab_kid.size() > 512)
    return make_error(errc::invalid_argument, "eab.kid must be 1-512 characters", "eab.kid");
  for (char c : eab_kid)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return make_error(errc::invalid_argument, "eab.kid must not contain control characters", "eab.kid");
  // CAs hand the key out base64url-encoded; some print it with '=' padding.
  std::string_view text = hmac_key_base64url;
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  auto mac_key = base64url_decode(text);
  if (!mac_key || mac_key->empty())
    return make_error(errc::invalid_argument, "eab.hmac_key must be the base64url text the CA gave (A-Z a-z 0-9 - _)",
                      "eab.hmac_key");
  boost::json::object prot;
  prot["alg"] = "HS256";
  prot["kid"] = eab_kid;
  prot["url"] = new_account_url;
  std::string prot_b64 = base64url_encode(boost::json::serialize(prot));
  std::string payload_b64 = base64url_encode(boost::json::serialize(key.jwk()));
  std::string input = prot_b64 + "." + payload_b64;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  bool ok = HMAC(EVP_sha256(), mac_key->data(), static_cast<int>(mac_key->size()),
                 reinterpret_cast<const unsigned char*>(input.data()), input.size(), md, &len) != nullptr;
  OPENSSL_cleanse(mac_key->data(), mac_key->size());
  if (!ok) return make_error(errc::invalid_argument, "the EAB signature could not be computed", "eab.hmac_key");
  boost::json::object jws;
  jws["protected"] = prot_b64;
  jws["payload"] = payload_b64;
  jws["signature"] = base64url_encode(std::string_view(reinterpret_cast<const char*>(md), len));
  OPENSSL_cleanse(md, sizeof md);
  return jws;
}

std::string key_authorization(std::string_view token, std::string_view thumbprint) {
  return std::string(token) + "." + std::string(thumbprint);
}

std::string dns01_txt_value(std::string_view key_authorization) { return base64url_encode(sha256(key_authorization)); }

std::string dns01_record_name(std::string_view identifier_value) {
  std::string_view name = identifier_value;
  if (name.substr(0, 2) == "*.") name.remove_prefix(2);
  while (!name.empty() && name.back() == '.') name.remove_suffix(1);
  return "_acme-challenge." + std::string(name);
}

}  // namespace certfleet::acme
