#pragma once
// `certfleet completion bash|zsh|fish`: scripts generated from the command table (CLI11's tree of
// commands and flags), so a new command or flag completes without anyone editing a script. Flag
// values come from the tables that define them: job statuses, roles, modes, the settings table.
#include <optional>
#include <string>
#include <string_view>

namespace CLI {
class App;
}

namespace certfleet::app {

inline constexpr std::string_view completion_shells = "bash, zsh or fish";

// The script for `shell`; nullopt for a shell this build does not complete.
std::optional<std::string> completion_script(const CLI::App& app, std::string_view shell);

}  // namespace certfleet::app
