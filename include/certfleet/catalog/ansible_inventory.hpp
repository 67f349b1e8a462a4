#pragma once
// An Ansible INI inventory read into hosts with their effective variables, so the CLI can turn an
// inventory the operator already keeps into SSH targets. Pure: the caller reads the file. The
// format and the merge follow Ansible's INI inventory plugin; values stay strings (no YAML/JSON).
#include "certfleet/core/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::catalog {

struct inventory_host {
  std::string name;  // the inventory hostname as written (after range expansion)
  // Effective variables, sorted by name. Precedence, lowest first: [all:vars], then the groups by
  // depth below all (a parent before its children), at the same depth by ansible_group_priority
  // then by group name (Ansible's order), then the host lines' own key=value and name:port. In
  // one group or one host, the later line wins.
  std::vector<std::pair<std::string, std::string>> vars;
  // Every group it belongs to, directly or through :children, sorted, without "all";
  // "ungrouped" only when it is in no other group (as Ansible reconciles it).
  std::vector<std::string> groups;
  std::size_t line = 0;  // the line that first named it (1-based)

  std::string_view var(std::string_view name) const;  // "" when absent
};

struct inventory {
  std::vector<inventory_host> hosts;  // first-appearance order, each host once
};

// Caps on what a small file may expand to (ranges, long group chains inheriting variables): past
// them the parse is an error, found before the memory is spent.
inline constexpr std::size_t max_inventory_hosts = 100000;
inline constexpr std::size_t max_inventory_bytes = std::size_t{256} << 20;  // names, groups, vars
inline constexpr std::size_t max_inventory_line = 64 * 1024;

// group: "" or "all": every host; otherwise the hosts of that group and of its :children
// (recursively). Errors are invalid_argument: about the text with field "line N" (1-based) and a
// message starting "line N: "; an unknown `group` with field "group".
result<inventory> parse_ansible_ini_inventory(std::string_view text, std::string_view group = "");

}  // namespace certfleet::catalog
