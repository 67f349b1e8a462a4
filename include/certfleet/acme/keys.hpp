#pragma once
// A managed certificate's key, its CSR, and what the CA sends back: pure (no I/O). Key
// generation is CPU work (RSA 3072 takes a second or more): callers run it on the cpu pool.
// The private key travels as PKCS#8 PEM text the caller seals at rest; no error quotes it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/acme/key_type.hpp"
#include "certfleet/core/error.hpp"

namespace certfleet::acme {

// A new private key of that type, as unencrypted PKCS#8 PEM ("BEGIN PRIVATE KEY").
result<std::string> generate_private_key(key_type type);

// The key type of a PEM private key (PKCS#8 or traditional), when it is one of the table's.
// Errors: invalid_argument naming `field`.
result<key_type> private_key_type(std::string_view key_pem, std::string_view field = "key_pem");

// The names of one certificate: 1-100, each a DNS name with at most a leading "*.", no repeats
// (case-insensitive). Errors: invalid_argument naming "domains" or "domains[i]". make_csr and the
// API's issue body both check with this.
result<void> check_domains(const std::vector<std::string>& domains);

// A PKCS#10 CSR (DER) for `domains` (each a DNS SAN, in order; CN = the first when it fits the
// 64-character limit), signed with `key_pem` (SHA-256; SHA-384 for P-384). Domains are checked:
// 1-100 names, each a DNS name with at most a leading "*." (errors name "domains[i]").
result<std::string> make_csr(std::string_view key_pem, const std::vector<std::string>& domains);

struct issued_certificate {
  std::string leaf_pem;   // the end-entity certificate
  std::string chain_pem;  // the rest, in the order the CA sent them (issuer first); may be empty
  std::string serial_hex;  // lower-case hex, no leading zero bytes beyond a sign byte: as pebble
                           // and `openssl x509 -serial` name it
  std::int64_t not_before_ms = 0;
  std::int64_t not_after_ms = 0;
  std::vector<std::string> dns_names;  // subjectAltName DNS entries of the leaf
};

// Splits the CA's application/pem-certificate-chain answer (§7.4.2) into leaf and chain and
// checks that the leaf carries the public key of `key_pem` (the certificate is for our key).
// Errors: invalid_argument, field "certificate" (not PEM certificates, no certificate) or
// "key_pem" (the leaf's key is not ours: "the CA's certificate does not match the key …").
result<issued_certificate> read_issued_chain(std::string_view pem_chain, std::string_view key_pem);

// The DER of the first certificate in `pem` (revocation sends it). Errors name `field`.
result<std::string> certificate_der(std::string_view pem, std::string_view field = "cert_pem");

// RFC 5280 §5.3.1 reason names as DESIGN §9's revoke body takes them ("keyCompromise",
// "superseded", …; "unspecified" is 0) → the code; nullopt for anything else (7 is unused).
std::optional<int> revocation_reason_code(std::string_view name) noexcept;
// The name of a reason code ("keyCompromise" for 1); "" for a code that is not one (7, 11, -1).
std::string_view revocation_reason_name(int code) noexcept;
// "keyCompromise|superseded|…": for error messages that list the choices.
std::string_view revocation_reason_choices() noexcept;

}  // namespace certfleet::acme
