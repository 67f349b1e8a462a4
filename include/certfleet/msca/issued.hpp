#pragma once
// The certificate an enrollment answer carries, as the catalog stores certificates: PEM, the
// chain in issuing order. Pure (OpenSSL stays in src/).
#include "certfleet/core/error.hpp"
#include "certfleet/msca/protocol.hpp"

#include <string>

namespace certfleet::msca {

struct issued_pem {
  std::string leaf_pem;
  std::string chain_pem;  // the leaf's issuer first, each certificate issued by the next; "" : none
};

// From an issued answer: the leaf (RequestedSecurityToken) and, from the PKCS#7's other
// certificates, the chain walked by issuer name from the leaf (certificates that are not on the
// path are left out; a self-signed root ends it). invalid_argument when the answer holds no
// certificate or one does not parse as DER X.509.
result<issued_pem> issued_certificate_pem(const enroll_response& r);

}  // namespace certfleet::msca
