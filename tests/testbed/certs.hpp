#pragma once
// X.509 test certificates made in-process with OpenSSL (no CLI, a few ms each): CA → intermediate
// → leaf chains, expired leaves, chosen validity windows, keys that belong to another certificate.
// Throws std::runtime_error when OpenSSL fails: a broken test set-up, not a case to test.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace testbed {

struct pem_cert {
  std::string cert_pem;  // "-----BEGIN CERTIFICATE-----…"
  std::string key_pem;   // unencrypted PKCS#8 ("BEGIN PRIVATE KEY"), or traditional when asked
};

inline std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct cert_spec {
  std::string common_name = "test.example";
  std::vector<std::string> dns_sans = {};                    // subjectAltName DNS entries
  std::vector<std::string> ip_sans = {};                     // subjectAltName IP entries ("127.0.0.1")
  std::int64_t not_before_ms = unix_now_ms() - 3600'000;     // unix ms (X.509 keeps whole seconds)
  std::int64_t not_after_ms = unix_now_ms() + 90LL * 86400'000;
  std::string key_type = "ec";                               // "ec" (P-256), "ec:P-384" / "ec:secp256k1" (any
                                                             // named curve), "rsa:2048" (bits) or "ed25519"
  const pem_cert* issuer = nullptr;                          // nullptr: self-signed
  bool is_ca = false;                                        // basicConstraints CA:TRUE + keyCertSign
  bool traditional_key = false;                              // "BEGIN EC PRIVATE KEY" instead of PKCS#8
  std::string crl_url = {};                                  // cRLDistributionPoints URI, when set
  std::string ocsp_url = {};                                 // authorityInfoAccess OCSP URI, when set
};

pem_cert make_certificate(const cert_spec& spec);

// A DER CRL signed by `issuer` (its key), listing the certificates in `revoked` (PEM) as revoked
// at `revoked_at_ms` with reason keyCompromise. next_update_ms 0: no nextUpdate.
struct crl_spec {
  const pem_cert* issuer = nullptr;
  std::vector<std::string> revoked = {};
  std::int64_t this_update_ms = unix_now_ms() - 3600'000;
  std::int64_t next_update_ms = unix_now_ms() + 7LL * 86400'000;
  std::int64_t revoked_at_ms = unix_now_ms() - 1800'000;
};
std::string make_crl_der(const crl_spec& spec);

// Whether `leaf` chains to `root` through `chain` (PEM), by OpenSSL's verifier: what a client
// that trusts `root` would accept.
bool chains_to(const std::string& leaf, const std::string& chain, const std::string& root);

}  // namespace testbed
