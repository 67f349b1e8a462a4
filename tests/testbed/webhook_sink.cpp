#include "webhook_sink.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http.hpp>

#include <condition_variable>
#include <deque>
#include <map>
#include <optional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

namespace testbed {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

std::string to_hex(const unsigned char* p, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

struct pkey_free { void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); } };
struct x509_free { void operator()(X509* x) const { X509_free(x); } };
struct bio_free { void operator()(BIO* b) const { BIO_free(b); } };

void add_ext(X509* x, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) throw std::runtime_error("webhook_sink: bad certificate extension");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
}

std::string bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// A self-signed P-256 certificate for 127.0.0.1 / localhost, valid for a day: its own trust
// anchor, so a client given it as ca_pem verifies chain and host.
void make_self_signed(std::string& cert_pem, std::string& key_pem) {
  std::unique_ptr<EVP_PKEY, pkey_free> key(EVP_EC_gen("P-256"));
  std::unique_ptr<X509, x509_free> x(X509_new());
  if (!key || !x) throw std::runtime_error("webhook_sink: key generation failed");
  X509_set_version(x.get(), 2);
  std::random_device rd;
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), static_cast<long>(rd() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 86400);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("certfleet test sink"), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  add_ext(x.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_ext(x.get(), NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_ext(x.get(), NID_subject_key_identifier, "hash");
  add_ext(x.get(), NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  if (!X509_sign(x.get(), key.get(), EVP_sha256())) throw std::runtime_error("webhook_sink: signing failed");
  std::unique_ptr<BIO, bio_free> cb(BIO_new(BIO_s_mem())), kb(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cb.get(), x.get());
  PEM_write_bio_PrivateKey(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  cert_pem = bio_text(cb.get());
  key_pem = bio_text(kb.get());
}

}  // namespace

std::string received_request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

bool received_request::signature_valid(std::string_view secret) const {
  std::string got = header("x-certfleet-signature");
  if (got.rfind("sha256=", 0) != 0) return false;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  static const unsigned char empty = 0;
  HMAC(EVP_sha256(), secret.empty() ? &empty : reinterpret_cast<const unsigned char*>(secret.data()),
       static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(body.data()), body.size(), md, &len);
  return got.substr(7) == to_hex(md, len);
}

struct webhook_sink::impl {
  struct action {
    bool hang = false;
    int status = 200;
    std::string retry_after;
  };

  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::unique_ptr<asio::ssl::context> ssl;
  std::string cert_pem, key_pem;
  std::uint16_t port = 0;

  mutable std::mutex m;
  mutable std::condition_variable cv;
  std::vector<received_request> seen;
  std::deque<action> script;
  std::map<std::string, canned_response> routes;
  int default_status = 200;
  std::string default_body = "{}";
  std::thread thread;

  action next_action() {
    std::lock_guard lk(m);
    if (script.empty()) return {false, default_status, {}};
    auto a = script.front();
    script.pop_front();
    return a;
  }

  std::string body_for_success() {
    std::lock_guard lk(m);
    return default_body;
  }

  void record(received_request r) {
    {
      std::lock_guard lk(m);
      seen.push_back(std::move(r));
    }
    cv.notify_all();
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buf;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(16 * 1024 * 1024);
      auto [ec, n] = co_await http::async_read(stream, buf, parser, tuple_awaitable);
      if (ec) co_return;
      auto& req = parser.get();
      received_request r;
      r.method = std::string(req.method_string());
      r.target = std::string(req.target());
      for (const auto& f : req) {
        std::string name(f.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        r.headers[name] = std::string(f.value());
      }
      r.body = req.body();
      bool keep_alive = req.keep_alive();
      unsigned version = req.version();
      std::optional<canned_response> canned;
      {
        std::lock_guard lk(m);
        auto path = r.target.substr(0, r.target.find('?'));
        if (auto it = routes.find(path); it != routes.end()) canned = it->second;
      }
      if (canned) {
        record(std::move(r));
        http::response<http::string_body> res;
        res.version(version);
        res.result(static_cast<unsigned>(canned->status));
        bool typed = false;
        for (const auto& [name, value] : canned->headers) {
          res.insert(name, value);
          typed = typed || beast::iequals(name, "content-type");
        }
        if (!typed) res.set(http::field::content_type, "application/json");
        res.body() = canned->body;
        res.keep_alive(keep_alive);
        res.prepare_payload();
        auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
        if (wec || !keep_alive) co_return;
        continue;
      }
      // Decide before recording: a test that saw the request may change the script next.
      auto a = next_action();
      record(std::move(r));
      if (a.hang) {
        asio::steady_timer forever(stream.get_executor());
        forever.expires_at(asio::steady_timer::time_point::max());
        co_await forever.async_wait(tuple_awaitable);
        co_return;
      }
      http::response<http::string_body> res;
      res.version(version);
      res.result(static_cast<unsigned>(a.status));
      res.set(http::field::content_type, "application/json");
      if (!a.retry_after.empty()) res.set(http::field::retry_after, a.retry_after);
      else if (a.status == 429) res.set(http::field::retry_after, "1");
      // 204/304 (and 1xx) carry no body: Beast refuses to serialize one.
      bool bodyless = a.status < 200 || a.status == 204 || a.status == 304;
      if (!bodyless) res.body() = a.status < 300 ? body_for_success() : "{\"error\":\"scripted by webhook_sink\"}";
      res.keep_alive(keep_alive);
      res.prepare_payload();
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      if (wec || !keep_alive) co_return;
    }
  }

  asio::awaitable<void> connection(tcp::socket sock) {
    if (!ssl) {
      co_await serve(sock);
      boost::system::error_code ec;
      sock.shutdown(tcp::socket::shutdown_both, ec);
      co_return;
    }
    asio::ssl::stream<tcp::socket> stream(std::move(sock), *ssl);
    auto [ec] = co_await stream.async_handshake(asio::ssl::stream_base::server, tuple_awaitable);
    if (ec) co_return;  // e.g. a client that refused our certificate
    co_await serve(stream);
    boost::system::error_code ignored;
    stream.next_layer().shutdown(tcp::socket::shutdown_both, ignored);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, sock] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        continue;
      }
      asio::co_spawn(ioc, connection(std::move(sock)), asio::detached);
    }
  }
};

webhook_sink::webhook_sink(bool tls) : p_(std::make_unique<impl>()) {
  if (tls) {
    make_self_signed(p_->cert_pem, p_->key_pem);
    p_->ssl = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    p_->ssl->use_certificate_chain(asio::buffer(p_->cert_pem));
    p_->ssl->use_private_key(asio::buffer(p_->key_pem), asio::ssl::context::pem);
  }
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), 0);
  p_->acceptor.open(ep.protocol());
  p_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  p_->acceptor.bind(ep);
  p_->acceptor.listen(128);
  p_->port = p_->acceptor.local_endpoint().port();
  asio::co_spawn(p_->ioc, p_->accept_loop(), asio::detached);
  p_->thread = std::thread([this] { p_->ioc.run(); });
}

webhook_sink::~webhook_sink() {
  p_->ioc.stop();
  if (p_->thread.joinable()) p_->thread.join();
  // The acceptor and the coroutines still suspended (hanging connections) are destroyed with
  // the impl, closing their sockets; nothing touches the recorded state after the join.
}

std::uint16_t webhook_sink::port() const { return p_->port; }
bool webhook_sink::tls() const { return p_->ssl != nullptr; }
std::string webhook_sink::url(std::string_view path) const {
  return std::string(tls() ? "https" : "http") + "://127.0.0.1:" + std::to_string(p_->port) + std::string(path);
}
const std::string& webhook_sink::ca_pem() const { return p_->cert_pem; }

void webhook_sink::set_default_status(int status) {
  std::lock_guard lk(p_->m);
  p_->default_status = status;
}

void webhook_sink::respond_with(int status, int count, std::string retry_after) {
  std::lock_guard lk(p_->m);
  for (int i = 0; i < count; ++i) p_->script.push_back({false, status, retry_after});
}

void webhook_sink::set_default_body(std::string body) {
  std::lock_guard lk(p_->m);
  p_->default_body = std::move(body);
}

void webhook_sink::hang_next(int count) {
  std::lock_guard lk(p_->m);
  for (int i = 0; i < count; ++i) p_->script.push_back({true, 0, {}});
}

void webhook_sink::serve(std::string path, canned_response answer) {
  std::lock_guard lk(p_->m);
  p_->routes[std::move(path)] = std::move(answer);
}

std::vector<received_request> webhook_sink::requests() const {
  std::lock_guard lk(p_->m);
  return p_->seen;
}

std::size_t webhook_sink::count() const {
  std::lock_guard lk(p_->m);
  return p_->seen.size();
}

bool webhook_sink::wait_for(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lk(p_->m);
  return p_->cv.wait_for(lk, timeout, [&] { return p_->seen.size() >= count; });
}

void webhook_sink::clear() {
  std::lock_guard lk(p_->m);
  p_->seen.clear();
}

}  // namespace testbed
