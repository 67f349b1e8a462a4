// The CLI's Ansible INI inventory reader: any bytes give hosts or an error naming its line,
// never a crash, a hang or memory past the caps. An accepted inventory keeps its contract:
// named, distinct hosts within the cap, variables sorted and unique, groups sorted without
// "all", a line inside the text; the group filter only ever narrows it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "certfleet/catalog/ansible_inventory.hpp"

using namespace certfleet;
using namespace certfleet::catalog;

namespace {

bool line_field(const error& e) {
  std::string_view f = e.field;
  if (!e.is(errc::invalid_argument) || !f.starts_with("line ") || f.size() == 5) return false;
  if (f.substr(5).find_first_not_of("0123456789") != std::string_view::npos || f[5] == '0') return false;
  return e.message.starts_with(std::string(f) + ": ");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto lines = static_cast<std::size_t>(std::count(in.begin(), in.end(), '\n')) + 1;
  auto inv = parse_ansible_ini_inventory(in);
  if (!inv) {
    if (!line_field(inv.error())) std::abort();
    return 0;
  }
  if (inv->hosts.size() > max_inventory_hosts) std::abort();
  std::set<std::string_view> seen, groups;
  std::size_t last_line = 0;
  for (const auto& h : inv->hosts) {
    if (h.name.empty() || !seen.insert(h.name).second) std::abort();
    if (h.line == 0 || h.line > lines || h.line < last_line) std::abort();  // first-appearance order
    last_line = h.line;
    for (std::size_t i = 1; i < h.vars.size(); ++i)
      if (!(h.vars[i - 1].first < h.vars[i].first)) std::abort();
    for (const auto& [k, v] : h.vars)
      if (k.empty() || h.var(k) != v) std::abort();
    if (h.groups.empty() || !std::is_sorted(h.groups.begin(), h.groups.end()) ||
        std::adjacent_find(h.groups.begin(), h.groups.end()) != h.groups.end())
      std::abort();
    for (const auto& g : h.groups) {
      if (g.empty() || g == "all") std::abort();
      groups.insert(g);
    }
  }
  // Filtering by a group the hosts belong to keeps exactly those hosts, in the same order.
  for (auto g : {std::string_view("all"), groups.empty() ? std::string_view("ungrouped") : *groups.begin()}) {
    auto sub = parse_ansible_ini_inventory(in, g);
    if (!sub) {
      if (g == "all" || sub.error().field != "group") std::abort();
      continue;
    }
    std::size_t at = 0;
    for (const auto& h : sub->hosts) {
      while (at < inv->hosts.size() && inv->hosts[at].name != h.name) ++at;
      if (at == inv->hosts.size() || inv->hosts[at].vars != h.vars) std::abort();
      if (g != "all" && !std::binary_search(h.groups.begin(), h.groups.end(), std::string(g))) std::abort();
    }
    auto members = std::count_if(inv->hosts.begin(), inv->hosts.end(), [&](const auto& h) {
      return g == "all" || std::binary_search(h.groups.begin(), h.groups.end(), std::string(g));
    });
    if (static_cast<std::size_t>(members) != sub->hosts.size()) std::abort();
  }
  return 0;
}
