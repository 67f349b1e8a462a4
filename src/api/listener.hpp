#pragma once
// The accept loop: binds the listen address, hands each connection to an HTTP session (with the
// TLS context current at accept time), and on stop ends the connections (idle ones and streams
// at once, requests in flight after they finish).
#include "certfleet/core/error.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>
#include <utility>

namespace certfleet::api {

struct server_state;
struct connection_reserve;

// "ADDR:PORT" or "[v6]:PORT" as host and port.
result<std::pair<std::string, unsigned short>> parse_listen(const std::string& listen);

class listener : public std::enable_shared_from_this<listener> {
 public:
  // `address`: "ADDR:PORT", named `setting` in errors. `health_only`: the metrics listener
  // (plain HTTP, /healthz /readyz /metrics only); otherwise the API listener, over TLS while
  // the server state has a TLS context.
  // `reserve`: the server's health/metrics slots beyond the connection cap.
  listener(std::shared_ptr<server_state> s, std::string address, std::string setting, bool health_only,
           std::shared_ptr<connection_reserve> reserve);
  // Binds and starts accepting; the bound "ADDR:PORT".
  result<std::string> start();
  boost::asio::awaitable<void> stop();
  void close();
  unsigned short port() const noexcept { return bound_port_; }

 private:
  boost::asio::awaitable<void> accept_loop();

  std::shared_ptr<server_state> s_;
  std::string address_, setting_;
  bool health_only_;
  std::shared_ptr<connection_reserve> reserve_;
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short bound_port_ = 0;
};

}  // namespace certfleet::api
