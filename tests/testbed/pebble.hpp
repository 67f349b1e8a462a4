#pragma once
// pebble (Debian `pebble` 2.4, TESTBED.md): a real ACME server on 127.0.0.1 for tests and
// benchmarks, with its own TLS certificate made here (a test CA and a localhost/127.0.0.1 leaf),
// its config in the test directory, free ports for the ACME and management listeners, and
// PEBBLE_VA_NOSLEEP=1. pebble-challtestsrv is the DNS server a test can point pebble at and put
// DNS-01 TXT records in (its /set-txt and /clear-txt). Both are stopped by their PIDs.
//
// pebble rejects 5% of good nonces (badNonce) and reuses authorizations 50% of the time unless
// told otherwise; it issues 5-year certificates by default and has no renewalInfo (RFC 9773).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process.hpp"

namespace testbed {

struct pebble_options {
  // kid → HMAC key (base64url). Non-empty: pebble requires External Account Binding
  // (externalAccountBindingRequired) and accepts these keys.
  std::map<std::string, std::string> eab_keys = {};
  // "127.0.0.1:PORT": where pebble resolves DNS-01 records (-dnsserver). Empty: its default.
  std::string dns_server = {};
  std::optional<int> nonce_reject_percent = {};  // PEBBLE_WFE_NONCEREJECT (pebble's default 5)
  std::optional<int> authz_reuse_percent = {};   // PEBBLE_AUTHZREUSE (pebble's default 50)
  std::uint64_t validity_s = 0;             // certificateValidityPeriod; 0: pebble's 5 years
  std::vector<std::string> domain_blocklist = {};  // names pebble refuses (rejectedIdentifier)
};

// A certificate's status as pebble's management interface reports it.
struct pebble_cert_status {
  int http_status = 0;  // 0: no answer; 404: pebble does not know the serial
  std::string status;   // "Valid" | "Revoked"
  int reason = -1;      // RFC 5280 reason code once revoked
  std::string body;     // the whole answer, for failure messages
};

class pebble {
 public:
  pebble(const std::filesystem::path& dir, pebble_options o = {});
  ~pebble();  // SIGTERM, then SIGKILL
  pebble(const pebble&) = delete;
  pebble& operator=(const pebble&) = delete;

  std::uint16_t port() const { return port_; }
  std::uint16_t management_port() const { return management_port_; }
  std::string directory_url() const;  // https://127.0.0.1:PORT/dir
  // The trust anchor of pebble's own HTTPS listeners (the testbed CA, not pebble's issuing CA).
  const std::string& tls_ca_pem() const { return tls_ca_pem_; }
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stdout_text() + proc_->stderr_text() : ""; }

  // Management interface: the root that issues this instance's certificates (PEM).
  std::string root_pem() const;
  // Management interface: /cert-status-by-serial/<hex serial> (lower- or upper-case hex).
  pebble_cert_status certificate_status(const std::string& serial_hex) const;

 private:
  std::filesystem::path dir_;
  std::uint16_t port_ = 0, management_port_ = 0;
  std::string tls_ca_pem_;
  std::unique_ptr<process> proc_;
};

// pebble-challtestsrv with every listener set explicitly on 127.0.0.1 (its defaults bind all
// interfaces): the DNS-01 server (UDP and TCP) and the management API; HTTP-01, HTTPS-01 and
// TLS-ALPN-01 are off. A and AAAA queries answer 127.0.0.1 / nothing.
class challtestsrv {
 public:
  explicit challtestsrv(const std::filesystem::path& dir);
  ~challtestsrv();
  challtestsrv(const challtestsrv&) = delete;
  challtestsrv& operator=(const challtestsrv&) = delete;

  std::string dns_address() const { return "127.0.0.1:" + std::to_string(dns_port_); }
  std::uint16_t dns_port() const { return dns_port_; }
  int pid() const { return proc_ ? proc_->pid() : -1; }
  // Adds a TXT record (host "_acme-challenge.example.com", with or without the final dot);
  // false when the management API refused.
  bool set_txt(const std::string& host, const std::string& value);
  // Removes every TXT record of the host.
  bool clear_txt(const std::string& host);

 private:
  bool post(const std::string& path, const std::string& body);
  std::uint16_t dns_port_ = 0, management_port_ = 0;
  std::unique_ptr<process> proc_;
};

}  // namespace testbed
