#pragma once
// Hex and SHA-256 of bytes, as certfleet names contents it compares or derives ids from
// (a delivered file, a mail's Message-ID).
#include <string>
#include <string_view>

namespace certfleet {

// Lower-case hex, two digits a byte.
std::string hex_encode(std::string_view bytes);
// Lower-case hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);

}  // namespace certfleet
