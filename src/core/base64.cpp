#include "certfleet/core/base64.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <limits>

namespace certfleet {

std::string base64_encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// EVP_DecodeBlock alone skips whitespace and ignores padding: the re-encoding check makes it strict.
std::optional<std::string> base64_decode(std::string_view in) {
  if (in.empty() || in.size() % 4 != 0 || in.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return std::nullopt;
  std::string out(in.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  std::size_t pad = in.ends_with("==") ? 2 : in.ends_with("=") ? 1 : 0;
  out.resize(static_cast<std::size_t>(n) - pad);
  if (base64_encode(out) != in) {
    OPENSSL_cleanse(out.data(), out.size());
    return std::nullopt;
  }
  return out;
}

}  // namespace certfleet
