#pragma once
// The project's one HTTP(S) client: one request per connection, on the caller's event loop.
// Name resolution on a thread pool, the egress allow-list (when the caller gives one) checked
// against the resolved addresses BEFORE anything connects, then connect, TLS (the peer always
// verified: system CA store + extra trust anchors), write and read, all under one deadline over
// the whole exchange. Redirects are never followed (a new location would bypass the egress check
// and the caller's idea of whom it talks to). Webhook POSTs (webhook.hpp) and the ACME client
// (certfleet/acme/client.hpp) are its users. Beast/OpenSSL stay in src/.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/net/phase_timing.hpp"

namespace certfleet::net {

// An http:// or https:// URL, split. Userinfo ("user:pass@") and non-ASCII are refused; the
// fragment is dropped.
struct http_url {
  std::string scheme;  // "http" | "https" (lower-case)
  std::string host;    // lower-case name or IP literal, IPv6 without brackets
  std::uint16_t port = 0;  // explicit, or 80/443
  std::string target;  // path and query, at least "/"

  bool tls() const { return scheme == "https"; }
  bool host_is_ip() const;
  // "host" or "host:port" (port only when not the scheme's default), IPv6 in brackets: the
  // Host header, and how error messages name the destination (never the path or query, which
  // often carry a token).
  std::string authority() const;
};
// Errors are invalid_argument with `field` (default "url").
result<http_url> parse_url(std::string_view text, std::string_view field = "url");

enum class http_method { get, head, post, patch, put, delete_ };

struct http_request {
  http_method method = http_method::get;
  std::string url;
  // Extra headers. Names must be HTTP tokens, values one line; Host, Content-Length,
  // Transfer-Encoding and Connection are set here and refused.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // sent with POST, PATCH and PUT (Content-Length always set, even when empty)
  std::chrono::milliseconds timeout{10000};  // the whole exchange: resolve … last response byte
  // nullptr: no egress check (the caller vouches for the destination). Set: must outlive the
  // awaited call; an empty policy allows nothing. Applied with egress_allows (egress.hpp) to
  // the resolved addresses before connecting.
  const egress_policy* egress = nullptr;
  // The setting `egress` comes from, for the refusal's message ("acme_allow_list does not
  // allow 127.0.0.1").
  std::string egress_setting = "egress_allow_list";
  // Extra trust anchors (PEM) next to the system CA store, e.g. a test CA or a private CA's
  // root. The peer is always verified (chain and host name / IP).
  std::string ca_pem;
  // A client certificate (PEM, leaf first) and its key for TLS client authentication (an AD CS
  // enrollment service's certificate endpoint); both empty: none. The key is wiped from this
  // request once the TLS context holds it.
  std::string client_cert_pem;
  std::string client_key_pem;
  // Where getaddrinfo runs (the cpu pool); nullptr: the resolver's own pool (resolve.hpp).
  boost::asio::thread_pool* resolve_pool = nullptr;
  // The body is kept up to this many bytes; a longer one ends the read (body_complete false).
  std::size_t max_body = 64 * 1024;
  // The body may carry key material: wipe the request's copy once sent.
  bool cleanse_body = false;
};

struct http_response {
  int status = 0;  // HTTP status; 0 when no response arrived
  // Every response header in the order received (names as the server spelled them): a name may
  // repeat (Link).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // at most max_body bytes
  // False when the body broke off, timed out or ran past max_body. A status line and headers
  // are an answer (status set, cls none), but then the body is not the whole document.
  bool body_complete = false;
  // Why no answer arrived: none when a status line and headers did, whatever the status.
  // network: DNS, refused, timeout, TLS handshake; io_transient: reset/EOF mid-exchange; auth:
  // untrusted TLS certificate; validation: bad URL/headers/CA PEM, egress refused, an answer
  // that is not HTTP.
  error_class cls = error_class::none;
  std::string error;  // for operators: names the destination by host[:port] only; no secret
  std::string phase;  // where it failed: check, resolve, egress, connect, tls, write, read
  bool timed_out = false;  // the deadline ended it
  std::vector<phase_timing> timings;

  bool ok() const { return cls == error_class::none; }
  // The first value of a header (case-insensitive name); "" when absent.
  std::string header(std::string_view name) const;
  // Every value of a header, in order.
  std::vector<std::string> header_values(std::string_view name) const;
};

// One request. Never throws for expected failures; the response says what happened.
boost::asio::awaitable<http_response> http_exchange(http_request req);

}  // namespace certfleet::net
