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

// `tls`: the context of the certificate version to serve (null: plain HTTP); the session holds
// it to its end. `health_only`: the metrics listener's connections (only /healthz, /readyz and
// /metrics; no UI, no WebSocket).
boost::asio::awaitable<void> run_http_session(std::shared_ptr<server_state> s, boost::asio::ip::tcp::socket sock,
                                              std::shared_ptr<boost::asio::ssl::context> tls, bool health_only);

}  // namespace certfleet::api
