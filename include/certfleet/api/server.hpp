#pragma once
// The HTTP/1.1 + WebSocket server (DESIGN §6) on the process's one event loop. Beast stays out
// of this header: the server is a pimpl facade.
#include "certfleet/api/audit_file.hpp"
#include "certfleet/api/tls.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/queue/handler.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace certfleet {
class kek;
}
namespace certfleet::store {
class store;
}
namespace certfleet::queue {
class queue_service;
class worker;
class liveness_monitor;
}  // namespace certfleet::queue
namespace certfleet::distribution {
class delivery_phase_metrics;
}

namespace certfleet::api {

struct server_options {
  std::string listen = "127.0.0.1:8080";  // ADDR:PORT; port 0 picks a free one
  std::string version = "dev";            // the build's version (the OpenAPI document's info.version)
  bool serve_api = true;                  // false (worker/scheduler mode): /healthz /readyz /metrics only
  std::size_t body_limit = 1u << 20;      // 1 MiB: 413 beyond
  // POST …/targets:import, for an authorized caller: 100,000 targets as JSON lines fit in ~40 MiB.
  std::size_t bulk_body_limit = 64u << 20;
  std::size_t header_limit = 16u << 10;   // 431 beyond
  std::chrono::milliseconds idle_timeout{60'000};  // keep-alive: waiting for the next request
  // A new connection's first request must start within this: a client that connects and sends
  // nothing holds a slot this long, not the keep-alive idle_timeout.
  std::chrono::milliseconds first_byte_timeout{10'000};
  std::chrono::milliseconds read_timeout{15'000};  // one request, from its first byte to its end
  std::chrono::milliseconds write_timeout{30'000};
  // http_max_connections. At it, a newcomer takes the slot of the oldest idle connection of the
  // address holding the most; when none is idle, 503 too_many_connections and close.
  int max_connections = 4096;
  // Per client address (an IPv6 client by its /64); setting http_max_connections_per_client.
  int max_connections_per_client = 256;
  // Slots beyond max_connections for /healthz, /readyz and /metrics only, used when the cap is
  // reached and no idle connection can be evicted (http_health_reserve_connections).
  int health_reserve_connections = 16;
  // Strict-Transport-Security: max-age on every response over TLS; 0 = none (http_hsts_max_age_s).
  std::int64_t hsts_max_age_s = 31'536'000;
  // Refused (401/403) state-changing calls audited per minute by this process; the rest are
  // counted into the next entry, so a flood of bad tokens cannot fill the disk.
  int refusal_audit_per_minute = 120;
  // Live log stream.
  std::chrono::milliseconds ws_idle_timeout{30'000};  // pings at half of it; a silent peer is closed
  std::chrono::milliseconds log_poll_interval{250};   // store poll of a watched job
  std::chrono::milliseconds log_coalesce{5};          // lines this close together share a frame
  std::size_t ws_queue_frames = 1024;                 // per subscriber; beyond, it is closed as too slow
  std::size_t ws_queue_bytes = 8u << 20;
  // Live streams open at once per token (or sign-in) and per client address (settings
  // ws_streams_per_token, ws_streams_per_client): beyond, the upgrade is refused with 429.
  int ws_streams_per_token = 32;
  int ws_streams_per_client = 64;
  std::chrono::milliseconds auth_cache_ttl{2'000};    // a revoked token may work this long in other processes
  std::chrono::milliseconds settings_cache_ttl{1'000};
  std::chrono::milliseconds shutdown_grace{5'000};
  // The audit log's file copy (audit_log_file); null or not open: none.
  std::shared_ptr<audit_file> audit_sink;
  // Seals and opens catalog secrets; null: those routes answer 503 (must outlive the server).
  const kek* key = nullptr;
  boost::asio::thread_pool* cpu = nullptr;  // name resolution of scan-host-key and channel tests
  // Extra trust anchors (PEM) for a channel test's TLS peers (CERTFLEET_EXTRA_CA_FILE).
  std::string ca_pem;
  // TLS (issue 19): with material, `listen` serves HTTPS only. With tls_certificate also set,
  // the material is that managed certificate's current version, and the server reads it again
  // every tls_poll_interval (and at once after this process changes a certificate), serving each
  // new version to new connections.
  std::optional<tls_material> tls;
  std::optional<certificate_ref> tls_certificate;
  std::chrono::milliseconds tls_poll_interval{10'000};
  // A second, plain-HTTP listener for /healthz, /readyz and /metrics only ("" = none).
  std::string metrics_listen;
};

class server {
 public:
  server(boost::asio::any_io_executor ex, store::store& st, queue::queue_service& queue, const clock_source& clock,
         server_options options);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and starts accepting; returns the bound "ADDR:PORT" (the real port when 0 was asked).
  result<std::string> start();
  // Stops accepting, lets requests in flight finish, closes idle and WebSocket connections
  // (going away), and returns when every connection is gone or the grace period ends.
  boost::asio::awaitable<void> stop();
  unsigned short port() const;
  unsigned short metrics_port() const;  // 0: no metrics listener

  // The certificate new TLS connections get (nullopt: plain HTTP).
  std::optional<tls_identity> tls_certificate() const;
  // Serve new connections this material from now on (SIGHUP re-reading tls_cert_file and
  // tls_key_file); refused with the setting named, keeping the current certificate. Call on the
  // server's executor.
  result<tls_identity> replace_tls(const tls_material& m);
  // SIGHUP: reads tls_cert_file and tls_key_file again and serves them to new connections; a
  // file that cannot be read or a pair that cannot be served is refused (logged, counted in
  // certfleet_tls_certificate_reloads_total{outcome="failed"}) keeping the current certificate.
  // Call on the server's executor.
  result<tls_identity> reload_tls_files(const std::string& cert_file, const std::string& key_file);
  // A certificate may have a new version (stored by this process): the tls_certificate watcher
  // looks now instead of at its next poll. Call on the server's executor.
  void certificate_changed();

  // Worker counters for /metrics, when a worker runs in this process.
  void attach_worker(const queue::worker* w);
  // The delivery phases this process timed, for /metrics (must outlive the server).
  void attach_delivery_phases(const distribution::delivery_phase_metrics* m);
  // The worker registry's watcher of this process (issue 34): live workers and reclaimed jobs
  // for /metrics, /readyz and the workers list (must outlive the server).
  void attach_liveness(const queue::liveness_monitor* m);
  // Leader state (held, epoch) for /metrics, when a scheduler runs in this process.
  void attach_scheduler_probe(std::function<std::pair<bool, std::int64_t>()> probe);
  // Give to worker::set_log_publisher: the in-process hub of the live log stream.
  queue::log_publisher log_publisher();

  struct stats {
    std::size_t connections = 0;
    std::size_t subscribers = 0;
    std::size_t watched_jobs = 0;  // store pollers running
    std::uint64_t subscribers_dropped = 0;
    std::size_t stream_slots = 0;  // live streams counted against the per-token/per-client caps
  };
  stats current_stats() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace certfleet::api
