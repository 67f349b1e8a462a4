#pragma once
// tls_certificate: the listener follows a managed certificate. Every poll interval (and when
// woken: this process changed a certificate) it reads the certificate object; a new fingerprint
// means a new version, made into a new TLS context that new connections get. Connections that
// began earlier keep their context until they end: nothing is dropped. A version that cannot be
// served (deleted, no PEM, a key that does not open or match) is logged once and the current
// certificate stays.
#include "certfleet/api/tls.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>

namespace certfleet::api {

struct server_state;

boost::asio::awaitable<void> watch_managed_certificate(std::shared_ptr<server_state> s, certificate_ref ref,
                                                       std::chrono::milliseconds every);

// Makes `m` the certificate of new connections, or refuses it (the error names the setting)
// keeping the current one; counts and logs either way.
result<tls_identity> install_tls(server_state& s, const tls_material& m);

// A new certificate (files on SIGHUP, a managed version) could not be read or served: counted in
// certfleet_tls_certificate_reloads_total{outcome="failed"}, logged once per distinct error.
void tls_reload_failed(server_state& s, const error& e);

}  // namespace certfleet::api
