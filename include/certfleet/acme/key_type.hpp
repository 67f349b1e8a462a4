#pragma once
// The key types a managed certificate's private key may have (DESIGN §9): one table that the
// certificate bodies, the CSR builder, the API's validation messages and docs/acme.md read.
#include <optional>
#include <span>
#include <string_view>

namespace certfleet::acme {

enum class key_type { ecdsa_p256, ecdsa_p384, rsa_2048, rsa_3072 };

struct key_type_def {
  key_type type;
  std::string_view name;  // as the API spells it: "ecdsa-p256", …
  std::string_view doc;
};

std::span<const key_type_def> all_key_types() noexcept;
// nullopt for a name outside the table.
std::optional<key_type> parse_key_type(std::string_view name) noexcept;
std::string_view key_type_name(key_type t) noexcept;
// "ecdsa-p256|ecdsa-p384|rsa-2048|rsa-3072": for error messages that list the choices.
std::string_view key_type_choices() noexcept;
inline constexpr key_type default_key_type = key_type::ecdsa_p256;

}  // namespace certfleet::acme
