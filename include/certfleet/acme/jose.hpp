#pragma once
// The JOSE pieces of ACME (RFC 8555 §6.2, RFC 7515, RFC 7517, RFC 7638): base64url, the ES256
// account key and its JWK, JWS in flattened JSON, External Account Binding, key authorizations.
// Pure: no I/O (key generation takes CPU: callers run account_key::generate on the cpu pool).
// The private key never leaves this type except as the PKCS#8 PEM the caller seals at rest.
#include <boost/json/object.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"

namespace certfleet::acme {

// RFC 4648 §5 without padding.
std::string base64url_encode(std::string_view bytes);
// Strict: only the URL-safe alphabet, no padding, no whitespace, a length that can be
// base64 (not 1 mod 4), zero trailing bits; nullopt otherwise.
std::optional<std::string> base64url_decode(std::string_view text);

// RFC 7638 thumbprint of a public JWK: base64url(SHA-256) of its required members in
// lexicographic order without whitespace (EC: crv, kty, x, y; RSA: e, kty, n; oct: k, kty).
// Errors: invalid_argument, field "jwk".
result<std::string> jwk_thumbprint(const boost::json::object& jwk);

// An ACME account key: ECDSA on P-256, signing ES256.
class account_key {
 public:
  // A new random key (CPU: a few ms; run it on the cpu pool).
  static result<account_key> generate();
  // An unencrypted PKCS#8 or SEC1 PEM of a P-256 key; anything else is invalid_argument naming
  // `field` (never quoting the text).
  static result<account_key> from_pem(std::string_view pem, std::string_view field = "account_key");

  account_key(account_key&&) noexcept;
  account_key& operator=(account_key&&) noexcept;
  ~account_key();

  // PKCS#8 PEM of the private key, to be sealed at rest by the caller.
  std::string private_pem() const;
  // {"crv":"P-256","kty":"EC","x":…,"y":…}
  boost::json::object jwk() const;
  // RFC 7638 thumbprint of jwk().
  std::string thumbprint() const;
  // ES256 over `data`: the 64-byte r||s (RFC 7518 §3.4), not DER.
  result<std::string> sign(std::string_view data) const;

 private:
  struct impl;
  explicit account_key(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

// The protected header's "kid" (an account URL) or, when empty, the "jwk" (newAccount and
// revocation by certificate key).
struct jws_protected {
  std::string url;
  std::string nonce;
  std::string kid;
};

// A JWS in flattened JSON serialization (RFC 7515 §7.2.2):
//   {"protected": b64u({"alg":"ES256","kid"|"jwk":…,"nonce":…,"url":…}),
//    "payload": b64u(payload), "signature": b64u(r||s)}
// `payload` nullopt is POST-as-GET: the empty payload "".
result<std::string> sign_jws(const account_key& key, const jws_protected& header,
                             const std::optional<std::string>& payload);

// External Account Binding (RFC 8555 §7.3.4): the JWS that goes in newAccount's
// "externalAccountBinding": protected {"alg":"HS256","kid":eab_kid,"url":new_account_url},
// payload the account key's JWK, signed with HMAC-SHA256 under the base64url-decoded key.
// Errors: invalid_argument naming "eab.kid" or "eab.hmac_key" (never quoting the key).
result<boost::json::object> external_account_binding(const account_key& key, std::string_view eab_kid,
                                                     std::string_view hmac_key_base64url,
                                                     std::string_view new_account_url);

// §8.1: token "." thumbprint.
std::string key_authorization(std::string_view token, std::string_view thumbprint);
// §8.4: the TXT record value, base64url(SHA-256(key authorization)).
std::string dns01_txt_value(std::string_view key_authorization);
// "_acme-challenge.<name>" for an identifier (a leading "*." dropped: a wildcard's record
// lives at the base name), without a trailing dot.
std::string dns01_record_name(std::string_view identifier_value);

}  // namespace certfleet::acme
