#pragma once
// HTTP(S) POSTs of JSON to webhook receivers: the `webhook` delivery module (DESIGN §4) and the
// transport notification.send uses (DESIGN §6), over the one HTTP client (http.hpp): name
// resolution on a thread pool, the egress allow-list (required here) checked against the
// resolved addresses BEFORE anything connects, then connect, TLS, write and read, all under one
// deadline. Redirects are never followed (the new location would bypass the egress check).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/net/http.hpp"  // http_url, parse_url
#include "certfleet/delivery/module.hpp"

namespace certfleet::delivery {

// Lower-case hex HMAC-SHA256 of `data` keyed with `key` (the X-Certfleet-Signature value
// after "sha256=").
std::string hmac_sha256_hex(std::string_view key, std::string_view data);

struct webhook_request {
  std::string url;
  std::string body;  // JSON text, sent as application/json unless headers set Content-Type
  // Extra headers. Names must be HTTP tokens, values one line; Host, Content-Length,
  // Transfer-Encoding, Connection and X-Certfleet-Signature are set by certfleet and refused here.
  std::vector<std::pair<std::string, std::string>> headers;
  // Non-empty: adds `X-Certfleet-Signature: sha256=<hmac_sha256_hex(hmac_secret, body)>`.
  std::string hmac_secret;
  std::chrono::milliseconds timeout{10000};  // the whole exchange: resolve … last response byte
  // Must outlive the awaited call. nullptr allows nothing, like an empty list (fail closed).
  const egress_policy* egress = nullptr;
  // Extra trust anchors (PEM) next to the system CA store, e.g. a test CA. The peer is always
  // verified (chain and host name / IP).
  std::string ca_pem;
  // Where getaddrinfo runs (the cpu pool); nullptr: the delivery module's own pool.
  boost::asio::thread_pool* resolve_pool = nullptr;
};

struct webhook_result {
  int status = 0;  // HTTP status; 0 when no response arrived
  // none for 2xx. network: DNS, refused, timeout, TLS handshake; io_transient: 5xx, 429,
  // reset/EOF mid-exchange; auth: 401, 403, untrusted TLS certificate; validation: other 4xx,
  // 3xx (not followed), bad URL/headers, egress refused.
  error_class cls = error_class::none;
  std::string error;  // for operators: names the destination by host[:port] only; no secret
  std::string phase;  // where it failed: check, resolve, egress, connect, tls, write, read, status
  std::string body;   // the response body, at most 64 KiB; it may echo what was sent, so
                      // callers that sent secrets must not log it
  // The answer's Retry-After (429, 503), as a wait from when it arrived; 0 when absent.
  std::chrono::seconds retry_after{0};
  std::vector<phase_timing> timings;

  bool ok() const { return cls == error_class::none; }
};

// One POST. Never throws for expected failures; the result says what happened.
boost::asio::awaitable<webhook_result> post_json(webhook_request req);

// The `webhook` delivery module: POSTs the bundle as JSON
//   {"certificate_pem", "chain_pem", "private_key_pem", "fingerprint_sha256", "run_id"}
// with X-Certfleet-Event-Id: <run_id> and, with a secret, X-Certfleet-Signature. The key only
// travels in the request body; no log line or error text carries it (or the secret).
struct webhook_options {
  std::chrono::milliseconds timeout{15000};
  const egress_policy* egress = nullptr;  // must outlive the call; nullptr allows nothing
  std::string ca_pem;
  boost::asio::thread_pool* resolve_pool = nullptr;
  // The body carries a private key: plain http:// is refused unless this is set (local
  // receivers on a trusted host, tests).
  bool allow_plain_http = false;
};

// `run_id` ([A-Za-z0-9._-]{1,64}) is also the event id receivers dedupe by. Any 2xx is success
// (status succeeded; a webhook has no hash-skip). Arguments by value: the coroutine may outlive
// the caller's temporaries.
boost::asio::awaitable<delivery_result> deliver_webhook(std::string url, std::string secret, cert_bundle bundle,
                                                        std::string run_id, webhook_options opts = {});

}  // namespace certfleet::delivery
