#pragma once
// POST …/targets:import (docs/targets-import.md): many targets in one request, all or none. The
// body is JSON lines (each line the body of POST …/targets) or CSV (a header row of the same
// members, dotted for nested ones: ssh.host). Parsing is pure; the service checks what needs the
// store (credentials, names already taken) and stores every row in one transaction.
#include "certfleet/catalog/ansible_inventory.hpp"
#include "certfleet/catalog/catalog.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::catalog {

enum class import_format { json_lines, csv };

// The format a Content-Type names (parameters such as charset=utf-8 allowed); nullopt: neither.
std::optional<import_format> import_format_of(std::string_view content_type);

// One request holds at most this many targets: 100,000 is the largest fleet the fan-out is
// measured at (docs/performance.md), and an import is one transaction.
constexpr std::size_t max_import_rows = 100000;
// A refusal names at most this many bad rows; the count says how many there were.
constexpr std::size_t max_import_problems = 100;

struct import_row {
  std::size_t line = 0;  // where the row starts in the body (1-based)
  new_target target;
};
struct import_problem {
  std::size_t line = 0;  // 0: the body as a whole
  std::string field;     // the member at fault (ssh.port), or "body"
  std::string message;
};
struct target_import {
  std::vector<import_row> rows;
  std::vector<import_problem> problems;  // at most max_import_problems of them
  std::size_t problem_count = 0;         // every bad row, counted
  void add_problem(std::size_t line, std::string field, std::string message);
};

// Every row parsed as POST …/targets parses its body, and names unique within the import. The
// rows are kept only when there is no problem.
target_import parse_target_import(std::string_view body, import_format format);
// The same, handing each good row to `keep` as it is parsed instead of keeping it: 100,000 parsed
// targets hold ~150 MiB, and a caller needs only part of each (the service: the stored document
// and what its checks read). A problem `keep` returns is that row's. Rows handed over before a
// later problem are the caller's to drop (the result's problem_count says so).
using import_row_sink = std::function<std::optional<import_problem>(import_row&&)>;
target_import parse_target_import(std::string_view body, import_format format, const import_row_sink& keep);

// The CLI's Ansible import: one JSON line per inventory host, each the `template_body` (a target
// body without name, module ssh) with the host's name, its address (ansible_host, else the
// inventory name), ansible_port, ansible_user, and its host key: the host variable
// certfleet_host_key, else the `known_hosts` entry for its address or name, else the template's.
// certfleet_<member> host variables (cert_path, key_path, chain_path, owner, post_command,
// credential_id) set that ssh member. Errors name the template member ("template.…") or the
// inventory line of the host ("line N").
result<std::string> inventory_import_lines(const inventory& inv, std::string_view template_body,
                                           std::string_view known_hosts);

// "3 rows are invalid; nothing was imported. line 7: ssh.port: port must be 1-65535; …" (the
// first few), for a message that must stand alone (the CLI prints it).
std::string describe_import_problems(const target_import& t);

}  // namespace certfleet::catalog
