#pragma once
// Small encoders shared by the delivery sources (private to src/delivery).
#include <optional>
#include <string>
#include <string_view>

#include "certfleet/core/digest.hpp"  // hex_encode, sha256_hex

namespace certfleet::delivery {

std::string base64_encode(std::string_view in);
// Strict: standard alphabet, '=' padding only at the end, length a multiple of 4.
std::optional<std::string> base64_decode(std::string_view in);
// A string as one POSIX shell word: 'it'\''s'.
std::string shell_quote(std::string_view in);

}  // namespace certfleet::delivery
