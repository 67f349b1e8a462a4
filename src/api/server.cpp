// The server facade: the shared state, the listener and the live log hub's publisher. The parts:
// listener.cpp (accept loop, start/stop), http_session.cpp, log_stream_session.cpp (+ the pure
// log_cursor.cpp), auth.cpp, reply.cpp, dispatch.cpp (calls the handler a row of routes.def
// names) and one *_routes.cpp per resource.
#include "certfleet/api/server.hpp"

#include "http_session.hpp"
#include "listener.hpp"
#include "server_state.hpp"
#include "tls_watch.hpp"

#include "certfleet/core/spawn.hpp"

#include <boost/asio/co_spawn.hpp>

namespace certfleet::api {

struct server::impl {
  std::shared_ptr<server_state> state;
  std::shared_ptr<api::listener> listener;
  std::shared_ptr<api::listener> metrics;  // metrics_listen, when set
  std::shared_ptr<connection_reserve> reserve = std::make_shared<connection_reserve>();  // both listeners'
};

server::server(boost::asio::any_io_executor ex, store::store& st, queue::queue_service& queue, const clock_source& clock,
               server_options options)
    : impl_(std::make_shared<impl>()) {
  impl_->state = std::make_shared<server_state>(ex, st, queue, clock, std::move(options));
  const auto& opt = impl_->state->opt;
  impl_->reserve->slots = opt.health_reserve_connections;
  impl_->listener = std::make_shared<api::listener>(impl_->state, opt.listen, "listen", false, impl_->reserve);
  if (!opt.metrics_listen.empty())
    impl_->metrics =
        std::make_shared<api::listener>(impl_->state, opt.metrics_listen, "metrics_listen", true, impl_->reserve);
}

server::~server() {
  impl_->listener->close();
  if (impl_->metrics) impl_->metrics->close();
}

result<std::string> server::start() {
  auto& s = *impl_->state;
  if (s.opt.tls) {
    // Refused here, before anything listens: a bad certificate or key is a configuration error.
    auto installed = install_tls(s, *s.opt.tls);
    if (!installed) return std::move(installed).error();
  }
  auto bound = impl_->listener->start();
  if (!bound) return bound;
  if (impl_->metrics)
    if (auto m = impl_->metrics->start(); !m) return std::move(m).error();
  if (s.opt.tls && s.opt.tls_certificate)
    boost::asio::co_spawn(s.ex, watch_managed_certificate(impl_->state, *s.opt.tls_certificate, s.opt.tls_poll_interval),
                          report_unexpected("tls_certificate watcher"));
  return bound;
}

boost::asio::awaitable<void> server::stop() {
  // The metrics listener only stops accepting: its connections are ended with the others.
  if (impl_->metrics) impl_->metrics->close();
  return impl_->listener->stop();
}
unsigned short server::port() const { return impl_->listener->port(); }
unsigned short server::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

std::optional<tls_identity> server::tls_certificate() const {
  const auto& s = *impl_->state;
  if (!s.tls.context) return std::nullopt;
  return s.tls.identity;
}

result<tls_identity> server::replace_tls(const tls_material& m) {
  if (!impl_->state->tls.context)
    return make_error(errc::config_invalid, "this listener serves plain HTTP: TLS is chosen at start", m.cert_setting);
  return install_tls(*impl_->state, m);
}

result<tls_identity> server::reload_tls_files(const std::string& cert_file, const std::string& key_file) {
  auto& s = *impl_->state;
  auto m = read_tls_files(cert_file, key_file);
  if (!m) {
    // A file that cannot be read (removed, half-renamed, wrong mode) is a failed reload like a
    // pair that does not parse: counted, so an alert on the failed outcome sees it.
    if (s.tls.context) tls_reload_failed(s, m.error());
    return std::move(m).error();
  }
  return replace_tls(*m);
}

void server::certificate_changed() {
  if (impl_->state->tls.wake) impl_->state->tls.wake();
}
void server::attach_worker(const queue::worker* w) { impl_->state->worker = w; }
void server::attach_delivery_phases(const distribution::delivery_phase_metrics* m) { impl_->state->delivery_phases = m; }
void server::attach_liveness(const queue::liveness_monitor* m) { impl_->state->liveness = m; }

void server::attach_scheduler_probe(std::function<std::pair<bool, std::int64_t>()> probe) {
  impl_->state->scheduler_probe = std::move(probe);
}

queue::log_publisher server::log_publisher() {
  std::weak_ptr<server_state> w = impl_->state;
  return [w](const std::string& job_id, const store::log_line& line) {
    if (auto p = w.lock()) p->hub.publish(job_id, line);
  };
}

server::stats server::current_stats() const {
  const auto& s = *impl_->state;
  std::size_t slots = 0;
  for (const auto& [token, n] : s.streams_per_token) slots += static_cast<std::size_t>(n);
  return stats{s.conns.size(), s.hub.subscribers(), s.hub.watched_jobs(), s.metrics.subscribers_dropped(), slots};
}

}  // namespace certfleet::api
