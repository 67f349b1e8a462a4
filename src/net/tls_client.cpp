// The shared TLS client context (tls_client.hpp).
#include "net/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>

#include <list>
#include <mutex>
#include <utility>

namespace certfleet::net::detail {

namespace asio = boost::asio;

namespace {

// An SSL_CTX is safe to use from several threads once configured.
std::shared_ptr<asio::ssl::context> make_context(const std::string& ca_pem, std::string& error) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  ctx->set_default_verify_paths(ec);  // a host without a CA store still works with ca_pem
  ctx->set_verify_mode(asio::ssl::verify_peer);
  if (!ca_pem.empty()) {
    ctx->add_certificate_authority(asio::buffer(ca_pem), ec);
    ERR_clear_error();
    if (ec) {
      error = "ca_pem does not parse as PEM certificates";
      return nullptr;
    }
  }
  return ctx;
}

}  // namespace

std::shared_ptr<asio::ssl::context> client_tls_context(const std::string& ca_pem, std::string& error) {
  static const std::shared_ptr<asio::ssl::context> shared = [] {
    std::string ignored;
    return make_context({}, ignored);
  }();
  if (ca_pem.empty()) return shared;
  // Building a context loads the system CA store (about 26 ms of CPU here) and an ACME issuance
  // makes about ten requests with its account's CA bundle, a webhook one per delivery: keep the
  // contexts of the last few bundles, keyed by their text, so a changed bundle gets a new one.
  // A bad bundle is not kept (its error is cheap to find again).
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<asio::ssl::context>>> recent;  // most recent first
  constexpr std::size_t max_contexts = 16;
  {
    std::lock_guard lock(mu);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (it->first == ca_pem) {
        recent.splice(recent.begin(), recent, it);
        return recent.front().second;
      }
  }
  auto ctx = make_context(ca_pem, error);
  if (!ctx) return nullptr;
  std::lock_guard lock(mu);
  recent.emplace_front(ca_pem, ctx);
  if (recent.size() > max_contexts) recent.pop_back();
  return ctx;
}

std::shared_ptr<asio::ssl::context> client_tls_context_with_identity(const std::string& ca_pem,
                                                                     const std::string& cert_pem,
                                                                     const std::string& key_pem, std::string& error) {
  auto ctx = make_context(ca_pem, error);
  if (!ctx) return nullptr;
  boost::system::error_code ec;
  ctx->use_certificate_chain(asio::buffer(cert_pem), ec);
  if (ec) {
    ERR_clear_error();
    error = "the client certificate does not parse as PEM";
    return nullptr;
  }
  ctx->use_private_key(asio::buffer(key_pem), asio::ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    error = "the client certificate's key does not load or does not match the certificate";
    return nullptr;
  }
  return ctx;
}

}  // namespace certfleet::net::detail
