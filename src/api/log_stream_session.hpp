#pragma once
// The live log stream (GET …/jobs/{id}/logs/stream, a WebSocket): the upgrade, the backlog from
// the store, then the hub's frames as they come, paced by the peer.
#include "certfleet/api/router.hpp"
#include "http_io.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace certfleet::api {

struct server_state;

// Takes the connection over from the HTTP session (which registered it as `conn_id`); refuses
// the upgrade with an HTTP error reply when the caller may not watch the job. `client`: the peer,
// for the access log line. Stream:
// beast::tcp_stream or tls_stream (instantiated for both in log_stream_session.cpp).
template <class Stream>
boost::asio::awaitable<void> run_log_stream(std::shared_ptr<server_state> s, Stream stream, request_t req, route_match m,
                                            std::string query, std::uint64_t conn_id, std::string client);

}  // namespace certfleet::api
