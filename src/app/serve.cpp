// Wiring of `certfleet serve`: store, queue, worker lanes, (API), signals, graceful shutdown.
#include "certfleet/api/server.hpp"
#include "certfleet/api/tls.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/app/app.hpp"
#include "certfleet/core/log.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/catalog/kek_rotation.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/checks/expiry.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/lifecycle/msca_jobs.hpp"
#include "certfleet/notify/send.hpp"
#include "certfleet/distribution/phase_metrics.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/scheduler/scheduler.hpp"
#include "certfleet/service/kinds.hpp"
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/store.hpp"
#include "sd_notify.hpp"
#include "wiring.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fcntl.h>
#include <malloc.h>
#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

namespace certfleet::app {

namespace asio = boost::asio;

void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

result<void> make_data_dir(const std::filesystem::path& dir, bool warn_if_open) {
  // 0700: the directory holds the store, the key file and the owner token (docs/secrets.md).
  // Parents are made as any directory; an existing data directory is left as the operator set
  // it (its files are 0600 either way), with a warning when others may list it.
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
    if (!ec && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) ec = std::error_code(errno, std::generic_category());
    if (!ec && ::chmod(dir.c_str(), 0700) != 0) ec = std::error_code(errno, std::generic_category());
    if (ec)
      return make_error(errc::config_invalid, fmt::format("data: cannot create {}: {}", dir.string(), ec.message()),
                        "data");
    return {};
  }
  struct stat sb {};
  if (warn_if_open && ::stat(dir.c_str(), &sb) == 0 && (sb.st_mode & 077) != 0)
    spdlog::warn("data directory {} has mode {:04o}: others can list it; certfleet creates it 0700 (chmod 700 {})",
                 dir.string(), sb.st_mode & 07777, dir.string());
  return {};
}

result<void> check_store_setting(const settings_map& s) {
  if (const auto& which = s.text("store"); which != "sqlite") {
    auto backend = store::mongodb_backend_for(which);
    if (!backend) return std::move(backend).error();
  }
  return {};
}

// SQLite is linked in; the MongoDB backend is a module loaded here, only for a MongoDB URI, so a
// process on SQLite never loads (and so never initialises) the MongoDB C driver.
result<std::unique_ptr<store::store>> open_store(const settings_map& s, store_access access) {
  if (const auto& uri = s.text("store"); uri != "sqlite") {
    auto backend = store::mongodb_backend_for(uri);
    if (!backend) return std::move(backend).error();
    store::mongodb_options o;
    o.uri = uri;
    o.threads = static_cast<int>(s.integer("store_threads"));
    o.server_selection_timeout_ms = static_cast<int>(s.integer("store_timeout_ms"));
    o.operation_timeout_ms = static_cast<int>(s.integer("store_timeout_ms"));
    return (*backend)->open(o);
  }
  std::filesystem::path dir(s.text("data"));
  store::sqlite_options o;
  o.read_only = access == store_access::read_only;
  if (!o.read_only)
    if (auto ok = make_data_dir(dir, false); !ok) return std::move(ok).error();
  o.path = (dir / "certfleet.db").string();
  o.readers = static_cast<int>(s.integer("store_readers"));
  o.busy_timeout_ms = static_cast<int>(s.integer("store_busy_timeout_ms"));
  o.synchronous_full = s.text("store_synchronous") == "full";
  return store::open_sqlite(o);
}

queue::worker_options worker_options_from(const settings_map& s) {
  queue::worker_options o;
  o.lease_ms = s.integer("lease_ms");
  o.main_concurrency = static_cast<int>(s.integer("worker_main_concurrency"));
  o.dist_concurrency = static_cast<int>(s.integer("worker_dist_concurrency"));
  o.claim_batch = static_cast<int>(s.integer("worker_claim_batch"));
  o.poll_ms = s.integer("worker_poll_ms");
  o.grace_ms = s.integer("shutdown_grace_ms");
  o.presence_ms = s.integer("worker_heartbeat_ms");
  o.dead_after_ms = s.integer("worker_dead_after_ms");
  o.version = CERTFLEET_VERSION;
  return o;
}

namespace {
// Extra trust anchors for webhook, notification and SMTP peers (a private CA; the tests' local
// one), read at start.
std::string extra_ca_pem() {
  std::string pem;
  if (const char* ca = std::getenv("CERTFLEET_EXTRA_CA_FILE")) {
    std::ifstream in(ca);
    pem.assign(std::istreambuf_iterator<char>(in), {});
  }
  return pem;
}

// A module's handler options, with what every module may be given filled in: the key, the CPU
// pool and the extra trust anchors (each only where the options have it).
template <class Options>
std::shared_ptr<Options> module_options(const kek* key, asio::thread_pool* cpu, const std::string& ca_pem) {
  auto o = std::make_shared<Options>();
  if constexpr (requires { o->key; }) o->key = key;
  if constexpr (requires { o->cpu; }) o->cpu = cpu;
  if constexpr (requires { o->ca_pem; }) o->ca_pem = ca_pem;
  return o;
}
}  // namespace

void register_handlers(queue::handler_registry& r, const settings_map& s, const kek* key, asio::thread_pool* cpu,
                       distribution::delivery_phase_metrics* phases) {
  const auto ca_pem = extra_ca_pem();
  queue::register_noop(r);
  scheduler::register_sweep_handler(r, s.integer("job_retention_s") * 1000, s.integer("audit_retention_s") * 1000, cpu,
                                    ca_pem, key);
  // Each module registers the handlers of the job types it owns (DESIGN §3's table).
  auto rotation = module_options<catalog::kek_rotation_options>(key, cpu, ca_pem);
  rotation->kinds = service::catalog_kinds();
  catalog::register_kek_rotation_handlers(r, std::move(rotation));
  notify::register_notification_handler(r, module_options<notify::notify_options>(key, cpu, ca_pem));
  auto engine = module_options<distribution::engine_options>(key, cpu, ca_pem);
  engine->phases = phases;
  distribution::register_handlers(r, std::move(engine));
  lifecycle::register_acme_handlers(r, module_options<lifecycle::acme_job_options>(key, cpu, ca_pem));
  lifecycle::register_msca_handlers(r, module_options<lifecycle::msca_job_options>(key, cpu, ca_pem));
  checks::register_expiration_check(r);
  auto check = module_options<checks::check_options>(key, cpu, ca_pem);
  check->rdap_bootstrap_file = s.text("rdap_bootstrap_file");
  checks::register_check_handlers(r, std::move(check));
  checks::register_discovery_handler(r, module_options<checks::discovery_options>(key, cpu, ca_pem));
}

std::filesystem::path key_file_path(const settings_map& s) {
  std::filesystem::path path = s.text("key_file");
  if (path.empty()) path = std::filesystem::path(s.text("data")) / "certfleet.key";
  return path;
}

result<keyring_facts> read_keyring_facts(store::store& st, const kek* ring) {
  auto f = std::make_shared<keyring_facts>();
  std::vector<std::uint32_t> versions;
  if (ring) versions = ring->versions();
  auto read = run_sync([&] {
    return st.catalog().read([f, versions](store::catalog_read& rd) -> result<void> {
      auto fp = rd.meta("kek_fingerprint");
      if (!fp) return std::move(fp).error();
      f->legacy_fingerprint = *fp;
      for (auto v : versions) {
        auto one = rd.meta(kek_fingerprint_meta_key(v));
        if (!one) return std::move(one).error();
        if (*one) f->fingerprints[v] = **one;
      }
      auto counts = rd.sealed_versions();
      if (!counts) return std::move(counts).error();
      for (const auto& c : *counts) f->sealed_by_version[c.version] += static_cast<std::uint64_t>(c.count);
      return {};
    });
  });
  if (!read) return std::move(read).error();
  return std::move(*f);
}

result<void> record_key_fingerprints(store::store& st, const kek& ring, bool created) {
  std::vector<std::pair<std::string, std::string>> fps;
  for (auto v : ring.versions()) fps.emplace_back(kek_fingerprint_meta_key(v), *ring.fingerprint(v));
  const auto primary_fp = ring.fingerprint();
  return run_sync([&] {
    return st.catalog().transact([fps, primary_fp, created](store::catalog_tx& tx) -> result<void> {
      auto cur = tx.meta("kek_fingerprint");
      if (!cur) return std::move(cur).error();
      auto sealed = tx.count_sealed();
      if (!sealed) return std::move(sealed).error();
      // The legacy record: the fingerprint of the store's first key (what earlier versions check).
      if (!*cur || (created && **cur != primary_fp)) {
        if (*cur && (!created || *sealed > 0))
          return make_error(errc::config_invalid, "another process recorded a different key-encryption key for this store "
                                                  "at the same time: check the key_file settings of both",
                            "key_file");
        if (auto w = tx.set_meta("kek_fingerprint", primary_fp); !w) return w;
      }
      for (const auto& [key, fp] : fps) {
        auto have = tx.meta(key);
        if (!have) return std::move(have).error();
        if (*have && **have == fp) continue;
        if (*have && !(created && *sealed == 0))
          return make_error(errc::config_invalid, "another process recorded a different key-encryption key for this store "
                                                  "at the same time: check the key_file settings of both",
                            "key_file");
        if (auto w = tx.set_meta(key, fp); !w) return w;
      }
      return {};
    });
  });
}

result<kek> prepare_store(store::store& st, const settings_map& s) {
  st.jobs().set_terminal_hook(distribution::make_terminal_hook());
  // Before the key is read: from here on a core file or another user's ptrace could hold it.
  if (s.text("core_dumps") != "on" && ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
    spdlog::warn("could not make the process non-dumpable: {}", std::strerror(errno));
  const auto path = key_file_path(s);
  std::error_code ec;
  std::optional<kek> loaded;
  if (std::filesystem::exists(path, ec)) {
    auto k = load_key_file(path);
    if (!k) return std::move(k).error();
    loaded.emplace(std::move(*k));
  }
  auto facts = read_keyring_facts(st, loaded ? &*loaded : nullptr);
  if (!facts) return std::move(facts).error();
  if (auto ok = check_keyring_matches(*facts, loaded ? &*loaded : nullptr, path); !ok) return std::move(ok).error();
  bool created = false;
  if (!loaded) {
    created = true;
    auto k = create_key_file(path);
    // Another process starting on the same data directory may have created it first.
    if (!k && std::filesystem::exists(path, ec)) k = load_key_file(path);
    if (!k) return std::move(k).error();
    loaded.emplace(std::move(*k));
    spdlog::info("created the key-encryption key file {} (mode 0600): back it up with the store", path.string());
  }
  // The fingerprint of each version the ring holds is recorded once (a new key on a store with
  // nothing sealed replaces what was recorded).
  bool missing = created || !facts->legacy_fingerprint;
  for (auto v : loaded->versions()) missing = missing || !facts->fingerprints.contains(v);
  if (missing)
    if (auto w = record_key_fingerprints(st, *loaded, created); !w) return std::move(w).error();
  return std::move(*loaded);
}

// First start on an empty store: one owner token (system admin) of the default project, written
// once to DATA/owner-token (0600). The store creates it only when it holds no token at all, so
// two processes starting together make one.
result<std::optional<std::string>> bootstrap_owner_token(store::store& store, const std::string& project_id,
                                                         const std::filesystem::path& data) {
  auto issued = run_sync([&] {
    return api::issue_token(store.auth(), project_id, store::role::owner, true, "first owner token", "bootstrap",
                            system_clock(), true);
  });
  if (!issued) return std::move(issued).error();
  if (!*issued) return std::optional<std::string>{};
  auto path = data / "owner-token";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  std::string text = (*issued)->text + "\n";
  bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    // Nobody could ever read this token: take it back so the next start makes a new one.
    auto id = (*issued)->record.id;
    (void)run_sync([&] { return store.auth().revoke_token(id, system_clock().now_ms()); });
    return make_error(errc::config_invalid, fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)), "data");
  }
  return std::optional<std::string>(path.string());
}

// tls_cert_file and tls_key_file read and checked (chain, key, that they belong together); an
// empty optional when the listener serves plain HTTP or a managed certificate (tls_certificate).
result<std::optional<api::tls_material>> tls_from_files(const settings_map& settings) {
  if (auto ok = api::check_tls_settings(settings); !ok) return std::move(ok).error();
  const auto& cert = settings.text("tls_cert_file");
  if (cert.empty()) return std::optional<api::tls_material>{};
  auto m = api::read_tls_files(cert, settings.text("tls_key_file"));
  if (!m) return std::move(m).error();
  if (auto ok = api::check_tls_material(*m); !ok) return std::move(ok).error();
  return std::optional<api::tls_material>(std::move(*m));
}

// Why a start is refused, on stderr: "certfleet: …" for a person, or (log_format = json) an
// error line like every other, so that whatever reads the log parses every line.
void start_refused(const settings_map& settings, std::string_view message) {
  if (settings.text("log_format") == "json") spdlog::error("{}", message);
  else std::cerr << "certfleet: " << message << "\n";
}

int serve(const settings_map& settings) {
  // glibc gives every thread that allocates its own arena and keeps freed memory in each: with
  // the store's reader/writer threads and the cpu pool that is most of the resident size. Two
  // arenas are plenty for one event loop and a few store threads.
  mallopt(M_ARENA_MAX, 2);
  log::init(settings.text("log_level"), settings.text("log_format"));
  raise_fd_limit();
  // The store setting and the TLS files are checked before anything else happens: a store URI
  // that is not usable, or a certificate or key that cannot be served, is a configuration error
  // (exit 2), named like every other bad setting.
  if (auto ok = check_store_setting(settings); !ok) {
    start_refused(settings, ok.error().message);
    return 2;
  }
  auto tls = tls_from_files(settings);
  if (!tls) {
    start_refused(settings, tls.error().message);
    return 2;
  }
  // The warning about an open data directory goes to the server's log, not every CLI command.
  if (auto made = make_data_dir(settings.text("data"), true); !made) {
    start_refused(settings, made.error().message);
    return 1;
  }
  auto st = open_store(settings);
  if (!st) {
    start_refused(settings, st.error().message);
    return 1;
  }
  store::store& store = **st;
  const auto& clock = system_clock();
  const std::string mode = settings.text("mode");
  // Before anything is written: a store whose secrets this key cannot open is refused.
  auto key = prepare_store(store, settings);
  if (!key) {
    start_refused(settings, key.error().message);
    return 1;
  }

  auto project = run_sync([&] { return store.projects().ensure("default", clock.now_ms()); });
  if (!project) {
    start_refused(settings, project.error().message);
    return 1;
  }

  auto data = std::filesystem::absolute(settings.text("data")).lexically_normal();
  auto owner_token = bootstrap_owner_token(store, project->first.id, data);
  if (!owner_token) {
    start_refused(settings, owner_token.error().message);
    return 1;
  }
  if (*owner_token)
    std::cout << fmt::format("certfleet: first start: the owner token of project default (system admin) is in {} "
                             "(mode 0600); it is not shown again",
                             **owner_token)
              << std::endl;

  std::optional<certificate_ref> managed;
  if (const auto& ref = settings.text("tls_certificate"); !ref.empty()) {
    managed = *parse_certificate_ref(ref);  // validated with the settings
    auto current = run_sync([&] { return api::read_managed_certificate(store, &*key, *managed, ""); });
    if (!current) {
      start_refused(settings, current.error().message);
      return 2;
    }
    tls = std::move(*current);
  }

  // Blocking work that is not socket-driven: name resolution, local file delivery.
  asio::thread_pool cpu(2);
  queue::handler_registry handlers;
  distribution::delivery_phase_metrics phases;
  register_handlers(handlers, settings, &*key, &cpu, &phases);
  asio::io_context ioc(1);
  queue::queue_service queue(store, handlers, clock);

  // Every mode listens: api/all serve the API, worker/scheduler only health and metrics.
  api::server_options sopt;
  sopt.listen = settings.text("listen");
  sopt.version = CERTFLEET_VERSION;
  sopt.serve_api = mode == "api" || mode == "all";
  sopt.max_connections_per_client = static_cast<int>(settings.integer("http_max_connections_per_client"));
  sopt.max_connections = static_cast<int>(settings.integer("http_max_connections"));
  sopt.health_reserve_connections = static_cast<int>(settings.integer("http_health_reserve_connections"));
  sopt.hsts_max_age_s = settings.integer("http_hsts_max_age_s");
  if (sopt.serve_api && !settings.text("audit_log_file").empty()) {
    sopt.audit_sink = std::make_shared<api::audit_file>();
    if (auto opened = sopt.audit_sink->open(settings.text("audit_log_file"), settings.integer("audit_log_max_bytes"));
        !opened) {
      start_refused(settings, opened.error().message);
      return 2;
    }
  }
  sopt.key = &*key;
  sopt.cpu = &cpu;
  sopt.ca_pem = extra_ca_pem();
  sopt.tls = std::move(*tls);
  sopt.tls_certificate = managed;
  sopt.tls_poll_interval = std::chrono::milliseconds(settings.integer("tls_certificate_poll_ms"));
  sopt.metrics_listen = settings.text("metrics_listen");
  sopt.ws_streams_per_token = static_cast<int>(settings.integer("ws_streams_per_token"));
  sopt.ws_streams_per_client = static_cast<int>(settings.integer("ws_streams_per_client"));
  api::server http(ioc.get_executor(), store, queue, clock, sopt);
  auto bound = http.start();
  if (!bound) {
    start_refused(settings, bound.error().message);
    return bound.error().is(errc::config_invalid) ? 2 : 1;
  }

  std::unique_ptr<queue::worker> worker;
  if (mode == "worker" || mode == "all") {
    worker = std::make_unique<queue::worker>(ioc.get_executor(), store, handlers, clock, worker_options_from(settings));
    queue.on_enqueued = [w = worker.get()](std::string_view lane) { w->wake(lane); };
    queue.on_cancel_requested = [w = worker.get()](const std::string& id) { w->request_cancel(id); };
    worker->set_log_publisher(http.log_publisher());
    http.attach_worker(worker.get());
    http.attach_delivery_phases(&phases);
    worker->start();
    // Jobs another process made claimable (a MongoDB store's change stream) wake the lanes at
    // once; the poll stays the fallback.
    store.watch_claimable([ex = ioc.get_executor(), w = worker.get()](std::string_view lane) {
      asio::post(ex, [w, lane = std::string(lane)] { w->wake(lane); });
    });
  }

  // Every mode watches the worker registry and releases a dead worker's jobs at once (issue 34):
  // with only API processes left, their jobs still come back when a worker returns.
  queue::liveness_monitor liveness(
      ioc.get_executor(), store, clock,
      queue::liveness_options{settings.integer("worker_heartbeat_ms"), settings.integer("worker_dead_after_ms")});
  liveness.start();
  http.attach_liveness(&liveness);

  std::unique_ptr<scheduler::scheduler> sched;
  if (mode == "scheduler" || mode == "all") {
    scheduler::scheduler_options so;
    so.lease_ttl_ms = settings.integer("scheduler_lease_ms");
    so.interval_ms = settings.integer("scheduler_interval_ms");
    sched = std::make_unique<scheduler::scheduler>(ioc.get_executor(), store, queue, clock, so);
    sched->start();
    http.attach_scheduler_probe([s = sched.get()] { return std::pair{s->stats().leader, s->stats().epoch}; });
  }

  const auto& store_setting = settings.text("store");
  const auto store_shown = store_setting == "sqlite"
                               ? (data / "certfleet.db").string()
                               : (*store::mongodb_backend_for(store_setting))->redacted_uri(store_setting);
  // WatchdogSec=: a ping from the event loop itself, so a loop that stops turning stops the pings
  // and systemd restarts the service.
  asio::steady_timer watchdog(ioc);
  std::function<void()> watchdog_ping;
  if (auto every = sd_watchdog_interval()) {
    watchdog_ping = [&, every = *every] {
      sd_notify("WATCHDOG=1");
      watchdog.expires_after(every);
      watchdog.async_wait([&](const boost::system::error_code& ec) {
        if (!ec) watchdog_ping();
      });
    };
    watchdog_ping();
  }

  // SIGHUP: read tls_cert_file and tls_key_file again (a renewed certificate put there by another
  // tool); a pair that cannot be served is refused and the current one kept.
  asio::signal_set hangup(ioc, SIGHUP);
  std::function<void()> on_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      const auto& cert_file = settings.text("tls_cert_file");
      if (cert_file.empty()) {
        spdlog::info("SIGHUP: no tls_cert_file to read again");
      } else {
        (void)http.reload_tls_files(cert_file, settings.text("tls_key_file"));  // logs and counts what it did
      }
      on_hangup();
    });
  };
  on_hangup();

  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  bool stopping = false;
  signals.async_wait([&](const boost::system::error_code& ec, int sig) {
    if (ec || stopping) return;
    stopping = true;
    spdlog::info("signal {}: shutting down gracefully", sig);
    sd_notify("STOPPING=1");
    watchdog.cancel();
    hangup.cancel();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          // The listener first: no new requests while the worker winds down.
          co_await http.stop();
          if (sched) co_await sched->stop();
          if (worker) co_await worker->stop();
          co_await liveness.stop();
          ioc.stop();
        },
        report_unexpected("graceful shutdown"));
  });
  // Ready only now: SIGTERM and SIGHUP are handled from here on. Announced before the signal sets
  // existed, a stop sent at once (a supervisor, a test) killed the process with the default action
  // instead of shutting it down gracefully.
  std::cout << fmt::format("certfleet {} serving: mode={} data={} store={}", CERTFLEET_VERSION, mode, data.string(),
                           store_shown)
            << (worker ? fmt::format(" worker={}", worker->id()) : std::string())
            << (sched ? fmt::format(" scheduler={}", sched->holder_id()) : std::string()) << " listen=" << *bound
            << (http.tls_certificate() ? " tls=on" : "")
            << (http.metrics_port() ? fmt::format(" metrics_listen={}", sopt.metrics_listen.substr(0, sopt.metrics_listen.rfind(':') + 1) + std::to_string(http.metrics_port())) : std::string())
            << std::endl;
  // systemd (Type=notify): listening now. Not under systemd this does nothing.
  sd_notify(fmt::format("READY=1\nSTATUS=serving {} on {}{}\nMAINPID={}", mode, *bound,
                        http.tls_certificate() ? " (HTTPS)" : "", ::getpid()));
  ioc.run();
  cpu.join();
  store.close();
  spdlog::info("stopped");
  return 0;
}

}  // namespace certfleet::app
