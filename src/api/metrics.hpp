#pragma once
// In-process counters of the API and the Prometheus text rendering of /metrics.
#include "certfleet/core/histogram.hpp"
#include "certfleet/checks/gauges.hpp"
#include "certfleet/distribution/phase_metrics.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/store.hpp"
#include "process_metrics.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::api {

class api_metrics {
 public:
  void request(std::string_view route, unsigned status, double seconds);
  void store_call(std::string_view op, double seconds);
  void subscriber_dropped() { ++ws_dropped_; }
  std::uint64_t subscribers_dropped() const { return ws_dropped_; }
  void stream_refused() { ++ws_refused_; }  // over ws_streams_per_token / ws_streams_per_client
  void connection_refused(bool per_client) { ++(per_client ? refused_client_ : refused_total_); }
  // At http_max_connections: an idle connection ended to give its slot to a new one.
  void connection_evicted() { ++evicted_; }
  // A request answered from the health reserve (beyond http_max_connections).
  void reserve_served() { ++reserve_served_; }
  void refusal_unaudited() { ++refusals_unaudited_; }
  void tls_handshake_failed() { ++tls_handshake_failures_; }

  // What /metrics shows besides these counters, gathered from the store and the worker.
  struct snapshot {
    std::vector<store::job_count> jobs;
    std::vector<store::lane_stats> lanes;
    std::optional<store::duration_histogram> durations;
    const queue::worker_stats* worker = nullptr;
    const distribution::delivery_phase_metrics* delivery_phases = nullptr;
    int worker_running = 0;
    std::size_t ws_subscribers = 0;
    std::size_t ws_watched_jobs = 0;
    std::size_t connections = 0;
    time_ms now = 0;
    bool store_ok = true;
    store::store::write_health store_writes;
    const queue::liveness_stats* liveness = nullptr;  // the worker registry as this process saw it
    int scheduler_leader = -1;  // -1: no scheduler in this process
    std::int64_t scheduler_epoch = 0;
    std::int64_t certificates_expiring_soon = -1;  // -1: not read
    std::int64_t certificates_expired = 0;
    std::int64_t certificates_revoked = 0;
    std::int64_t distributions_running = -1;
    std::int64_t distributions_running_long = 0;
    // Per-certificate, per-distribution and per-target series (empty when not read).
    std::vector<checks::certificate_series> certificate_series;
    std::vector<checks::distribution_series> distribution_series;
    std::vector<checks::target_series> target_series;
    std::optional<process_stats> process;
    std::string version;  // certfleet_build_info
    // The API listener's TLS certificate (only when it serves HTTPS).
    bool tls = false;
    std::int64_t tls_not_after_ms = 0;
    std::uint64_t tls_reloads = 0, tls_reload_failures = 0;
  };
  std::string render(const snapshot& s) const;

 private:
  std::map<std::pair<std::string, unsigned>, std::uint64_t> requests_;
  std::map<std::string, histogram, std::less<>> latency_;
  std::map<std::string, histogram, std::less<>> store_latency_;
  std::uint64_t ws_dropped_ = 0;
  std::uint64_t ws_refused_ = 0;
  std::uint64_t refused_client_ = 0, refused_total_ = 0;
  std::uint64_t evicted_ = 0, reserve_served_ = 0;
  std::uint64_t refusals_unaudited_ = 0;
  std::uint64_t tls_handshake_failures_ = 0;
};

// "a\"b" with \, " and newline escaped, for a label value.
std::string escape_label(std::string_view v);

}  // namespace certfleet::api
