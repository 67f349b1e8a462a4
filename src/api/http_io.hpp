#pragma once
// Beast, for the two files that speak HTTP/WebSocket (http_session.cpp, log_stream_session.cpp):
// the request type, a reply as a response, the TLS stream (queued_socket.hpp's tls_stream).
// Route handlers never include this.
#include "auth.hpp"
#include "queued_socket.hpp"
#include "reply.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <string_view>

namespace certfleet::api {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using request_t = http::request<http::string_body>;
constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);
constexpr std::string_view server_name = "certfleet";

http::response<http::string_body> make_response(const reply& r, unsigned version, bool keep_alive);
// Who the request says it is from: its Authorization, session cookie, CSRF header, Origin, Host.
// The views point into `req`.
credentials credentials_of(const request_t& req);

}  // namespace certfleet::api
