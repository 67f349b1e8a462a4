// The one HTTP(S) client (http.hpp): one connection per request, Beast over a TCP socket or an
// asio::ssl stream, every await under the request's single deadline.
#include "certfleet/net/http.hpp"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <memory>
#include <optional>

#include "certfleet/net/resolve.hpp"
#include "net/tls_client.hpp"

namespace certfleet::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_url = 4096;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

bool is_ipv6_literal(std::string_view s) {
  if (s.empty() || s.size() > 64 || s.find('%') != std::string_view::npos) return false;
  boost::system::error_code ec;
  (void)asio::ip::make_address_v6(std::string(s), ec);
  return !ec;
}

bool is_ipv4_literal(std::string_view s) {
  if (s.empty() || s.size() > 15) return false;
  boost::system::error_code ec;
  (void)asio::ip::make_address_v4(std::string(s), ec);
  return !ec;
}

bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// A header name for an error message: only token characters can get there unquoted.
std::string printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += is_token_char(c) ? c : '?';
  return out;
}


// The response being built, with the phase clock; a failure may be a timeout.
struct recorder : phase_recorder<http_response> {
  http_response& fail(error_class cls, std::string message, bool timed_out = false) {
    phase_recorder::fail(cls, std::move(message));
    r.timed_out = timed_out;
    return r;
  }
};

// The other half of every `op || watchdog(...)`: when the deadline passes first it closes the
// socket, which ends every operation pending on it, including those inside the SSL and Beast
// composed operations, whether or not they honour cancellation slots. When the operation wins,
// the operator cancels the timer wait and nothing is closed.
awaitable<void> watchdog(asio::steady_timer& timer, tcp::socket& sock) {
  auto [ec] = co_await timer.async_wait(tuple_awaitable);
  if (ec) co_return;
  boost::system::error_code ignored;
  sock.close(ignored);
}

// Extra headers: only what cannot smuggle a second header or request, and nothing set here.
std::optional<std::string> check_headers(const std::vector<std::pair<std::string, std::string>>& headers) {
  static const std::vector<std::string> reserved{"host", "content-length", "transfer-encoding", "connection"};
  if (headers.size() > 64) return "more than 64 extra headers";
  for (const auto& [name, value] : headers) {
    if (name.empty() || name.size() > 256 || !std::all_of(name.begin(), name.end(), is_token_char))
      return "header name \"" + printable(name) + "\" is not an HTTP token";
    if (std::find(reserved.begin(), reserved.end(), lower(name)) != reserved.end())
      return "header " + name + " is set by certfleet";
    // The value is never quoted back: it is often a token. 64 KiB: a Kerberos ticket of an account
    // in many AD groups makes a Negotiate header of tens of KiB (IIS takes up to 64 KiB).
    if (value.size() > 65536) return "header " + name + " is longer than 65536 characters";
    for (char c : value)
      if (c == '\r' || c == '\n' || c == '\0') return "header " + name + " contains a line break or NUL";
  }
  return std::nullopt;
}

http::verb verb_of(http_method m) {
  switch (m) {
    case http_method::get: return http::verb::get;
    case http_method::head: return http::verb::head;
    case http_method::post: return http::verb::post;
    case http_method::patch: return http::verb::patch;
    case http_method::put: return http::verb::put;
    case http_method::delete_: return http::verb::delete_;
  }
  return http::verb::get;
}

// Write the request and read the response on an established stream (TCP or TLS).
template <class Stream>
awaitable<void> exchange(Stream& stream, tcp::socket& sock, asio::steady_timer& timer, steady::time_point deadline,
                         http::request<http::string_body>& req, recorder& rec, const std::string& where,
                         std::chrono::milliseconds limit, std::size_t max_body) {
  auto timeout_text = [&] { return " (" + std::to_string(limit.count()) + " ms)"; };
  rec.begin("write");
  timer.expires_at(deadline);
  auto w = co_await (http::async_write(stream, req, tuple_awaitable) || watchdog(timer, sock));
  if (w.index() == 1) { rec.fail(error_class::network, "sending the request to " + where + " timed out" + timeout_text(), true); co_return; }
  if (auto [ec, n] = std::get<0>(w); ec) {
    // The connection was up: a failure now is a reset or close mid-exchange.
    auto cls = classify(ec);
    if (cls == error_class::network || cls == error_class::unknown) cls = error_class::io_transient;
    rec.fail(cls, "sending the request to " + where + " failed: " + ec.message());
    co_return;
  }
  rec.end();

  rec.begin("read");
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(max_body);
  // A HEAD answer's Content-Length describes a body that never comes.
  if (req.method() == http::verb::head) parser.skip(true);
  timer.expires_at(deadline);
  auto rd = co_await (http::async_read(stream, buf, parser, tuple_awaitable) || watchdog(timer, sock));
  bool timed_out = rd.index() == 1;
  boost::system::error_code ec = timed_out ? boost::system::error_code{} : std::get<0>(std::get<0>(rd));
  // A status line and headers are an answer, even when the body then broke off or ran long.
  if (!parser.is_header_done()) {
    if (timed_out) { rec.fail(error_class::network, where + " did not answer in time" + timeout_text(), true); co_return; }
    auto cls = classify(ec);
    if (ec.category() == boost::system::error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream &&
        ec != http::error::partial_message)
      cls = error_class::validation;  // something answered, but not with HTTP
    else if (cls == error_class::network || cls == error_class::unknown)
      cls = error_class::io_transient;
    rec.fail(cls, where + " sent no HTTP response: " + ec.message());
    co_return;
  }
  auto& res = parser.get();
  rec.r.status = static_cast<int>(res.result_int());
  for (const auto& f : res) rec.r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  rec.r.body = std::move(res.body());
  if (rec.r.body.size() > max_body) rec.r.body.resize(max_body);
  rec.r.body_complete = !timed_out && !ec && parser.is_done();
  rec.end();
}

}  // namespace

bool http_url::host_is_ip() const { return is_ipv4_literal(host) || is_ipv6_literal(host); }

std::string http_url::authority() const {
  std::string h = is_ipv6_literal(host) ? "[" + host + "]" : host;
  bool default_port = (scheme == "https" && port == 443) || (scheme == "http" && port == 80);
  return default_port ? h : h + ":" + std::to_string(port);
}

result<http_url> parse_url(std::string_view text, std::string_view field_name) {
  const std::string field(field_name);
  // No message quotes the URL: userinfo, paths and queries often carry secrets.
  auto bad = [&](std::string msg) { return make_error(errc::invalid_argument, std::move(msg), field); };
  if (text.empty()) return bad("url is empty");
  if (text.size() > max_url) return bad("url is longer than " + std::to_string(max_url) + " characters");
  for (char c : text)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return bad("url must be ASCII without spaces or control characters (percent-encode the rest)");
  http_url u;
  auto sep = text.find("://");
  if (sep == std::string_view::npos) return bad("url must start with http:// or https://");
  u.scheme = lower(text.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https") return bad("url must start with http:// or https://");
  auto rest = text.substr(sep + 3);
  auto end = std::min(rest.find_first_of("/?#"), rest.size());
  auto authority = rest.substr(0, end);
  auto tail = rest.substr(end);
  if (authority.find('@') != std::string_view::npos)
    return bad("credentials in the url are not supported (use the webhook secret)");
  std::string_view host, port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("url has an unterminated [IPv6] host");
    host = authority.substr(1, close - 1);
    if (!is_ipv6_literal(host)) return bad("url host is not a valid IPv6 address");
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("url has junk after the [IPv6] host");
      port = after.substr(1);
      has_port = true;
    }
  } else {
    auto colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      has_port = true;
    }
    if (host.empty()) return bad("url has no host");
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);  // "example.com." is example.com
    if (!is_ipv4_literal(host) && !valid_dns_name(host)) return bad("url host is not a valid host name or IPv4 address");
  }
  u.host = lower(host);
  if (has_port) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("url port must be 1-65535");
    unsigned long n = std::stoul(std::string(port));
    if (n < 1 || n > 65535) return bad("url port must be 1-65535");
    u.port = static_cast<std::uint16_t>(n);
  } else {
    u.port = u.tls() ? 443 : 80;
  }
  tail = tail.substr(0, std::min(tail.find('#'), tail.size()));
  if (tail.empty()) u.target = "/";
  else if (tail.front() == '?') u.target = "/" + std::string(tail);
  else u.target = std::string(tail);
  return u;
}

std::string http_response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return {};
}

std::vector<std::string> http_response::header_values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) out.push_back(v);
  return out;
}

awaitable<http_response> http_exchange(http_request req) {
  recorder rec;
  const auto deadline = steady::now() + req.timeout;
  auto wipe = [&](std::string& s) {
    if (req.cleanse_body) OPENSSL_cleanse(s.data(), s.size());
  };
  // Before the request is built: its body (maybe key material) is wiped here.
  auto fail_early = [&](error_class cls, std::string message, bool timed_out = false) {
    wipe(req.body);
    return std::move(rec.fail(cls, std::move(message), timed_out));
  };
  rec.begin("check");
  auto url = parse_url(req.url);
  if (!url) co_return fail_early(error_class::validation, url.error().message);
  const std::string where = url->authority();
  if (auto bad = check_headers(req.headers)) co_return fail_early(error_class::validation, *bad);
  std::shared_ptr<asio::ssl::context> ctx;
  if (url->tls()) {
    std::string why;
    ctx = req.client_cert_pem.empty()
              ? detail::client_tls_context(req.ca_pem, why)
              : detail::client_tls_context_with_identity(req.ca_pem, req.client_cert_pem, req.client_key_pem, why);
    OPENSSL_cleanse(req.client_key_pem.data(), req.client_key_pem.size());
    if (!ctx) co_return fail_early(error_class::validation, why.empty() ? "TLS client context could not be set up" : why);
  }
  // An empty policy can refuse before any DNS query leaves the host.
  if (req.egress && req.egress->empty())
    co_return fail_early(error_class::validation, req.egress_setting + " does not allow " + url->host);
  rec.end();

  rec.begin("resolve");
  std::vector<tcp::endpoint> eps;
  if (url->host_is_ip()) {
    eps.emplace_back(asio::ip::make_address(url->host), url->port);
  } else {
    const auto limit = std::max(std::chrono::milliseconds(1),
                                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now()));
    auto r = co_await resolve_host(url->host, url->port, req.resolve_pool, limit);
    if (!r.ok()) co_return fail_early(r.cls, r.error, steady::now() >= deadline);
    eps = std::move(r.endpoints);
  }
  rec.end();

  // DESIGN §6: checked against what the name resolved to, and only those addresses are used.
  if (req.egress) {
    rec.begin("egress");
    std::vector<asio::ip::address> addrs;
    for (const auto& ep : eps) addrs.push_back(ep.address());
    if (!egress_allows(*req.egress, url->host, addrs))
      co_return fail_early(error_class::validation, req.egress_setting + " does not allow " + url->host);
    rec.end();
  }

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  tcp::socket sock(ex);
  rec.begin("connect");
  boost::system::error_code last;
  bool connected = false;
  for (const auto& ep : eps) {
    boost::system::error_code ec;
    if (sock.is_open()) sock.close(ec);
    timer.expires_at(deadline);
    auto c = co_await (sock.async_connect(ep, tuple_awaitable) || watchdog(timer, sock));
    if (c.index() == 1)
      co_return fail_early(error_class::network,
                           "connecting to " + where + " timed out (" + std::to_string(req.timeout.count()) + " ms)", true);
    last = std::get<0>(std::get<0>(c));
    if (!last) { connected = true; break; }
  }
  if (!connected) co_return fail_early(classify(last), "cannot connect to " + where + ": " + last.message());
  {
    boost::system::error_code ignored;
    sock.set_option(tcp::no_delay(true), ignored);
  }
  rec.end();

  http::request<http::string_body> hreq{verb_of(req.method), url->target, 11};
  hreq.set(http::field::host, where);
  hreq.set(http::field::user_agent, "certfleet");
  hreq.set(http::field::connection, "close");
  for (const auto& [name, value] : req.headers) hreq.insert(name, value);
  if (req.method == http_method::post || req.method == http_method::patch || req.method == http_method::put) {
    hreq.body() = std::move(req.body);
    hreq.prepare_payload();
  }

  if (url->tls()) {
    asio::ssl::stream<tcp::socket&> stream(sock, *ctx);
    SSL* ssl = stream.native_handle();
    if (url->host_is_ip()) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url->host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url->host.c_str());  // SNI is for names only (RFC 6066)
      SSL_set1_host(ssl, url->host.c_str());
    }
    rec.begin("tls");
    timer.expires_at(deadline);
    auto h = co_await (stream.async_handshake(asio::ssl::stream_base::client, tuple_awaitable) || watchdog(timer, sock));
    if (h.index() == 1) {
      rec.fail(error_class::network, "TLS handshake with " + where + " timed out (" + std::to_string(req.timeout.count()) + " ms)", true);
    } else if (auto [ec] = std::get<0>(h); ec) {
      long vr = SSL_get_verify_result(ssl);
      if (vr != X509_V_OK)
        // Not fixed by a retry: like a host key mismatch, the peer is not who we trust.
        rec.fail(error_class::auth, "TLS certificate of " + where + " is not trusted: " + X509_verify_cert_error_string(vr));
      else
        rec.fail(classify(cause_kind::tls_handshake), "TLS handshake with " + where + " failed: " + ec.message());
      ERR_clear_error();
    } else {
      rec.end();
      co_await exchange(stream, sock, timer, deadline, hreq, rec, where, req.timeout, req.max_body);
    }
  } else {
    co_await exchange(sock, sock, timer, deadline, hreq, rec, where, req.timeout, req.max_body);
  }
  wipe(hreq.body());
  boost::system::error_code ignored;
  sock.close(ignored);
  co_return std::move(rec.r);
}

}  // namespace certfleet::net
