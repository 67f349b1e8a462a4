// The command line: `certfleet serve`, `certfleet jobs …`, `certfleet --version`.
#include "certfleet/app/app.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "wiring.hpp"

#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

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

struct jobs_args {
  std::string project = "default";
  std::string status, type, id, payload = "{}", key;
  int page = 1, page_size = 25, count = 1, limit = 100;
  std::int64_t after = 0, run_at = 0;
};

int run_jobs(const std::string& cmd, common_flags& flags, jobs_args& a) {
  auto settings = settings_from(flags);
  if (!settings) {
    print_error(settings.error());
    return 2;
  }
  auto st = open_store(*settings);
  if (!st) {
    print_error(st.error());
    return 1;
  }
  store::store& store = **st;
  queue::handler_registry handlers;
  register_handlers(handlers);
  const auto& clock = system_clock();
  queue::queue_service queue(store, handlers, clock,
                             static_cast<int>(settings->integer("job_retry_per_minute")));

  // The default project exists from the first use of a store, whichever command comes first.
  auto project = run_sync([&] {
    return a.project == "default" ? [&]() -> store::task<store::project> {
      auto p = co_await store.projects().ensure("default", clock.now_ms());
      if (!p) co_return std::move(p).error();
      co_return std::move(p->first);
    }()
                                  : store.projects().find_by_name(a.project);
  });
  if (!project) {
    print_error(project.error());
    return exit_code(project.error());
  }
  const std::string pid = project->id;
  auto print = [](const boost::json::value& v) { std::cout << boost::json::serialize(v) << "\n"; };
  auto fail = [&](const error& e) {
    print_error(e);
    return exit_code(e);
  };

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
  if (jobs->parsed()) return run_jobs(jobs_cmd, flags, ja);
  std::cout << app.help();
  return 0;
}

}  // namespace certfleet::app
