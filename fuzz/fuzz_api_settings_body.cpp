// The body of PUT /api/v1/settings and of PUT /api/v1/projects/{p}/settings: whatever it accepts must be valid per the settings table.
#include "certfleet/api/requests.hpp"
#include "certfleet/core/settings.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (auto scope : {certfleet::setting_scope::system, certfleet::setting_scope::project}) {
    auto s = certfleet::api::parse_settings_body(in, scope);
    if (!s) continue;
    for (const auto& [name, value] : *s) {
      const auto* def = certfleet::find_setting(name);
      if (!def || def->scope != scope) __builtin_trap();
      auto again = certfleet::validate_setting(*def, value);
      if (!again || *again != value) __builtin_trap();  // canonical values stay canonical
    }
  }
  return 0;
}
