// The command line: `certfleet serve`, `certfleet jobs …`, `certfleet token …`, `certfleet --version`.
// Lists print an aligned table for people (--json: the JSON scripts read); exit codes come from
// one table (exit_codes.hpp, docs/cli.md).
#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/app/app.hpp"
#include "certfleet/app/exit_codes.hpp"
#include "certfleet/core/build_info.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/log.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/distribution/kek_rotation.hpp"
#include "certfleet/distribution/service.hpp"
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

namespace certfleet::app {

namespace {

struct common_flags {
  std::string config;
  std::map<std::string, std::string> overrides;
  std::vector<std::string> sets;
  remote_flags remote;  // remote mode (remote.hpp): set on the commands that have it
};

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

using app::time_cell;  // the JSON one (output.hpp), beside this one
std::string time_cell(time_ms t) {
  if (t == 0) return "-";
  auto text = format_iso8601(t);
  text[10] = ' ';
  return text.substr(0, 19);
}

// A job's status as people read it: a completed job whose result is partial says so.
std::string status_cell(const store::job_record& j) {
  if (j.status == store::job_status::completed && j.result_status == "partial") return "partial";
  std::string s(store::to_string(j.status));
  if (j.cancel_requested && j.status == store::job_status::active) s += " (cancelling)";
  return s;
}
std::string duration_cell(const store::job_record& j) {
  if (j.started_at == 0 || j.completed_at == 0) return "-";
  return format_duration(j.completed_at - j.started_at);
}

// The exit code of a job that ended (--watch): completed ok, partial, or failed.
int exit_for_job(const store::job_record& j) {
  if (j.status == store::job_status::completed)
    return to_int(j.result_status == "partial" ? exit_code::partial : exit_code::ok);
  return to_int(exit_code::failed);
}

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

struct jobs_args {
  std::string project = "default";
  std::string status, type, id, payload = "{}", key;
  int page = 1, page_size = 25, count = 1, limit = 100;
  std::int64_t after = 0, run_at = 0;
  bool json = false, watch = false, wide = false;
  int timeout_s = 0;
};

void print_job(const store::job_record& j) {
  text_table t{{"FIELD", "VALUE"}, {}, {}};
  auto row = [&](std::string k, std::string v) {
    if (!v.empty()) t.rows.push_back({std::move(k), std::move(v)});
  };
  row("id", j.id);
  row("type", j.type);
  row("status", status_cell(j));
  row("attempts", fmt::format("{}/{}", j.attempts, j.max_attempts));
  if (j.progress_total > 0) row("progress", fmt::format("{}/{}", j.progress_current, j.progress_total));
  row("created", time_cell(j.created_at));
  row("started", j.started_at ? time_cell(j.started_at) : "");
  row("completed", j.completed_at ? time_cell(j.completed_at) : "");
  row("duration", duration_cell(j) == "-" ? "" : duration_cell(j));
  row("triggered_by", j.triggered_by);
  row("parent_job", j.parent_job_id);
  row("distribution", j.distribution_id);
  row("certificate", j.certificate_id);
  row("idempotency_key", j.idempotency_key);
  row("error", j.error);
  std::cout << render(t);
}

void print_log_line(const store::log_line& l) {
  std::string level = l.level;
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::cout << format_iso8601(l.ts) << " " << fmt::format("{:<5}", level) << " " << cell(l.message) << "\n";
  if (!l.detail.empty()) std::cout << "    " << cell(l.detail, 2000) << "\n";
}

// The state of a job --watch prints (after the time) when it changes.
std::string watch_state(const store::job_record& j) {
  auto s = fmt::format("{}  attempt {}/{}", status_cell(j), j.attempts, j.max_attempts);
  if (j.progress_total > 0) s += fmt::format("  progress {}/{}", j.progress_current, j.progress_total);
  if (!j.error.empty()) s += "  error: " + cell(j.error, 200);
  return s;
}

// --server names a server's API; --config and --data a store: one of them.
std::optional<int> refuse_both_modes(common_flags& flags) {
  if (flags.remote.wanted() && (!flags.config.empty() || !flags.overrides["data"].empty()))
    return fail(make_error(errc::invalid_argument,
                           "--server talks to a server's API; --config and --data open a store: give one", "server"));
  return std::nullopt;
}

// `certfleet jobs …` on the store itself (local mode).
class local_jobs_backend final : public jobs_backend {
 public:
  local_jobs_backend(cli_context cli, std::string project_id)
      : cli_(std::move(cli)), pid_(std::move(project_id)),
        queue_(*cli_.store, handlers_, system_clock(), static_cast<int>(cli_.settings.integer("job_retry_per_minute"))) {}
  // Handlers first: the queue refuses types without one.
  static std::unique_ptr<local_jobs_backend> make(cli_context cli, std::string project_id) {
    auto b = std::unique_ptr<local_jobs_backend>(new local_jobs_backend(std::move(cli), std::move(project_id)));
    register_handlers(b->handlers_, b->cli_.settings);
    return b;
  }

  result<store::job_page> list(std::optional<store::job_status> status, const std::string& type, int page,
                               int page_size) override {
    store::job_filter f{pid_, status, type, page, page_size};
    return run_sync([&] { return cli_.store->jobs().list(f); });
  }
  result<store::job_record> get(const std::string& id) override {
    return run_sync([&] { return cli_.store->jobs().get(pid_, id); });
  }
  result<store::log_page> logs(const std::string& id, std::int64_t after, int limit) override {
    return run_sync([&] { return cli_.store->jobs().read_logs(id, after, limit); });
  }
  result<enqueued> enqueue(const std::string& type, const std::string& payload, const std::string& key,
                           time_ms run_at) override {
    auto r = run_sync([&] { return queue_.enqueue(request(type, payload, key, run_at), queue::caller::user); });
    if (!r) return std::move(r).error();
    return enqueued{std::move(r->job), r->created};
  }
  result<void> enqueue_many(const std::string& type, const std::string& payload, time_ms run_at, int count) override {
    // Validated once, inserted in chunks of one transaction each.
    auto prepared = queue_.prepare(request(type, payload, "", run_at), queue::caller::user);
    if (!prepared) return std::move(prepared).error();
    int left = count;
    while (left > 0) {
      int n = std::min(left, 5000);
      std::vector<store::new_job> batch(static_cast<std::size_t>(n), *prepared);
      auto r = run_sync([&] { return cli_.store->jobs().enqueue_many(std::move(batch), system_clock().now_ms()); });
      if (!r) return std::move(r).error();
      left -= n;
    }
    return {};
  }
  result<store::job_record> retry(const std::string& id) override {
    return run_sync([&] { return queue_.retry(pid_, id); });
  }
  result<store::cancel_outcome> cancel(const std::string& id) override {
    return run_sync([&] { return queue_.cancel(pid_, id); });
  }

 private:
  queue::enqueue_request request(const std::string& type, const std::string& payload, const std::string& key,
                                 time_ms run_at) const {
    queue::enqueue_request req{pid_, type, payload};
    if (!key.empty()) req.idempotency_key = key;
    req.run_at = run_at;
    req.triggered_by = queue::triggers::cli;
    return req;
  }
  cli_context cli_;
  std::string pid_;
  queue::handler_registry handlers_;
  queue::queue_service queue_;
};

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

int run_jobs(const std::string& cmd, common_flags& flags, jobs_args& a) {
  int exit = 0;
  std::optional<remote_client> remote;
  auto be = open_backend<local_jobs_backend>(flags, a.project, exit, remote, &remote_jobs);
  if (!be) return exit;

  if (cmd == "list") {
    std::optional<store::job_status> status;
    if (!a.status.empty() && a.status != "all") {
      status = store::parse_job_status(a.status);
      if (!status)
        return fail(make_error(errc::invalid_argument,
                               "status must be one of all, pending, active, completed, failed, dead, cancelled", "status"));
    }
    if (a.page < 1 || a.page_size < 1 || a.page_size > 1000)
      return fail(make_error(errc::invalid_argument, "page must be >= 1 and page-size from 1 to 1000", "page_size"));
    auto r = be->list(status, a.type, a.page, a.page_size);
    if (!r) return fail(r.error());
    if (a.json) {
      boost::json::array items;
      for (const auto& j : r->items) items.push_back(queue::to_json(j));
      print(boost::json::object{{"items", std::move(items)}, {"page", a.page}, {"page_size", a.page_size}, {"total", r->total}});
      return 0;
    }
    text_table t{{"ID", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "DURATION", "ERROR"}, {}, {24, 32, 24, 9, 19, 9, 60}};
    if (a.wide) {
      // -o wide: where it ran and why, and the whole error line.
      t.header.insert(t.header.end() - 1, {"LANE", "PROGRESS", "WORKER", "TRIGGERED BY"});
      t.max_width.insert(t.max_width.end() - 1, {8, 13, 40, 40});
      t.max_width.back() = 400;
    }
    for (const auto& j : r->items) {
      std::vector<std::string> row{j.id, j.type, status_cell(j), fmt::format("{}/{}", j.attempts, j.max_attempts),
                                   time_cell(j.created_at), duration_cell(j)};
      if (a.wide)
        row.insert(row.end(), {j.lane, j.progress_total ? fmt::format("{}/{}", j.progress_current, j.progress_total) : "",
                               j.locked_by, j.triggered_by});
      row.push_back(j.error);
      t.rows.push_back(std::move(row));
    }
    std::cout << render(t);
    const auto pages = (r->total + a.page_size - 1) / a.page_size;
    if (pages > 1 || r->items.empty())
      std::cout << fmt::format("page {} of {}, {} jobs{}\n", a.page, std::max<std::int64_t>(pages, 1), r->total,
                               a.page < pages ? fmt::format(" (next: --page {})", a.page + 1) : "");
    return 0;
  }
  if (cmd == "show") {
    if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
    auto r = be->get(a.id);
    if (!r) return fail(r.error());
    if (a.json) print(queue::to_json(*r));
    else print_job(*r);
    if (!a.watch) return 0;
    // Follow it: a line on each change (status, attempt, progress, error) until it ends.
    const deadline until(a.timeout_s);
    std::string last;
    for (;;) {
      if (auto state = watch_state(*r); state != last) {
        std::cerr << time_cell(system_clock().now_ms()) << "  " << state << std::endl;
        last = std::move(state);
      }
      if (store::is_terminal(r->status)) {
        if (a.json) print(queue::to_json(*r));
        return exit_for_job(*r);
      }
      if (until.passed()) return fail(make_error(errc::timeout, fmt::format("job {} is still {} after --timeout {}s",
                                                                            a.id, store::to_string(r->status), a.timeout_s), "timeout"));
      std::this_thread::sleep_for(watch_interval);
      r = be->get(a.id);
      if (!r) return fail(r.error());
    }
  }
  if (cmd == "enqueue") {
    if (a.count < 1 || a.count > 10'000'000)
      return fail(make_error(errc::invalid_argument, "count must be from 1 to 10000000", "count"));
    if (a.count == 1) {
      auto r = be->enqueue(a.type, a.payload, a.key, a.run_at);
      if (!r) return fail(r.error());
      auto o = queue::to_json(r->job);
      o["created"] = r->created;
      print(o);
      return 0;
    }
    if (!a.key.empty()) return fail(make_error(errc::invalid_argument, "--key cannot be used with --count", "key"));
    auto r = be->enqueue_many(a.type, a.payload, a.run_at, a.count);
    if (!r) return fail(r.error());
    print(boost::json::object{{"enqueued", a.count}, {"type", a.type}});
    return 0;
  }
  if (cmd == "retry") {
    auto r = be->retry(a.id);
    if (!r) return fail(r.error());
    print(queue::to_json(*r));
    return 0;
  }
  if (cmd == "cancel") {
    auto r = be->cancel(a.id);
    if (!r) return fail(r.error());
    auto o = queue::to_json(r->job);
    o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
    print(o);
    return 0;
  }
  if (cmd == "logs") {
    if (a.after < 0) return fail(make_error(errc::invalid_argument, "after must not be negative", "after"));
    if (a.limit < 1 || a.limit > 1000) return fail(make_error(errc::invalid_argument, "limit must be from 1 to 1000", "limit"));
    if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
    const deadline until(a.timeout_s);
    std::int64_t after = a.after;
    for (;;) {
      // The job first: lines read after it was seen terminal are all the lines it will have.
      auto job = be->get(a.id);
      if (!job) return fail(job.error());
      auto r = be->logs(a.id, after, a.limit);
      if (!r) return fail(r.error());
      const bool done = store::is_terminal(job->status);
      if (a.json) {
        // --watch --json: one JSON object a page, like the API's pages, until done is true.
        if (!a.watch || !r->lines.empty() || done) {
          boost::json::array lines;
          for (const auto& l : r->lines) lines.push_back(queue::to_json(l));
          print(boost::json::object{{"lines", std::move(lines)}, {"next_cursor", r->next_cursor}, {"done", done}});
        }
      } else {
        for (const auto& l : r->lines) print_log_line(l);
      }
      std::cout.flush();
      after = r->next_cursor;
      if (!a.watch) return 0;
      if (static_cast<int>(r->lines.size()) == a.limit) continue;  // more are waiting
      if (done) {
        if (!a.json)
          std::cerr << fmt::format("job {} {}{}", a.id, status_cell(*job), job->error.empty() ? "" : ": " + cell(job->error, 300))
                    << std::endl;
        return exit_for_job(*job);
      }
      if (until.passed()) return fail(make_error(errc::timeout, fmt::format("job {} is still {} after --timeout {}s",
                                                                            a.id, store::to_string(job->status), a.timeout_s), "timeout"));
      std::this_thread::sleep_for(watch_interval);
    }
  }
  return to_int(exit_code::usage);
}

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

boost::json::object token_json(const store::token_record& t, const std::string& project_name) {
  auto o = api::token_answer(t, system_clock().now_ms());
  o["project"] = project_name;
  return o;
}

// --ttl: seconds, or a number with s, m, h or d; 0 never expires. The API's range.
result<std::int64_t> parse_ttl(std::string_view text) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::int64_t scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else if (unit == "d") scale = 86400;
  const auto bad = make_error(errc::invalid_argument,
                              fmt::format("--ttl is 0 (never expires) or 60s-{}d, like 3600, 12h or 90d",
                                          api::token_ttl_max_s / 86400),
                              "ttl");
  if (ec != std::errc() || end == text.data() || scale == 0 || n < 0 || n > api::token_ttl_max_s) return bad;
  n *= scale;
  if (n != 0 && (n < api::token_ttl_min_s || n > api::token_ttl_max_s)) return bad;
  return n;
}

// `certfleet token create|list|revoke`: tokens are managed on the store directly (whoever can
// read the data directory owns the store anyway); each change is audited with actor "cli".
// Remote mode (--server): the token routes of the API, for one project.
int run_remote_token(const std::string& cmd, common_flags& flags, const token_args& a) {
  auto c = remote_client::open(flags.remote);
  if (!c) return fail(c.error());
  remote_token_args r{a.project, a.role, a.name, a.id, std::nullopt, a.system, a.all, a.json, a.wide};
  if (!a.ttl.empty()) {
    auto ttl = parse_ttl(a.ttl);
    if (!ttl) return fail(ttl.error());
    r.ttl_s = *ttl;
  }
  return remote_token(*c, cmd, r);
}

int run_token(const std::string& cmd, common_flags& flags, token_args& a) {
  if (auto refused = refuse_both_modes(flags)) return *refused;
  if (flags.remote.wanted()) return run_remote_token(cmd, flags, a);
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  store::store& store = *cli->store;
  const auto& clock = system_clock();
  auto projects = run_sync([&] { return store.projects().list(); });
  if (!projects) return fail(projects.error());
  auto name_of = [&](const std::string& id) {
    for (const auto& p : *projects)
      if (p.id == id) return p.name;
    return id;
  };
  auto audit = [&](const std::string& project_id, const std::string& action, const std::string& object,
                   const std::string& outcome) {
    store::audit_entry e;
    e.project_id = project_id;
    e.actor = "cli";
    e.action = action;
    e.object = object;
    e.outcome = outcome;
    e.at = clock.now_ms();
    auto r = run_sync([&] { return store.auth().append_audit(e); });
    if (!r) print_error(r.error());
  };

  if (cmd == "create") {
    auto role = store::parse_role(a.role);
    if (!role) return fail(make_error(errc::invalid_argument, "role must be one of viewer, operator, admin, owner", "role"));
    if (a.system && *role < store::role::admin)
      return fail(make_error(errc::invalid_argument, "a --system token must have the admin or owner role", "role"));
    auto ttl = parse_ttl(a.ttl.empty() ? "0" : a.ttl);
    if (!ttl) return fail(ttl.error());
    const time_ms expires_at = *ttl ? clock.now_ms() + *ttl * 1000 : 0;
    auto project = run_sync([&] { return project_for_cli(store, a.project, clock.now_ms()); });
    if (!project) return fail(project.error());
    auto issued = run_sync([&] {
      return api::issue_token(store.auth(), project->id, *role, a.system, a.name, "cli", clock, false, expires_at);
    });
    if (!issued) return fail(issued.error());
    audit(project->id, "token.create", "token/" + (*issued)->record.id, "ok");
    auto o = token_json((*issued)->record, project->name);
    o["token"] = (*issued)->text;  // shown once; only its hash is stored
    print(o);
    return 0;
  }
  if (cmd == "list") {
    std::string pid;
    if (!a.all) {
      auto project = run_sync([&] { return store.projects().find_by_name(a.project); });
      if (!project) return fail(project.error());
      pid = project->id;
    }
    auto tokens = run_sync([&] { return store.auth().list_tokens(pid); });
    if (!tokens) return fail(tokens.error());
    boost::json::array items;
    for (const auto& t : *tokens) items.push_back(token_json(t, name_of(t.project_id)));
    if (a.json) print(boost::json::object{{"items", std::move(items)}});
    else print_token_table(items, a.project, a.wide);
    return 0;
  }
  if (cmd == "revoke") {
    auto r = run_sync([&] { return store.auth().revoke_token(a.id, clock.now_ms()); });
    if (!r) return fail(r.error());
    audit(r->project_id, "token.revoke", "token/" + r->id, "ok");
    print(token_json(*r, name_of(r->project_id)));
    return 0;
  }
  return to_int(exit_code::usage);
}

// `certfleet project create|list|delete`: like tokens, on the store directly, each change audited
// with actor "cli" (in the `default` project: the project itself may be gone afterwards).
// `certfleet kek rotate|status|retire` (DESIGN §11, docs/secrets.md): the keyring in the key file
// and the rotation jobs in the store.
struct kek_args {
  bool json = false;
  std::uint32_t version = 0;
};

// Holds an exclusive lock on the key file's directory while a command changes the keyring, so
// two `kek` commands never write it at once.
struct key_dir_lock {
  int fd = -1;
  ~key_dir_lock() {
    if (fd >= 0) ::close(fd);
  }
};
result<void> lock_key_dir(const std::filesystem::path& key_file, key_dir_lock& lock) {
  auto dir = key_file.has_parent_path() ? key_file.parent_path().string() : std::string(".");
  lock.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock.fd < 0 || ::flock(lock.fd, LOCK_EX) != 0)
    return make_error(errc::config_invalid, fmt::format("cannot lock the key file's directory {}: {}", dir,
                                                        std::strerror(errno)),
                      "key_file");
  return {};
}

// Rotation jobs not finished (pending, active or failed awaiting a retry) in the project.
result<std::int64_t> open_rotation_jobs(store::store& st, const std::string& project_id) {
  std::int64_t n = 0;
  for (auto type : {queue::job_names::kek_rotation_orchestrate, queue::job_names::kek_rotation_collection})
    for (auto status : {store::job_status::pending, store::job_status::active, store::job_status::failed}) {
      store::job_filter f{project_id, status, std::string(type), 1, 1};
      auto r = run_sync([&] { return st.jobs().list(f); });
      if (!r) return std::move(r).error();
      n += r->total;
    }
  return n;
}

struct rotation_record {
  std::uint32_t from = 0, to = 0;
  time_ms started_at = 0;
  std::string job_id;
};
std::optional<rotation_record> parse_rotation_record(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  boost::system::error_code ec;
  auto v = boost::json::parse(*text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const auto& o = v.as_object();
  rotation_record r;
  if (const auto* f = o.if_contains("from"); f && f->is_int64()) r.from = static_cast<std::uint32_t>(f->as_int64());
  if (const auto* f = o.if_contains("to"); f && f->is_int64()) r.to = static_cast<std::uint32_t>(f->as_int64());
  if (const auto* f = o.if_contains("started_at"); f && f->is_int64()) r.started_at = f->as_int64();
  if (const auto* f = o.if_contains("job_id"); f && f->is_string()) r.job_id = std::string(f->as_string());
  return r;
}

std::string versions_cell(const std::vector<std::uint32_t>& vs) {
  std::string out;
  for (auto v : vs) out += (out.empty() ? "v" : ", v") + std::to_string(v);
  return out;
}

int run_kek(const std::string& cmd, common_flags& flags, kek_args& a) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  store::store& store = *cli->store;
  const auto& clock = system_clock();
  const auto path = key_file_path(cli->settings);
  key_dir_lock lock;
  if (cmd != "status")
    if (auto l = lock_key_dir(path, lock); !l) return fail(l.error());
  auto ring = load_key_file(path);
  if (!ring) return fail(ring.error());
  auto facts = read_keyring_facts(store, &*ring);
  if (!facts) return fail(facts.error());
  auto check = check_keyring_matches(*facts, &*ring, path);
  if (!check && cmd != "status") return fail(check.error());
  auto project = run_sync([&] { return project_for_cli(store, "default", clock.now_ms()); });
  if (!project) return fail(project.error());
  auto open_jobs = open_rotation_jobs(store, project->id);
  if (!open_jobs) return fail(open_jobs.error());
  auto meta = run_sync([&] {
    return store::read_value<std::optional<std::string>>(
        store.catalog(), [](store::catalog_read& rd) { return rd.meta(distribution::kek_rotation_meta_key); });
  });
  if (!meta) return fail(meta.error());
  auto record = parse_rotation_record(*meta);

  if (cmd == "rotate") {
    if (*open_jobs > 0)
      return fail(make_error(
          errc::conflict,
          fmt::format("a key rotation is running{} ({} of its jobs not finished): wait for it to end (certfleet kek "
                      "status), then rotate again",
                      record ? fmt::format(" (v{} → v{})", record->from, record->to) : "", *open_jobs),
          "kek"));
    // The key file names a primary no rotation was started for (a rotate that stopped between
    // writing the file and enqueueing): start that one instead of adding another version.
    const std::uint32_t started_to = record ? record->to : 1;
    std::optional<kek> next;
    std::uint32_t from = ring->version();
    if (ring->versions().size() > 1 && ring->version() > started_to) {
      next.emplace(*ring);
      from = started_to;
      std::cerr << fmt::format("certfleet: the key file's primary v{} has no rotation yet: starting it (no new version)\n",
                               ring->version());
    } else {
      auto grown = ring->with_new_primary();
      if (!grown) return fail(grown.error());
      auto written = replace_key_file(path, *grown);
      if (!written) return fail(written.error());
      next.emplace(std::move(*written));
    }
    const std::uint32_t to = next->version();
    if (auto r = record_key_fingerprints(store, *next, false); !r) return fail(r.error());
    queue::handler_registry handlers;
    register_handlers(handlers, cli->settings);
    queue::queue_service queue(store, handlers, clock, static_cast<int>(cli->settings.integer("job_retry_per_minute")));
    queue::enqueue_request req{project->id, std::string(queue::job_names::kek_rotation_orchestrate),
                               distribution::kek_orchestrate_payload(from, to)};
    req.idempotency_key = distribution::kek_orchestrate_key(from, to);
    req.triggered_by = queue::triggers::cli;
    auto prepared = queue.prepare(req, queue::caller::system);
    if (!prepared) return fail(prepared.error());
    const auto now = clock.now_ms();
    auto job = std::make_shared<store::job_record>();
    store::tx_fn start = [nj = *prepared, job, from, to, now](store::catalog_tx& tx) -> result<void> {
      auto e = tx.jobs().enqueue(nj, now);
      if (!e) return std::move(e).error();
      *job = e->job;
      return tx.set_meta(distribution::kek_rotation_meta_key,
                         boost::json::serialize(boost::json::object{
                             {"from", from}, {"to", to}, {"started_at", now}, {"job_id", e->job.id}}));
    };
    auto w = run_sync([&] { return store.catalog().transact(std::move(start)); });
    if (!w)
      return fail(make_error(w.error().value(),
                             fmt::format("the key file now has primary v{}, but the rotation was not started: {}; run "
                                         "`certfleet kek rotate` again to start it",
                                         to, w.error().message),
                             "kek"));
    print(boost::json::object{{"from", from}, {"to", to}, {"job_id", job->id}, {"key_file", path.string()}});
    std::cerr << fmt::format("certfleet: key version {} is primary in {}; a worker re-seals every secret (certfleet kek "
                             "status). Back up the key file now.\n",
                             to, path.string());
    return 0;
  }

  auto counts = run_sync([&] {
    return store::read_value<std::vector<store::sealed_count>>(
        store.catalog(), [](store::catalog_read& rd) { return rd.sealed_versions(); });
  });
  if (!counts) return fail(counts.error());

  if (cmd == "retire") {
    const auto v = a.version;
    if (!ring->has_version(v))
      return fail(make_error(errc::not_found,
                             fmt::format("the key file {} holds no version {} (it holds {})", path.string(), v,
                                         versions_cell(ring->versions())),
                             "version"));
    // The primary is refused first, whatever uses it: while a rotation runs, the new primary
    // already seals some secrets, and "wait for the rotation" would be the wrong advice.
    auto smaller = ring->without_version(v);
    if (!smaller) return fail(make_error(errc::conflict, smaller.error().message, "version"));
    std::int64_t using_it = 0;
    for (const auto& c : *counts)
      if (c.version == v) using_it += c.count;
    if (using_it > 0)
      return fail(make_error(errc::conflict,
                             fmt::format("{} sealed secret{} still use{} key version {}: wait for the rotation to finish "
                                         "(certfleet kek status), then retire it",
                                         using_it, using_it == 1 ? "" : "s", using_it == 1 ? "s" : "", v),
                             "version"));
    auto written = replace_key_file(path, *smaller);
    if (!written) return fail(written.error());
    boost::json::array vs;
    for (auto x : written->versions()) vs.emplace_back(x);
    print(boost::json::object{{"retired", v}, {"versions", std::move(vs)}, {"primary", written->version()}});
    return 0;
  }

  // status
  auto progress = distribution::rotation_progress(*counts, ring->version());
  std::int64_t left = 0;
  for (const auto& p : progress) left += p.total - p.done;
  const bool running = *open_jobs > 0;
  if (a.json) {
    boost::json::array cols;
    for (const auto& p : progress) {
      boost::json::object by;
      for (const auto& c : p.by_version) by[std::to_string(c.version)] = c.count;
      cols.push_back(boost::json::object{
          {"collection", p.collection}, {"done", p.done}, {"total", p.total}, {"by_version", std::move(by)}});
    }
    boost::json::array vs;
    for (auto x : ring->versions()) vs.emplace_back(x);
    boost::json::object o{{"key_file", path.string()}, {"versions", std::move(vs)}, {"primary", ring->version()},
                          {"running", running}, {"open_jobs", *open_jobs}, {"left", left},
                          {"collections", std::move(cols)}};
    if (record)
      o["rotation"] = boost::json::object{{"from", record->from}, {"to", record->to},
                                          {"started_at", certfleet::json::time_value(record->started_at)},
                                          {"job_id", record->job_id}};
    if (!check) o["error"] = check.error().message;
    print(o);
    return 0;
  }
  std::cout << fmt::format("key file  {}: {}, primary v{}\n", path.string(), versions_cell(ring->versions()),
                           ring->version());
  if (!check) std::cout << "error     " << check.error().message << "\n";
  if (running)
    std::cout << fmt::format("rotation  running{}: {} jobs not finished\n",
                             record ? fmt::format(" v{} → v{} since {}", record->from, record->to,
                                                  time_cell(record->started_at))
                                    : "",
                             *open_jobs);
  else if (left > 0)
    std::cout << fmt::format("rotation  not running; {} secrets are not at v{}: a rotation job died (certfleet jobs list "
                             "--type kek_rotation_collection --status dead, then certfleet jobs retry ID), or a process "
                             "still on the old key sealed them during the rotation (certfleet kek rotate again)\n",
                             left, ring->version());
  else
    std::cout << fmt::format("rotation  none running; every secret is at v{}\n", ring->version());
  text_table t{{"COLLECTION", "DONE", "TOTAL", "BY VERSION"}, {}, {}};
  for (const auto& p : progress) {
    std::string by;
    for (const auto& c : p.by_version) by += (by.empty() ? "" : ", ") + fmt::format("v{}: {}", c.version, c.count);
    t.rows.push_back({p.collection, std::to_string(p.done), std::to_string(p.total), by.empty() ? "-" : by});
  }
  std::cout << render(t);
  return 0;
}

int run_project(const std::string& cmd, common_flags& flags, const std::string& name, bool json) {
  if (auto refused = refuse_both_modes(flags)) return *refused;
  if (flags.remote.wanted()) {
    auto c = remote_client::open(flags.remote);
    if (!c) return fail(c.error());
    return remote_project(*c, cmd, name, json);
  }
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  store::store& store = *cli->store;
  const auto& clock = system_clock();
  auto view = [](const store::project& p) {
    return boost::json::object{{"id", p.id}, {"name", p.name}, {"created_at", format_iso8601(p.created_at)}};
  };
  auto audit = [&](const std::string& action, const std::string& outcome, const std::string& id) {
    auto home = run_sync([&] { return project_for_cli(store, "default", clock.now_ms()); });
    if (!home) return;
    store::audit_entry e;
    e.project_id = home->id;
    e.actor = "cli";
    e.action = action;
    e.object = "project/" + name;
    e.outcome = outcome;
    e.detail = boost::json::serialize(boost::json::object{{"name", name}, {"id", id}});
    e.at = clock.now_ms();
    if (auto r = run_sync([&] { return store.auth().append_audit(e); }); !r) print_error(r.error());
  };
  if (cmd == "list") {
    auto ps = run_sync([&] { return store.projects().list(); });
    if (!ps) return fail(ps.error());
    if (json) {
      boost::json::array items;
      for (const auto& p : *ps) items.push_back(view(p));
      print(boost::json::object{{"items", std::move(items)}});
      return 0;
    }
    text_table t{{"NAME", "ID", "CREATED"}, {}, {}};
    for (const auto& p : *ps) t.rows.push_back({p.name, p.id, time_cell(p.created_at)});
    std::cout << render(t);
    return 0;
  }
  if (auto ok = api::check_project_name(name); !ok) return fail(ok.error());
  if (cmd == "create") {
    auto p = run_sync([&] { return store.projects().create(name, clock.now_ms()); });
    audit("project.create", p ? "ok" : errc_name(p.error().value()), p ? p->id : "");
    if (!p) return fail(p.error());
    print(view(*p));
    return 0;
  }
  if (cmd == "delete") {
    auto p = run_sync([&] { return store.projects().remove(name, clock.now_ms()); });
    audit("project.delete", p ? "ok" : errc_name(p.error().value()), p ? p->id : "");
    if (!p) return fail(p.error());
    auto o = view(*p);
    o["deleted"] = true;
    print(o);
    return 0;
  }
  return to_int(exit_code::usage);
}

// `certfleet backup --to FILE`: a consistent online copy of the embedded store (VACUUM INTO),
// safe while servers run. `certfleet restore --from FILE`: puts a backup in place as the store;
// only while no certfleet process uses the data directory.
// Backup and restore copy the embedded file; a MongoDB store is the operator's mongodump's.
result<void> refuse_mongodb_for(common_flags& flags, std::string_view command) {
  auto settings = settings_from(flags);
  if (!settings || settings->text("store") == "sqlite") return {};
  return make_error(errc::invalid_argument,
                    fmt::format("store: {} copies the embedded SQLite store; for a MongoDB store use mongodump "
                                "--uri <uri> --archive=FILE --gzip (and mongorestore), see docs/operations-mongodb.md",
                                command),
                    "store");
}

int run_backup(common_flags& flags, const std::string& to) {
  if (auto no = refuse_mongodb_for(flags, "backup"); !no) {
    print_error(no.error());
    return to_int(exit_code::usage);
  }
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  auto target = std::filesystem::absolute(to).string();
  auto r = run_sync([&] { return cli->store->maintenance().backup_to(target); });
  if (!r) return fail(r.error());
  print(boost::json::object{{"backup", target}});
  return 0;
}

int run_restore(common_flags& flags, const std::string& from, bool force) {
  if (auto no = refuse_mongodb_for(flags, "restore"); !no) {
    print_error(no.error());
    return to_int(exit_code::usage);
  }
  auto settings = settings_from(flags);
  if (!settings) {
    print_error(settings.error());
    return to_int(exit_code::usage);
  }
  namespace fs = std::filesystem;
  fs::path dir(settings->text("data"));
  fs::path db = dir / "certfleet.db";
  if (!fs::is_regular_file(from)) {
    print_error(make_error(errc::invalid_argument, fmt::format("{} is not a file", from), "from"));
    return to_int(exit_code::usage);
  }
  {
    // A backup must open as a certfleet store before it replaces anything.
    store::sqlite_options o;
    o.path = from;
    o.readers = 1;
    auto check = store::open_sqlite(o);
    if (!check) {
      print_error(make_error(errc::invalid_argument, fmt::format("{} is not a usable certfleet store: {}", from,
                                                                 check.error().message), "from"));
      return to_int(exit_code::usage);
    }
    (*check)->close();
  }
  if (fs::exists(db) && !force) {
    print_error(make_error(errc::conflict,
                           fmt::format("{} exists; stop every certfleet process using {} and pass --force to replace it",
                                       db.string(), dir.string()),
                           "force"));
    return to_int(exit_code::conflict);
  }
  if (auto made = make_data_dir(dir, false); !made) {
    print_error(made.error());
    return to_int(exit_code::conflict);
  }
  std::error_code ec;
  auto tmp = db.string() + ".restore";
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec) {
    fs::remove(db.string() + "-wal", ec);
    fs::remove(db.string() + "-shm", ec);
    fs::rename(tmp, db, ec);
  }
  if (ec) {
    print_error(make_error(errc::store_failure, fmt::format("restore into {} failed: {}", db.string(), ec.message())));
    return to_int(exit_code::failed);
  }
  std::cout << boost::json::serialize(boost::json::object{{"restored", db.string()}, {"from", from}}) << "\n";
  return 0;
}

// Re-triggers runs whose jobs are gone, then completes distributions whose children have all
// reported but whose run is not closed (the scheduler runs the same passes every cycle).
int run_reconcile(common_flags& flags) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  auto lost = run_sync([&] { return distribution::retrigger_lost(*cli->store, system_clock()); });
  if (!lost) return fail(lost.error());
  auto r = run_sync([&] { return distribution::reconcile(*cli->store, system_clock()); });
  if (!r) return fail(r.error());
  print(boost::json::object{{"reconciled", *r}, {"retriggered", *lost}});
  return 0;
}

// The SSH sessions certfleet holds per destination right now, across every worker process
// (distribution_max_sessions_per_host counts these).
int run_sessions(common_flags& flags, bool json) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  auto live = run_sync([&] { return cli->store->session_slots().live(system_clock().now_ms()); });
  if (!live) return fail(live.error());
  if (!json) {
    text_table t{{"DESTINATION", "SESSIONS"}, {}, {}};
    for (const auto& [destination, n] : *live) t.rows.push_back({destination, std::to_string(n)});
    std::cout << render(t);
    return 0;
  }
  boost::json::array items;
  for (const auto& [destination, n] : *live) items.push_back(boost::json::object{{"destination", destination}, {"sessions", n}});
  print(boost::json::object{{"items", std::move(items)}});
  return 0;
}

// `certfleet store init`: the one way besides `serve` to make a store, chosen explicitly (every
// other command refuses a missing one): the data directory (0700), the store with its schema, the
// key-encryption key file and the default project. Safe to run again.
int run_store_init(common_flags& flags) {
  auto settings = settings_from(flags);
  if (!settings) return fail(settings.error());
  if (auto ok = check_store_setting(*settings); !ok) return fail(ok.error());
  const bool sqlite = settings->text("store") == "sqlite";
  const auto db = std::filesystem::path(settings->text("data")) / "certfleet.db";
  std::error_code ec;
  const bool existed = sqlite && std::filesystem::exists(db, ec);
  auto st = open_store(*settings);
  if (!st) return fail(st.error());
  auto key = prepare_store(**st, *settings);
  if (!key) return fail(key.error());
  auto project = run_sync([&] { return (*st)->projects().ensure("default", system_clock().now_ms()); });
  if (!project) return fail(project.error());
  print(boost::json::object{{"store", sqlite ? boost::json::value(db.string()) : boost::json::value("mongodb")},
                            {"created", sqlite ? boost::json::value(!existed) : boost::json::value(nullptr)},
                            {"key_file", key_file_path(*settings).string()}});
  return 0;
}

// The worker registry (issue 34): who runs, who died and what it gave back. The verdict is the
// same one every process's liveness watcher reaches (its dead_after from the settings).
int run_workers(common_flags& flags, bool json) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  auto settings = settings_from(flags);
  const time_ms dead_after =
      settings ? settings->integer("worker_dead_after_ms") : queue::liveness_options{}.dead_after_ms;
  auto all = run_sync([&] { return cli->store->workers().list_workers(system_clock().now_ms()); });
  if (!all) return fail(all.error());
  auto state_of = [&](const store::worker_presence& w) {
    const auto v = queue::judge_worker(w, queue::this_host(), dead_after, queue::process_start_of);
    const std::string why = v.state == queue::liveness_state::declared_dead ? w.dead_reason : v.reason;
    return std::pair<std::string, std::string>{queue::liveness_state_name(v.state), why};
  };
  if (!json) {
    text_table t{{"WORKER", "STATE", "LAST HEARTBEAT", "LANES", "RUNNING", "VERSION", "WHY"}, {}, {}};
    for (const auto& w : *all) {
      auto [state, why] = state_of(w);
      t.rows.push_back({w.id, state, fmt::format("{:.1f} s ago", static_cast<double>(w.age_ms) / 1000.0), w.lanes,
                        std::to_string(w.running), w.version, why});
    }
    std::cout << render(t);
    return 0;
  }
  boost::json::array items;
  for (const auto& w : *all) {
    auto [state, why] = state_of(w);
    boost::json::object o{{"id", w.id},           {"host", w.host},         {"pid", w.pid},
                          {"state", state},       {"lanes", w.lanes},       {"running_jobs", w.running},
                          {"version", w.version}, {"heartbeat_age_ms", w.age_ms}};
    if (!why.empty()) o["dead_reason"] = why;
    if (w.dead_at > 0) o["released_jobs"] = w.released_jobs;
    items.push_back(std::move(o));
  }
  print(boost::json::object{{"items", std::move(items)}});
  return 0;
}

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

// The progress of a run as one line: a bar over the targets with a result, and the counts.
std::string progress_line(const boost::json::object& d, bool bar) {
  std::int64_t total = 0, ok = 0, failed = 0, skipped = 0, cancelled = 0;
  if (const auto* s = d.if_contains("summary"); s && s->is_object()) {
    auto n = [&](std::string_view k) {
      const auto* v = s->as_object().if_contains(k);
      return v && v->is_int64() ? v->as_int64() : 0;
    };
    total = n("targets"), ok = n("succeeded"), failed = n("failed"), skipped = n("skipped"), cancelled = n("cancelled");
  }
  const auto done = ok + failed + skipped + cancelled;
  std::string line;
  if (bar) {
    constexpr int width = 30;
    const int filled = total > 0 ? static_cast<int>(done * width / total) : 0;
    line = "[" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.') + "] ";
  }
  line += fmt::format("{}/{} targets  {} succeeded  {} failed", done, total, ok, failed);
  if (skipped) line += fmt::format("  {} skipped", skipped);
  if (cancelled) line += fmt::format("  {} cancelled", cancelled);
  line += "  " + text_of(d, "status");
  return line;
}

// `certfleet distributions list|show|execute`: on the store directly, like jobs; execute only
// enqueues (a worker process runs the run) and, with --wait, follows the run to its end.
// `certfleet distributions …` on the store itself (local mode): the distribution service, as
// the API's handlers call it; each change audited with actor "cli".
class local_dist_backend final : public dist_backend {
 public:
  static std::unique_ptr<local_dist_backend> make(cli_context cli, std::string project_id) {
    auto b = std::unique_ptr<local_dist_backend>(new local_dist_backend(std::move(cli), std::move(project_id)));
    register_handlers(b->handlers_, b->cli_.settings);
    return b;
  }
  result<boost::json::value> list(int page, int page_size) override {
    return run_sync([&] { return service_.list_distributions(pid_, page, page_size); });
  }
  result<boost::json::value> get(const std::string& id) override {
    return run_sync([&] { return service_.get_distribution(pid_, id); });
  }
  result<boost::json::value> execute(const std::string& id) override {
    return audited("distribution.execute", id, run_sync([&] { return service_.execute(pid_, id, actor()); }));
  }
  result<boost::json::value> retry_failed(const std::string& id) override {
    return audited("distribution.retry_failed", id, run_sync([&] { return service_.retry_failed(pid_, id, actor()); }));
  }
  result<boost::json::value> retry_targets(const std::string& id, const boost::json::value& body) override {
    const auto text = boost::json::serialize(body);
    return audited("distribution.retry_targets", id,
                   run_sync([&] { return service_.retry_targets(pid_, id, text, actor()); }));
  }
  result<boost::json::value> rollback(const std::string& id, std::int64_t run_no) override {
    boost::json::object body;
    if (run_no > 0) body["run_no"] = run_no;
    const auto text = boost::json::serialize(body);
    return audited("distribution.rollback", id, run_sync([&] { return service_.rollback(pid_, id, text, actor()); }));
  }
  result<boost::json::value> cancel(const std::string& id) override {
    return audited("distribution.cancel", id, run_sync([&] { return service_.cancel(pid_, id); }));
  }
  result<boost::json::value> results(const std::string& id, std::int64_t run_no, int page, int page_size,
                                     const std::string& status, const std::string& error_class) override {
    auto filter = distribution::parse_result_filter(status, error_class);
    if (!filter) return std::move(filter).error();
    return run_sync([&] { return service_.results(pid_, id, run_no, page, page_size, *filter); });
  }

 private:
  local_dist_backend(cli_context cli, std::string project_id)
      : cli_(std::move(cli)), pid_(std::move(project_id)),
        queue_(*cli_.store, handlers_, system_clock(), static_cast<int>(cli_.settings.integer("job_retry_per_minute"))),
        // No key: a run seals and opens nothing (the worker opens the credentials).
        service_(*cli_.store, queue_, system_clock(), nullptr) {}
  static std::string actor() { return std::string(queue::triggers::cli); }
  result<boost::json::value> audited(const char* action, const std::string& id, result<boost::json::value> r) {
    store::audit_entry e;
    e.project_id = pid_;
    e.actor = "cli";
    e.action = action;
    e.object = "distribution/" + id;
    e.outcome = r ? "ok" : errc_name(r.error().value());
    e.at = system_clock().now_ms();
    if (auto w = run_sync([&] { return cli_.store->auth().append_audit(e); }); !w) print_error(w.error());
    return r;
  }
  cli_context cli_;
  std::string pid_;
  queue::handler_registry handlers_;
  queue::queue_service queue_;
  distribution::service service_;
};

// --wait: follows the run `opened` started with a progress bar on stderr until it ends; the exit
// code says how it ended.
int follow_run(dist_backend& be, const std::string& id, const boost::json::value& opened, int timeout_s) {
  const auto run_no = opened.as_object().at("run_no");
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const deadline until(timeout_s);
  std::string last;
  for (;;) {
    auto d = be.get(id);
    if (!d) return fail(d.error());
    const auto& o = d->as_object();
    if (o.at("run_no") != run_no)
      return fail(make_error(errc::conflict, fmt::format("another run ({}) of distribution {} started; follow it with "
                                                         "certfleet distributions show", text_of(o, "run_no"), id),
                             "run_no"));
    const auto status = text_of(o, "status");
    const bool ended = status == "success" || status == "partial" || status == "failed" || status == "cancelled";
    auto line = progress_line(o, true);
    // At a terminal: the bar redrawn in place; elsewhere (a log file): a line per change.
    if (tty) std::cerr << "\r\033[K" << line << std::flush;
    else if (line != last) std::cerr << line << "\n" << std::flush;
    last = line;
    if (ended) {
      if (tty) std::cerr << "\n";
      if (auto err = text_of(o, "error"); !err.empty()) std::cerr << "certfleet: " << cell(err, 500) << "\n";
      return to_int(status == "success" ? exit_code::ok : status == "partial" ? exit_code::partial : exit_code::failed);
    }
    if (until.passed()) {
      if (tty) std::cerr << "\n";
      return fail(make_error(errc::timeout, fmt::format("distribution {} run {} is still {} after --timeout {}s", id,
                                                        text_of(o, "run_no"), status, timeout_s), "timeout"));
    }
    std::this_thread::sleep_for(watch_interval);
  }
}

int run_distributions(const std::string& cmd, common_flags& flags, dist_args& a) {
  if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
  int exit = 0;
  std::optional<remote_client> remote;
  auto be = open_backend<local_dist_backend>(flags, a.project, exit, remote, &remote_distributions);
  if (!be) return exit;

  if (cmd == "list") {
    if (a.page < 1 || a.page_size < 1 || a.page_size > 200)
      return usage("page must be >= 1 and page-size from 1 to 200", "page_size");
    auto r = be->list(a.page, a.page_size);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    text_table t{{"ID", "NAME", "STATUS", "RUN", "TARGETS", "CREATED", "ERROR"}, {}, {24, 40, 10, 5, 7, 19, 60}};
    for (const auto& v : r->as_object().at("items").as_array()) {
      const auto& d = v.as_object();
      const auto* targets = d.if_contains("target_ids");
      t.rows.push_back({text_of(d, "id"), text_of(d, "name"), text_of(d, "status"), text_of(d, "run_no"),
                        targets && targets->is_array() ? std::to_string(targets->as_array().size()) : "",
                        time_cell(d.if_contains("created_at")), text_of(d, "error")});
    }
    std::cout << render(t);
    return 0;
  }
  if (cmd == "show") {
    auto r = be->get(a.id);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    const auto& d = r->as_object();
    text_table t{{"FIELD", "VALUE"}, {}, {}};
    for (const auto* k : {"id", "name", "status", "run_no", "mode", "certificate_id", "error"})
      if (auto v = text_of(d, k); !v.empty()) t.rows.push_back({k, v});
    t.rows.push_back({"created", time_cell(d.if_contains("created_at"))});
    if (d.contains("run_started_at")) t.rows.push_back({"run_started", time_cell(d.if_contains("run_started_at"))});
    if (d.contains("run_finished_at")) t.rows.push_back({"run_finished", time_cell(d.if_contains("run_finished_at"))});
    if (d.contains("summary")) t.rows.push_back({"progress", progress_line(d, false)});
    std::cout << render(t);
    return 0;
  }
  if (cmd == "execute" || cmd == "retry-failed" || cmd == "rollback" || cmd == "retry-targets") {
    // retry-targets: the body names what the flags named; neither or both is the API's 400.
    auto redrive_body = [&] {
      boost::json::object b;
      if (!a.job.empty()) b["job_id"] = a.job;
      if (!a.targets.empty()) {
        boost::json::array ids;
        for (const auto& t : a.targets) ids.emplace_back(t);
        b["target_ids"] = std::move(ids);
      }
      return boost::json::value(std::move(b));
    };
    auto r = cmd == "execute"          ? be->execute(a.id)
             : cmd == "retry-failed"   ? be->retry_failed(a.id)
             : cmd == "retry-targets"  ? be->retry_targets(a.id, redrive_body())
                                       : be->rollback(a.id, a.run);
    if (!r) return fail(r.error());
    print(*r);  // {distribution_id, run_no, mode, job_ids}: what a script needs to follow it
    std::cout.flush();
    if (!a.wait) return 0;
    return follow_run(*be, a.id, *r, a.timeout_s);
  }
  if (cmd == "cancel") {
    auto r = be->cancel(a.id);
    if (!r) return fail(r.error());
    print(*r);
    return 0;
  }
  if (cmd == "results") {
    if (a.page < 1 || a.page_size < 1 || a.page_size > 200)
      return usage("page must be >= 1 and page-size from 1 to 200", "page_size");
    auto r = be->results(a.id, a.run, a.page, a.page_size, a.status, a.error_class);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    text_table t{{"TARGET", "STATUS", "ERROR CLASS", "FINISHED", "ERROR"}, {}, {24, 12, 16, 19, 80}};
    const auto& o = r->as_object();
    if (const auto* items = o.if_contains("items"); items && items->is_array())
      for (const auto& v : items->as_array()) {
        const auto& x = v.as_object();
        t.rows.push_back({text_of(x, "target_id"), text_of(x, "status"), text_of(x, "error_class"),
                          time_cell(x.if_contains("finished_at")), text_of(x, "error")});
      }
    std::cout << render(t);
    std::cout << fmt::format("run {}: {} results{}\n", text_of(o, "run"), text_of(o, "total"),
                             a.status.empty() && a.error_class.empty() ? "" : " matching the filter");
    return 0;
  }
  return to_int(exit_code::usage);
}

// A word of the command line that no command or flag took (CLI11 keeps those as "remaining"),
// said in words with the closest known name: `certfleet jbos` → did you mean "jobs"?
std::optional<std::string> unknown_word_hint(CLI::App& app) {
  CLI::App* at = &app;
  std::string path = "certfleet";
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (auto* sub : at->get_subcommands())
      if (sub->parsed()) {
        at = sub;
        path += " " + sub->get_name();
        deeper = true;
        break;
      }
  }
  // What the deepest command did not take. Under a command group (jobs, kek, …) a word is the
  // mistyped command and the flags after it are its; under a command an unknown flag's value
  // comes back too ("x --stauts"): the flag is the mistake.
  auto rest = at->remaining();
  if (rest.empty()) rest = app.remaining();
  if (rest.empty()) return std::nullopt;
  const bool group = !at->get_subcommands([](const CLI::App*) { return true; }).empty();
  const auto dashed = std::find_if(rest.begin(), rest.end(), [](const std::string& w) { return w.starts_with("-"); });
  const std::string word = group || dashed == rest.end() ? rest.front() : *dashed;
  std::vector<std::string> known;
  const bool flag = word.starts_with("-");
  if (flag) {
    for (const auto* o : at->get_options())
      for (const auto& name : o->get_lnames()) known.push_back("--" + name);
  } else {
    for (const auto* sub : at->get_subcommands([](const CLI::App*) { return true; })) known.push_back(sub->get_name());
  }
  if (!flag && known.empty()) return std::nullopt;  // a stray argument: CLI11's message says it
  const std::string what = flag ? "flag" : "command";
  std::string out = fmt::format("unknown {} \"{}\" for {}", what, word.substr(0, 64), path);
  const auto word_only = flag ? word.substr(0, word.find('=')) : word;
  if (auto near = closest_word(word_only, known)) out += fmt::format("; did you mean \"{}\"?", *near);
  out += fmt::format(" ({} --help lists them)", path);
  return out;
}

}  // namespace

// `certfleet certificates|targets|credentials|settings …`: over the API only.
int run_catalog(const std::string& kind, const std::string& cmd, common_flags& flags, const catalog_args& a) {
  if (!flags.remote.wanted())
    return usage(fmt::format("`certfleet {}` works over the API: give --server URL (or CERTFLEET_ADDR) and a token; on "
                             "the server itself --server https://127.0.0.1:PORT (docs/cli.md, Remote mode)",
                             kind),
                 "server");
  auto c = remote_client::open(flags.remote);
  if (!c) return fail(c.error());
  if (kind == "settings") return remote_settings(*c, cmd, a);
  if (cmd == "upload" && a.id.empty() && a.name.empty())
    return usage("upload needs --name for a new certificate, or --id for a new version of one", "name");
  return remote_catalog(*c, kind, cmd, a);
}

int run_cli(int argc, char** argv) {
  CLI::App app{"certfleet: durable jobs and certificate distribution to server fleets"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and exit");

  common_flags flags;
  auto add_common = [&](CLI::App* c) {
    c->add_option("--config", flags.config, "TOML config file");
    c->add_option("--data", flags.overrides["data"], "Data directory (default ./var)");
    c->add_option("--store", flags.overrides["store"], "sqlite (default) or a mongodb:// URI (docs/operations-mongodb.md)");
    c->add_option("--set", flags.sets, "NAME=VALUE: any process setting (docs/configuration.md)");
  };
  // Remote mode (remote.hpp): on the commands that work over the API.
  auto add_remote = [&](CLI::App* c) {
    c->add_option("--server", flags.remote.server, "Talk to this server's API (https://HOST:PORT) instead of the store")
        ->envname("CERTFLEET_ADDR");
    c->add_option("--token", flags.remote.token, "API token for --server (better: CERTFLEET_TOKEN or --token-file)")
        ->envname("CERTFLEET_TOKEN");
    c->add_option("--token-file", flags.remote.token_file, "File holding the API token for --server")
        ->envname("CERTFLEET_TOKEN_FILE");
    c->add_option("--ca-cert", flags.remote.ca_cert, "PEM file of a CA to trust for --server (besides the system's)")
        ->envname("CERTFLEET_CACERT");
  };

  // --json, and -o/--output json|table|wide (as kubectl has it): json is --json; wide adds
  // columns to the lists that have more to show (jobs, tokens); table is the default.
  bool wide = false;
  auto add_json = [&](CLI::App* c, bool& json, const char* help) {
    c->add_flag("--json", json, help);
    c->add_option_function<std::string>(
         "-o,--output", [&json, &wide](const std::string& v) { json = v == "json"; wide = v == "wide"; },
         "json, table (default) or wide")
        ->check(CLI::IsMember({"json", "table", "wide"}));
  };

  auto* serve_cmd = app.add_subcommand("serve", "Run the server");
  add_common(serve_cmd);
  serve_cmd->add_option("--mode", flags.overrides["mode"], "api|worker|scheduler|all (default all)");
  serve_cmd->add_option("--listen", flags.overrides["listen"], "ADDR:PORT (default 127.0.0.1:8080)");

  auto* jobs = app.add_subcommand("jobs", "Inspect and act on jobs in the store");
  jobs->require_subcommand(1);
  jobs_args ja;
  std::string jobs_cmd;
  auto sub = [&](const char* name, const char* help) {
    auto* c = jobs->add_subcommand(name, help);
    add_common(c);
    add_remote(c);
    c->add_option("--project", ja.project, "Project name (default: default)");
    c->callback([&, name] { jobs_cmd = name; });
    return c;
  };
  auto* list = sub("list", "List jobs, newest first (a table; --json for scripts)");
  list->add_option("--status", ja.status, "all|pending|active|completed|failed|dead|cancelled");
  list->add_option("--type", ja.type, "Job type");
  list->add_option("--page", ja.page, "Page, from 1");
  list->add_option("--page-size", ja.page_size, "Jobs per page");
  add_json(list, ja.json, "Print the page as JSON");
  auto* show = sub("show", "Show one job");
  show->add_option("id", ja.id, "Job id")->required();
  add_json(show, ja.json, "Print the job as JSON");
  show->add_flag("--watch", ja.watch, "Follow the job until it ends; the exit code says how it ended");
  show->add_option("--timeout", ja.timeout_s, "With --watch: give up after this many seconds (exit 7); 0: no limit");
  auto* enq = sub("enqueue", "Enqueue a job");
  enq->add_option("--type", ja.type, "Job type")->required();
  enq->add_option("--payload", ja.payload, "JSON object");
  enq->add_option("--key", ja.key, "Idempotency key");
  enq->add_option("--run-at", ja.run_at, "Earliest start, ms since the epoch");
  enq->add_option("--count", ja.count, "Enqueue this many identical jobs");
  sub("retry", "Retry a failed or dead job")->add_option("id", ja.id, "Job id")->required();
  sub("cancel", "Cancel a job")->add_option("id", ja.id, "Job id")->required();
  auto* logs = sub("logs", "Read a job's log lines");
  logs->add_option("id", ja.id, "Job id")->required();
  logs->add_option("--after", ja.after, "Cursor: the seq of the last line already read");
  logs->add_option("--limit", ja.limit, "Lines at most (per page with --watch)");
  add_json(logs, ja.json, "Print pages as JSON {lines, next_cursor, done}");
  logs->add_flag("--watch", ja.watch, "Follow new lines until the job ends; the exit code says how it ended");
  logs->add_option("--timeout", ja.timeout_s, "With --watch: give up after this many seconds (exit 7); 0: no limit");

  std::string backup_to, restore_from;
  bool restore_force = false;
  auto* backup = app.add_subcommand("backup", "Copy the embedded store, consistently, while it runs");
  add_common(backup);
  backup->add_option("--to", backup_to, "Destination file (must not exist)")->required();
  auto* restore = app.add_subcommand("restore", "Put a backup in place as the store (no process may use it)");
  add_common(restore);
  restore->add_option("--from", restore_from, "A file made by certfleet backup")->required();
  restore->add_flag("--force", restore_force, "Replace an existing store");

  auto* dists = app.add_subcommand("distributions", "List, show and execute distributions; maintenance");
  dists->require_subcommand(1);
  dist_args da;
  std::string dist_cmd;
  auto dsub = [&](const char* name, const char* help) {
    auto* c = dists->add_subcommand(name, help);
    add_common(c);
    add_remote(c);
    c->add_option("--project", da.project, "Project name (default: default)");
    c->callback([&, name] { dist_cmd = name; });
    return c;
  };
  auto* dlist = dsub("list", "List distributions (a table; --json for scripts)");
  dlist->add_option("--page", da.page, "Page, from 1");
  dlist->add_option("--page-size", da.page_size, "Distributions per page");
  add_json(dlist, da.json, "Print the page as JSON");
  auto* dshow = dsub("show", "Show a distribution and its current run");
  dshow->add_option("id", da.id, "Distribution id")->required();
  add_json(dshow, da.json, "Print the distribution as JSON");
  // The commands that open a run; each can follow it to its end.
  auto run_cmd = [&](const char* name, const char* help) {
    auto* c = dsub(name, help);
    c->add_option("id", da.id, "Distribution id")->required();
    c->add_flag("--wait", da.wait, "Follow the run with a progress bar on stderr; the exit code says how it ended");
    c->add_option("--timeout", da.timeout_s, "With --wait: give up after this many seconds (exit 7); 0: no limit");
    return c;
  };
  run_cmd("execute", "Start a run (a worker process delivers it); prints {run_no, job_ids}");
  run_cmd("retry-failed", "Run the failed and cancelled targets of the last run again");
  auto* dredrive = run_cmd("retry-targets",
                           "Re-drive failed targets of the last run, once it has ended, in that run: one child job's "
                           "(--job) or named ones (--target)");
  dredrive->add_option("--job", da.job, "A job of the last run: its failed and cancelled targets");
  dredrive->add_option("--target", da.targets, "A failed or cancelled target of the last run (repeat for more)");
  run_cmd("rollback", "Put back the files a run replaced (a rollback run)")
      ->add_option("--run", da.run, "The delivery run to undo (default: the last one)");
  dsub("cancel", "Cancel the running run: waiting jobs cancelled, running ones asked to stop")
      ->add_option("id", da.id, "Distribution id")->required();
  auto* dresults = dsub("results", "Per-target results of a run (a table; --json for the counts and long tail)");
  dresults->add_option("id", da.id, "Distribution id")->required();
  dresults->add_option("--run", da.run, "Run number (default: the current one)");
  dresults->add_option("--status", da.status, "Only results with this status (failed, succeeded, …)");
  dresults->add_option("--error-class", da.error_class, "Only results with this error class (auth, network, …)");
  dresults->add_option("--page", da.page, "Page, from 1");
  dresults->add_option("--page-size", da.page_size, "Results per page (at most 200)");
  add_json(dresults, da.json, "Print the page as JSON");
  auto* reconcile_cmd = dists->add_subcommand("reconcile", "Report finished children and close runs left open");
  add_common(reconcile_cmd);
  bool sessions_json = false;
  auto* sessions_cmd = dists->add_subcommand("sessions", "SSH sessions held per destination now (every worker)");
  add_common(sessions_cmd);
  add_json(sessions_cmd, sessions_json, "Print them as JSON");

  bool workers_json = false;
  auto* workers_cmd = app.add_subcommand("workers", "The worker registry: live workers, dead ones and the jobs they gave back");
  add_common(workers_cmd);
  add_json(workers_cmd, workers_json, "Print them as JSON");

  auto* token = app.add_subcommand("token", "Create, list and revoke API access tokens");
  token->require_subcommand(1);
  token_args ta;
  std::string token_cmd;
  auto tsub = [&](const char* name, const char* help) {
    auto* c = token->add_subcommand(name, help);
    add_common(c);
    add_remote(c);
    c->callback([&, name] { token_cmd = name; });
    return c;
  };
  auto* tcreate = tsub("create", "Create a token; its text is printed once");
  tcreate->add_option("--project", ta.project, "Project name (default: default)");
  tcreate->add_option("--role", ta.role, "viewer|operator|admin|owner")->required();
  tcreate->add_flag("--system", ta.system, "System admin: every project and the system-wide settings");
  tcreate->add_option("--name", ta.name, "A note saying what the token is for");
  tcreate->add_option("--ttl", ta.ttl, "Expires after: seconds or 12h, 90d; 0 never (default: never; with --server 90d)");
  auto* tlist = tsub("list", "List tokens (never their text)");
  tlist->add_option("--project", ta.project, "Project name (default: default)");
  tlist->add_flag("--all", ta.all, "Every project's tokens");
  add_json(tlist, ta.json, "Print them as JSON");
  auto* trevoke = tsub("revoke", "Revoke a token");
  trevoke->add_option("id", ta.id, "Token id")->required();
  trevoke->add_option("--project", ta.project, "With --server: the token's project (default: default)");

  // Catalog objects and settings: over the API only (remote_catalog.hpp).
  catalog_args ca;
  std::string catalog_kind, catalog_cmd;
  auto catalog_group = [&](const char* kind, const char* help) {
    auto* g = app.add_subcommand(kind, help);
    g->require_subcommand(1);
    auto csub = [&, g, kind](const char* name, const char* sub_help, bool with_id) {
      auto* c = g->add_subcommand(name, sub_help);
      add_remote(c);
      if (std::string_view(kind) != "settings") c->add_option("--project", ca.project, "Project name (default: default)");
      if (with_id) c->add_option("id", ca.id, "Object id")->required();
      c->callback([&, kind, name] {
        catalog_kind = kind;
        catalog_cmd = name;
      });
      return c;
    };
    return csub;
  };
  for (const auto& [kind, what] : {std::pair{"certificates", "certificates"}, std::pair{"targets", "targets (ssh, file, webhook)"},
                                   std::pair{"credentials", "SSH keys and passwords (never shown)"}}) {
    auto csub = catalog_group(kind, fmt::format("List, show, create and delete {} over the API (--server)", what).c_str());
    add_json(csub("list", "List them (a table; -o json for the API's page)", false), ca.json, "Print the page as JSON");
    csub("show", "One, as the API answers it (JSON)", true);
    csub("delete", "Delete one (refused while something uses it)", true);
    if (std::string_view(kind) != "certificates")
      csub("create", "Create one from the API's request body (docs/api.md)", false)
          ->add_option("--from-file", ca.from_file, "A JSON file with the body; - reads stdin")
          ->required();
    if (std::string_view(kind) == "certificates") {
      auto* up = csub("upload", "Upload a certificate and its key (or, with --id, a new version of one)", false);
      up->add_option("--name", ca.name, "Name of a new certificate");
      up->add_option("--id", ca.id, "An existing certificate: upload a new version of it");
      up->add_option("--cert", ca.cert_file, "The leaf certificate, PEM file (- : stdin)")->required();
      up->add_option("--key", ca.key_file, "Its private key, PEM file (sealed at rest, never returned)")->required();
      up->add_option("--chain", ca.chain_file, "Intermediates, PEM file");
      auto* is = csub("issue", "Issue a certificate over ACME (DNS-01); prints {certificate_id, job_id}", false);
      is->add_option("--name", ca.name, "Name of the certificate")->required();
      is->add_option("--domain", ca.domains, "A domain (repeat for more; *.example.com for a wildcard)")->required();
      is->add_option("--acme-account", ca.acme_account, "ACME account id")->required();
      is->add_option("--dns-provider", ca.dns_provider, "DNS provider id")->required();
      is->add_option("--key-type", ca.key_type, "ecdsa-p256 (default), ecdsa-p384, rsa-2048, rsa-3072");
      is->add_option("--profile", ca.profile, "An ACME profile the CA offers");
      csub("renew", "Renew an ACME certificate now (enqueues renew_certificate)", true);
      csub("revoke", "Revoke an ACME certificate at its CA", true)
          ->add_option("--reason", ca.reason, "keyCompromise, superseded, cessationOfOperation, … or 0-10");
      csub("approve", "Approve an issue request that awaits approval (an admin other than the requester)", true);
      csub("reject", "Reject an issue request that awaits approval, with a reason the requester reads", true)
          ->add_option("--reason", ca.reason, "Why (1 to 500 characters)")
          ->required();
    }
  }
  {
    auto csub = catalog_group("settings", "Read and change the system settings (system-admin token), or with --project a project's (its admins)");
    auto project_flag = [&](CLI::App* c) {
      c->add_option_function<std::string>(
          "--project", [&](const std::string& p) { ca.project = p; ca.settings_project = true; },
          "That project's settings (issuance_requires_approval) instead of the system-wide ones");
    };
    auto* get = csub("get", "Every system setting, or one (prints its value)", false);
    get->add_option("name", ca.name, "A setting's name");
    add_json(get, ca.json, "Print them as JSON");
    project_flag(get);
    auto* set = csub("set", "Change settings: NAME=VALUE…, all of them or none", false);
    set->add_option("assignments", ca.assignments, "NAME=VALUE (one or more)")->required();
    project_flag(set);
  }

  auto* project = app.add_subcommand("project", "Create, list and delete projects");
  project->require_subcommand(1);
  std::string project_cmd, project_name;
  auto psub = [&](const char* name, const char* help, bool with_name) {
    auto* c = project->add_subcommand(name, help);
    add_common(c);
    add_remote(c);
    if (with_name) c->add_option("name", project_name, "Project name: 1-63 of a-z, 0-9, '-'")->required();
    c->callback([&, name] { project_cmd = name; });
    return c;
  };
  psub("create", "Create a project (then: certfleet token create --project NAME …)", true);
  bool project_json = false;
  add_json(psub("list", "List projects", false), project_json, "Print them as JSON");
  psub("delete", "Delete a project that has no objects, distributions or unfinished jobs left", true);

  auto* kek_cmd = app.add_subcommand("kek", "Rotate the key-encryption key, follow the rotation, retire old versions");
  kek_cmd->require_subcommand(1);
  kek_args ka;
  std::string kek_sub;
  auto ksub = [&](const char* name, const char* help) {
    auto* c = kek_cmd->add_subcommand(name, help);
    add_common(c);
    c->callback([&, name] { kek_sub = name; });
    return c;
  };
  ksub("rotate", "Add a new key version as primary and start re-sealing every secret with it");
  add_json(ksub("status", "Secrets per collection at the primary version, and whether a rotation runs"), ka.json,
           "Print it as JSON");
  ksub("retire", "Remove a key version from the key file once no secret uses it")
      ->add_option("version", ka.version, "Key version (N of vN)")
      ->required()
      ->check(CLI::Range(1u, 4294967295u));

  auto* store_cmd = app.add_subcommand("store", "The store itself");
  store_cmd->require_subcommand(1);
  auto* store_init = store_cmd->add_subcommand(
      "init", "Create the store, its key file and the default project where none is (commands other than serve never do)");
  add_common(store_init);
  auto* store_check = store_cmd->add_subcommand(
      "check", "Self-test a MongoDB cluster in a scratch database (claims, idempotency, transactions, guards)");
  add_common(store_check);

  doctor_flags doctor_args;
  auto* doctor = app.add_subcommand(
      "doctor", "Check config, key file, store, listeners, TLS, clock and egress (exit 0 OK, 1 WARN, 2 FAIL)");
  add_common(doctor);
  doctor->add_flag("--targets", doctor_args.targets, "Also connect to each SSH target and compare its host key");
  doctor->add_option("--project", doctor_args.project, "With --targets: only this project's targets");

  auto* completion =
      app.add_subcommand("completion", "Print a shell completion script: certfleet completion bash|zsh|fish");
  std::string completion_shell;
  completion->add_option("shell", completion_shell, "bash, zsh or fish")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (auto hint = unknown_word_hint(app)) {
      std::cerr << "certfleet: " << *hint << "\n";
      return to_int(exit_code::usage);
    }
    // CLI11's own codes (106 and the like) are not ours: any refusal of the command line is usage.
    const int code = app.exit(e);
    return code == 0 ? 0 : to_int(exit_code::usage);
  }
  // Unset flags must not override the config file or the environment.
  for (auto it = flags.overrides.begin(); it != flags.overrides.end();)
    it = it->second.empty() ? flags.overrides.erase(it) : std::next(it);

  if (version) {
    const auto& b = this_build();
    std::cout << "certfleet " << b.version << "\ncommit " << b.commit << " (" << b.date << ")\ncompiler " << b.compiler
              << "\n";
    return 0;
  }
  if (serve_cmd->parsed()) {
    auto settings = settings_from(flags);
    if (!settings) {
      print_error(settings.error());
      return to_int(exit_code::usage);
    }
    return serve(*settings);
  }
  if (completion->parsed()) {
    auto script = completion_script(app, completion_shell);
    if (!script) return usage(fmt::format("shell must be {}", completion_shells), "shell");
    std::cout << *script;
    return 0;
  }
  // The other commands print JSON on stdout for scripts: log lines (a data directory's mode,
  // a store file tightened) go to stderr, not spdlog's default stdout.
  log::init("info");
  if (doctor->parsed()) {
    doctor_args.config = flags.config;
    return run_doctor(settings_from(flags), doctor_args);
  }
  ja.wide = ta.wide = wide;
  if (jobs->parsed()) return run_jobs(jobs_cmd, flags, ja);
  if (store_init->parsed()) return run_store_init(flags);
  if (store_check->parsed()) {
    auto settings = settings_from(flags);
    if (!settings) {
      print_error(settings.error());
      return to_int(exit_code::usage);
    }
    return run_store_check(*settings);
  }
  if (backup->parsed()) return run_backup(flags, backup_to);
  if (restore->parsed()) return run_restore(flags, restore_from, restore_force);
  if (token->parsed()) return run_token(token_cmd, flags, ta);
  if (!catalog_kind.empty()) return run_catalog(catalog_kind, catalog_cmd, flags, ca);
  if (project->parsed()) return run_project(project_cmd, flags, project_name, project_json);
  if (reconcile_cmd->parsed()) return run_reconcile(flags);
  if (sessions_cmd->parsed()) return run_sessions(flags, sessions_json);
  if (workers_cmd->parsed()) return run_workers(flags, workers_json);
  if (!dist_cmd.empty()) return run_distributions(dist_cmd, flags, da);
  if (!kek_sub.empty()) return run_kek(kek_sub, flags, ka);
  std::cout << app.help();
  return 0;
}

}  // namespace certfleet::app
