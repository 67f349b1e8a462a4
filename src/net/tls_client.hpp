#pragma once
// The verified-peer TLS client context the HTTP client and SMTP STARTTLS share:
// the system CA store plus optional extra trust anchors, TLS 1.2 or newer, peer always verified.
// Private to src/net (OpenSSL stays in src/).
#include <boost/asio/ssl/context.hpp>

#include <memory>
#include <string>

namespace certfleet::net::detail {

// Shared and built once when `ca_pem` is empty (loading the store is not free); with extra
// anchors, one per bundle text, the last 16 bundles kept. Callers never change a context (host
// checks are per stream). nullptr with `error` set when ca_pem does not parse.
std::shared_ptr<boost::asio::ssl::context> client_tls_context(const std::string& ca_pem, std::string& error);

// A context of its own that also presents a client certificate: never shared or kept (it holds
// a private key). nullptr with `error` set (never quoting the key) when the PEM does not load or
// the key does not match the certificate.
std::shared_ptr<boost::asio::ssl::context> client_tls_context_with_identity(const std::string& ca_pem,
                                                                            const std::string& cert_pem,
                                                                            const std::string& key_pem,
                                                                            std::string& error);

}  // namespace certfleet::net::detail
