#pragma once
// TLS on the API listener (docs/install.md, docs/configuration.md): the certificate chain and key
// the listener serves, from files (tls_cert_file / tls_key_file) or from a certificate certfleet
// manages (tls_certificate = PROJECT/ID), checked before anything listens. OpenSSL and Asio's
// SSL layer stay in src/api.
#include "certfleet/core/error.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace certfleet {
class kek;
}
namespace certfleet::store {
class store;
}

namespace certfleet::api {

// What the listener serves: a chain (leaf first) and its private key as PEM text, with the
// settings that name them (an error names the one at fault) and where they came from.
struct tls_material {
  std::string chain_pem;
  std::string key_pem;
  std::string cert_setting = "tls_cert_file";
  std::string key_setting = "tls_key_file";
  std::string source;  // "/etc/certfleet/tls.pem" or "certificate default/66a1…"
};

// The served leaf, as the log, /metrics and `certfleet doctor` show it.
struct tls_identity {
  std::string subject;             // RFC 2253
  std::string fingerprint_sha256;  // lower-case hex SHA-256 of the leaf's DER
  std::int64_t not_after_ms = 0;
};

// Builds the listener's TLS context from `m` and throws it away: the leaf's identity, or
// config_invalid naming the setting at fault (no PEM certificate, no PEM key, an encrypted key,
// a key that does not belong to the leaf).
result<tls_identity> check_tls_material(const tls_material& m);

// Reads both files (config_invalid naming the setting of a file that cannot be read).
result<tls_material> read_tls_files(const std::string& cert_file, const std::string& key_file);

// The TLS settings taken together: tls_cert_file and tls_key_file both or neither, and not with
// tls_certificate. config_invalid naming the setting.
result<void> check_tls_settings(const settings_map& s);

// A managed certificate's current version, when its fingerprint differs from
// `known_fingerprint` (nullopt: the same version). Errors name tls_certificate: an unknown
// project or certificate, a certificate without PEM yet, a key that does not open with `key`.
boost::asio::awaitable<result<std::optional<tls_material>>> read_managed_certificate(store::store& st, const kek* key,
                                                                                     certificate_ref ref,
                                                                                     std::string known_fingerprint);

}  // namespace certfleet::api
