#pragma once
// How certfleet names a certificate held as an OpenSSL object: the one fingerprint rule for the
// probes here and for delivery's PEM checks and TLS validation (pem.hpp has the PEM-text form).
// Only code in src/ holds OpenSSL objects; the type is declared, not included.
#include <string>

struct x509_st;

namespace certfleet::net {

// Lower-case hex SHA-256 of the certificate's DER; empty when OpenSSL cannot hash it.
std::string fingerprint_sha256(const x509_st* cert);

}  // namespace certfleet::net
