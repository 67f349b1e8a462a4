#include "http_session.hpp"

#include "certfleet/api/requests.hpp"
#include "certfleet/core/log.hpp"
#include "handlers.hpp"
#include "http_io.hpp"
#include "log_stream_session.hpp"
#include "server_state.hpp"

#include <boost/beast/websocket/rfc6455.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <type_traits>

namespace certfleet::api {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

http::response<http::string_body> make_response(const reply& r, unsigned version, bool keep_alive,
                                                std::string_view request_id) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, server_name);
  res.set("X-Request-Id", request_id);
  res.set(http::field::content_type, r.content_type);
  res.set(http::field::cache_control, "no-store");
  // DESIGN §8: on every response, so a UI page, script, style or icon never goes without them.
  res.set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  for (const auto& [k, v] : r.headers) res.set(k, v);
  res.body() = r.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

std::string request_id_of(const request_t& req) {
  auto v = req["X-Request-Id"];
  return request_id_for(std::string_view(v.data(), v.size()));
}

void log_request(const request_record& r, std::string_view internal_error) {
  if (!internal_error.empty())
    log::write(spdlog::level::err, {.request_id = r.request_id, .route = r.route}, "{} {}: {}", r.method,
               r.target.substr(0, 200), internal_error);
  const log::fields access{.request_id = r.request_id,
                           .route = r.route,
                           .method = r.method,
                           .status = static_cast<int>(r.status),
                           .bytes = static_cast<std::int64_t>(r.bytes),
                           .duration_ms = r.seconds * 1000,
                           .client = r.client,
                           .event = "access"};
  log::write(spdlog::level::info, access, "{} {} {} {}B {:.1f}ms {}", r.method, r.target.substr(0, 200), r.status,
             r.bytes, r.seconds * 1000, r.client);
}

credentials credentials_of(const request_t& req) {
  auto field = [&](http::field f) {
    auto v = req[f];
    return std::string_view(v.data(), v.size());
  };
  credentials c;
  c.method = std::string_view(req.method_string().data(), req.method_string().size());
  c.authorization_count = req.count(http::field::authorization);
  c.authorization = field(http::field::authorization);
  c.session_cookie = session_cookie_in(field(http::field::cookie));
  auto csrf = req["X-CSRF-Token"];
  c.csrf_token = std::string_view(csrf.data(), csrf.size());
  c.origin = field(http::field::origin);
  c.host = field(http::field::host);
  c.websocket = beast::websocket::is_upgrade(req);
  return c;
}

namespace {

// Whom the per-client connection limit counts: an IPv4 address (also IPv4-mapped IPv6), or an
// IPv6 client's /64 (one host is usually given a whole /64, so counting single addresses would
// not limit it).
std::string client_key(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  if (a.is_v4()) return a.to_string();
  auto b = a.to_v6().to_bytes();
  std::fill(b.begin() + 8, b.end(), 0);
  return asio::ip::address_v6(b).to_string() + "/64";
}

// The Transfer-Encoding fields of a request, as one list.
std::string transfer_encodings(const request_t& h) {
  std::string all;
  for (auto it = h.find(http::field::transfer_encoding); it != h.end() && it->name() == http::field::transfer_encoding;
       ++it) {
    if (!all.empty()) all += ", ";
    all.append(it->value().data(), it->value().size());
  }
  return all;
}

// Closing with unread request bytes makes the kernel send a reset, which can destroy the error
// response before the client reads it (a client still sending a too-large body). So: stop
// sending, then read and discard for a short while (bounded in time and bytes), then close.
template <class Stream>
asio::awaitable<void> linger(Stream& stream, std::chrono::milliseconds for_at_most = std::chrono::seconds(1)) {
  boost::system::error_code ec;
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_send, ec);
  beast::get_lowest_layer(stream).expires_after(for_at_most);
  std::size_t drained = 0;
  std::array<char, 16384> sink;
  while (drained < (8u << 20)) {
    auto [rec, n] = co_await stream.async_read_some(asio::buffer(sink), tuple_awaitable);
    drained += n;
    if (rec) break;
  }
}

// What every response of this connection gets besides the reply: Strict-Transport-Security over
// TLS (http_hsts_max_age_s; never over plain HTTP, where a browser ignores it and it would only
// mislead), and no body for a HEAD request (RFC 9110 §9.3.2) — its Content-Length stays the
// one GET would have, and the next response on a kept-alive connection starts where the client
// expects it.
template <class Stream>
void finish_response(const server_state& s, http::response<http::string_body>& res, bool head) {
  set_hsts(res, std::is_same_v<Stream, tls_stream>, s.opt.hsts_max_age_s);
  if (head) res.body().clear();  // after prepare_payload: Content-Length is already set
}

// `req`: what was read of the request (its method and target may be empty).
template <class Stream>
asio::awaitable<void> send_error_and_close(server_state& s, Stream& stream, const request_t& req,
                                           const std::string& client, unsigned status, errc code, std::string msg,
                                           std::string field) {
  reply r = error_reply(code, std::move(msg), std::move(field));
  r.status = status;
  const auto rid = request_id_of(req);
  auto res = make_response(r, 11, false, rid);
  finish_response<Stream>(s, res, req.method() == http::verb::head);
  beast::get_lowest_layer(stream).expires_after(s.opt.write_timeout);
  auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
  s.metrics.request("unmatched", status, 0);
  log_request({std::string_view(req.method_string().data(), req.method_string().size()),
               std::string_view(req.target().data(), req.target().size()), status, r.body.size(), 0, client, rid,
               "unmatched"});
  if (!ec) co_await linger(stream);
}

// Over a connection limit: 503 too_many_connections, then close. Such a connection is never
// counted (a flood of refused ones must not take the slots of others) and lives briefly: a
// short write deadline and a short linger, so the response is not reset away. `req`: the
// request a health-reserve connection sent (empty: none was read).
template <class Stream>
asio::awaitable<void> refuse_connection(server_state& s, Stream& stream, bool per_client, const std::string& client,
                                        const request_t& req = {}) {
  s.metrics.connection_refused(per_client);
  auto e = make_error(errc::too_many_connections,
                      per_client ? fmt::format("this client address already has {} connections open, the most allowed "
                                               "(http_max_connections_per_client); close some and retry",
                                               s.opt.max_connections_per_client)
                                 : fmt::format("the server has {} connections open, its limit "
                                               "(http_max_connections), none of them idle; try again later",
                                               s.opt.max_connections));
  e.retry_after_s = per_client ? 5 : 1;
  const auto rid = request_id_of(req);
  auto res = make_response(error_reply(e), 11, false, rid);
  finish_response<Stream>(s, res, req.method() == http::verb::head);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(2));
  auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
  s.metrics.request("unmatched", 503, 0);
  const auto method = req.method_string(), target = req.target();
  log_request({method.empty() ? std::string_view("-") : std::string_view(method.data(), method.size()),
               target.empty() ? std::string_view("-") : std::string_view(target.data(), target.size()), 503,
               res.body().size(), 0, client, rid, "unmatched"});
  if (!ec) co_await linger(stream, std::chrono::milliseconds(250));
}

// At http_max_connections: ends the connection that has waited longest for a request among
// those of the client address holding the most connections (that has an idle one), so a newcomer
// gets its slot. An idle keep-alive connection costs its client nothing but a reconnect; the
// heaviest address is the likeliest to be the flood. False: no connection is idle (all busy).
bool evict_idle(server_state& s) {
  server_state::conn* victim = nullptr;
  int victim_weight = 0;
  for (auto& [id, c] : s.conns) {
    if (!c.idle || !c.cancel_http || c.client.empty()) continue;  // busy, a stream, or a reserve slot
    auto it = s.conns_per_client.find(c.client);
    const int weight = it == s.conns_per_client.end() ? 0 : it->second;
    if (!victim || weight > victim_weight || (weight == victim_weight && c.idle_since < victim->idle_since)) {
      victim = &c;
      victim_weight = weight;
    }
  }
  if (!victim) return false;
  // No cancel_http marks it evicted: its session ends even if a request arrived meanwhile, so it
  // is never chosen twice and the newcomer's slot is really freed.
  auto cancel = std::move(victim->cancel_http);
  victim->cancel_http = nullptr;
  victim->idle = false;
  cancel();
  s.metrics.connection_evicted();
  return true;
}

bool is_health_route(std::string_view method, std::string_view target) {
  auto parts = split_target(target);
  if (!parts) return false;
  auto m = match_route(method == "HEAD" ? std::string_view("GET") : method, parts->path);
  return m && (m->route->id == route_id::healthz || m->route->id == route_id::readyz ||
               m->route->id == route_id::metrics);
}

// RFC 9112 §3.2: an HTTP/1.1 request has exactly one Host; HTTP/1.0 may have none, never two.
std::optional<std::string> host_problem(const request_t& req) {
  const auto n = req.count(http::field::host);
  if (n > 1) return fmt::format("the request has {} Host header fields; send exactly one", n);
  if (n == 0 && req.version() >= 11) return std::string("an HTTP/1.1 request must have a Host header field");
  return std::nullopt;
}

// A media type is `want` ("application/json"), optionally with "; charset=utf-8" (any case,
// quoted or not), and nothing else.
bool is_media_type(std::string_view v, std::string_view want) {
  auto trim = [](std::string_view x) {
    while (!x.empty() && (x.front() == ' ' || x.front() == '\t')) x.remove_prefix(1);
    while (!x.empty() && (x.back() == ' ' || x.back() == '\t')) x.remove_suffix(1);
    return x;
  };
  auto iequals = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  auto semi = v.find(';');
  if (!iequals(trim(v.substr(0, semi)), want)) return false;
  if (semi == std::string_view::npos) return true;
  auto param = trim(v.substr(semi + 1));
  auto eq = param.find('=');
  if (eq == std::string_view::npos || !iequals(trim(param.substr(0, eq)), "charset")) return false;
  auto value = trim(param.substr(eq + 1));
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
  return iequals(value, "utf-8");
}

// Every body is JSON, said so (415 otherwise, before anything else is read of it): a client that
// sends a form or text learns it at once instead of from a parser's complaint, and a cross-site
// <form> (urlencoded, multipart, text/plain posts without a preflight; a JSON body cannot) never
// reaches a route. POST /api/v1/session needs the header even with no body: it is the sign-in.
// The bulk import takes JSON lines or CSV instead (body_media_types): neither is a type a
// cross-site form or a fetch without a preflight may send.
std::optional<reply> media_type_refusal(const request_t& req, bool health_only, std::string& route_name) {
  if (health_only) return std::nullopt;
  auto parts = split_target(std::string_view(req.target().data(), req.target().size()));
  if (!parts) return std::nullopt;
  auto m = match_route(std::string_view(req.method_string().data(), req.method_string().size()), parts->path);
  if (!m) return std::nullopt;
  if (req.body().empty() && m->route->id != route_id::session_create) return std::nullopt;
  auto v = req[http::field::content_type];
  const auto media = body_media_types(*m->route);
  if (req.count(http::field::content_type) == 1)
    for (auto want : media)
      if (is_media_type(std::string_view(v.data(), v.size()), want)) return std::nullopt;
  route_name = std::string(m->route->pattern);
  std::string accepted;
  for (auto want : media) accepted += (accepted.empty() ? "" : ", ") + std::string(want);
  reply r;
  r.status = 415;
  r.body = error_body("unsupported_media_type",
                      media.size() == 1 && media[0] == "application/json"
                          ? std::string("the body must be JSON: send Content-Type: application/json (optionally ; charset=utf-8)")
                          : fmt::format("this route's body must be one of {}: say which in Content-Type", accepted),
                      "content-type");
  if (req.method() == http::verb::post) r.headers.emplace_back("Accept-Post", accepted);
  return r;
}

// Whether the request, by its header alone, is for a bulk-body route its credentials may use.
asio::awaitable<bool> may_send_bulk_body(server_state& s, const request_t& req) {
  auto parts = split_target(std::string_view(req.target().data(), req.target().size()));
  if (!parts) co_return false;
  auto m = match_route(std::string_view(req.method_string().data(), req.method_string().size()), parts->path);
  if (!m || !takes_bulk_body(*m->route) || !s.opt.serve_api) co_return false;
  caller ignored;
  auto c = co_await authorize(s, credentials_of(req), *m, &ignored);
  co_return c.has_value();
}

// A TLS connection ends with the peer told (close_notify), briefly: a peer that never answers
// it does not hold the connection.
asio::awaitable<void> close_gracefully(beast::tcp_stream& stream) {
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream.close();
  co_return;
}
asio::awaitable<void> close_gracefully(tls_stream& stream) {
  auto& lowest = beast::get_lowest_layer(stream);
  if (lowest.socket().is_open()) {
    lowest.expires_after(std::chrono::seconds(1));
    co_await stream.async_shutdown(tuple_awaitable);
  }
  lowest.close();
}

// One connection from the first byte to the close. Stream: beast::tcp_stream (plain HTTP) or
// tls_stream (its handshake is done here, under the first-byte deadline).
template <class Stream>
asio::awaitable<void> run_session(std::shared_ptr<server_state> self, Stream stream, std::string client,
                                  bool health_only, std::shared_ptr<connection_reserve> reserve) {
  constexpr bool over_tls = std::is_same_v<Stream, tls_stream>;
  server_state& s = *self;
  const auto& opt = s.opt;
  auto& conns = s.conns;
  auto& lowest = beast::get_lowest_layer(stream);
  // A health-reserve connection: beyond the cap, one request, answered only for /healthz,
  // /readyz and /metrics, all of it under this short deadline (a probe sends at once; anyone
  // else must not hold a reserve slot for long).
  bool in_reserve = false;
  constexpr auto reserve_deadline = std::chrono::seconds(3);
  {
    auto it = s.conns_per_client.find(client);
    const bool client_full = it != s.conns_per_client.end() && it->second >= opt.max_connections_per_client;
    const int regular = static_cast<int>(conns.size()) - (reserve ? reserve->in_use : 0);
    const bool total_full = !client_full && regular >= opt.max_connections && !evict_idle(s);
    if (total_full && reserve && reserve->in_use < reserve->slots) {
      in_reserve = true;
    } else if (client_full || total_full) {
      if constexpr (over_tls) {
        // The refusal is an HTTP answer, so it needs a (short) handshake first.
        lowest.expires_after(std::chrono::seconds(2));
        auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
        if (hec) co_return;
      }
      co_await refuse_connection(s, stream, client_full, client);
      co_return;
    }
  }
  const auto id = ++s.next_conn;
  if (in_reserve) ++reserve->in_use;
  else ++s.conns_per_client[client];
  struct unregister {
    server_state* s;
    std::uint64_t id;
    std::string client;
    connection_reserve* reserve;  // non-null: a reserve slot
    ~unregister() {
      s->conns.erase(id);
      if (reserve) {
        --reserve->in_use;
        return;
      }
      if (auto it = s->conns_per_client.find(client); it != s->conns_per_client.end() && --it->second <= 0)
        s->conns_per_client.erase(it);
    }
  } guard{&s, id, client, in_reserve ? reserve.get() : nullptr};
  conns[id].cancel_http = [&lowest] { lowest.cancel(); };
  conns[id].close_http = [&lowest] { lowest.close(); };
  if (!in_reserve) conns[id].client = client;  // a reserve slot is never evicted
  // Waiting for a request (or the handshake): idle, so a stop or an eviction may end it.
  auto set_idle = [&] {
    auto& c = conns[id];
    c.idle = true;
    c.idle_since = steady::now();
  };
  // Back from waiting: busy again; false when the wait was ended by an eviction.
  auto set_busy = [&] {
    auto& c = conns[id];
    c.idle = false;
    return static_cast<bool>(c.cancel_http);
  };
  if constexpr (over_tls) {
    // The handshake counts as waiting for the first request: idle (a stop ends it), and under
    // the first-byte deadline (a peer that connects and sends nothing holds its slot that long).
    set_idle();
    lowest.expires_after(in_reserve ? std::min<std::chrono::milliseconds>(opt.first_byte_timeout, reserve_deadline)
                                    : opt.first_byte_timeout);
    auto [hec] = co_await stream.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
    const bool evicted = !set_busy();
    if (hec || evicted) {
      if (hec && !evicted) s.metrics.tls_handshake_failed();
      lowest.close();
      co_return;
    }
  }
  beast::flat_buffer buf;
  bool first_request = true;
  for (;;) {
    if (s.stopping) break;
    if (buf.size() == 0) {
      // Wait for the first byte of the next request: a new connection gets the short
      // first-byte deadline (connecting and sending nothing must not hold a slot for long),
      // a kept-alive one the idle deadline.
      set_idle();
      if (in_reserve) lowest.expires_after(std::min<std::chrono::milliseconds>(opt.first_byte_timeout, reserve_deadline));
      else lowest.expires_after(first_request ? opt.first_byte_timeout : opt.idle_timeout);
      auto [ec, n] = co_await stream.async_read_some(buf.prepare(8192), tuple_awaitable);
      buf.commit(n);
      if (!set_busy() || ec || s.stopping) break;
    }
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(opt.header_limit));
    // The parser compares a Content-Length with its limit while it reads the header, before the
    // route is known: it gets the larger limit, and the route's is applied once the header is in.
    std::size_t body_limit = opt.body_limit;
    parser.body_limit(std::max(opt.body_limit, opt.bulk_body_limit));
    lowest.expires_after(in_reserve ? std::min<std::chrono::milliseconds>(opt.read_timeout, reserve_deadline)
                                    : opt.read_timeout);
    auto [hec, hn] = co_await http::async_read_header(stream, buf, parser, tuple_awaitable);
    first_request = false;
    if (!hec && parser.get().count(http::field::transfer_encoding) > 0)
      if (auto problem = transfer_encoding_problem(parser.get().version(), transfer_encodings(parser.get()))) {
        // Closing (after a linger that discards the rest) is the point: what follows this
        // header cannot be told apart from a next request.
        co_await send_error_and_close(s, stream, parser.get(), client, 400, errc::invalid_argument, std::move(*problem), "transfer-encoding");
        break;
      }
    if (!hec)
      if (auto problem = host_problem(parser.get())) {
        // Which host (virtual server) the request is for is ambiguous, and what follows may be
        // framed for another server: answer and close.
        co_await send_error_and_close(s, stream, parser.get(), client, 400, errc::invalid_argument, std::move(*problem),
                                      "host");
        break;
      }
    if (!hec && in_reserve &&
        !is_health_route(std::string_view(parser.get().method_string().data(), parser.get().method_string().size()),
                         std::string_view(parser.get().target().data(), parser.get().target().size()))) {
      co_await refuse_connection(s, stream, false, client, parser.get());
      break;
    }
    // A bulk body (the target import) may be larger than body_limit, for a caller allowed the
    // route: who may not use it cannot make the server hold more than body_limit.
    if (!hec && !health_only && !in_reserve && !parser.is_done() && co_await may_send_bulk_body(s, parser.get()))
      body_limit = opt.bulk_body_limit;
    if (!hec) {
      parser.body_limit(body_limit);  // a chunked body is counted against it as it arrives
      if (auto n = parser.content_length(); n && *n > body_limit) hec = http::error::body_limit;
    }
    if (!hec && parser.get()[http::field::expect] == "100-continue" && !parser.is_done()) {
      http::response<http::empty_body> cont{http::status::continue_, 11};
      auto [cec, cn] = co_await http::async_write(stream, cont, tuple_awaitable);
      if (cec) break;
    }
    boost::system::error_code ec = hec;
    if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(stream, buf, parser, tuple_awaitable);
    if (ec) {
      if (ec == http::error::body_limit) {
        co_await send_error_and_close(s, stream, parser.get(), client, 413, errc::payload_too_large,
                                      fmt::format("the body is larger than {} bytes", body_limit), "body");
      } else if (ec == http::error::header_limit) {
        co_await send_error_and_close(s, stream, parser.get(), client, 431, errc::invalid_argument,
                                      fmt::format("the request header is larger than {} bytes", opt.header_limit),
                                      "header");
      } else if (ec == beast::error::timeout) {
        // tcp_stream closed the socket at the deadline: nothing can be answered.
        s.metrics.request("unmatched", 408, 0);
      } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
                 ec != asio::error::operation_aborted && ec != asio::error::connection_reset &&
                 ec.category() != asio::error::get_ssl_category() && ec != asio::ssl::error::stream_truncated) {
        co_await send_error_and_close(s, stream, parser.get(), client, 400, errc::invalid_argument,
                                      fmt::format("malformed HTTP request: {}", ec.message()), "request");
      }
      break;
    }
    auto t0 = steady::now();
    if (beast::websocket::is_upgrade(parser.get()) && !health_only && !in_reserve) {
      auto req = parser.release();
      auto parts = split_target(std::string_view(req.target().data(), req.target().size()));
      auto m = parts ? match_route("GET", parts->path) : result<route_match>(make_error(errc::not_found, ""));
      if (m && m->route->websocket) {
        conns[id].cancel_http = nullptr;
        conns[id].close_http = nullptr;
        // The query is copied: it points into the request, which moves into the stream session.
        std::string query(parts->query);
        co_await run_log_stream(self, std::move(stream), std::move(req), *m, std::move(query), id, client);
        co_return;
      }
      parser.get() = std::move(req);  // not a WebSocket route: answer it as plain HTTP
    }
    const auto& req = parser.get();
    const bool head = req.method() == http::verb::head;
    const auto rid = request_id_of(req);
    reply r;
    std::string route_name = "unmatched";
    try {
      if (auto refused = media_type_refusal(req, health_only, route_name)) {
        r = std::move(*refused);
      } else {
        const request_view view{std::string_view(req.method_string().data(), req.method_string().size()),
                                std::string_view(req.target().data(), req.target().size()), credentials_of(req),
                                req.body(), health_only,
                                std::string_view(req[http::field::content_type].data(), req[http::field::content_type].size())};
        r = co_await dispatch(s, view, route_name);
      }
    } catch (const std::exception& e) {
      // A bug: this request fails and its connection ends; the process and others carry on.
      r = error_reply(errc::store_failure, "internal error");
      r.internal_error = fmt::format("unexpected exception: {}", e.what());
      r.close = true;
    }
    if (in_reserve) s.metrics.reserve_served();
    bool keep = req.keep_alive() && !s.stopping && !r.close && !in_reserve;
    auto res = make_response(r, req.version(), keep, rid);
    finish_response<Stream>(s, res, head);
    lowest.expires_after(opt.write_timeout);
    auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
    const double seconds = std::chrono::duration<double>(steady::now() - t0).count();
    s.metrics.request(route_name, r.status, seconds);
    log_request({std::string_view(req.method_string().data(), req.method_string().size()),
                 std::string_view(req.target().data(), req.target().size()), r.status, head ? 0 : r.body.size(),
                 seconds, client, rid, route_name},
                r.internal_error);
    if (wec || !keep) break;
  }
  co_await close_gracefully(stream);
}

}  // namespace

asio::awaitable<void> run_http_session(std::shared_ptr<server_state> self, tcp::socket sock,
                                       std::shared_ptr<asio::ssl::context> tls, bool health_only,
                                       std::shared_ptr<connection_reserve> reserve) {
  auto client = client_key(sock);
  if (!tls) {
    co_await run_session(std::move(self), beast::tcp_stream(std::move(sock)), std::move(client), health_only,
                         std::move(reserve));
    co_return;
  }
  // `tls` stays alive in this frame: the connection keeps the context (the certificate version)
  // it began with, whatever the listener serves meanwhile.
  co_await run_session(std::move(self), tls_stream(beast::tcp_stream(std::move(sock)), *tls), std::move(client),
                       health_only, std::move(reserve));
}

}  // namespace certfleet::api
