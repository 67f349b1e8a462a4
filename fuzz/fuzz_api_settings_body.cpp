// The body of PUT /api/v1/settings: whatever it accepts must be valid per the settings table.
#include "certfleet/api/requests.hpp"
#include "certfleet/core/settings.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto s = certfleet::api::parse_settings_body(in);
  if (!s) return 0;
  for (const auto& [name, value] : *s) {
    const auto* def = certfleet::find_setting(name);
    if (!def || def->scope != certfleet::setting_scope::system) __builtin_trap();
    auto again = certfleet::validate_setting(*def, value);
    if (!again || *again != value) __builtin_trap();  // canonical values stay canonical
  }
  return 0;
}
