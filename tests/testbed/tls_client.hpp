#pragma once
// HTTPS and WebSocket-over-TLS clients for the tests of the TLS listener: real TLS (Beast over
// Asio's OpenSSL layer), the server's chain verified against a test CA for a server name (SNI
// and the name checked), every call under a deadline. Each client runs its own io_context.
#include "http_client.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace testbed {

// SHA-256 (lower-case hex) of the first certificate in `pem`: how a test names the certificate
// it expects the server to present.
std::string pem_fingerprint(const std::string& pem);

// One HTTPS/1.1 keep-alive connection to 127.0.0.1:port, reopened when it is gone.
class https_client {
 public:
  https_client(unsigned short port, std::string ca_pem, std::string server_name,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~https_client();
  https_client(const https_client&) = delete;
  https_client& operator=(const https_client&) = delete;

  http_response request(std::string_view method, std::string_view target, std::string_view body = {},
                        std::string_view token = {}, const std::map<std::string, std::string>& headers = {});
  http_response get(std::string_view target, std::string_view token = {}) { return request("GET", target, {}, token); }
  // The certificate the server presented on the current connection (its SHA-256, lower-case
  // hex); "" when not connected.
  std::string peer_fingerprint() const;
  // Connections opened so far (a kept-alive client that never reconnected has 1).
  int connections_opened() const { return opened_; }
  bool connected() const;
  void disconnect();

 private:
  struct impl;
  bool ensure_connected(std::string& error);
  std::unique_ptr<impl> p_;
  int opened_ = 0;
};

// A WebSocket over TLS (wss://), blocking.
class wss_client {
 public:
  wss_client(unsigned short port, std::string ca_pem, std::string server_name,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~wss_client();
  // The HTTP status of the handshake (101 when upgraded), 0 when no answer.
  int connect(const std::string& target, const std::string& token);
  ws_message read(std::chrono::milliseconds timeout);

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace testbed
