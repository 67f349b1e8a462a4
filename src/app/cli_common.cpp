// The command line's shared pieces (cli_common.hpp).
#include "cli_common.hpp"

namespace certfleet::app::detail {

result<settings_map> settings_from(common_flags& f) {
  // Like VAULT_CONFIG_PATH: the config file when no --config names one.
  if (f.config.empty())
    if (const char* env = std::getenv("CERTFLEET_CONFIG"); env && *env) f.config = env;
  for (const auto& kv : f.sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      return make_error(errc::config_invalid, fmt::format("--set {}: expected NAME=VALUE", kv), "set");
    f.overrides[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return load_config(f.config, f.overrides);
}

int usage(std::string message, std::string field) {
  return fail(make_error(errc::invalid_argument, std::move(message), std::move(field)));
}

std::string time_cell(time_ms t) {
  if (t == 0) return "-";
  auto text = format_iso8601(t);
  text[10] = ' ';
  return text.substr(0, 19);
}

std::optional<cli_context> open_cli(common_flags& flags, int& exit) {
  auto settings = settings_from(flags);
  if (!settings) {
    print_error(settings.error());
    exit = to_int(exit_code::usage);
    return std::nullopt;
  }
  if (auto ok = check_store_setting(*settings); !ok) {
    print_error(ok.error());
    exit = to_int(exit_code::usage);
    return std::nullopt;
  }
  // Fail closed: a command run in the wrong directory, or without the service's config, must not
  // create an empty store there and answer from it ("0 jobs"); only `serve` creates a store.
  if (settings->text("store") == "sqlite") {
    const auto db = std::filesystem::path(settings->text("data")) / "certfleet.db";
    std::error_code ec;
    if (!std::filesystem::exists(db, ec)) {
      print_error(make_error(errc::not_found,
                             fmt::format("no store in {} ({} does not exist; `certfleet serve` creates it): give the "
                                         "service's config with --config FILE or CERTFLEET_CONFIG, or its data "
                                         "directory with --data DIR (`certfleet store init` makes a new store)",
                                         settings->text("data"), db.string()),
                             "data"));
      exit = to_int(exit_code::not_found);
      return std::nullopt;
    }
  }
  auto st = open_store(*settings);
  if (!st) {
    print_error(st.error());
    exit = to_int(exit_code_for(st.error()) == exit_code::unavailable ? exit_code::unavailable : exit_code::failed);
    return std::nullopt;
  }
  // Commands that cancel jobs report distribution children through the terminal hook.
  (*st)->jobs().set_terminal_hook(distribution::make_terminal_hook());
  return cli_context{std::move(*settings), std::move(*st)};
}

// The named project; `default` is created on the first use of a store, whichever command comes
// first. (A coroutine function, not a lambda: its frame must not refer to a dead closure.)
store::task<store::project> project_for_cli(store::store& st, std::string name, time_ms now) {
  if (name != "default") co_return co_await st.projects().find_by_name(std::move(name));
  auto p = co_await st.projects().ensure("default", now);
  if (!p) co_return std::move(p).error();
  co_return std::move(p->first);
}

// --server names a server's API; --config and --data a store: one of them.
std::optional<int> refuse_both_modes(common_flags& flags) {
  if (flags.remote.wanted() && (!flags.config.empty() || !flags.overrides["data"].empty()))
    return fail(make_error(errc::invalid_argument,
                           "--server talks to a server's API; --config and --data open a store: give one", "server"));
  return std::nullopt;
}

}  // namespace certfleet::app::detail
