// The server facade: the shared state, the listener and the live log hub's publisher. The parts:
// listener.cpp (accept loop, start/stop), http_session.cpp, log_stream_session.cpp (+ the pure
// log_cursor.cpp), auth.cpp, reply.cpp, dispatch.cpp (calls the handler a row of routes.def
// names) and one *_routes.cpp per resource.
#include "certfleet/api/server.hpp"

#include "listener.hpp"
#include "server_state.hpp"

namespace certfleet::api {

struct server::impl {
  std::shared_ptr<server_state> state;
  std::shared_ptr<api::listener> listener;
};

server::server(boost::asio::any_io_executor ex, store::store& st, queue::queue_service& queue, const clock_source& clock,
               server_options options)
    : impl_(std::make_shared<impl>()) {
  impl_->state = std::make_shared<server_state>(ex, st, queue, clock, std::move(options));
  impl_->listener = std::make_shared<api::listener>(impl_->state);
}

server::~server() { impl_->listener->close(); }

result<std::string> server::start() { return impl_->listener->start(); }
boost::asio::awaitable<void> server::stop() { return impl_->listener->stop(); }
unsigned short server::port() const { return impl_->listener->port(); }
void server::attach_worker(const queue::worker* w) { impl_->state->worker = w; }
void server::attach_delivery_phases(const distribution::delivery_phase_metrics* m) { impl_->state->delivery_phases = m; }
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
  return stats{s.conns.size(), s.hub.subscribers(), s.hub.watched_jobs(), s.metrics.subscribers_dropped()};
}

}  // namespace certfleet::api
