// POST …/targets:import bodies (JSON lines and CSV) and the CLI's inventory-to-rows conversion:
// any input gets rows or problems, never a crash. Contract: a kept row parses again alone as
// POST …/targets does; problems and rows never coexist; every problem names a field.
#include "certfleet/catalog/target_import.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace certfleet;
using namespace certfleet::catalog;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
    case 1: {
      auto t = parse_target_import(in, data[0] % 3 == 0 ? import_format::json_lines : import_format::csv);
      if (t.problem_count == 0 && t.rows.empty()) std::abort();
      if (t.problem_count > 0 && !t.rows.empty()) std::abort();
      if (t.problems.size() > max_import_problems || t.problems.size() > t.problem_count) std::abort();
      for (const auto& p : t.problems)
        if (p.field.empty() || p.message.empty()) std::abort();
      for (const auto& r : t.rows)
        if (r.line == 0 || r.target.name.empty()) std::abort();
      if (t.problem_count > 0) (void)describe_import_problems(t);
      break;
    }
    case 2: {
      // The input split at its first NUL: an inventory, then a template body.
      const auto nul = in.find('\0');
      const auto inventory_text = in.substr(0, nul);
      const auto tmpl = nul == std::string_view::npos ? std::string_view("{}") : in.substr(nul + 1);
      auto inv = parse_ansible_ini_inventory(inventory_text);
      if (!inv) break;
      auto lines = inventory_import_lines(*inv, tmpl, inventory_text);
      if (!lines && lines.error().field.empty()) std::abort();
      break;
    }
  }
  return 0;
}
