#include "http_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json/parse.hpp>

#include <cctype>
#include <exception>

namespace testbed {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Runs `a` on `ioc` for at most `timeout`; false on timeout (the loop is left drained).
template <class T>
bool run_with_deadline(asio::io_context& ioc, asio::awaitable<T> a, std::chrono::milliseconds timeout,
                       std::optional<T>& out, const std::function<void()>& cancel) {
  bool done = false;
  std::exception_ptr failure;
  asio::co_spawn(ioc, std::move(a), [&](std::exception_ptr e, T v) {
    done = true;
    failure = e;
    if (!e) out.emplace(std::move(v));
  });
  ioc.restart();
  ioc.run_for(timeout);
  const bool in_time = done;
  if (!done) {
    cancel();
    ioc.restart();
    ioc.run_for(std::chrono::seconds(5));
  }
  if (failure) std::rethrow_exception(failure);
  return in_time && out.has_value();
}
}  // namespace

boost::json::value http_response::json() const {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  return ec ? boost::json::value(nullptr) : v;
}

std::string http_response::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

http_client::http_client(std::string host, unsigned short port, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {}

http_client::~http_client() { disconnect(); }

bool http_client::connected() const { return stream_ && stream_->socket().is_open(); }

void http_client::disconnect() {
  if (stream_) {
    boost::system::error_code ec;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_->close();
    stream_.reset();
  }
}

bool http_client::ensure_connected(std::string& error) {
  if (connected()) return true;
  stream_ = std::make_unique<beast::tcp_stream>(ioc_);
  boost::system::error_code ec;
  stream_->expires_after(timeout_);
  stream_->connect(tcp::endpoint(asio::ip::make_address(host_), port_), ec);
  if (ec) {
    error = "connect: " + ec.message();
    stream_.reset();
    return false;
  }
  stream_->socket().set_option(tcp::no_delay(true), ec);
  return true;
}

http_response http_client::request(std::string_view method, std::string_view target, std::string_view body,
                                   std::string_view token, const std::map<std::string, std::string>& headers) {
  http_response out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!ensure_connected(out.error)) return out;
    http::request<http::string_body> req{http::string_to_verb(method), std::string(target), 11};
    if (req.method() == http::verb::unknown) req.method_string(method);
    req.set(http::field::host, host_);
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + std::string(token));
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST" || method == "PUT") {
      if (req.count(http::field::content_type) == 0) req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
    }
    req.keep_alive(true);
    req.prepare_payload();
    auto io = [this, req = std::move(req)]() -> asio::awaitable<http_response> {
      http_response r;
      stream_->expires_after(timeout_);
      auto [wec, wn] = co_await http::async_write(*stream_, req, tuple_awaitable);
      if (wec) {
        r.error = "write: " + wec.message();
        co_return r;
      }
      beast::flat_buffer buf;
      http::response_parser<http::string_body> parser;
      parser.body_limit(64u << 20);
      auto [rec, rn] = co_await http::async_read(*stream_, buf, parser, tuple_awaitable);
      if (rec) {
        r.error = "read: " + rec.message();
        co_return r;
      }
      auto res = parser.release();
      r.status = static_cast<int>(res.result_int());
      r.body = std::move(res.body());
      for (const auto& f : res) r.headers[lower(std::string_view(f.name_string().data(), f.name_string().size()))] =
                                  std::string(f.value());
      if (!res.keep_alive()) disconnect();
      co_return r;
    };
    std::optional<http_response> got;
    bool ok = run_with_deadline<http_response>(ioc_, io(), timeout_ + std::chrono::seconds(1), got, [this] { disconnect(); });
    if (!ok) {
      out.error = "timeout";
      disconnect();
      return out;
    }
    if (got->status != 0) return *got;
    // A kept-alive connection the server closed meanwhile: one retry on a fresh connection.
    out = *got;
    disconnect();
  }
  return out;
}

std::string http_client::raw(std::string_view bytes) {
  disconnect();
  std::string error;
  if (!ensure_connected(error)) return {};
  std::string data(bytes);
  auto io = [this, data]() -> asio::awaitable<std::string> {
    std::string got;
    stream_->expires_after(timeout_);
    auto [wec, wn] = co_await asio::async_write(*stream_, asio::buffer(data), tuple_awaitable);
    char buf[4096];
    for (;;) {
      auto [ec, n] = co_await stream_->async_read_some(asio::buffer(buf), tuple_awaitable);
      got.append(buf, n);
      if (ec) break;
    }
    co_return got;
  };
  std::optional<std::string> got;
  run_with_deadline<std::string>(ioc_, io(), timeout_ + std::chrono::seconds(1), got, [this] { disconnect(); });
  disconnect();
  return got.value_or("");
}

ws_stream::ws_stream(asio::any_io_executor ex) : ex_(ex) {}
ws_stream::~ws_stream() = default;

void ws_stream::hard_close() {
  if (!ws_) return;
  boost::system::error_code ec;
  beast::get_lowest_layer(*ws_).socket().shutdown(tcp::socket::shutdown_both, ec);
  beast::get_lowest_layer(*ws_).close();
}

asio::awaitable<int> ws_stream::connect(std::string host, unsigned short port, std::string target, std::string token,
                                        int receive_buffer, std::map<std::string, std::string> headers) {
  ws_ = std::make_unique<websocket::stream<beast::tcp_stream>>(ex_);
  auto& lowest = beast::get_lowest_layer(*ws_);
  boost::system::error_code ec;
  lowest.socket().open(tcp::v4(), ec);
  if (receive_buffer > 0) lowest.socket().set_option(asio::socket_base::receive_buffer_size(receive_buffer), ec);
  lowest.expires_after(std::chrono::seconds(10));
  auto [cec] = co_await lowest.async_connect(tcp::endpoint(asio::ip::make_address(host), port), tuple_awaitable);
  if (cec) {
    rejection_ = "connect: " + cec.message();
    co_return 0;
  }
  ws_->set_option(websocket::stream_base::decorator([token, headers](websocket::request_type& req) {
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    for (const auto& [k, v] : headers) req.set(k, v);
  }));
  ws_->control_callback([pongs = pongs_](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::pong) ++*pongs;
  });
  websocket::response_type res;
  auto [hec] = co_await ws_->async_handshake(res, host + ":" + std::to_string(port), target, tuple_awaitable);
  lowest.expires_never();
  if (hec) {
    rejection_ = res.body().empty() ? hec.message() : res.body();
    co_return res.result_int() ? static_cast<int>(res.result_int()) : 0;
  }
  // The client answers the server's pings while it reads; no client-side idle timeout.
  websocket::stream_base::timeout to{};
  to.handshake_timeout = std::chrono::seconds(10);
  to.idle_timeout = websocket::stream_base::none();
  to.keep_alive_pings = false;
  ws_->set_option(to);
  ws_->read_message_max(64u << 20);
  co_return 101;
}

asio::awaitable<ws_message> ws_stream::read() {
  ws_message m;
  beast::flat_buffer buf;
  auto [ec, n] = co_await ws_->async_read(buf, tuple_awaitable);
  if (ec) {
    m.closed = true;
    m.error = ec.message();
    auto r = ws_->reason();
    m.close_code = static_cast<int>(r.code);
    m.close_reason = std::string(r.reason.data(), r.reason.size());
    co_return m;
  }
  m.text = beast::buffers_to_string(buf.data());
  co_return m;
}

asio::awaitable<bool> ws_stream::ping() {
  if (!ws_ || !ws_->is_open()) co_return false;
  auto [ec] = co_await ws_->async_ping({}, tuple_awaitable);
  co_return !ec;
}

asio::awaitable<void> ws_stream::close() {
  if (!ws_ || !ws_->is_open()) co_return;
  beast::get_lowest_layer(*ws_).expires_after(std::chrono::seconds(5));
  co_await ws_->async_close(websocket::close_code::normal, tuple_awaitable);
}

ws_client::ws_client(std::string host, unsigned short port, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout), ws_(ioc_.get_executor()) {}

ws_client::~ws_client() { ws_.hard_close(); }

int ws_client::connect(const std::string& target, const std::string& token, int receive_buffer,
                       std::map<std::string, std::string> headers) {
  std::optional<int> status;
  run_with_deadline<int>(ioc_, ws_.connect(host_, port_, target, token, receive_buffer, std::move(headers)), timeout_, status,
                         [this] { ws_.hard_close(); });
  return status.value_or(0);
}

ws_message ws_client::read(std::optional<std::chrono::milliseconds> timeout) {
  std::optional<ws_message> m;
  if (!run_with_deadline<ws_message>(ioc_, ws_.read(), timeout.value_or(timeout_), m, [this] { ws_.hard_close(); })) {
    ws_message t;
    t.closed = true;
    t.error = "timeout";
    return t;
  }
  return *m;
}

void ws_client::close() {
  std::optional<bool> done;
  run_with_deadline<bool>(
      ioc_,
      [this]() -> asio::awaitable<bool> {
        co_await ws_.close();
        co_return true;
      }(),
      timeout_, done, [this] { ws_.hard_close(); });
  ws_.hard_close();
}

}  // namespace testbed
