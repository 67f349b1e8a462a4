// The command line: `certfleet serve`, `certfleet jobs …`, `certfleet token …`, `certfleet --version`.
// Lists print an aligned table for people (--json: the JSON scripts read); exit codes come from
// one table (exit_codes.hpp, docs/cli.md).
#include "cli_common.hpp"

namespace certfleet::app {

using namespace detail;

namespace {

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
  if (cmd == "import" && a.dry_run) return import_targets(nullptr, a);
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
    if (std::string_view(kind) == "targets") {
      auto* im = csub("import", "Create many targets at once, all or none (JSON lines, CSV, or an Ansible INI inventory)", false);
      im->add_option("--from-file", ca.from_file, "A JSON-lines or CSV file of target bodies (- reads stdin)");
      im->add_option("--format", ca.format, "jsonl or csv (default: by the file's extension, .csv or else jsonl)");
      im->add_option("--ansible", ca.inventory, "An Ansible INI inventory: one SSH target per host");
      im->add_option("--template", ca.template_file, "With --ansible: a target body without name (JSON file)");
      im->add_option("--group", ca.group, "With --ansible: only this group's hosts (and its children's)");
      im->add_option("--known-hosts", ca.known_hosts, "With --ansible: an OpenSSH known_hosts file the host keys come from");
      im->add_flag("--dry-run", ca.dry_run, "Print the body that would be sent (JSON lines or CSV) and send nothing");
      add_json(im, ca.json, "Print the answer as JSON (the new ids)");
    }
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
