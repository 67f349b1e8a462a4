#pragma once
// What the files of the command line share (private to src/app): the flags every command takes,
// opening the store or the API, the cells of tables, and each command family's arguments and
// entry (cli.cpp builds the command tree; cli_jobs, cli_tokens, cli_kek, cli_store and
// cli_distributions run the families).
#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/app/app.hpp"
#include "certfleet/app/exit_codes.hpp"
#include "certfleet/core/build_info.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/log.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/catalog/kek_rotation.hpp"
#include "certfleet/service/kinds.hpp"
#include "certfleet/service/service.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/maintenance.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/session_slots.hpp"
#include "certfleet/store/workers.hpp"
#include "completion.hpp"
#include "dist_backend.hpp"
#include "doctor.hpp"
#include "jobs_backend.hpp"
#include "output.hpp"
#include "remote_admin.hpp"
#include "remote_catalog.hpp"
#include "remote.hpp"
#include "store_check.hpp"
#include "suggest.hpp"
#include "table.hpp"
#include "wiring.hpp"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <thread>
#include <vector>

namespace certfleet::app::detail {

struct common_flags {
  std::string config;
  std::map<std::string, std::string> overrides;
  std::vector<std::string> sets;
  remote_flags remote;  // remote mode (remote.hpp): set on the commands that have it
};

result<settings_map> settings_from(common_flags& f);
int usage(std::string message, std::string field);
using app::time_cell;  // the JSON one (output.hpp), beside this one
// A time for a table cell: "YYYY-MM-DD HH:MM:SS", "-" for none.
std::string time_cell(time_ms t);

// --timeout of --watch and --wait: 0 waits as long as it takes.
struct deadline {
  std::chrono::steady_clock::time_point at;
  bool none;
  explicit deadline(int seconds)
      : at(std::chrono::steady_clock::now() + std::chrono::seconds(seconds)), none(seconds == 0) {}
  bool passed() const { return !none && std::chrono::steady_clock::now() >= at; }
};
// How often --watch and --wait look at the store: often enough to feel live, a read a time.
constexpr auto watch_interval = std::chrono::milliseconds(500);

// Settings and store for a command that works on the store directly. On failure the error is
// printed and `exit` holds the exit code.
struct cli_context {
  settings_map settings;
  std::unique_ptr<store::store> store;
};
std::optional<cli_context> open_cli(common_flags& flags, int& exit);
// The named project; `default` is created on the first use of a store, whichever command comes
// first.
store::task<store::project> project_for_cli(store::store& st, std::string name, time_ms now);
// --server names a server's API; --config and --data a store: one of them.
std::optional<int> refuse_both_modes(common_flags& flags);

// The backend a command uses: the API when --server (CERTFLEET_ADDR) is given, else the store
// (Local::make with the open store and the project's id). On failure the error is printed and
// `exit` holds the exit code.
template <class Local, class Backend>
std::unique_ptr<Backend> open_backend(common_flags& flags, const std::string& project, int& exit,
                                      std::optional<remote_client>& remote,
                                      std::unique_ptr<Backend> (*over_api)(const remote_client&, std::string)) {
  if (auto refused = refuse_both_modes(flags)) return exit = *refused, nullptr;
  if (flags.remote.wanted()) {
    auto c = remote_client::open(flags.remote);
    if (!c) return exit = fail(c.error()), nullptr;
    remote.emplace(std::move(*c));
    return over_api(*remote, project);
  }
  auto cli = open_cli(flags, exit);
  if (!cli) return nullptr;
  auto p = run_sync([&] { return project_for_cli(*cli->store, project, system_clock().now_ms()); });
  if (!p) return exit = fail(p.error()), nullptr;
  return Local::make(std::move(*cli), p->id);
}

struct jobs_args {
  std::string project = "default";
  std::string status, type, id, payload = "{}", key;
  int page = 1, page_size = 25, count = 1, limit = 100;
  std::int64_t after = 0, run_at = 0;
  bool json = false, watch = false, wide = false;
  int timeout_s = 0;
};
int run_jobs(const std::string& cmd, common_flags& flags, jobs_args& a);

struct token_args {
  std::string project = "default";
  std::string role, name, id;
  // Empty: never expires on the store's host (break-glass and bootstrap tokens); the API's
  // default (90 days) in remote mode.
  std::string ttl;
  bool system = false;
  bool all = false;
  bool json = false;
  bool wide = false;  // -o wide: who made each token
};
int run_token(const std::string& cmd, common_flags& flags, token_args& a);

struct kek_args {
  bool json = false;
  std::uint32_t version = 0;
};
int run_kek(const std::string& cmd, common_flags& flags, kek_args& a);

int run_project(const std::string& cmd, common_flags& flags, const std::string& name, bool json);
int run_backup(common_flags& flags, const std::string& to);
int run_restore(common_flags& flags, const std::string& from, bool force);
int run_reconcile(common_flags& flags);
int run_sessions(common_flags& flags, bool json);
int run_store_init(common_flags& flags);
int run_workers(common_flags& flags, bool json);

struct dist_args {
  std::string project = "default";
  std::string id;
  int page = 1, page_size = 25, timeout_s = 0;
  std::int64_t run = 0;  // rollback, results: a run number (0: the last one)
  std::string status, error_class;  // results' filters
  bool json = false, wait = false;
  std::string job;                   // retry-targets: a child job of the last run
  std::vector<std::string> targets;  // retry-targets: named targets of the last run
};
int run_distributions(const std::string& cmd, common_flags& flags, dist_args& a);

}  // namespace certfleet::app::detail
