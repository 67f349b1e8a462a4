#include "certfleet/acme/key_type.hpp"

#include <array>

namespace certfleet::acme {

namespace {
constexpr std::array<key_type_def, 4> table{{
    {key_type::ecdsa_p256, "ecdsa-p256", "ECDSA on P-256 (the default: small, fast, accepted everywhere)"},
    {key_type::ecdsa_p384, "ecdsa-p384", "ECDSA on P-384"},
    {key_type::rsa_2048, "rsa-2048", "RSA 2048 bits (for old clients that cannot use ECDSA)"},
    {key_type::rsa_3072, "rsa-3072", "RSA 3072 bits"},
}};
}  // namespace

std::span<const key_type_def> all_key_types() noexcept { return table; }

std::optional<key_type> parse_key_type(std::string_view name) noexcept {
  for (const auto& d : table)
    if (d.name == name) return d.type;
  return std::nullopt;
}

std::string_view key_type_name(key_type t) noexcept {
  for (const auto& d : table)
    if (d.type == t) return d.name;
  return "ecdsa-p256";
}

std::string_view key_type_choices() noexcept { return "ecdsa-p256|ecdsa-p384|rsa-2048|rsa-3072"; }

}  // namespace certfleet::acme
