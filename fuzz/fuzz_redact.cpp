// The command-output redactor (delivery/redact.hpp): any bytes, with no key, a fixed real key
// or the input itself as the key. Whatever comes out holds no PEM private-key BEGIN marker, no
// redact_min_run-long piece of a real key's body or DER, and redacting it again changes
// nothing (real keys); with an arbitrary "key" it must simply not crash or hang.
#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/delivery/redact.hpp"

using namespace certfleet::delivery;

namespace {

// A throwaway P-256 key (generated for this fuzzer; it protects nothing).
constexpr std::string_view fixed_key =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPlhj4aVUauAeXds+\n"
    "tJ95eFon9lnH+m0AOQOgWtwqhS+hRANCAASi7f+6sy7a2KotB0YAnxG6IJaxBTvV\n"
    "1vSgFFYSizZWTKZu8mYhR7eeOf1qjw9m71P8kLJNxyjJsdmVEDwmA9VA\n"
    "-----END PRIVATE KEY-----\n";

std::string body_of(std::string_view pem) {
  std::string b;
  std::size_t pos = 0;
  while (pos < pem.size()) {
    auto eol = pem.find('\n', pos);
    auto line = pem.substr(pos, eol - pos);
    pos = eol == std::string_view::npos ? pem.size() : eol + 1;
    if (!line.starts_with("-----")) b += line;
  }
  return b;
}

bool has_begin_marker(std::string_view s) {
  for (std::size_t at = s.find("-----BEGIN "); at != std::string_view::npos; at = s.find("-----BEGIN ", at + 1)) {
    auto close = s.find("-----", at + 11);
    auto eol = s.find('\n', at);
    if (close != std::string_view::npos && (eol == std::string_view::npos || close < eol) &&
        s.substr(at + 11, close - at - 11).ends_with("PRIVATE KEY"))
      return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 64 * 1024) return 0;
  const int mode = data[0] % 3;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string_view key = mode == 0 ? std::string_view{} : mode == 1 ? fixed_key : text;
  const std::string out = redact_command_output(text, key);
  if (has_begin_marker(out)) std::abort();
  if (mode != 1) return 0;
  static const std::string b64 = body_of(fixed_key);
  static const std::string der = [] {
    std::string d(b64.size(), '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(d.data()), reinterpret_cast<const unsigned char*>(b64.data()),
                            static_cast<int>(b64.size()));
    d.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return d;
  }();
  for (const std::string* secret : {&b64, &der})
    for (std::size_t i = 0; i + redact_min_run <= secret->size(); ++i)
      if (out.find(std::string_view(*secret).substr(i, redact_min_run)) != std::string::npos) std::abort();
  if (redact_command_output(out, key) != out) std::abort();
  return 0;
}
