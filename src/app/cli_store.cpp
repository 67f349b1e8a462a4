// The commands on the store itself: projects, backup and restore, reconcile, sessions, store init,
// workers.
#include "cli_common.hpp"

namespace certfleet::app::detail {

namespace {

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

}  // namespace

// `certfleet project create|list|delete`: like tokens, on the store directly, each change audited
// with actor "cli" (in the `default` project: the project itself may be gone afterwards).
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

}  // namespace certfleet::app::detail
