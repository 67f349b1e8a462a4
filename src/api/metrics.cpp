#include "metrics.hpp"

#include "certfleet/core/build_info.hpp"

#include <fmt/format.h>

namespace certfleet::api {

std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.push_back(c);
  }
  return out;
}

void api_metrics::request(std::string_view route, unsigned status, double seconds) {
  ++requests_[{std::string(route), status}];
  auto it = latency_.find(route);
  if (it == latency_.end()) it = latency_.emplace(std::string(route), histogram{}).first;
  it->second.observe(seconds);
}

void api_metrics::store_call(std::string_view op, double seconds) {
  auto it = store_latency_.find(op);
  if (it == store_latency_.end()) it = store_latency_.emplace(std::string(op), histogram{}).first;
  it->second.observe(seconds);
}

namespace {
void head(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}
}  // namespace

std::string api_metrics::render(const snapshot& s) const {
  std::string out;
  out.reserve(8192);
  head(out, "certfleet_store_up", "gauge", "Whether the last store reads for this scrape succeeded (1) or not (0).");
  out += fmt::format("certfleet_store_up {}\n", s.store_ok ? 1 : 0);
  head(out, "certfleet_store_disk_full", "gauge",
       "Whether the store refuses writes because its disk is full (1) or not (0); /readyz is 503 meanwhile.");
  out += fmt::format("certfleet_store_disk_full {}\n", s.store_writes.disk_full ? 1 : 0);
  head(out, "certfleet_store_disk_full_refusals_total", "counter",
       "Store write operations of this process refused because the disk was full.");
  out += fmt::format("certfleet_store_disk_full_refusals_total {}\n", s.store_writes.disk_full_refusals);

  if (s.scheduler_leader >= 0) {
    head(out, "certfleet_scheduler_leader", "gauge", "Whether this process's scheduler holds the leader lease (1) or not (0).");
    out += fmt::format("certfleet_scheduler_leader {}\n", s.scheduler_leader);
    head(out, "certfleet_scheduler_epoch", "gauge", "The leader lease's fencing epoch as this process last saw it.");
    out += fmt::format("certfleet_scheduler_epoch {}\n", s.scheduler_epoch);
  }
  if (s.certificates_expiring_soon >= 0) {
    head(out, "certfleet_certificates_expiring_soon", "gauge",
         "Certificates whose not_after is within the largest certificate_expiry_thresholds_days, not yet expired.");
    out += fmt::format("certfleet_certificates_expiring_soon {}\n", s.certificates_expiring_soon);
    head(out, "certfleet_certificates_expired", "gauge", "Certificates past their not_after.");
    out += fmt::format("certfleet_certificates_expired {}\n", s.certificates_expired);
    head(out, "certfleet_certificates_revoked", "gauge",
         "Certificates marked revoked: through certfleet, or found in their CA's CRL or by OCSP.");
    out += fmt::format("certfleet_certificates_revoked {}\n", s.certificates_revoked);
  }
  if (s.distributions_running >= 0) {
    head(out, "certfleet_distributions_running", "gauge", "Distributions with a run in progress.");
    out += fmt::format("certfleet_distributions_running {}\n", s.distributions_running);
    head(out, "certfleet_distributions_running_long", "gauge",
         "Distributions whose current run started more than an hour ago and has not finished.");
    out += fmt::format("certfleet_distributions_running_long {}\n", s.distributions_running_long);
  }

  // Heads always: a dashboard's query names a family that exists, with or without series.
  auto seconds = [](time_ms ms) { return fmt::format("{:.3f}", static_cast<double>(ms) / 1000.0); };
  auto cert_labels = [](const checks::certificate_series& c) {
    return fmt::format("project=\"{}\",certificate=\"{}\",issuer=\"{}\"", escape_label(c.project),
                       escape_label(c.name), escape_label(c.issuer));
  };
  head(out, "certfleet_certificate_not_after_timestamp_seconds", "gauge",
       "The current version's not_after, per certificate (seconds since the epoch).");
  for (const auto& c : s.certificate_series)
    out += fmt::format("certfleet_certificate_not_after_timestamp_seconds{{{}}} {}\n", cert_labels(c), seconds(c.not_after));
  head(out, "certfleet_certificate_not_before_timestamp_seconds", "gauge",
       "The current version's not_before, per certificate (seconds since the epoch).");
  for (const auto& c : s.certificate_series)
    out += fmt::format("certfleet_certificate_not_before_timestamp_seconds{{{}}} {}\n", cert_labels(c), seconds(c.not_before));
  head(out, "certfleet_certificate_renewal_due_timestamp_seconds", "gauge",
       "When an ACME auto-renew certificate is due for renewal by its lifetime (the start of its last third); "
       "a renewal moves it forward.");
  for (const auto& c : s.certificate_series)
    if (c.renewal_due > 0)
      out += fmt::format("certfleet_certificate_renewal_due_timestamp_seconds{{{}}} {}\n", cert_labels(c),
                         seconds(c.renewal_due));
  head(out, "certfleet_distribution_last_run_status", "gauge",
       "1 for the status of each distribution's current or last run, 0 for the other statuses.");
  for (const auto& d : s.distribution_series)
    for (auto status : store::run_status_names)
      out += fmt::format("certfleet_distribution_last_run_status{{project=\"{}\",distribution=\"{}\",status=\"{}\"}} {}\n",
                         escape_label(d.project), escape_label(d.name), status, d.status == status ? 1 : 0);
  head(out, "certfleet_distribution_last_run_finished_timestamp_seconds", "gauge",
       "When each distribution's last run finished (seconds since the epoch; 0: none finished yet).");
  for (const auto& d : s.distribution_series)
    out += fmt::format("certfleet_distribution_last_run_finished_timestamp_seconds{{project=\"{}\",distribution=\"{}\"}} {}\n",
                       escape_label(d.project), escape_label(d.name), seconds(d.run_finished_at));
  head(out, "certfleet_target_last_success_timestamp_seconds", "gauge",
       "When a delivery to each target last succeeded, by any distribution (seconds since the epoch).");
  for (const auto& t : s.target_series)
    out += fmt::format("certfleet_target_last_success_timestamp_seconds{{project=\"{}\",target=\"{}\"}} {}\n",
                       escape_label(t.project), escape_label(t.name), seconds(t.last_success));
  head(out, "certfleet_build_info", "gauge", "Always 1: the version, commit, commit date and compiler of this build.");
  const auto& b = this_build();
  out += fmt::format("certfleet_build_info{{version=\"{}\",commit=\"{}\",date=\"{}\",compiler=\"{}\"}} 1\n",
                     escape_label(s.version), escape_label(b.commit), escape_label(b.date), escape_label(b.compiler));
  if (s.process) out += render_process_stats(*s.process);

  head(out, "certfleet_jobs", "gauge", "Jobs in the store by status and type.");
  for (const auto& c : s.jobs)
    out += fmt::format("certfleet_jobs{{status=\"{}\",type=\"{}\"}} {}\n", escape_label(c.status), escape_label(c.type),
                       c.count);

  head(out, "certfleet_lane_pending_jobs", "gauge", "Claimable pending or failed-awaiting-retry jobs per lane.");
  for (const auto& l : s.lanes)
    out += fmt::format("certfleet_lane_pending_jobs{{lane=\"{}\"}} {}\n", escape_label(l.lane), l.pending);
  head(out, "certfleet_lane_oldest_pending_age_seconds", "gauge",
       "Age of the oldest claimable job per lane since it became ready (0 when none).");
  for (const auto& l : s.lanes) {
    double age = l.oldest_ready_at && s.now > l.oldest_ready_at ? static_cast<double>(s.now - l.oldest_ready_at) / 1000.0 : 0.0;
    out += fmt::format("certfleet_lane_oldest_pending_age_seconds{{lane=\"{}\"}} {}\n", escape_label(l.lane), age);
  }

  if (s.durations) {
    const auto& d = *s.durations;
    head(out, "certfleet_job_duration_seconds", "histogram",
         "Run time (start of the last attempt to the end) of the finished jobs in the store.");
    for (std::size_t i = 0; i < d.bounds_s.size(); ++i)
      out += fmt::format("certfleet_job_duration_seconds_bucket{{le=\"{}\"}} {}\n", d.bounds_s[i], d.cumulative[i]);
    out += fmt::format("certfleet_job_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", d.cumulative.back());
    out += fmt::format("certfleet_job_duration_seconds_sum {}\n", d.sum_s);
    out += fmt::format("certfleet_job_duration_seconds_count {}\n", d.cumulative.back());
  }

  if (s.worker) {
    const auto& w = *s.worker;
    head(out, "certfleet_worker_claims_total", "counter", "Jobs this process's worker claimed.");
    out += fmt::format("certfleet_worker_claims_total {}\n", w.claimed);
    head(out, "certfleet_worker_claim_calls_total", "counter", "Claim statements this process's worker ran.");
    out += fmt::format("certfleet_worker_claim_calls_total {}\n", w.claim_calls);
    head(out, "certfleet_worker_job_ends_total", "counter",
         "Attempts this process's worker ended, by outcome (completed, failed, dead, cancelled, released, lost).");
    for (auto [name, v] : {std::pair<const char*, std::int64_t>{"completed", w.completed},
                           {"failed", w.failed},
                           {"dead", w.dead},
                           {"cancelled", w.cancelled},
                           {"released", w.released},
                           {"lost", w.lost}})
      out += fmt::format("certfleet_worker_job_ends_total{{outcome=\"{}\"}} {}\n", name, v);
    head(out, "certfleet_worker_reaped_total", "counter", "Jobs whose worker was lost that this process reaped.");
    out += fmt::format("certfleet_worker_reaped_total {}\n", w.reaped);
    head(out, "certfleet_worker_running_jobs", "gauge", "Handlers running in this process.");
    out += fmt::format("certfleet_worker_running_jobs {}\n", s.worker_running);
  }

  if (s.delivery_phases) {
    head(out, "certfleet_delivery_phase_duration_seconds", "histogram",
         "Delivery phases this process's distribution jobs timed (connect, handshake, auth, upload, install, validate).");
    for (const auto& [phase, h] : s.delivery_phases->phases())
      h.render(out, "certfleet_delivery_phase_duration_seconds", fmt::format("phase=\"{}\",", escape_label(phase)));
  }

  head(out, "certfleet_http_requests_total", "counter", "HTTP requests by route and status code.");
  for (const auto& [k, v] : requests_)
    out += fmt::format("certfleet_http_requests_total{{route=\"{}\",code=\"{}\"}} {}\n", escape_label(k.first), k.second, v);
  head(out, "certfleet_http_request_duration_seconds", "histogram", "HTTP request latency by route.");
  for (const auto& [route, h] : latency_)
    h.render(out, "certfleet_http_request_duration_seconds", fmt::format("route=\"{}\",", escape_label(route)));
  head(out, "certfleet_http_connections", "gauge", "Open HTTP and WebSocket connections.");
  out += fmt::format("certfleet_http_connections {}\n", s.connections);
  head(out, "certfleet_http_connections_refused_total", "counter",
       "Connections answered 503 too_many_connections, by the limit that was reached.");
  out += fmt::format("certfleet_http_connections_refused_total{{limit=\"per_client\"}} {}\n", refused_client_);
  out += fmt::format("certfleet_http_connections_refused_total{{limit=\"total\"}} {}\n", refused_total_);
  head(out, "certfleet_http_connections_evicted_total", "counter",
       "Idle keep-alive connections closed at http_max_connections to give their slot to a new connection "
       "(the oldest idle one of the client address holding the most).");
  out += fmt::format("certfleet_http_connections_evicted_total {}\n", evicted_);
  head(out, "certfleet_http_health_reserve_requests_total", "counter",
       "/healthz, /readyz and /metrics requests answered from http_health_reserve_connections (every regular slot busy).");
  out += fmt::format("certfleet_http_health_reserve_requests_total {}\n", reserve_served_);
  head(out, "certfleet_audit_refusals_unaudited_total", "counter",
       "Refused (401/403) state-changing calls beyond the per-minute audit bound: counted, not written.");
  out += fmt::format("certfleet_audit_refusals_unaudited_total {}\n", refusals_unaudited_);

  if (s.tls) {
    head(out, "certfleet_tls_certificate_not_after_seconds", "gauge",
         "The not_after (unix seconds) of the certificate the API listener serves to new connections.");
    out += fmt::format("certfleet_tls_certificate_not_after_seconds {}\n", s.tls_not_after_ms / 1000);
    head(out, "certfleet_tls_certificate_reloads_total", "counter",
         "New certificate versions the API listener took (ok) or refused and kept the old one (failed).");
    out += fmt::format("certfleet_tls_certificate_reloads_total{{outcome=\"ok\"}} {}\n", s.tls_reloads);
    out += fmt::format("certfleet_tls_certificate_reloads_total{{outcome=\"failed\"}} {}\n", s.tls_reload_failures);
    head(out, "certfleet_tls_handshake_failures_total", "counter",
         "TLS handshakes on the API listener that failed or did not finish within the first-byte deadline.");
    out += fmt::format("certfleet_tls_handshake_failures_total {}\n", tls_handshake_failures_);
  }

  if (s.liveness) {
    head(out, "certfleet_workers_alive", "gauge",
         "Workers whose registry heartbeat is fresh and whose process runs, at this process's last look.");
    out += fmt::format("certfleet_workers_alive {}\n", s.liveness->workers_alive);
    head(out, "certfleet_workers_declared_dead_total", "counter",
         "Workers this process declared dead (process gone, or no heartbeat within worker_dead_after_ms).");
    out += fmt::format("certfleet_workers_declared_dead_total {}\n", s.liveness->declared_dead);
    head(out, "certfleet_jobs_reclaimed_total", "counter",
         "Jobs of dead workers this process released at once instead of at lease expiry.");
    out += fmt::format("certfleet_jobs_reclaimed_total {}\n", s.liveness->reclaimed_jobs);
  }

  head(out, "certfleet_websocket_subscribers", "gauge", "Live job-log stream subscribers.");
  out += fmt::format("certfleet_websocket_subscribers {}\n", s.ws_subscribers);
  head(out, "certfleet_websocket_watched_jobs", "gauge", "Jobs whose log this process is watching (one store poller each).");
  out += fmt::format("certfleet_websocket_watched_jobs {}\n", s.ws_watched_jobs);
  head(out, "certfleet_websocket_subscribers_dropped_total", "counter",
       "Subscribers closed because they could not keep up with their job's log.");
  out += fmt::format("certfleet_websocket_subscribers_dropped_total {}\n", ws_dropped_);
  head(out, "certfleet_websocket_streams_refused_total", "counter",
       "Live log streams refused by ws_streams_per_token or ws_streams_per_client (429).");
  out += fmt::format("certfleet_websocket_streams_refused_total {}\n", ws_refused_);

  head(out, "certfleet_store_call_duration_seconds", "histogram", "Store calls made by the API, by operation.");
  for (const auto& [op, h] : store_latency_)
    h.render(out, "certfleet_store_call_duration_seconds", fmt::format("op=\"{}\",", escape_label(op)));
  return out;
}

}  // namespace certfleet::api
