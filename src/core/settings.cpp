#include "certfleet/core/settings.hpp"

#include "certfleet/core/allow_list.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <charconv>
#include <cstdlib>
#include <stdexcept>

namespace certfleet {

namespace {
using S = setting_scope;
using T = setting_type;

// An ssh_allow_list that does not validate must not read as the default (any destination): it
// reads as a list that matches no real host, so every SSH destination is refused.
constexpr std::string_view ssh_allow_list_invalid = "ssh-allow-list-does-not-parse.invalid";

// The settings with a grammar of their own (the table's validator column).
result<std::string> valid_listen(const setting_def& def, std::string_view value);
result<std::string> valid_data(const setting_def& def, std::string_view value);
result<std::string> valid_expiry_thresholds(const setting_def& def, std::string_view value);
result<std::string> valid_base_dirs(const setting_def& def, std::string_view value);
result<std::string> valid_allow_list(const setting_def& def, std::string_view value);
result<std::string> valid_ui_base_url(const setting_def& def, std::string_view value);

result<std::string> valid_optional_listen(const setting_def& def, std::string_view value);
result<std::string> valid_store(const setting_def& def, std::string_view value);
result<std::string> valid_certificate_ref(const setting_def& def, std::string_view value);
result<std::string> valid_optional_server(const setting_def& def, std::string_view value);

constexpr std::array<setting_def, 72> table{{
    {"mode", T::choice, S::process, 0, 0, "all", "api|worker|scheduler|all",
     "Which parts this process runs."},
    {"listen", T::string, S::process, 0, 0, "127.0.0.1:8080", "",
     "ADDR:PORT of the listener: health, metrics and, in api/all mode, the API and the web UI. HTTPS when tls_cert_file or tls_certificate is set.", valid_listen},
    {"data", T::string, S::process, 0, 0, "./var", "",
     "Data directory: the embedded store certfleet.db and the owner-token file live here.", valid_data},
    {"store", T::string, S::process, 0, 0, "sqlite", "",
     "The store: sqlite (the embedded file in the data directory) or a mongodb:// / mongodb+srv:// URI of a replica set (or sharded cluster), checked at start: a standalone server, w below majority or a non-primary read preference is refused (docs/operations-mongodb.md). The URI may hold a password: keep it in the config file, not on a command line others can read.", valid_store},
    {"store_threads", T::integer, S::process, 1, 64, "4", "",
     "MongoDB store: threads that run store calls, each with one pooled connection."},
    {"store_timeout_ms", T::integer, S::process, 100, 600'000, "10000", "",
     "MongoDB store: how long start waits for a primary (unless the URI sets serverSelectionTimeoutMS) and the maxTimeMS of every command."},
    {"key_file", T::string, S::process, 0, 0, "", "",
     "The key-encryption key file that seals secrets at rest; empty means DATA/certfleet.key. Back it up with the store."},
    {"log_level", T::choice, S::process, 0, 0, "info", "trace|debug|info|warn|error", "Process log level."},
    {"log_format", T::choice, S::process, 0, 0, "text", "text|json",
     "Process log lines on stderr: text for people, or json: one JSON object a line (time in RFC 3339 UTC with milliseconds, level, message; job_id, request_id, route where the line has them; an access line's method, status, bytes, duration_ms and client; a job lifecycle line's event, type and project) for journald, Loki or jq."},
    {"audit_log_file", T::string, S::process, 0, 0, "", "",
     "API processes: also write each audit entry as one JSON line to this file (created 0600), for a SIEM or log shipper; empty: the store only. Rotated to FILE.1 at audit_log_max_bytes."},
    {"audit_log_max_bytes", T::integer, S::process, 4096, 1LL << 40, "104857600", "",
     "The size at which audit_log_file is renamed to FILE.1 (replacing the previous one) and a new file begun."},
    {"core_dumps", T::choice, S::process, 0, 0, "off", "off|on",
     "off: the process is not dumpable once it holds the key-encryption key (no core file, no ptrace by other users), so a crash never writes the key to disk. on: for debugging a crash only; set LimitCORE= in the unit too."},
    {"lease_ms", T::integer, S::process, 1000, 3'600'000, "300000", "",
     "Job lease: a worker that stops heartbeating loses its jobs after this long."},
    {"worker_main_concurrency", T::integer, S::process, 1, 4096, "8", "",
     "Jobs the main lane runs at once in this process."},
    {"worker_dist_concurrency", T::integer, S::process, 1, 4096, "16", "",
     "Jobs the dist lane (distribution_execute/_rollback) runs at once in this process."},
    {"worker_claim_batch", T::integer, S::process, 1, 1000, "64", "",
     "Most jobs one claim transaction takes for a lane."},
    {"rdap_bootstrap_file", T::string, S::process, 0, 0, "", "",
     "IANA's RDAP bootstrap file for DNS (dns.json, RFC 9224) that the domain check uses to find each TLD's RDAP server; empty: the snapshot shipped in the binary. Read at each check, so a newer file takes effect without a restart."},
    {"worker_poll_ms", T::integer, S::process, 10, 60'000, "250", "",
     "How long an idle lane waits before it looks for jobs again."},
    {"worker_heartbeat_ms", T::integer, S::process, 500, 60'000, "5000", "",
     "How often a worker records its heartbeat in the worker registry, and how often every process (api, scheduler, worker) looks there for dead workers whose jobs it releases at once."},
    {"worker_dead_after_ms", T::integer, S::process, 2'000, 3'600'000, "20000", "",
     "A worker whose last heartbeat is older than this is dead and its jobs are released to others (a worker on the same host whose process is gone is dead at once). Keep it several times worker_heartbeat_ms; lease_ms stays the bound for a death nobody can see."},
    {"shutdown_grace_ms", T::integer, S::process, 0, 600'000, "30000", "",
     "On SIGTERM, how long running handlers get to reach a checkpoint before their jobs are released."},
    {"store_readers", T::integer, S::process, 1, 16, "2", "", "SQLite reader connections."},
    {"store_busy_timeout_ms", T::integer, S::process, 100, 120'000, "5000", "",
     "How long a write waits for another process's write lock before failing with store_busy."},
    {"store_synchronous", T::choice, S::process, 0, 0, "normal", "normal|full",
     "SQLite synchronous mode under WAL: normal survives a process crash; full also a power loss."},
    {"scheduler_interval_ms", T::integer, S::process, 1000, 86'400'000, "3600000", "",
     "One scheduler cycle: each sweep runs once per cycle."},
    {"scheduler_lease_ms", T::integer, S::process, 1000, 600'000, "30000", "",
     "The scheduler leader's lease: a dead leader is replaced within this."},
    {"job_retention_s", T::integer, S::process, 60, 315'360'000, "2592000", "",
     "Completed and cancelled jobs (and their logs) older than this, and tokens expired longer than this, are deleted by the retention sweep."},
    {"http_max_connections_per_client", T::integer, S::process, 1, 4096, "256", "",
     "Open HTTP/WebSocket connections one client address (an IPv6 client: its /64) may hold; beyond, 503 too_many_connections. Behind a reverse proxy every client is the proxy: raise it to 4096."},
    {"http_max_connections", T::integer, S::process, 16, 1'000'000, "4096", "",
     "Open HTTP/WebSocket connections in all. At the limit a new connection takes the slot of the oldest idle keep-alive connection of the client address holding the most; when none is idle, 503 too_many_connections (health and metrics still answer from http_health_reserve_connections)."},
    {"http_health_reserve_connections", T::integer, S::process, 0, 1024, "16", "",
     "Connection slots beyond http_max_connections for /healthz, /readyz and /metrics only: when every slot is busy a probe still gets its answer (anything else there: 503 too_many_connections); 0 = none."},
    {"http_hsts_max_age_s", T::integer, S::process, 0, 63'072'000, "31536000", "",
     "Strict-Transport-Security max-age (seconds) sent on every response of the HTTPS listener (never over plain HTTP); 0 = no header."},
    {"audit_retention_s", T::integer, S::process, 60, 315'360'000, "31536000", "",
     "Audit log entries older than this are deleted by the retention sweep; keep them as long as your audits need."},
    {"tls_cert_file", T::string, S::process, 0, 0, "", "",
     "PEM file of the listener's certificate, leaf first, then its chain. With tls_key_file, `listen` serves HTTPS only (TLS 1.2 and 1.3); empty: plain HTTP. SIGHUP reads both files again."},
    {"tls_key_file", T::string, S::process, 0, 0, "", "",
     "PEM file of the private key of tls_cert_file (unencrypted; mode 0600, readable by the certfleet user)."},
    {"tls_certificate", T::string, S::process, 0, 0, "", "",
     "A certificate certfleet manages, as PROJECT/ID (project name / certificate id, e.g. default/66a1f0c2e4b5a6c7d8e9f001): `listen` serves it over HTTPS and swaps to each new version without a restart. Instead of tls_cert_file and tls_key_file.",
     valid_certificate_ref},
    {"tls_certificate_poll_ms", T::integer, S::process, 1000, 3'600'000, "10000", "",
     "How often the listener reads tls_certificate from the store to see a new version stored by another process (one stored by this process is served at once)."},
    {"metrics_listen", T::string, S::process, 0, 0, "", "",
     "ADDR:PORT of a second, plain-HTTP listener that serves only /healthz, /readyz and /metrics (for scrapers when `listen` serves HTTPS); empty: none.",
     valid_optional_listen},
    {"ws_streams_per_token", T::integer, S::process, 1, 100'000, "32", "",
     "Live log streams (WebSocket) one token (or web UI sign-in) may have open at once in this process; beyond, 429 naming this setting."},
    {"ws_streams_per_client", T::integer, S::process, 1, 100'000, "64", "",
     "Live log streams one client address (an IPv6 client: its /64) may have open at once in this process; beyond, 429 naming this setting. Behind a reverse proxy every client is the proxy: raise it."},
    {"distribution_fanout_threshold", T::integer, S::system, 0, 500, "0", "",
     "Targets from which a distribution fans out into batch child jobs; 0 = never."},
    {"distribution_fanout_batch_size", T::integer, S::system, 0, 200, "0", "",
     "Targets per batch child; 0 means 50."},
    {"distribution_ssh_max_concurrency", T::integer, S::system, 0, 50, "0", "",
     "SSH sessions one distribution job opens at once; 0 means the module default, 10."},
    {"distribution_max_sessions_per_host", T::integer, S::system, 0, 200, "0", "",
     "SSH sessions to one host:port at once, across every job of every worker process sharing the store; 0 = no limit."},
    {"distribution_ssh_connection_reuse", T::choice, S::system, 0, 0, "on", "on|off",
     "Targets of one job on one host:port that log in alike (user, credential, pinned host key) share one SSH connection, one after another."},
    {"jobs_page_size_default", T::integer, S::system, 1, 200, "25", "", "Job list page size when none is asked."},
    {"ui_session_ttl_s", T::integer, S::system, 300, 2'592'000, "43200", "",
     "How long a web UI sign-in lasts (seconds); after it the browser must sign in again with a token."},
    {"job_retry_per_minute", T::integer, S::system, 1, 10'000, "20", "",
     "Manual job retries one project may make per minute."},
    {"issuance_requires_approval", T::choice, S::project, 0, 0, "off", "off|on",
     "on: a certificate issue request waits as awaiting_approval until an admin of the project other than the requester approves it (then its issue job starts) or rejects it with a reason; renewals of an issued certificate do not wait."},
    {"certificate_expiry_thresholds_days", T::string, S::system, 0, 0, "30,14,7,1", "",
     "Days before not_after at which a certificate.expiring notification is sent (comma-separated, 1-3650, at most 10); the largest is the expiring-soon window.", valid_expiry_thresholds},
    {"egress_allow_list", T::string, S::system, 0, 0, "", "",
     "CIDRs and host names that webhook/notification destinations may use (comma-separated); empty refuses all.",
     valid_allow_list},
    {"file_target_base_dirs", T::string, S::system, 0, 0, "", "",
     "Absolute directories (comma-separated, at most 32) under which file targets may write on the worker host; empty refuses every file target.",
     valid_base_dirs},
    {"ssh_allow_list", T::string, S::system, 0, 0, "0.0.0.0/0, ::/0", "",
     "CIDRs and host names (egress_allow_list grammar) that SSH targets (and their TLS validation endpoints) may connect to, checked on the resolved address before connecting; loopback, link-local, unspecified and cloud metadata addresses only when listed by address (e.g. 127.0.0.0/8 for SSH servers on this host); empty refuses every SSH destination.",
     valid_allow_list, ssh_allow_list_invalid},
    {"acme_dns_propagation_timeout_s", T::integer, S::system, 10, 3600, "300", "",
     "How long an ACME job waits for its DNS-01 TXT records to be answered by every authoritative server of the zone before it gives up (transient: the job retries)."},
    {"acme_dns_nameserver_port", T::integer, S::system, 1, 65535, "53", "",
     "The port on which the DNS-01 propagation check asks the zone's NS servers (the provider's own server is asked at its configured port). 53 everywhere but in test setups."},
    {"acme_dns_resolver", T::string, S::system, 0, 0, "", "",
     "HOST:PORT of a recursive DNS resolver through which validate_manual_dns finds a zone's authoritative servers when a manual DNS provider has no check_server; empty: the first nameserver of /etc/resolv.conf on the worker.",
     valid_optional_server},
    {"acme_allow_list", T::string, S::system, 0, 0, "0.0.0.0/0, ::/0", "",
     "CIDRs and host names (egress_allow_list grammar) that the ACME client (every URL of a CA: directory, nonce, account, order, authorization, challenge, finalize, certificate, renewal info, revoke) and DNS-01 (an rfc2136 provider's server, a manual provider's check_server, the zone's NS addresses) may reach, checked on the resolved address before connecting; loopback, link-local, unspecified and cloud metadata addresses only when listed by address; empty refuses every CA.",
     valid_allow_list},
    {"msca_allow_list", T::string, S::system, 0, 0, "0.0.0.0/0, ::/0", "",
     "CIDRs and host names (egress_allow_list grammar) that the AD CS client (an msca_ca's CEP and CES URLs) may reach, checked on the resolved address before connecting; loopback, link-local, unspecified and cloud metadata addresses only when listed by address; empty refuses every CA.",
     valid_allow_list},
    {"msca_timeout_s", T::integer, S::system, 1, 300, "30", "",
     "Deadline of one call to an AD CS policy (CEP) or enrollment (CES) service, connect to last byte."},
    {"msca_poll_first_delay_s", T::integer, S::system, 1, 86400, "60", "",
     "How long after an AD CS request is left pending (waiting for a certificate manager) the first msca_poll_pending asks the CA again; each next wait doubles up to msca_poll_max_delay_s."},
    {"msca_poll_max_delay_s", T::integer, S::system, 1, 86400, "3600", "",
     "The longest wait between two polls of a pending AD CS request."},
    {"msca_poll_give_up_h", T::integer, S::system, 1, 2160, "168", "",
     "Hours after its submission at which a still-pending AD CS request is given up: its last poll fails the enrollment (the CA keeps the request; approve it and enroll again)."},
    {"check_allow_list", T::string, S::system, 0, 0, "0.0.0.0/0, ::/0", "",
     "CIDRs and host names (egress_allow_list grammar) that the revocation and domain checks may fetch from (CRL, OCSP, RDAP, WHOIS servers named by certificates and registries); loopback and link-local only when listed.",
     valid_allow_list},
    {"check_fetch_timeout_s", T::integer, S::system, 1, 120, "15", "",
     "Deadline of one CRL download, OCSP query, RDAP or WHOIS lookup (connect to last byte)."},
    {"revocation_crl_max_bytes", T::integer, S::system, 4096, 268435456, "10485760", "",
     "Largest CRL the revocation check downloads; a bigger one is a warning on the certificate, not a revocation."},
    {"domain_expiry_thresholds_days", T::string, S::system, 0, 0, "60,30,14,7,1", "",
     "Days before a domain's registration expires at which a domain.expiring notification is sent (comma-separated, 1-3650, at most 10).",
     valid_expiry_thresholds},
    {"discovery_allow_list", T::string, S::system, 0, 0, "", "",
     "CIDRs and host names (egress_allow_list grammar) that discovery sources may scan; empty refuses every scan. A source whose ranges reach outside it is refused when created.",
     valid_allow_list},
    {"discovery_concurrency", T::integer, S::system, 1, 1000, "50", "",
     "TLS handshakes one discovery_execute job has in flight at once."},
    {"discovery_endpoint_timeout_ms", T::integer, S::system, 100, 60000, "5000", "",
     "Deadline of one discovery probe: name resolution, connect and TLS handshake together. A filtered port or a server that stalls the handshake counts as timeout after it."},
    {"discovery_max_addresses", T::integer, S::system, 1, 1048576, "65536", "",
     "Most targets (addresses × ports × SNI names) one discovery source may name; a /16 with one port is 65,534."},
    {"domain_whois_server", T::string, S::system, 0, 0, "whois.iana.org:43", "",
     "HOST:PORT of the WHOIS server asked first when RDAP cannot answer for a domain (its referrals are followed, at most 2: IANA → registry → registrar); empty: RDAP only.",
     valid_optional_server},
    {"kek_rotation_batch", T::integer, S::system, 1, 10'000, "500", "",
     "Envelopes one kek_rotation_collection job re-seals in one transaction before it enqueues the next batch (DESIGN §11); smaller batches hold the store's write lock for less time."},
    {"ui_base_url", T::string, S::system, 0, 0, "", "",
     "The web UI's address as people reach it (https://certfleet.example.com): notification messages link to the job, distribution or certificate there; empty sends no links.",
     valid_ui_base_url},
}};

constexpr std::array<setting_group, 6> groups{{
    {"distribution", "Distribution",
     "How runs fan out, how many SSH sessions they open, and where file targets may write.",
     "distribution_fanout_threshold|distribution_fanout_batch_size|distribution_ssh_max_concurrency|"
     "distribution_max_sessions_per_host|distribution_ssh_connection_reuse|file_target_base_dirs"},
    {"certificates", "Certificates and ACME",
     "When expiry is told, and how ACME's DNS-01 validation finds and waits for its records.",
     "certificate_expiry_thresholds_days|acme_dns_propagation_timeout_s|acme_dns_nameserver_port|acme_dns_resolver|"
     "msca_timeout_s|msca_poll_first_delay_s|msca_poll_max_delay_s|msca_poll_give_up_h"},
    {"checks", "Checks and discovery",
     "The revocation and domain checks, and discovery scans: deadlines, sizes, thresholds.",
     "check_fetch_timeout_s|revocation_crl_max_bytes|domain_expiry_thresholds_days|domain_whois_server|"
     "discovery_concurrency|discovery_endpoint_timeout_ms|discovery_max_addresses"},
    {"egress", "Network egress",
     "Where certfleet may connect: each list is checked on the resolved address before connecting.",
     "egress_allow_list|ssh_allow_list|acme_allow_list|msca_allow_list|check_allow_list|discovery_allow_list"},
    {"jobs", "Jobs",
     "Limits on what operators and maintenance jobs do at once.",
     "job_retry_per_minute|kek_rotation_batch"},
    {"ui", "UI preferences",
     "The web console: list page size, how long a sign-in lasts, and the address messages link to.",
     "jobs_page_size_default|ui_session_ttl_s|ui_base_url"},
}};

// The table's lists (a choice's values, a group's members) are words separated by '|'.
std::vector<std::string_view> split_bars(std::string_view list) {
  std::vector<std::string_view> out;
  for (std::string_view rest = list; !rest.empty();) {
    auto bar = rest.find('|');
    out.push_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  return out;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::string upper(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

// HOST:PORT with a port from min_port to 65535 (0: a listener's "any free port").
result<std::string> host_port(const setting_def& def, std::string_view value, std::int64_t min_port) {
  auto colon = value.rfind(':');
  std::int64_t port;
  if (colon == std::string_view::npos || colon == 0 || !parse_int(value.substr(colon + 1), port) || port < min_port ||
      port > 65535)
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be {}:PORT with a port from {} to 65535 (got \"{}\")", def.name,
                                  min_port == 0 ? "ADDR" : "HOST", min_port, value),
                      std::string(def.name));
  return std::string(value);
}

result<std::string> valid_listen(const setting_def& def, std::string_view value) { return host_port(def, value, 0); }

result<std::string> valid_optional_listen(const setting_def& def, std::string_view value) {
  if (value.empty()) return std::string();
  return valid_listen(def, value);
}

result<std::string> valid_optional_server(const setting_def& def, std::string_view value) {
  if (value.empty()) return std::string();
  return host_port(def, value, 1);
}

result<std::string> valid_certificate_ref(const setting_def&, std::string_view value) {
  if (value.empty()) return std::string();
  auto ref = parse_certificate_ref(value);
  if (!ref) return std::move(ref).error();
  return std::string(value);
}

// The shape only: the MongoDB URI's own grammar is the store module's (checked at start).
result<std::string> valid_store(const setting_def&, std::string_view value) {
  if (value == "sqlite" || value.rfind("mongodb://", 0) == 0 || value.rfind("mongodb+srv://", 0) == 0)
    return std::string(value);
  return make_error(errc::invalid_argument, "store must be sqlite or a mongodb:// or mongodb+srv:// URI", "store");
}

result<std::string> valid_data(const setting_def&, std::string_view value) {
  if (value.empty()) return make_error(errc::invalid_argument, "data must not be empty", "data");
  return std::string(value);
}
}  // namespace

std::span<const setting_group> setting_groups() noexcept { return groups; }

std::vector<std::string_view> group_members(const setting_group& group) { return split_bars(group.members); }

std::string_view group_of(const setting_def& def) noexcept {
  if (def.scope != setting_scope::system) return {};
  for (const auto& g : groups)
    for (auto name : split_bars(g.members))
      if (name == def.name) return g.id;
  return {};
}

std::span<const setting_def> all_settings() noexcept { return table; }

std::string_view type_name(setting_type t) noexcept {
  return t == T::integer ? "integer" : t == T::choice ? "choice" : "string";
}

std::vector<std::string_view> choice_values(const setting_def& def) {
  if (def.type != T::choice) return {};
  return split_bars(def.choices);
}

result<std::vector<std::int64_t>> parse_expiry_thresholds(std::string_view value, std::string_view setting) {
  std::vector<std::int64_t> out;
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be 1 to 10 comma-separated day counts from 1 "
                                  "to 3650, like 30,14,7,1 (got \"{}\")", setting, value.substr(0, 100)),
                      std::string(setting));
  };
  while (!value.empty()) {
    auto comma = value.find(',');
    auto part = value.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    std::int64_t d = 0;
    if (!parse_int(part, d) || d < 1 || d > 3650) return bad();
    out.push_back(d);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  if (out.empty() || out.size() > 10) return bad();
  std::sort(out.begin(), out.end(), std::greater<>());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

result<std::vector<std::string>> parse_base_dirs(std::string_view value) {
  std::vector<std::string> out;
  auto bad = [&](std::string_view entry, const char* why) {
    return make_error(errc::invalid_argument,
                      fmt::format("file_target_base_dirs: \"{}\" {} (give absolute directories, comma-separated, like "
                                  "/srv/certs,/etc/nginx/tls)", entry.substr(0, 200), why),
                      "file_target_base_dirs");
  };
  while (!value.empty()) {
    auto comma = value.find(',');
    auto part = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part.empty()) continue;
    if (part.size() > 1024) return bad(part, "is longer than 1024 characters");
    if (part.front() != '/') return bad(part, "is not absolute");
    std::string dir(part);
    // Trailing slashes and the blanks before them go: "/srv/certs /" is /srv/certs, and the
    // canonical text read again is itself (a kept "certs " would be trimmed on the next read).
    while (dir.size() > 1 && (dir.back() == '/' || dir.back() == ' ')) dir.pop_back();
    if (dir == "/") return bad(part, "is the root directory: that would allow every path");
    for (char c : dir)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ',') return bad(part, "contains a control character");
    // Lexically normal, so "is under" is a prefix test: no empty, "." or ".." segments.
    for (std::size_t i = 1; i <= dir.size();) {
      auto j = dir.find('/', i);
      if (j == std::string::npos) j = dir.size();
      auto seg = std::string_view(dir).substr(i, j - i);
      if (seg.empty() || seg == "." || seg == "..") return bad(part, "has an empty, . or .. segment");
      i = j + 1;
    }
    if (std::find(out.begin(), out.end(), dir) == out.end()) out.push_back(std::move(dir));
    if (out.size() > 32) return bad(part, "is one entry too many (at most 32)");
  }
  return out;
}

namespace {
result<std::string> valid_expiry_thresholds(const setting_def& def, std::string_view value) {
  auto days = parse_expiry_thresholds(value, def.name);
  if (!days) return std::move(days).error();
  std::string canon;
  for (auto d : *days) canon += (canon.empty() ? "" : ",") + std::to_string(d);
  return canon;
}

result<std::string> valid_base_dirs(const setting_def&, std::string_view value) {
  auto dirs = parse_base_dirs(value);
  if (!dirs) return std::move(dirs).error();
  std::string canon;
  for (const auto& d : *dirs) canon += (canon.empty() ? "" : ",") + d;
  return canon;
}

// egress_allow_list and ssh_allow_list: refused when the grammar refuses them (the error names
// the setting), so a bad list never gets stored to fail at the first delivery. The text is kept
// as written: the settings API shows it back the way the operator typed it.
result<std::string> valid_allow_list(const setting_def& def, std::string_view value) {
  auto policy = parse_egress_allow_list(value, def.name);
  if (!policy) return std::move(policy).error();
  return std::string(value);
}
// An http(s) origin with an optional path prefix: what a link in a message starts with. No
// user:password@, query or fragment (the link adds its own path and query); stored without a
// trailing slash.
result<std::string> valid_ui_base_url(const setting_def& def, std::string_view value) {
  if (value.empty()) return std::string();
  auto bad = [&](std::string_view why) {
    return make_error(errc::invalid_argument,
                      fmt::format("{} {} (write it like https://certfleet.example.com or http://10.0.0.5:8080/certfleet)",
                                  def.name, why),
                      std::string(def.name));
  };
  if (value.size() > 512) return bad("is longer than 512 characters");
  std::string_view rest;
  if (value.starts_with("https://")) rest = value.substr(8);
  else if (value.starts_with("http://")) rest = value.substr(7);
  else return bad("must start with https:// or http://");
  for (char c : value)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return bad("must be ASCII without spaces (percent-encode the rest)");
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  if (authority.empty()) return bad("has no host");
  if (authority.find('@') != std::string_view::npos) return bad("must not carry a user name or password");
  for (char c : authority)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '[' || c == ']'))
      return bad("has a host that is not a name, an address or name:port");
  if (value.find_first_of("?#") != std::string_view::npos) return bad("must not have a query or fragment");
  std::string canon(value);
  while (canon.size() > 1 && canon.back() == '/' && canon.size() > value.size() - rest.size() + authority.size())
    canon.pop_back();
  return canon;
}
}  // namespace

result<certificate_ref> parse_certificate_ref(std::string_view value) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      fmt::format("tls_certificate must be PROJECT/ID: a project name (a-z, 0-9, '-'), a slash and a "
                                  "24-character hex certificate id, like default/66a1f0c2e4b5a6c7d8e9f001 (got \"{}\")",
                                  value.substr(0, 200)),
                      "tls_certificate");
  };
  auto slash = value.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash > 63) return bad();
  auto project = value.substr(0, slash);
  auto id = value.substr(slash + 1);
  for (char c : project)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return bad();
  if (id.size() != 24) return bad();
  for (char c : id)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return bad();
  return certificate_ref{std::string(project), std::string(id)};
}

const setting_def* find_setting(std::string_view name) noexcept {
  for (const auto& d : table)
    if (d.name == name) return &d;
  return nullptr;
}

result<std::string> validate_setting(const setting_def& def, std::string_view value) {
  switch (def.type) {
    case T::integer: {
      std::int64_t v;
      if (!parse_int(value, v) || v < def.min || v > def.max)
        return make_error(errc::invalid_argument,
                          fmt::format("{} must be an integer from {} to {} (got \"{}\")", def.name, def.min,
                                      def.max, value),
                          std::string(def.name));
      return std::to_string(v);
    }
    case T::choice: {
      for (auto c : choice_values(def))
        if (c == value) return std::string(value);
      return make_error(errc::invalid_argument,
                        fmt::format("{} must be one of {} (got \"{}\")", def.name, def.choices, value),
                        std::string(def.name));
    }
    case T::string:
      if (value.size() > 4096)
        return make_error(errc::invalid_argument, fmt::format("{} is longer than 4096 characters", def.name),
                          std::string(def.name));
      if (def.validate) return def.validate(def, value);
      return std::string(value);
  }
  return std::string(value);
}

std::string settings_reference_markdown() {
  std::string out = "| setting | scope | type | range | default | what it does |\n|---|---|---|---|---|---|\n";
  for (const auto& d : table) {
    std::string range = "text";
    if (d.type == T::integer) range = fmt::format("{} – {}", d.min, d.max);
    if (d.type == T::choice) range = fmt::format("{}", fmt::join(choice_values(d), ", "));
    const auto type = type_name(d.type);
    std::string def = d.default_value.empty() ? std::string("*(empty)*") : fmt::format("`{}`", d.default_value);
    std::string scope = d.scope == S::project ? "project" : "process";
    if (d.scope == S::system)
      for (const auto& g : groups)
        if (g.id == group_of(d)) scope = fmt::format("system · {}", g.title);
    out += fmt::format("| `{}` | {} | {} | {} | {} | {} |\n", d.name, scope, type, range, def, d.doc);
  }
  return out;
}

namespace {
// Words of `text` as "# " lines of at most `width` characters.
void comment_lines(std::string& out, std::string_view text, std::size_t width = 98) {
  std::string line = "#";
  while (!text.empty()) {
    auto space = text.find(' ');
    auto word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
    if (line.size() > 1 && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = "#";
    }
    line += " ";
    line += word;
  }
  out += line + "\n";
}

std::string toml_value(const setting_def& d, std::string_view v) {
  if (d.type == T::integer) return std::string(v);
  std::string q = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}
}  // namespace

std::string settings_sample_toml(const std::map<std::string, std::string, std::less<>>& values) {
  std::string out =
      "# certfleet process settings (TOML: flat keys, `name = value`).\n"
      "#\n"
      "# Generated from the settings table in src/core/settings.cpp: every process setting, its\n"
      "# range and its default. A commented-out line is at its default; uncomment it to change it.\n"
      "# CERTFLEET_<NAME> environment variables override this file, and flags override both. A bad\n"
      "# value stops certfleet at start, naming the setting. `certfleet doctor` checks this file.\n"
      "# System-wide settings (egress_allow_list, ...) live in the store: PUT /api/v1/settings.\n"
      "# docs/configuration.md explains each setting.\n";
  for (const auto& d : table) {
    if (d.scope != S::process) continue;
    out += "\n";
    comment_lines(out, d.doc);
    std::string range = "text";
    if (d.type == T::integer) range = fmt::format("integer from {} to {}", d.min, d.max);
    if (d.type == T::choice) range = fmt::format("one of {}", fmt::join(choice_values(d), ", "));
    out += fmt::format("# {}; default {}\n", range, d.default_value.empty() ? "empty" : toml_value(d, d.default_value));
    if (auto it = values.find(d.name); it != values.end())
      out += fmt::format("{} = {}\n", d.name, toml_value(d, it->second));
    else
      out += fmt::format("#{} = {}\n", d.name, toml_value(d, d.default_value));
  }
  return out;
}

settings_map::settings_map() {
  for (const auto& d : table) values_.emplace(std::string(d.name), std::string(d.default_value));
}

result<void> settings_map::set(std::string_view name, std::string_view value) {
  const auto* def = find_setting(name);
  if (!def) return make_error(errc::invalid_argument, fmt::format("unknown setting {}", name), std::string(name));
  auto v = validate_setting(*def, value);
  if (!v) {
    if (!def->when_invalid.empty()) values_.find(name)->second = std::string(def->when_invalid);
    return std::move(v).error();
  }
  values_.find(name)->second = std::move(*v);
  return {};
}

const std::string& settings_map::text(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw std::logic_error(fmt::format("no setting named {}", name));
  return it->second;
}

std::int64_t settings_map::integer(std::string_view name) const {
  std::int64_t v = 0;
  if (!parse_int(text(name), v)) throw std::logic_error(fmt::format("setting {} is not an integer", name));
  return v;
}

namespace {
result<void> apply_toml(settings_map& m, const toml::table& doc, const std::string& source) {
  for (auto&& [key, node] : doc) {
    std::string name(key.str());
    const auto* def = find_setting(name);
    if (!def || def->scope != setting_scope::process)
      return make_error(errc::config_invalid, fmt::format("{}: unknown setting {}", source, name), name);
    std::string text;
    if (auto i = node.value<std::int64_t>(); i && node.is_integer()) text = std::to_string(*i);
    else if (auto s = node.value<std::string>(); s && node.is_string()) text = *s;
    else return make_error(errc::config_invalid, fmt::format("{}: {} must be a string or an integer", source, name), name);
    if (auto r = m.set(name, text); !r)
      return make_error(errc::config_invalid, fmt::format("{}: {}", source, r.error().message), r.error().field);
  }
  return {};
}

result<toml::table> parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return make_error(errc::config_invalid,
                      fmt::format("{}: line {}: {}", source, e.source().begin.line, e.description()), "config");
  }
}

result<void> apply_overrides(settings_map& m, const std::map<std::string, std::string>& overrides) {
  for (const auto& [name, value] : overrides) {
    const auto* def = find_setting(name);
    if (!def || def->scope != setting_scope::process)
      return make_error(errc::config_invalid, fmt::format("flag --{}: unknown setting", name), name);
    if (auto r = m.set(name, value); !r)
      return make_error(errc::config_invalid, fmt::format("flag --{}: {}", name, r.error().message), r.error().field);
  }
  return {};
}
}  // namespace

result<settings_map> load_config_text(std::string_view toml_text, const std::string& source,
                                      const std::map<std::string, std::string>& overrides) {
  settings_map m;
  auto doc = parse_toml(toml_text, source);
  if (!doc) return std::move(doc).error();
  if (auto r = apply_toml(m, *doc, source); !r) return std::move(r).error();
  if (auto r = apply_overrides(m, overrides); !r) return std::move(r).error();
  return m;
}

result<settings_map> load_config(const std::string& file, const std::map<std::string, std::string>& overrides) {
  settings_map m;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in)
      return make_error(errc::config_invalid, fmt::format("config file {}: cannot be read", file), "config");
    std::stringstream text;
    text << in.rdbuf();
    auto doc = parse_toml(text.str(), "config file " + file);
    if (!doc) return std::move(doc).error();
    if (auto r = apply_toml(m, *doc, "config file " + file); !r) return std::move(r).error();
  }
  for (const auto& d : table) {
    if (d.scope != setting_scope::process) continue;
    std::string env = "CERTFLEET_" + upper(d.name);
    if (const char* v = std::getenv(env.c_str()))
      if (auto r = m.set(d.name, v); !r)
        return make_error(errc::config_invalid, fmt::format("environment {}: {}", env, r.error().message),
                          r.error().field);
  }
  if (auto r = apply_overrides(m, overrides); !r) return std::move(r).error();
  return m;
}

}  // namespace certfleet
