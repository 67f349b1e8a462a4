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

#include <cstdint>
#include <string>
#include <string_view>

namespace certfleet::api {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using request_t = http::request<http::string_body>;
constexpr auto tuple_awaitable = boost::asio::as_tuple(boost::asio::use_awaitable);
constexpr std::string_view server_name = "certfleet";

// Every response carries the request's id (X-Request-Id), also on errors and refusals.
http::response<http::string_body> make_response(const reply& r, unsigned version, bool keep_alive,
                                                std::string_view request_id);

// Strict-Transport-Security: max-age=`max_age_s` (http_hsts_max_age_s) on a response sent over
// TLS; nothing over plain HTTP (a browser ignores it there) or when it is 0. For every response
// of the HTTPS listener, the WebSocket handshake's (a decorator) included.
template <class Fields>
void set_hsts(http::header<false, Fields>& h, bool over_tls, std::int64_t max_age_s) {
  if (over_tls && max_age_s > 0) h.set(http::field::strict_transport_security, "max-age=" + std::to_string(max_age_s));
}

// The request's X-Request-Id when the client sent a sane one (requests.hpp), else a new one.
std::string request_id_of(const request_t& req);

// One answered request: its access log line (info; with the request id and route as fields),
// and the internal error behind a 500 (error level). `route`: the route's pattern, "ui", or
// "unmatched".
struct request_record {
  std::string_view method;
  std::string_view target;
  unsigned status = 0;
  std::size_t bytes = 0;
  double seconds = 0;
  std::string_view client;
  std::string_view request_id;
  std::string_view route;
};
void log_request(const request_record& r, std::string_view internal_error = {});
// Who the request says it is from: its Authorization, session cookie, CSRF header, Origin, Host.
// The views point into `req`.
credentials credentials_of(const request_t& req);

}  // namespace certfleet::api
