#include "certfleet/net/x509.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <string_view>

#include "certfleet/core/digest.hpp"

namespace certfleet::net {

std::string fingerprint_sha256(const X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!cert || X509_digest(cert, EVP_sha256(), md, &len) != 1) {
    ERR_clear_error();
    return {};
  }
  return hex_encode(std::string_view(reinterpret_cast<const char*>(md), len));
}

}  // namespace certfleet::net
