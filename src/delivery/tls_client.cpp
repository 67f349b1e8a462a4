// The shared TLS client context (tls_client.hpp).
#include "delivery/tls_client.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>

namespace certfleet::delivery::detail {

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
  if (!ca_pem.empty()) return make_context(ca_pem, error);
  static const std::shared_ptr<asio::ssl::context> shared = [] {
    std::string ignored;
    return make_context({}, ignored);
  }();
  return shared;
}

}  // namespace certfleet::delivery::detail
