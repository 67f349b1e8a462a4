#pragma once
// How certfleet names a certificate it already holds as an OpenSSL object (private to
// src/delivery; pem.hpp has the PEM-text form). Defined in pem.cpp.
#include <string>

struct x509_st;

namespace certfleet::delivery::detail {

// Lower-case hex SHA-256 of the certificate's DER; empty when OpenSSL cannot hash it.
std::string fingerprint_sha256(const x509_st* cert);

}  // namespace certfleet::delivery::detail
