#pragma once
// A Microsoft AD CS enrollment peer (DESIGN §13) for tests: tests/testbed/msca_server.py run by
// /usr/bin/python3, a CEP (MS-XCEP GetPolicies) and a CES (MS-WSTEP RequestSecurityToken: Issue,
// renewal, QueryTokenStatus) written from Microsoft's public specifications, with a test CA made
// at start. Three listeners on 127.0.0.1, ports chosen by the OS:
//   https        TLS; WS-Security UsernameToken (PasswordText) in the SOAP header
//   client_cert  TLS requiring a client certificate from the test CA (its CN is the user name;
//                an expired one fails the handshake)
//   kerberos     (when given a keytab) TLS; HTTP Negotiate (SPNEGO) verified against a real KDC's
//                keys (kdc.hpp): no or a bad ticket gets 401 "WWW-Authenticate: Negotiate"
//   admin        plain HTTP JSON side channel: requests, approve/deny, faults, stats, log
// Templates: WebServer (RSA ≥ 2048, issued at once), WebServerApproval (pending until approved),
// ECWebServer (ECDSA P-256), SubCA (CERTSRV_E_TEMPLATE_DENIED 0x80094012), DeniedByPolicy
// (denied by the policy module, 0x80094800). Stopped by its PID (SIGTERM, then SIGKILL).
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"

namespace testbed {

struct msca_server_options {
  // user name → password, accepted in the UsernameToken of the https port. The client_cert
  // port takes any certificate of issue_client_certificate() whatever its user.
  std::vector<std::pair<std::string, std::string>> users = {{"alice", "alice-password"}};
  // The lifetime of the certificates it issues (0: 90 days).
  int validity_s = 0;
  // The kerberos port: the keytab of HTTP/127.0.0.1@REALM (kdc::add_keytab) and the realm's
  // krb5.conf (kdc::krb5_conf). Empty: no kerberos port.
  std::filesystem::path kerberos_keytab = {};
  std::filesystem::path krb5_conf = {};
};

struct msca_request {
  std::int64_t id = 0;
  std::string tmpl;    // the template name as the request named it
  std::string user;
  std::string status;  // "issued" | "pending" | "denied"
  std::string subject;  // RFC 4514
  std::vector<std::string> sans;
  bool renewal = false;
  std::string serial;  // lower-case hex, issued only
  std::string reason;  // denied only
  std::string hresult;  // denied only, "0x80094012"
};

struct msca_stats {
  int issued = 0, pending = 0, denied = 0;
  int cep_calls = 0, ces_calls = 0, faults = 0;
  int negotiate_refused = 0;  // requests the kerberos port answered 401
};

struct msca_faults {
  bool unavailable = false;            // CES answers the RPC_S_SERVER_UNAVAILABLE (0x800706BA) fault
  int delay_ms = 0;                    // every CEP/CES answer waits this long
  std::optional<int> http_status = {};  // CEP/CES answer this status with an HTML body
};

struct msca_client_certificate {
  std::string cert_pem, key_pem;
};

class msca_server {
 public:
  explicit msca_server(const std::filesystem::path& dir, msca_server_options o = {});
  ~msca_server();  // SIGTERM, then SIGKILL
  msca_server(const msca_server&) = delete;
  msca_server& operator=(const msca_server&) = delete;

  std::uint16_t https_port() const { return https_port_; }
  std::uint16_t client_cert_port() const { return client_cert_port_; }
  std::uint16_t admin_port() const { return admin_port_; }
  std::uint16_t kerberos_port() const { return kerberos_port_; }  // 0 without a keytab
  // The issuing CA: the trust anchor of both TLS ports and the issuer of every certificate.
  const std::string& ca_pem() const { return ca_pem_; }
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stdout_text() + proc_->stderr_text() : ""; }

  std::string cep_url() const;       // https port, username/password
  std::string ces_url() const;       // https port, username/password
  std::string cep_cert_url() const;  // client_cert port
  std::string ces_cert_url() const;  // client_cert port
  std::string cep_kerberos_url() const;  // kerberos port
  std::string ces_kerberos_url() const;  // kerberos port

  // A client certificate (CN = user) and its key for the client_cert port, made by the test CA;
  // `expired`: its validity ended yesterday. Throws when the side channel fails.
  msca_client_certificate issue_client_certificate(const std::string& user, bool expired = false) const;

  std::vector<msca_request> requests() const;
  bool approve(std::int64_t id) const;  // false: no such pending request
  bool deny(std::int64_t id, const std::string& reason) const;
  void set_faults(const msca_faults& f) const;
  msca_stats stats() const;
  // The last 200 request bodies as received (the UsernameToken's password shown as "***"):
  // [{port, path, content_type, body}].
  boost::json::value raw_log() const;

 private:
  boost::json::value admin(const std::string& method, const std::string& target, const std::string& body = {}) const;
  std::filesystem::path dir_;
  std::uint16_t https_port_ = 0, client_cert_port_ = 0, admin_port_ = 0, kerberos_port_ = 0;
  std::string ca_pem_;
  std::unique_ptr<process> proc_;
};

}  // namespace testbed
