// The command line: `certfleet serve`, `certfleet jobs …`, `certfleet token …`, `certfleet --version`.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/app/app.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/log.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/store/maintenance.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/session_slots.hpp"
#include "doctor.hpp"
#include "wiring.hpp"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

namespace certfleet::app {

namespace {

struct common_flags {
  std::string config;
  std::map<std::string, std::string> overrides;
  std::vector<std::string> sets;
};

result<settings_map> settings_from(common_flags& f) {
  for (const auto& kv : f.sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos)
      return make_error(errc::config_invalid, fmt::format("--set {}: expected NAME=VALUE", kv), "set");
    f.overrides[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return load_config(f.config, f.overrides);
}

void print_error(const error& e) {
  std::cerr << "certfleet: " << e.message;
  if (!e.field.empty() && e.message.find(e.field) == std::string::npos) std::cerr << " (field " << e.field << ")";
  std::cerr << "\n";
}

int exit_code(const error& e) {
  switch (e.value()) {
    case errc::invalid_argument:
    case errc::config_invalid:
    case errc::unknown_job_type:
    case errc::payload_too_large: return 2;
    case errc::not_found: return 3;
    case errc::conflict: return 4;
    default: return 1;
  }
}

// How a command answers: a failure on stderr with its exit code, a result as one JSON line.
int fail(const error& e) {
  print_error(e);
  return exit_code(e);
}
void print(const boost::json::value& v) { std::cout << boost::json::serialize(v) << "\n"; }

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
    exit = 2;
    return std::nullopt;
  }
  auto st = open_store(*settings);
  if (!st) {
    print_error(st.error());
    exit = 1;
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
};

int run_jobs(const std::string& cmd, common_flags& flags, jobs_args& a) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  const settings_map& settings = cli->settings;
  store::store& store = *cli->store;
  queue::handler_registry handlers;
  register_handlers(handlers, settings);
  const auto& clock = system_clock();
  queue::queue_service queue(store, handlers, clock,
                             static_cast<int>(settings.integer("job_retry_per_minute")));

  auto project = run_sync([&] { return project_for_cli(store, a.project, clock.now_ms()); });
  if (!project) return fail(project.error());
  const std::string pid = project->id;

  if (cmd == "list") {
    store::job_filter f{pid, std::nullopt, a.type, a.page, a.page_size};
    if (!a.status.empty() && a.status != "all") {
      f.status = store::parse_job_status(a.status);
      if (!f.status)
        return fail(make_error(errc::invalid_argument,
                               "status must be one of all, pending, active, completed, failed, dead, cancelled", "status"));
    }
    if (a.page < 1 || a.page_size < 1 || a.page_size > 1000)
      return fail(make_error(errc::invalid_argument, "page must be >= 1 and page-size from 1 to 1000", "page_size"));
    auto r = run_sync([&] { return store.jobs().list(f); });
    if (!r) return fail(r.error());
    boost::json::array items;
    for (const auto& j : r->items) items.push_back(queue::to_json(j));
    print(boost::json::object{{"items", std::move(items)}, {"page", a.page}, {"page_size", a.page_size}, {"total", r->total}});
    return 0;
  }
  if (cmd == "show") {
    auto r = run_sync([&] { return store.jobs().get(pid, a.id); });
    if (!r) return fail(r.error());
    print(queue::to_json(*r));
    return 0;
  }
  if (cmd == "enqueue") {
    if (a.count < 1 || a.count > 10'000'000)
      return fail(make_error(errc::invalid_argument, "count must be from 1 to 10000000", "count"));
    queue::enqueue_request req{pid, a.type, a.payload};
    if (!a.key.empty() || a.count == 1) {
      if (!a.key.empty()) req.idempotency_key = a.key;
    }
    req.run_at = a.run_at;
    req.triggered_by = "cli";
    if (a.count == 1) {
      auto r = run_sync([&] { return queue.enqueue(req, queue::caller::user); });
      if (!r) return fail(r.error());
      auto o = queue::to_json(r->job);
      o["created"] = r->created;
      print(o);
      return 0;
    }
    // Many: validated once, inserted in chunks of one transaction each.
    if (req.idempotency_key) return fail(make_error(errc::invalid_argument, "--key cannot be used with --count", "key"));
    auto prepared = queue.prepare(req, queue::caller::user);
    if (!prepared) return fail(prepared.error());
    int left = a.count;
    while (left > 0) {
      int n = std::min(left, 5000);
      std::vector<store::new_job> batch(static_cast<std::size_t>(n), *prepared);
      auto r = run_sync([&] { return store.jobs().enqueue_many(std::move(batch), clock.now_ms()); });
      if (!r) return fail(r.error());
      left -= n;
    }
    print(boost::json::object{{"enqueued", a.count}, {"type", a.type}});
    return 0;
  }
  if (cmd == "retry") {
    auto r = run_sync([&] { return queue.retry(pid, a.id); });
    if (!r) return fail(r.error());
    print(queue::to_json(*r));
    return 0;
  }
  if (cmd == "cancel") {
    auto r = run_sync([&] { return queue.cancel(pid, a.id); });
    if (!r) return fail(r.error());
    auto o = queue::to_json(r->job);
    o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
    print(o);
    return 0;
  }
  if (cmd == "logs") {
    if (a.after < 0) return fail(make_error(errc::invalid_argument, "after must not be negative", "after"));
    if (a.limit < 1 || a.limit > 1000) return fail(make_error(errc::invalid_argument, "limit must be from 1 to 1000", "limit"));
    auto job = run_sync([&] { return store.jobs().get(pid, a.id); });
    if (!job) return fail(job.error());
    auto r = run_sync([&] { return store.jobs().read_logs(a.id, a.after, a.limit); });
    if (!r) return fail(r.error());
    boost::json::array lines;
    for (const auto& l : r->lines) lines.push_back(queue::to_json(l));
    print(boost::json::object{{"lines", std::move(lines)}, {"next_cursor", r->next_cursor},
                              {"done", store::is_terminal(job->status)}});
    return 0;
  }
  return 2;
}

struct token_args {
  std::string project = "default";
  std::string role, name, id;
  bool system = false;
  bool all = false;
};

boost::json::object token_json(const store::token_record& t, const std::string& project_name) {
  return boost::json::object{{"id", t.id},
                             {"project", project_name},
                             {"project_id", t.project_id},
                             {"role", std::string(store::to_string(t.token_role))},
                             {"system", t.system},
                             {"name", t.name},
                             {"created_by", t.created_by},
                             {"created_at", format_iso8601(t.created_at)},
                             {"revoked_at", t.revoked_at ? boost::json::value(format_iso8601(t.revoked_at))
                                                         : boost::json::value(nullptr)}};
}

// `certfleet token create|list|revoke`: tokens are managed on the store directly (whoever can
// read the data directory owns the store anyway); each change is audited with actor "cli".
int run_token(const std::string& cmd, common_flags& flags, token_args& a) {
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
    auto project = run_sync([&] { return project_for_cli(store, a.project, clock.now_ms()); });
    if (!project) return fail(project.error());
    auto issued = run_sync([&] {
      return api::issue_token(store.auth(), project->id, *role, a.system, a.name, "cli", clock);
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
    print(boost::json::object{{"items", std::move(items)}});
    return 0;
  }
  if (cmd == "revoke") {
    auto r = run_sync([&] { return store.auth().revoke_token(a.id, clock.now_ms()); });
    if (!r) return fail(r.error());
    audit(r->project_id, "token.revoke", "token/" + r->id, "ok");
    print(token_json(*r, name_of(r->project_id)));
    return 0;
  }
  return 2;
}

// `certfleet project create|list|delete`: like tokens, on the store directly, each change audited
// with actor "cli" (in the `default` project: the project itself may be gone afterwards).
int run_project(const std::string& cmd, common_flags& flags, const std::string& name) {
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
    boost::json::array items;
    for (const auto& p : *ps) items.push_back(view(p));
    print(boost::json::object{{"items", std::move(items)}});
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
  return 2;
}

// `certfleet backup --to FILE`: a consistent online copy of the embedded store (VACUUM INTO),
// safe while servers run. `certfleet restore --from FILE`: puts a backup in place as the store;
// only while no certfleet process uses the data directory.
int run_backup(common_flags& flags, const std::string& to) {
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
  auto settings = settings_from(flags);
  if (!settings) {
    print_error(settings.error());
    return 2;
  }
  namespace fs = std::filesystem;
  fs::path dir(settings->text("data"));
  fs::path db = dir / "certfleet.db";
  if (!fs::is_regular_file(from)) {
    print_error(make_error(errc::invalid_argument, fmt::format("{} is not a file", from), "from"));
    return 2;
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
      return 2;
    }
    (*check)->close();
  }
  if (fs::exists(db) && !force) {
    print_error(make_error(errc::conflict,
                           fmt::format("{} exists; stop every certfleet process using {} and pass --force to replace it",
                                       db.string(), dir.string()),
                           "force"));
    return 4;
  }
  if (auto made = make_data_dir(dir, false); !made) {
    print_error(made.error());
    return 4;
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
    return 1;
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
int run_sessions(common_flags& flags) {
  int exit = 0;
  auto cli = open_cli(flags, exit);
  if (!cli) return exit;
  auto live = run_sync([&] { return cli->store->session_slots().live(system_clock().now_ms()); });
  if (!live) return fail(live.error());
  boost::json::array items;
  for (const auto& [destination, n] : *live) items.push_back(boost::json::object{{"destination", destination}, {"sessions", n}});
  print(boost::json::object{{"items", std::move(items)}});
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"certfleet: durable jobs and certificate distribution to server fleets"};
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version and exit");

  common_flags flags;
  auto add_common = [&](CLI::App* c) {
    c->add_option("--config", flags.config, "TOML config file");
    c->add_option("--data", flags.overrides["data"], "Data directory (default ./var)");
    c->add_option("--set", flags.sets, "NAME=VALUE: any process setting (docs/configuration.md)");
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
    c->add_option("--project", ja.project, "Project name (default: default)");
    c->callback([&, name] { jobs_cmd = name; });
    return c;
  };
  auto* list = sub("list", "List jobs, newest first");
  list->add_option("--status", ja.status, "all|pending|active|completed|failed|dead|cancelled");
  list->add_option("--type", ja.type, "Job type");
  list->add_option("--page", ja.page, "Page, from 1");
  list->add_option("--page-size", ja.page_size, "Jobs per page");
  sub("show", "Show one job")->add_option("id", ja.id, "Job id")->required();
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
  logs->add_option("--limit", ja.limit, "Lines at most");

  std::string backup_to, restore_from;
  bool restore_force = false;
  auto* backup = app.add_subcommand("backup", "Copy the embedded store, consistently, while it runs");
  add_common(backup);
  backup->add_option("--to", backup_to, "Destination file (must not exist)")->required();
  auto* restore = app.add_subcommand("restore", "Put a backup in place as the store (no process may use it)");
  add_common(restore);
  restore->add_option("--from", restore_from, "A file made by certfleet backup")->required();
  restore->add_flag("--force", restore_force, "Replace an existing store");

  auto* dists = app.add_subcommand("distributions", "Distribution maintenance");
  dists->require_subcommand(1);
  auto* reconcile_cmd = dists->add_subcommand("reconcile", "Report finished children and close runs left open");
  add_common(reconcile_cmd);
  auto* sessions_cmd = dists->add_subcommand("sessions", "SSH sessions held per destination now (every worker)");
  add_common(sessions_cmd);

  auto* token = app.add_subcommand("token", "Create, list and revoke API access tokens");
  token->require_subcommand(1);
  token_args ta;
  std::string token_cmd;
  auto tsub = [&](const char* name, const char* help) {
    auto* c = token->add_subcommand(name, help);
    add_common(c);
    c->callback([&, name] { token_cmd = name; });
    return c;
  };
  auto* tcreate = tsub("create", "Create a token; its text is printed once");
  tcreate->add_option("--project", ta.project, "Project name (default: default)");
  tcreate->add_option("--role", ta.role, "viewer|operator|admin|owner")->required();
  tcreate->add_flag("--system", ta.system, "System admin: every project and the system-wide settings");
  tcreate->add_option("--name", ta.name, "A note saying what the token is for");
  auto* tlist = tsub("list", "List tokens (never their text)");
  tlist->add_option("--project", ta.project, "Project name (default: default)");
  tlist->add_flag("--all", ta.all, "Every project's tokens");
  tsub("revoke", "Revoke a token")->add_option("id", ta.id, "Token id")->required();

  auto* project = app.add_subcommand("project", "Create, list and delete projects");
  project->require_subcommand(1);
  std::string project_cmd, project_name;
  auto psub = [&](const char* name, const char* help, bool with_name) {
    auto* c = project->add_subcommand(name, help);
    add_common(c);
    if (with_name) c->add_option("name", project_name, "Project name: 1-63 of a-z, 0-9, '-'")->required();
    c->callback([&, name] { project_cmd = name; });
    return c;
  };
  psub("create", "Create a project (then: certfleet token create --project NAME …)", true);
  psub("list", "List projects", false);
  psub("delete", "Delete a project that has no objects, distributions or unfinished jobs left", true);

  doctor_flags doctor_args;
  auto* doctor = app.add_subcommand(
      "doctor", "Check config, key file, store, listeners, TLS, clock and egress (exit 0 OK, 1 WARN, 2 FAIL)");
  add_common(doctor);
  doctor->add_flag("--targets", doctor_args.targets, "Also connect to each SSH target and compare its host key");
  doctor->add_option("--project", doctor_args.project, "With --targets: only this project's targets");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // Unset flags must not override the config file or the environment.
  for (auto it = flags.overrides.begin(); it != flags.overrides.end();)
    it = it->second.empty() ? flags.overrides.erase(it) : std::next(it);

  if (version) {
    std::cout << "certfleet " << CERTFLEET_VERSION << "\n";
    return 0;
  }
  if (serve_cmd->parsed()) {
    auto settings = settings_from(flags);
    if (!settings) {
      print_error(settings.error());
      return 2;
    }
    return serve(*settings);
  }
  // The other commands print JSON on stdout for scripts: log lines (a data directory's mode,
  // a store file tightened) go to stderr, not spdlog's default stdout.
  log::init("info");
  if (doctor->parsed()) {
    doctor_args.config = flags.config;
    return run_doctor(settings_from(flags), doctor_args);
  }
  if (jobs->parsed()) return run_jobs(jobs_cmd, flags, ja);
  if (backup->parsed()) return run_backup(flags, backup_to);
  if (restore->parsed()) return run_restore(flags, restore_from, restore_force);
  if (token->parsed()) return run_token(token_cmd, flags, ta);
  if (project->parsed()) return run_project(project_cmd, flags, project_name);
  if (reconcile_cmd->parsed()) return run_reconcile(flags);
  if (sessions_cmd->parsed()) return run_sessions(flags);
  std::cout << app.help();
  return 0;
}

}  // namespace certfleet::app
