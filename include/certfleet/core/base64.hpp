#pragma once
// Standard base64 (RFC 4648 §4, with padding) for secrets and keys that travel as text: the KEK
// key file, TSIG secrets. Decoding is strict: only the canonical encoding (what base64_encode
// makes) decodes, so one secret has one spelling.
#include <optional>
#include <string>
#include <string_view>

namespace certfleet {

std::string base64_encode(std::string_view bytes);
// nullopt for anything but canonical base64 (no whitespace, '=' only as the padding it needs,
// zero trailing bits, not empty). A rejected input leaves no decoded copy behind.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace certfleet
