// Any bytes as a TOML config file, and as values of every setting.
#include "certfleet/core/settings.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)certfleet::load_config_text(text, "fuzz.toml", {});
  for (const auto& def : certfleet::all_settings()) (void)certfleet::validate_setting(def, text);
  return 0;
}
