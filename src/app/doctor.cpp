// `certfleet doctor` (doctor.hpp): each check reads, never writes. The store is inspected
// read-only first (schema, integrity) and opened only when its schema is this build's, so a
// doctor never migrates or repairs anything.
#include "doctor.hpp"

#include "certfleet/store/mongodb.hpp"

#include "certfleet/api/tls.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/delivery/ssh_target.hpp"
#include "certfleet/service/service.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/store.hpp"
#include "wiring.hpp"

#include <arpa/inet.h>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace certfleet::app {

namespace {

namespace fs = std::filesystem;

const char* verdict_name(verdict v) { return v == verdict::ok ? "OK" : v == verdict::warn ? "WARN" : "FAIL"; }

doctor_line ok(std::string check, std::string detail) { return {std::move(check), verdict::ok, std::move(detail), {}}; }
doctor_line warn(std::string check, std::string detail, std::string fix) {
  return {std::move(check), verdict::warn, std::move(detail), std::move(fix)};
}
doctor_line fail(std::string check, std::string detail, std::string fix) {
  return {std::move(check), verdict::fail, std::move(detail), std::move(fix)};
}

std::string mode_text(mode_t m) { return fmt::format("{:04o}", m & 07777); }

// ---- listeners ----------------------------------------------------------------------------

struct endpoint {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
};

std::optional<endpoint> endpoint_of(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    return std::nullopt;
  }
  endpoint e;
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&e.addr); inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    e.len = sizeof(sockaddr_in);
    return e;
  }
  if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&e.addr); inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    e.len = sizeof(sockaddr_in6);
    e.family = AF_INET6;
    return e;
  }
  return std::nullopt;
}

// Whether whoever listens there answers /healthz as certfleet does (a running certfleet on this
// configuration: the port is "in use" by the service itself). Over TLS when `tls`.
bool answers_as_certfleet(const endpoint& e, bool tls) {
  int fd = ::socket(e.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&e.addr), e.len) != 0) {
    ::close(fd);
    return false;
  }
  static constexpr std::string_view request = "GET /healthz HTTP/1.0\r\nHost: doctor\r\n\r\n";
  std::string answer;
  char buf[4096];
  if (!tls) {
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()))
      for (ssize_t n; answer.size() < 16384 && (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, n);
  } else {
    // Only to recognise the server: its certificate is not checked (the TLS line checks it).
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = ctx ? SSL_new(ctx) : nullptr;
    if (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_connect(ssl) == 1 &&
        SSL_write(ssl, request.data(), static_cast<int>(request.size())) == static_cast<int>(request.size()))
      for (int n; answer.size() < 16384 && (n = SSL_read(ssl, buf, sizeof buf)) > 0;) answer.append(buf, n);
    if (ssl) SSL_free(ssl);
    if (ctx) SSL_CTX_free(ctx);
  }
  ::close(fd);
  std::transform(answer.begin(), answer.end(), answer.begin(), [](unsigned char c) { return std::tolower(c); });
  return answer.find("\r\nserver: certfleet") != std::string::npos;
}

doctor_line check_listener(const std::string& setting, const std::string& value, bool tls) {
  auto e = endpoint_of(value);
  if (!e)
    return fail(setting, fmt::format("{} is not ADDR:PORT with an IP address", value),
                fmt::format("set {} to an address of this machine and a port, like 127.0.0.1:8443 or 0.0.0.0:8443", setting));
  int fd = ::socket(e->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(setting, fmt::format("cannot make a socket: {}", std::strerror(errno)), "see the system log");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the listener binds
  const int rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&e->addr), e->len);
  const int err = errno;
  ::close(fd);
  if (rc == 0) return ok(setting, fmt::format("{} is free to bind{}", value, tls ? " (HTTPS)" : ""));
  if (err == EADDRINUSE) {
    if (answers_as_certfleet(*e, tls))
      return ok(setting, fmt::format("{} is served by a running certfleet (it answers /healthz)", value));
    return fail(setting, fmt::format("{} is in use by another program", value),
                fmt::format("find it with `ss -ltnp 'sport = :{}'` and stop it, or set {} to another port",
                            value.substr(value.rfind(':') + 1), setting));
  }
  if (err == EACCES)
    return fail(setting, fmt::format("{}: binding a port below 1024 needs privilege", value),
                fmt::format("use a port from 1024 up (like 8443), or give the service the capability: in a "
                            "drop-in (`systemctl edit certfleet`) set both CapabilityBoundingSet=CAP_NET_BIND_SERVICE "
                            "and AmbientCapabilities=CAP_NET_BIND_SERVICE (the shipped unit empties the bounding "
                            "set, which cancels an ambient capability alone)"));
  if (err == EADDRNOTAVAIL)
    return fail(setting, fmt::format("{}: no interface of this machine has that address", value),
                fmt::format("set {} to an address of this machine (`ip -br addr`), or 0.0.0.0 for all", setting));
  return fail(setting, fmt::format("{}: cannot bind: {}", value, std::strerror(err)), "see the system log");
}

// ---- the store -------------------------------------------------------------------------------

struct store_facts {
  bool exists = false;
  bool usable = false;  // opened at this build's schema: the checks that read it can run
};

}  // namespace

std::string render_doctor_table(const std::vector<doctor_line>& lines) {
  std::size_t width = 5;
  for (const auto& l : lines) width = std::max(width, l.check.size());
  std::string out = fmt::format("{:<{}}  {:<6}  {}\n", "CHECK", width, "STATUS", "DETAIL");
  int n_ok = 0, n_warn = 0, n_fail = 0;
  for (const auto& l : lines) {
    out += fmt::format("{:<{}}  {:<6}  {}\n", l.check, width, verdict_name(l.v), l.detail);
    if (!l.fix.empty()) out += fmt::format("{:<{}}  {:<6}  fix: {}\n", "", width, "", l.fix);
    (l.v == verdict::ok ? n_ok : l.v == verdict::warn ? n_warn : n_fail)++;
  }
  out += fmt::format("\n{} checks: {} OK, {} WARN, {} FAIL\n", lines.size(), n_ok, n_warn, n_fail);
  return out;
}

int doctor_exit_code(const std::vector<doctor_line>& lines) {
  int code = 0;
  for (const auto& l : lines) code = std::max(code, l.v == verdict::fail ? 2 : l.v == verdict::warn ? 1 : 0);
  return code;
}

int run_doctor(const result<settings_map>& loaded, const doctor_flags& flags) {
  std::vector<doctor_line> lines;
  auto finish = [&] {
    std::cout << render_doctor_table(lines);
    return doctor_exit_code(lines);
  };
  const std::string source = flags.config.empty() ? std::string("no config file (defaults, environment, flags)")
                                                  : flags.config;

  // Config: every setting from every source validated by the table's rules.
  if (!loaded) {
    lines.push_back(fail("config", loaded.error().message,
                         fmt::format("correct {} (docs/configuration.md lists each setting and its range)",
                                     loaded.error().field.empty() ? "the setting" : loaded.error().field)));
    return finish();
  }
  const settings_map& s = *loaded;
  if (auto tls = api::check_tls_settings(s); !tls) {
    lines.push_back(fail("config", tls.error().message, "set both tls_cert_file and tls_key_file, or tls_certificate alone"));
  } else {
    std::size_t n = 0;
    for (const auto& d : all_settings()) n += d.scope == setting_scope::process;
    lines.push_back(ok("config", fmt::format("{}: all {} process settings valid", source, n)));
  }

  // Data directory: holds the store, the key file and the owner token.
  const fs::path data = s.text("data");
  struct stat sb {};
  if (::stat(data.c_str(), &sb) != 0) {
    lines.push_back(warn("data directory", fmt::format("{} does not exist yet", data.string()),
                         "the first `certfleet serve` creates it (mode 0700); the install script makes it for the service"));
  } else if (!S_ISDIR(sb.st_mode)) {
    lines.push_back(fail("data directory", fmt::format("{} is not a directory", data.string()),
                         "set data to a directory (the install layout uses /var/lib/certfleet)"));
  } else if (sb.st_mode & 077) {
    lines.push_back(warn("data directory", fmt::format("{} has mode {}: others can list it", data.string(), mode_text(sb.st_mode)),
                         fmt::format("chmod 700 {}", data.string())));
  } else {
    lines.push_back(ok("data directory", fmt::format("{} (mode {})", data.string(), mode_text(sb.st_mode))));
  }

  // Store: read-only look first; opened (for the checks below) only at this build's schema.
  const fs::path db = data / "certfleet.db";
  std::unique_ptr<store::store> st;
  const bool on_mongodb = s.text("store") != "sqlite";
  bool store_exists = on_mongodb || fs::exists(db);
  if (on_mongodb) {
    // A MongoDB store: opening it checks the replica set, majority writes and the schema.
    auto opened = open_store(s);
    if (!opened) {
      lines.push_back(fail("store", opened.error().message,
                           "see docs/operations-mongodb.md (what start checks); `certfleet store check` tests the cluster"));
      store_exists = false;
    } else {
      st = std::move(*opened);
      const auto& uri = s.text("store");
      lines.push_back(ok("store", fmt::format("{}: a primary answered, schema current",
                                              (*store::mongodb_backend_for(uri))->redacted_uri(uri))));
    }
  } else if (!store_exists) {
    lines.push_back(warn("store", fmt::format("{} does not exist yet", db.string()),
                         "the first `certfleet serve` creates it; restore a backup with `certfleet restore --from FILE`"));
  } else if (auto report = store::inspect_sqlite(db.string()); !report) {
    lines.push_back(fail("store", report.error().message,
                         fmt::format("the file is not a readable SQLite database: stop certfleet, move {} aside and "
                                     "restore the last backup (`certfleet restore --from FILE --force`)",
                                     db.string())));
  } else if (report->integrity.size() != 1 || report->integrity.front() != "ok") {
    lines.push_back(fail("store", fmt::format("{}: PRAGMA integrity_check found {}{}: {}", db.string(), report->integrity.size(),
                                              report->integrity.size() >= 20 ? " or more problems" : " problem(s)",
                                              report->integrity.front()),
                         "stop certfleet and restore the last backup (`certfleet restore --from FILE --force`); "
                         "`sqlite3 certfleet.db .recover` may save newer rows"));
  } else if (report->schema_version > report->build_schema_version) {
    lines.push_back(fail("store", fmt::format("{}: schema version {} is newer than this build's {}", db.string(),
                                              report->schema_version, report->build_schema_version),
                         "run the certfleet version that wrote it (or a newer one): this binary refuses to start on it"));
  } else if (report->schema_version < report->build_schema_version) {
    lines.push_back(warn("store", fmt::format("{}: schema version {}, this build's is {}; integrity ok", db.string(),
                                              report->schema_version, report->build_schema_version),
                         "the next `certfleet serve` migrates it; take a backup first (`certfleet backup --to FILE`)"));
  } else {
    auto opened = open_store(s, store_access::read_only);
    if (!opened) {
      lines.push_back(fail("store", opened.error().message, "see the message; the store's directory and file must be "
                                                            "readable by the user doctor runs as (the certfleet user)"));
    } else {
      st = std::move(*opened);
      struct stat db_sb {};
      if (::stat(db.c_str(), &db_sb) == 0 && (db_sb.st_mode & 077) != 0)
        // Left as it is: doctor changes nothing. serve tightens it at start.
        lines.push_back(warn("store",
                             fmt::format("{}: schema version {}, integrity ok; mode {}: group or others can read "
                                         "token hashes and sealed secrets",
                                         db.string(), report->schema_version, mode_text(db_sb.st_mode)),
                             fmt::format("chmod 600 {} (the next `certfleet serve` does it too)", db.string())));
      else
        lines.push_back(ok("store", fmt::format("{}: schema version {}, integrity ok", db.string(), report->schema_version)));
    }
  }

  // Key file: present, 0600, and the key the store's secrets were sealed with.
  fs::path key_path = s.text("key_file");
  if (key_path.empty()) key_path = data / "certfleet.key";
  std::optional<kek> key;
  {
    std::optional<std::string> recorded;
    std::int64_t sealed = 0;
    if (st) {
      auto read = run_sync([&] {
        return st->catalog().read([&](store::catalog_read& rd) -> result<void> {
          auto fp = rd.meta("kek_fingerprint");
          if (!fp) return std::move(fp).error();
          recorded = *fp;
          auto n = rd.count_sealed();
          if (!n) return std::move(n).error();
          sealed = *n;
          return {};
        });
      });
      (void)read;
    }
    if (!fs::exists(key_path)) {
      if (sealed > 0)
        lines.push_back(fail("key file", fmt::format("{} is missing and the store holds {} sealed secrets", key_path.string(), sealed),
                             "restore the key file from your backup: without it those secrets cannot be opened"));
      else
        lines.push_back(warn("key file", fmt::format("{} does not exist yet", key_path.string()),
                             "the first `certfleet serve` creates it (mode 0600): back it up with the store"));
    } else if (auto k = load_key_file(key_path); !k) {
      std::string fix = k.error().message.find("mode") != std::string::npos
                            ? fmt::format("chmod 600 {} (and chown it to the certfleet user)", key_path.string())
                            : "restore the key file from your backup";
      lines.push_back(fail("key file", k.error().message, fix));
    } else if (auto facts = st ? read_keyring_facts(*st, &*k) : result<keyring_facts>(keyring_facts{recorded, {}, {}});
               !facts) {
      lines.push_back(fail("key file", facts.error().message, "check the store"));
    } else if (auto m = check_keyring_matches(*facts, &*k, key_path); !m) {
      lines.push_back(fail("key file", m.error().message, "point key_file at the key this store was sealed with"));
    } else {
      key.emplace(std::move(*k));
      lines.push_back(ok("key file", fmt::format("{} (mode 0600){}", key_path.string(),
                                                 recorded ? ", the key of this store's secrets" : "")));
    }
  }

  // TLS: what the listener would serve.
  const bool tls_files = !s.text("tls_cert_file").empty();
  const auto& managed = s.text("tls_certificate");
  const time_ms now = system_clock().now_ms();
  auto tls_line = [&](const result<api::tls_identity>& id, const std::string& what) {
    if (!id) {
      lines.push_back(fail("tls", id.error().message, fmt::format("fix {}: certfleet refuses to start with it",
                                                                  id.error().field.empty() ? what : id.error().field)));
      return;
    }
    const auto days = (id->not_after_ms - now) / 86'400'000;
    auto detail = fmt::format("{}: {} (sha256 {}…), not after {}", what, id->subject, id->fingerprint_sha256.substr(0, 16),
                              format_iso8601(id->not_after_ms));
    if (id->not_after_ms <= now)
      lines.push_back(fail("tls", detail + ": EXPIRED", "renew the certificate: clients refuse an expired one"));
    else if (days < 14)
      lines.push_back(warn("tls", fmt::format("{}: expires in {} days", detail, days), "renew the certificate soon"));
    else
      lines.push_back(ok("tls", detail));
  };
  if (tls_files) {
    auto m = api::read_tls_files(s.text("tls_cert_file"), s.text("tls_key_file"));
    if (!m) tls_line(std::move(m).error(), "tls_cert_file");
    else tls_line(api::check_tls_material(*m), "tls_cert_file");
    struct stat kb {};
    // root:certfleet 0640 (the service reads it through its group) is fine; readable by every
    // user of the machine is not.
    if (::stat(s.text("tls_key_file").c_str(), &kb) == 0 && (kb.st_mode & 007))
      lines.push_back(warn("tls key mode", fmt::format("{} has mode {}: every user of this machine may read the private key",
                                                       s.text("tls_key_file"), mode_text(kb.st_mode)),
                           fmt::format("chmod 640 {} and chgrp certfleet {}", s.text("tls_key_file"),
                                       s.text("tls_key_file"))));
  } else if (!managed.empty()) {
    if (!st) {
      lines.push_back(fail("tls", fmt::format("tls_certificate {}: the store cannot be read (see store)", managed),
                           "fix the store first"));
    } else {
      auto ref = parse_certificate_ref(managed);
      auto m = run_sync([&] { return api::read_managed_certificate(*st, key ? &*key : nullptr, *ref, ""); });
      if (!m) tls_line(std::move(m).error(), "tls_certificate");
      else tls_line(api::check_tls_material(**m), "tls_certificate " + managed);
    }
  } else {
    const auto& listen = s.text("listen");
    const bool loopback = listen.rfind("127.", 0) == 0 || listen.rfind("[::1]", 0) == 0 || listen.rfind("localhost:", 0) == 0;
    if (loopback)
      lines.push_back(ok("tls", fmt::format("off: plain HTTP on {} (loopback only)", listen)));
    else
      lines.push_back(warn("tls", fmt::format("off: plain HTTP on {}: tokens and session cookies cross the network in clear", listen),
                           "set tls_cert_file and tls_key_file (or tls_certificate): docs/install.md#tls"));
  }

  // Listeners.
  lines.push_back(check_listener("listen", s.text("listen"), tls_files || !managed.empty()));
  if (!s.text("metrics_listen").empty()) lines.push_back(check_listener("metrics_listen", s.text("metrics_listen"), false));

  // Clock: leases, expiry checks and certificates all trust it.
  {
    timex tx{};
    const int state = ::adjtimex(&tx);
    std::string sync = state == TIME_ERROR ? "not synchronised (adjtimex reports TIME_ERROR)" : "synchronised";
    time_ms newest = 0;
    if (st) {
      auto projects = run_sync([&] { return st->projects().list(); });
      if (projects)
        for (const auto& p : *projects) {
          auto page = run_sync([&] { return st->jobs().list(store::job_filter{p.id, std::nullopt, "", 1, 1}); });
          if (page && !page->items.empty()) newest = std::max(newest, page->items.front().created_at);
        }
    }
    if (now < 1'704'067'200'000 /* 2024-01-01 */ || now > 4'102'444'800'000 /* 2100-01-01 */)
      lines.push_back(fail("clock", fmt::format("the system clock reads {}", format_iso8601(now)),
                           "set the clock (timedatectl set-ntp true, or chrony)"));
    else if (newest > now + 5 * 60'000)
      lines.push_back(fail("clock", fmt::format("the store holds a job created at {}, {} min ahead of this clock ({})",
                                                format_iso8601(newest), (newest - now) / 60'000, format_iso8601(now)),
                           "the clock went back, or another machine sharing the store runs ahead: synchronise "
                           "every clock (timedatectl set-ntp true)"));
    else if (state == TIME_ERROR)
      lines.push_back(warn("clock", fmt::format("{}; reads {}", sync, format_iso8601(now)),
                           "enable time synchronisation: timedatectl set-ntp true (systemd-timesyncd) or chrony"));
    else
      lines.push_back(ok("clock", fmt::format("{}; reads {}", sync, format_iso8601(now))));
  }

  // Egress: the system settings in the store that decide where certfleet may connect.
  if (st) {
    auto stored = run_sync([&] { return st->auth().system_settings(); });
    if (!stored) {
      lines.push_back(fail("egress", stored.error().message, "see the store line"));
    } else {
      std::vector<std::string> bad;
      for (const auto& [name, value] : *stored)
        if (const auto* d = find_setting(name); d && !validate_setting(*d, value)) bad.push_back(name);
      auto sys = store::to_settings_map(*stored);
      if (!bad.empty()) {
        lines.push_back(fail("egress", fmt::format("stored settings that no longer validate: {}", fmt::join(bad, ", ")),
                             "PUT /api/v1/settings with valid values (GET /api/v1/settings/schema lists the rules)"));
      } else if (sys.text("egress_allow_list").empty()) {
        lines.push_back(warn("egress", "egress_allow_list is empty: every webhook and notification destination is refused",
                             "PUT /api/v1/settings {\"egress_allow_list\": \"hooks.example.com,10.0.0.0/8\"} (docs/notifications.md)"));
      } else {
        lines.push_back(ok("egress", fmt::format("egress_allow_list {}; ssh_allow_list {}", sys.text("egress_allow_list"),
                                                 sys.text("ssh_allow_list").empty() ? "empty (every SSH destination refused)"
                                                                                    : sys.text("ssh_allow_list"))));
      }
    }
  }

  // SSH targets: reachable, and offering the pinned host key (the scan-host-key route's machinery).
  if (flags.targets) {
    if (!st) {
      lines.push_back(fail("targets", "the store cannot be read (see store)", "fix the store first"));
    } else {
      boost::asio::thread_pool cpu(1);
      queue::handler_registry handlers;
      queue::queue_service queue(*st, handlers, system_clock());
      service::service svc(*st, queue, system_clock(), key ? &*key : nullptr, &cpu);
      auto projects = run_sync([&] { return st->projects().list(); });
      int seen = 0;
      if (projects)
        for (const auto& p : *projects) {
          if (!flags.project.empty() && p.name != flags.project) continue;
          for (int page = 1;; ++page) {
            store::read_value_fn<store::object_page> get = [&](store::catalog_read& rd) {
              return rd.list_objects(p.id, store::kind_target, page, 200);
            };
            auto targets = run_sync([&] { return store::read_value(st->catalog(), get); });
            if (!targets || targets->items.empty()) break;
            for (const auto& t : targets->items) {
              auto scanned = run_sync([&] { return svc.scan_host_key(p.id, t.id); });
              if (!scanned && scanned.error().is(errc::invalid_argument) && scanned.error().field == "module") continue;
              ++seen;
              const std::string name = fmt::format("target {}/{}", p.name, t.name);
              if (!scanned) {
                lines.push_back(fail(name, scanned.error().message,
                                     "check that the host is up and sshd listens on that port, the firewall, and "
                                     "ssh_allow_list"));
                continue;
              }
              const auto& o = scanned->as_object();
              const std::string pinned(o.at("pinned").as_string());
              const auto where =
                  fmt::format("{}:{}", std::string(o.at("host").as_string()), boost::json::serialize(o.at("port")));
              std::string pinned_fp = pinned;
              if (auto k = delivery::parse_host_key(pinned)) pinned_fp = k->fingerprint();
              bool match = false;
              std::vector<std::string> offered;
              for (const auto& k : o.at("offered").as_array()) {
                match = match || std::string_view(k.at("line").as_string()) == pinned;
                offered.emplace_back(k.at("fingerprint").as_string());
              }
              if (match)
                lines.push_back(ok(name, fmt::format("{} offers the pinned host key {}", where, pinned_fp)));
              else
                lines.push_back(fail(name, fmt::format("{} offers {}, not the pinned {}", where, fmt::join(offered, ", "),
                                                       pinned_fp),
                                     "the host was reinstalled or this is another host: compare the fingerprint out of "
                                     "band (console, `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub`), then pin the new key"));
            }
            if (static_cast<std::int64_t>(page) * 200 >= targets->total) break;
          }
        }
      cpu.join();
      if (seen == 0) lines.push_back(ok("targets", "no SSH targets to check"));
    }
  }
  if (st) st->close();
  return finish();
}

}  // namespace certfleet::app
