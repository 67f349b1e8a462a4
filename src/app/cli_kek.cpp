// `certfleet kek …`: the key-encryption keyring (status, add, promote, rotate, retire) and the
// rules that keep two commands from changing it at once.
#include "cli_common.hpp"

namespace certfleet::app::detail {

namespace {

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

}  // namespace

// `certfleet kek rotate|status|retire` (DESIGN §11, docs/secrets.md): the keyring in the key file
// and the rotation jobs in the store.
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
        store.catalog(), [](store::catalog_read& rd) { return rd.meta(catalog::kek_rotation_meta_key); });
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
                               catalog::kek_orchestrate_payload(from, to)};
    req.idempotency_key = catalog::kek_orchestrate_key(from, to);
    req.triggered_by = queue::triggers::cli;
    auto prepared = queue.prepare(req, queue::caller::system);
    if (!prepared) return fail(prepared.error());
    const auto now = clock.now_ms();
    auto job = std::make_shared<store::job_record>();
    store::tx_fn start = [nj = *prepared, job, from, to, now](store::catalog_tx& tx) -> result<void> {
      auto e = tx.jobs().enqueue(nj, now);
      if (!e) return std::move(e).error();
      *job = e->job;
      return tx.set_meta(catalog::kek_rotation_meta_key,
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
  auto progress = catalog::rotation_progress(*counts, ring->version(), service::catalog_kinds());
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

}  // namespace certfleet::app::detail
