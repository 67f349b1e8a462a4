#pragma once
// One HTTP/1.1 connection: keep-alive, limits, deadlines; requests go to dispatch(), WebSocket
// upgrades of the log stream route to the log stream session.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>

namespace certfleet::api {

struct server_state;

boost::asio::awaitable<void> run_http_session(std::shared_ptr<server_state> s, boost::asio::ip::tcp::socket sock);

}  // namespace certfleet::api
