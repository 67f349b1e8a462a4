#pragma once
// A webhook receiver on 127.0.0.1 for tests and benchmarks: a real HTTP/1.1 server (optionally
// HTTPS with a freshly generated self-signed certificate) on its own thread and event loop,
// recording every request it receives. It can be told to answer a status for the next N
// requests (retries) or to hang without answering (timeouts).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace testbed {

struct received_request {
  std::string method;
  std::string target;                          // path and query as sent
  std::map<std::string, std::string> headers;  // lower-case names (last one wins)
  std::string body;

  std::string header(const std::string& lower_name) const;  // "" when absent
  // Whether X-Certfleet-Signature is "sha256=<hex HMAC-SHA256 of the body>" under `secret`,
  // computed here independently of the product's code.
  bool signature_valid(std::string_view secret) const;
};

// A fixed answer for one path (serve()): e.g. an ACME directory or an RFC 9773 renewalInfo
// document with its Retry-After, or a web page where a JSON document was expected.
struct canned_response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type defaults to JSON
  std::string body;
};

class webhook_sink {
 public:
  // tls: serve HTTPS with a self-signed P-256 certificate for IP 127.0.0.1 and DNS localhost
  // (its PEM is ca_pem(), the trust anchor clients pass).
  explicit webhook_sink(bool tls = false);
  ~webhook_sink();  // stops the loop, closes every connection (hanging ones too)
  webhook_sink(const webhook_sink&) = delete;
  webhook_sink& operator=(const webhook_sink&) = delete;

  std::uint16_t port() const;
  bool tls() const;
  // "http(s)://127.0.0.1:<port><path>"
  std::string url(std::string_view path = "/hook") const;
  const std::string& ca_pem() const;  // empty without TLS

  // The answer to requests with no scripted behaviour left (default 200, body "{}").
  void set_default_status(int status);
  // The next `count` requests are answered with `status` (then the default again); a 429 says
  // `Retry-After: <retry_after>` ("1" when empty), another status only when retry_after is given.
  void respond_with(int status, int count = 1, std::string retry_after = {});
  // The body of answers with no scripted behaviour left (default "{}" for 2xx).
  void set_default_body(std::string body);
  // The next `count` requests are read and recorded, then never answered; the connection stays
  // open until the sink is destroyed. Scripted hangs and statuses are used in the order given.
  void hang_next(int count = 1);

  // Requests for exactly `path` (the target without its query) get `answer`, every time,
  // before any scripted answer; the last call for a path wins.
  void serve(std::string path, canned_response answer);

  std::vector<received_request> requests() const;
  std::size_t count() const;
  // Waits until at least `count` requests have been recorded; false on timeout.
  bool wait_for(std::size_t count, std::chrono::milliseconds timeout) const;
  void clear();  // forget the recorded requests (scripted answers stay)

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

}  // namespace testbed
