#pragma once
// A small real HTTP/1.1 and WebSocket client over real sockets (Boost.Beast), for tests and
// benchmarks. The blocking clients run their own io_context with a deadline on every call.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace testbed {

struct http_response {
  int status = 0;  // 0: no response (connection failed, closed or timed out)
  std::string body;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string error;                           // why status is 0
  boost::json::value json() const;             // null when the body is not JSON
  std::string header(const std::string& lower_name) const;
};

// One keep-alive connection, reopened when the server closed it.
class http_client {
 public:
  http_client(std::string host, unsigned short port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~http_client();

  http_response request(std::string_view method, std::string_view target, std::string_view body = {},
                        std::string_view token = {}, const std::map<std::string, std::string>& headers = {});
  http_response get(std::string_view target, std::string_view token = {}) { return request("GET", target, {}, token); }
  http_response post(std::string_view target, std::string_view body, std::string_view token = {}) {
    return request("POST", target, body, token);
  }
  http_response put(std::string_view target, std::string_view body, std::string_view token = {}) {
    return request("PUT", target, body, token);
  }
  // Sends raw bytes on a new connection and returns everything received until the server closes
  // it or the timeout passes.
  std::string raw(std::string_view bytes);
  bool connected() const;
  void disconnect();

 private:
  bool ensure_connected(std::string& error);
  std::string host_;
  unsigned short port_;
  std::chrono::milliseconds timeout_;
  boost::asio::io_context ioc_;
  std::unique_ptr<boost::beast::tcp_stream> stream_;
};

struct ws_message {
  bool closed = false;  // the connection ended: see code/reason/error
  std::string text;
  int close_code = 0;  // from the server's close frame, when one arrived
  std::string close_reason;
  std::string error;
};

// A WebSocket client usable from coroutines on any executor (many at once on one loop).
class ws_stream {
 public:
  explicit ws_stream(boost::asio::any_io_executor ex);
  ~ws_stream();
  // Handshake; returns the HTTP status (101 when upgraded). A refusal's body is in rejection().
  // receive_buffer > 0 shrinks SO_RCVBUF (a stalled reader fills up quickly).
  // `headers`: more request fields (Cookie, Origin) for the handshake.
  boost::asio::awaitable<int> connect(std::string host, unsigned short port, std::string target, std::string token,
                                      int receive_buffer = 0, std::map<std::string, std::string> headers = {});
  boost::asio::awaitable<ws_message> read();
  boost::asio::awaitable<void> close();
  // Sends a ping (may run beside read()); false when the connection is gone.
  boost::asio::awaitable<bool> ping();
  // Pongs the read side has seen so far.
  int pongs() const { return *pongs_; }
  const std::string& rejection() const { return rejection_; }
  void hard_close();

 private:
  std::unique_ptr<boost::beast::websocket::stream<boost::beast::tcp_stream>> ws_;
  std::shared_ptr<int> pongs_ = std::make_shared<int>(0);
  boost::asio::any_io_executor ex_;
  std::string rejection_;
};

// Blocking wrapper of ws_stream with its own loop; every call has a deadline.
class ws_client {
 public:
  ws_client(std::string host, unsigned short port, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~ws_client();
  int connect(const std::string& target, const std::string& token, int receive_buffer = 0,
              std::map<std::string, std::string> headers = {});
  // A message, or closed; a timeout gives closed with error "timeout" (and the connection closed).
  ws_message read(std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  void close();
  const std::string& rejection() const { return ws_.rejection(); }

 private:
  std::string host_;
  unsigned short port_;
  std::chrono::milliseconds timeout_;
  boost::asio::io_context ioc_;
  ws_stream ws_;
};

}  // namespace testbed
