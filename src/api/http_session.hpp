#pragma once
// One HTTP/1.1 connection, plain or over TLS: keep-alive, limits, deadlines; requests go to
// dispatch(), WebSocket upgrades of the log stream route to the log stream session.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace boost::asio::ssl {
class context;
}

namespace certfleet::api {

struct server_state;

// Connection slots beyond http_max_connections for /healthz, /readyz and /metrics only
// (http_health_reserve_connections): when every slot is taken by a busy connection (none idle
// to evict), a new one still gets in here, sends one request under a short deadline and gets an
// answer only if it asks for one of those routes (else 503 too_many_connections), then closes.
// One per server, shared by its listeners; its connections are in server_state::conns (so a
// stop ends them) but not counted against the cap.
struct connection_reserve {
  int slots = 0;
  int in_use = 0;
};

// `tls`: the context of the certificate version to serve (null: plain HTTP); the session holds
// it to its end. `health_only`: the metrics listener's connections (only /healthz, /readyz and
// /metrics; no UI, no WebSocket).
boost::asio::awaitable<void> run_http_session(std::shared_ptr<server_state> s, boost::asio::ip::tcp::socket sock,
                                              std::shared_ptr<boost::asio::ssl::context> tls, bool health_only,
                                              std::shared_ptr<connection_reserve> reserve);

}  // namespace certfleet::api
