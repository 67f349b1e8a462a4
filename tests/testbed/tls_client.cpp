#include "tls_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cctype>
#include <optional>

namespace testbed {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using tls_stream = beast::ssl_stream<beast::tcp_stream>;

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

std::string hex_sha256(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!cert || X509_digest(cert, EVP_sha256(), md, &len) != 1) return {};
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(digits[md[i] >> 4]);
    out.push_back(digits[md[i] & 15]);
  }
  return out;
}

std::shared_ptr<ssl::context> client_context(const std::string& ca_pem) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  ctx->add_certificate_authority(asio::buffer(ca_pem));
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

// Runs `a` on `ioc` for at most `timeout`; nullopt on timeout (then `cancel` runs).
template <class T>
std::optional<T> run_for(asio::io_context& ioc, asio::awaitable<T> a, std::chrono::milliseconds timeout,
                         const std::function<void()>& cancel) {
  std::optional<T> out;
  std::exception_ptr failure;
  bool done = false;
  asio::co_spawn(ioc, std::move(a), [&](std::exception_ptr e, T v) {
    done = true;
    failure = e;
    if (!e) out.emplace(std::move(v));
  });
  ioc.restart();
  ioc.run_for(timeout);
  if (!done) {
    cancel();
    ioc.restart();
    ioc.run_for(std::chrono::seconds(5));
    out.reset();
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

// Connects and does the TLS handshake (SNI, chain and host name verified).
asio::awaitable<std::string> open_tls(tls_stream& s, unsigned short port, const std::string& name) {
  auto& lowest = beast::get_lowest_layer(s);
  lowest.expires_after(std::chrono::seconds(10));
  auto [cec] = co_await lowest.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), tuple_awaitable);
  if (cec) co_return "connect: " + cec.message();
  SSL_set_tlsext_host_name(s.native_handle(), name.c_str());
  s.set_verify_callback(ssl::host_name_verification(name));
  auto [hec] = co_await s.async_handshake(ssl::stream_base::client, tuple_awaitable);
  if (hec) co_return "handshake: " + hec.message();
  co_return std::string();
}
}  // namespace

std::string pem_fingerprint(const std::string& pem) {
  BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
  BIO_free(b);
  auto fp = hex_sha256(x);
  X509_free(x);
  return fp;
}

struct https_client::impl {
  unsigned short port;
  std::string name;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::shared_ptr<ssl::context> ctx;
  std::unique_ptr<tls_stream> stream;
};

https_client::https_client(unsigned short port, std::string ca_pem, std::string server_name,
                           std::chrono::milliseconds timeout)
    : p_(std::make_unique<impl>()) {
  p_->port = port;
  p_->name = std::move(server_name);
  p_->timeout = timeout;
  p_->ctx = client_context(ca_pem);
}

https_client::~https_client() { disconnect(); }

bool https_client::connected() const { return p_->stream && beast::get_lowest_layer(*p_->stream).socket().is_open(); }

void https_client::disconnect() {
  if (!p_->stream) return;
  beast::get_lowest_layer(*p_->stream).close();
  p_->stream.reset();
}

std::string https_client::peer_fingerprint() const {
  if (!connected()) return {};
  X509* cert = SSL_get1_peer_certificate(p_->stream->native_handle());
  auto fp = hex_sha256(cert);
  X509_free(cert);
  return fp;
}

bool https_client::ensure_connected(std::string& error) {
  if (connected()) return true;
  p_->stream = std::make_unique<tls_stream>(p_->ioc, *p_->ctx);
  auto r = run_for<std::string>(p_->ioc, open_tls(*p_->stream, p_->port, p_->name), p_->timeout, [this] { disconnect(); });
  if (!r || !r->empty()) {
    error = r ? *r : "timeout";
    disconnect();
    return false;
  }
  ++opened_;
  return true;
}

http_response https_client::request(std::string_view method, std::string_view target, std::string_view body,
                                    std::string_view token, const std::map<std::string, std::string>& headers) {
  http_response out;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!ensure_connected(out.error)) return out;
    http::request<http::string_body> req{http::string_to_verb(method), std::string(target), 11};
    req.set(http::field::host, p_->name);
    if (!token.empty()) req.set(http::field::authorization, "Bearer " + std::string(token));
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST" || method == "PUT") {
      req.set(http::field::content_type, "application/json");
      req.body() = std::string(body);
    }
    req.keep_alive(true);
    req.prepare_payload();
    auto io = [this, req = std::move(req)]() -> asio::awaitable<http_response> {
      http_response r;
      auto& s = *p_->stream;
      beast::get_lowest_layer(s).expires_after(p_->timeout);
      auto [wec, wn] = co_await http::async_write(s, req, tuple_awaitable);
      if (wec) {
        r.error = "write: " + wec.message();
        co_return r;
      }
      beast::flat_buffer buf;
      http::response_parser<http::string_body> parser;
      auto [rec, rn] = co_await http::async_read(s, buf, parser, tuple_awaitable);
      if (rec) {
        r.error = "read: " + rec.message();
        co_return r;
      }
      auto res = parser.release();
      r.status = static_cast<int>(res.result_int());
      r.body = std::move(res.body());
      for (const auto& f : res) {
        std::string k(f.name_string());
        for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers[k] = std::string(f.value());
      }
      if (!res.keep_alive()) beast::get_lowest_layer(s).close();
      co_return r;
    };
    auto got = run_for<http_response>(p_->ioc, io(), p_->timeout + std::chrono::seconds(1), [this] { disconnect(); });
    if (!got) {
      out.error = "timeout";
      disconnect();
      return out;
    }
    if (got->status != 0) {
      if (!connected()) disconnect();
      return *got;
    }
    // A kept-alive connection the server closed meanwhile: one retry on a fresh connection.
    out = *got;
    disconnect();
  }
  return out;
}

struct wss_client::impl {
  unsigned short port;
  std::string name;
  std::chrono::milliseconds timeout;
  asio::io_context ioc;
  std::shared_ptr<ssl::context> ctx;
  std::unique_ptr<websocket::stream<tls_stream>> ws;
  void hard_close() {
    if (ws) beast::get_lowest_layer(*ws).close();
  }
};

wss_client::wss_client(unsigned short port, std::string ca_pem, std::string server_name, std::chrono::milliseconds timeout)
    : p_(std::make_unique<impl>()) {
  p_->port = port;
  p_->name = std::move(server_name);
  p_->timeout = timeout;
  p_->ctx = client_context(ca_pem);
}

wss_client::~wss_client() { p_->hard_close(); }

int wss_client::connect(const std::string& target, const std::string& token) {
  p_->ws = std::make_unique<websocket::stream<tls_stream>>(p_->ioc, *p_->ctx);
  auto io = [this, target, token]() -> asio::awaitable<int> {
    auto& ws = *p_->ws;
    auto err = co_await open_tls(ws.next_layer(), p_->port, p_->name);
    if (!err.empty()) co_return 0;
    beast::get_lowest_layer(ws).expires_never();
    ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
      req.set(http::field::authorization, "Bearer " + token);
    }));
    websocket::response_type res;
    auto [hec] = co_await ws.async_handshake(res, p_->name, target, tuple_awaitable);
    if (hec) co_return static_cast<int>(res.result_int());
    co_return 101;
  };
  return run_for<int>(p_->ioc, io(), p_->timeout, [this] { p_->hard_close(); }).value_or(0);
}

ws_message wss_client::read(std::chrono::milliseconds timeout) {
  auto io = [this]() -> asio::awaitable<ws_message> {
    ws_message m;
    beast::flat_buffer buf;
    auto [ec, n] = co_await p_->ws->async_read(buf, tuple_awaitable);
    if (ec) {
      m.closed = true;
      m.error = ec.message();
      m.close_code = static_cast<int>(p_->ws->reason().code);
      co_return m;
    }
    m.text = beast::buffers_to_string(buf.data());
    co_return m;
  };
  auto m = run_for<ws_message>(p_->ioc, io(), timeout, [this] { p_->hard_close(); });
  if (!m) {
    ws_message t;
    t.closed = true;
    t.error = "timeout";
    return t;
  }
  return *m;
}

}  // namespace testbed
