// The table of delivery modules (module.hpp).
#include "certfleet/delivery/module.hpp"

#include <array>

namespace certfleet::delivery {
namespace {

constexpr std::array<module_info, 3> modules{{
    {module_kind::ssh, "ssh", true},
    {module_kind::file, "file", true},
    {module_kind::webhook, "webhook", false},  // a POST cannot be taken back
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < modules.size(); ++i)
    if (static_cast<std::size_t>(modules[i].kind) != i) return false;
  return true;
}
static_assert(in_enum_order(), "modules is indexed by module_kind");

}  // namespace

std::span<const module_info> all_modules() noexcept { return modules; }

const module_info& module_of(module_kind m) noexcept {
  auto i = static_cast<std::size_t>(m);
  return i < modules.size() ? modules[i] : modules.front();
}

std::optional<module_kind> parse_module(std::string_view name) noexcept {
  for (const auto& m : modules)
    if (m.name == name) return m.kind;
  return std::nullopt;
}

std::string module_choices() {
  std::string out;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    if (i > 0) out += i + 1 == modules.size() ? " or " : ", ";
    out += "\"" + std::string(modules[i].name) + "\"";
  }
  return out;
}

const char* delivery_status_name(delivery_status s) noexcept {
  switch (s) {
    case delivery_status::succeeded: return "succeeded";
    case delivery_status::failed: return "failed";
    case delivery_status::skipped_by_hash: return "skipped";
  }
  return "failed";
}

}  // namespace certfleet::delivery
