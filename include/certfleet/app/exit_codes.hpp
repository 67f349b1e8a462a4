#pragma once
// The exit codes of `certfleet` commands, for scripts: one table, read by the commands and by
// docs/cli.md (a test keeps the page's table equal to exit_codes_markdown()).
#include "certfleet/core/errc_table.hpp"
#include "certfleet/core/error.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace certfleet::app {

enum class exit_code : int {
  ok = 0,
  failed = 1,
  usage = 2,
  not_found = 3,
  conflict = 4,
  unavailable = 5,
  partial = 6,
  timeout = 7,
};

struct exit_code_def {
  exit_code code;
  std::string_view name;
  std::string_view meaning;
  // The errc rows (core/errc_table.hpp) with this exit kind exit with this code; none for codes
  // no errc leads to. Each kind has exactly one code (checked at compile time).
  std::optional<errc_exit> for_errc = std::nullopt;
};

std::span<const exit_code_def> all_exit_codes() noexcept;
constexpr int to_int(exit_code c) noexcept { return static_cast<int>(c); }

// The exit code of a command that failed with `e`.
exit_code exit_code_for(const error& e) noexcept;

// The table as Markdown (docs/cli.md embeds it).
std::string exit_codes_markdown();

}  // namespace certfleet::app
