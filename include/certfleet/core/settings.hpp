#pragma once
// The one table of settings: name, type, range, default, doc. Config loading, the settings API
// and docs/configuration.md all read it.
#include "certfleet/core/error.hpp"

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet {

enum class setting_scope {
  process,  // read at start from config file, CERTFLEET_<NAME>, flags
  system,   // system-wide, stored, changed through GET|PUT /api/v1/settings
  project,  // per project, stored, changed by its admins through GET|PUT /api/v1/projects/{p}/settings
};
enum class setting_type { integer, string, choice };

struct setting_def;
// A setting's own grammar, beyond its type: the canonical text of a valid value, or
// invalid_argument naming the setting. Runs after the type's checks (a string's length bound).
using setting_validator = result<std::string> (*)(const setting_def& def, std::string_view value);

struct setting_def {
  std::string_view name;
  setting_type type;
  setting_scope scope;
  std::int64_t min = 0;  // integer range, inclusive
  std::int64_t max = 0;
  std::string_view default_value;
  std::string_view choices;  // choice: values separated by '|'
  std::string_view doc;
  setting_validator validate = nullptr;  // nullptr: the type's checks are all
  // What settings_map::set leaves when it refuses a value (a stored value that no longer
  // validates): empty means the previous value (the default, when reading stored settings). Set
  // where the default would open what an invalid value meant to close (ssh_allow_list).
  std::string_view when_invalid = {};
};

std::span<const setting_def> all_settings() noexcept;

// The sections the system settings are shown in (the Settings page, GET /api/v1/settings/schema,
// docs/configuration.md), in page order; each system setting is in exactly one.
struct setting_group {
  std::string_view id;
  std::string_view title;
  std::string_view doc;
  std::string_view members;  // setting names separated by '|', in page order
};
std::span<const setting_group> setting_groups() noexcept;
// A group's setting names, in page order.
std::vector<std::string_view> group_members(const setting_group& group);
// The id of a system setting's group; empty for a process setting.
std::string_view group_of(const setting_def& def) noexcept;
// "integer", "string" or "choice" (docs/configuration.md and the settings schema route).
std::string_view type_name(setting_type t) noexcept;
// A choice setting's values (its `choices` split at '|'), in table order; empty for other types.
std::vector<std::string_view> choice_values(const setting_def& def);
const setting_def* find_setting(std::string_view name) noexcept;

// The settings table as Markdown (docs/configuration.md embeds it; a test keeps them equal).
std::string settings_reference_markdown();

// The canonical text of a valid value, or invalid_argument naming the setting and its range:
// the type's checks, then the setting's own validator. Every way a value gets in (config file,
// environment, flags, PUT /api/v1/settings, a stored value read back) goes through here.
result<std::string> validate_setting(const setting_def& def, std::string_view value);

// certificate_expiry_thresholds_days: day counts, largest first, unique.
result<std::vector<std::int64_t>> parse_expiry_thresholds(std::string_view value,
                                                          std::string_view setting = "certificate_expiry_thresholds_days");

// file_target_base_dirs: absolute directories without a trailing slash, no empty, "." or ".."
// segments, not "/", deduplicated, at most 32; empty text -> no directories.
result<std::vector<std::string>> parse_base_dirs(std::string_view value);

// tls_certificate: "PROJECT/ID", the project's name and the certificate's object id.
struct certificate_ref {
  std::string project;
  std::string id;
};
result<certificate_ref> parse_certificate_ref(std::string_view value);

// The table as a commented TOML config file: every process setting with its doc, range and
// default, commented out at its default unless `values` sets it (then the line is live).
// packaging/certfleet.toml is this text with the install layout's values (a test keeps them equal).
std::string settings_sample_toml(const std::map<std::string, std::string, std::less<>>& values = {});

// Setting values by name; every known setting has a value (its default when unset).
class settings_map {
 public:
  settings_map();  // all defaults
  // Validates; a refused value leaves the setting as it was, or at its when_invalid value.
  result<void> set(std::string_view name, std::string_view value);
  const std::string& text(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Process configuration: defaults, then the TOML file (when given), then CERTFLEET_<NAME>
// environment variables, then `overrides` (command-line flags). The first bad value fails the
// load with config_invalid naming where it came from and the setting.
result<settings_map> load_config(const std::string& file,
                                 const std::map<std::string, std::string>& overrides);
// The same from TOML text (`source` names it in errors); environment variables are not read.
result<settings_map> load_config_text(std::string_view toml_text, const std::string& source,
                                      const std::map<std::string, std::string>& overrides);

}  // namespace certfleet
