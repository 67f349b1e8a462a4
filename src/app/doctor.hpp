#pragma once
// `certfleet doctor`: checks what a start needs and what usually goes wrong, and prints one line
// per check, OK / WARN / FAIL, with the fix for each that is not OK (docs/install.md#doctor).
#include "certfleet/core/settings.hpp"

#include <string>
#include <vector>

namespace certfleet::app {

enum class verdict { ok, warn, fail };

struct doctor_line {
  std::string check;   // "config", "key file", "store", "listen", …
  verdict v = verdict::ok;
  std::string detail;  // what was found
  std::string fix;     // what to do (empty when OK)
};

// The table as printed: a header, each line with its status, the fix under a line that has one,
// then a summary. Pure.
std::string render_doctor_table(const std::vector<doctor_line>& lines);
// 0: all OK; 1: warnings, no failure; 2: at least one failure. Pure.
int doctor_exit_code(const std::vector<doctor_line>& lines);

struct doctor_flags {
  std::string config;   // --config, as given ("" = none)
  bool targets = false;  // --targets: connect to every SSH target and compare its host key
  std::string project;   // --project: only this project's targets ("" = every project)
};

// Runs every check on `settings` (or reports why they did not load) and prints the table.
int run_doctor(const result<settings_map>& settings, const doctor_flags& flags);

}  // namespace certfleet::app
