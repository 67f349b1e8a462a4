#pragma once
// The listener's TLS server context (OpenSSL through Asio's SSL layer): TLS 1.2 and 1.3 only,
// forward-secret AEAD ciphers, no compression, no renegotiation, HTTP/1.1 by ALPN. A context is
// built once per certificate version and shared by the connections that began under it: a new
// version is a new context, and connections keep theirs (src/api/tls_watch.cpp swaps them).
#include "certfleet/api/tls.hpp"

#include <boost/asio/ssl/context.hpp>

#include <memory>

namespace certfleet::api {

struct tls_server_context {
  std::shared_ptr<boost::asio::ssl::context> context;
  tls_identity identity;
};

result<tls_server_context> make_tls_context(const tls_material& m);

}  // namespace certfleet::api
