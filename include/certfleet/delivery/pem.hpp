#pragma once
// Checks of what an operator uploads to the catalog, before it is sealed and stored: a
// certificate bundle (leaf, chain, key) and an SSH login key. Pure: no I/O, no clock (the caller
// passes now), so the API and the fuzzers call them alike.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet::delivery {

inline constexpr std::size_t max_pem_bytes = 64 * 1024;  // each of cert_pem, chain_pem, key_pem
inline constexpr std::size_t max_chain_certs = 10;

struct certificate_info {
  std::string subject, issuer;     // RFC 2253 ("CN=www.example.com,O=Example")
  std::vector<std::string> sans;   // DNS names and IP addresses of subjectAltName
  std::int64_t not_before_ms = 0;  // unix ms
  std::int64_t not_after_ms = 0;
  std::string fingerprint_sha256;  // lower-case hex SHA-256 of the leaf's DER
  std::string serial;              // lower-case hex of the serial number, without leading zeros
  std::size_t chain_length = 0;    // certificates in chain_pem (0: none)
};

// The leaf (exactly one certificate), its chain in order leaf→root (each certificate issued by
// the next; may be empty, may end with the root) and the leaf's unencrypted private key (PKCS#8
// or traditional PEM). Refuses an expired leaf (not_after <= now_ms), and a leaf public key or
// private key below current minimums: RSA under 2048 bits, EC on a curve other than P-256 or
// P-384, any other type but Ed25519 (the message names the size or curve found).
// Errors: errc::invalid_argument, field "cert_pem", "chain_pem" or "key_pem".
result<certificate_info> parse_certificate_bundle(std::string_view cert_pem, std::string_view chain_pem,
                                                  std::string_view key_pem, std::int64_t now_ms);

// The SHA-256 fingerprint of the first certificate in `pem` (lower-case hex of its DER), the
// one way certfleet names a certificate (target results, rollbacks, the catalog view); nullopt
// when the text holds no certificate that parses.
std::optional<std::string> certificate_fingerprint(std::string_view pem);

// A certificate validity time (unix ms) as the catalog shows it and errors quote it:
// "2026-11-29T09:05:18Z" (UTC, whole seconds).
std::string certificate_time_text(std::int64_t ms);

struct ssh_key_info {
  std::string type;         // "ssh-ed25519", "ecdsa-sha2-nistp256" / 384 / 521
  std::string public_line;  // "type base64", for the target's authorized_keys
  std::string fingerprint;  // "SHA256:…" as `ssh-keygen -l` prints it
};

// An SSH login key: ed25519 or ECDSA (P-256/384/521), OpenSSH format ("BEGIN OPENSSH PRIVATE
// KEY") or PEM/PKCS#8. RSA is refused (libssh2 1.10 cannot sign with rsa-sha2). An encrypted
// PEM key is decrypted with `passphrase` (a wrong one is an error); an encrypted OpenSSH key
// needs a passphrase but it cannot be checked here (bcrypt-pbkdf): its public key is read from
// the clear part, and the passphrase is first tried at login.
// Errors: errc::invalid_argument, field "private_key_pem".
result<ssh_key_info> parse_ssh_private_key(std::string_view pem, std::string_view passphrase);

}  // namespace certfleet::delivery
