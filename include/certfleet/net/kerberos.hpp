#pragma once
// Kerberos for HTTP Negotiate (RFC 4559): the header a request to a service in an Active
// Directory realm carries when it authenticates with a principal's password or keytab instead of
// a password in the message. MIT krb5 and its GSSAPI stay in src/net/kerberos.cpp.
//
// Each call logs in afresh into a MEMORY credential cache of its own, destroyed before it
// returns: no ticket is kept between calls, nothing is written to disk (the keytab is handed to
// the library through an anonymous memory file), and the process's own credential cache is never
// read or changed.
#include <chrono>
#include <string>
#include <string_view>

namespace certfleet::net {

struct kerberos_login {
  std::string principal;  // "svc-certfleet", or with its realm "svc-certfleet@CORP.EXAMPLE"
  std::string realm;      // "CORP.EXAMPLE"
  std::string password;   // exactly one of password and keytab
  std::string keytab;     // a keytab file's bytes (kadmin ktadd, ktpass, msktutil)
  // "192.0.2.10:88" or "[2001:db8::10]:88": the address the caller checked against its egress
  // policy. "": the realm's KDCs as the system's krb5.conf (or KRB5_CONFIG) finds them.
  std::string kdc;
  std::chrono::milliseconds timeout{30000};  // the KDC exchanges together (krb5 request_timeout)
};

enum class kerberos_failure {
  none,
  credentials,      // wrong password, unknown or locked principal, a keytab without its key
  service_unknown,  // the KDC has no such service principal (SPN)
  kdc_unreachable,  // no KDC answered, or none was found for the realm
  other,
};

struct negotiate_result {
  std::string header;  // "Negotiate <base64 SPNEGO token>"
  kerberos_failure failure = kerberos_failure::none;
  std::string error;  // the library's words and what to check; never a secret
  bool ok() const noexcept { return failure == kerberos_failure::none; }
};

// Blocking (the KDC's round trips): run it on a pool. The AS exchange for the principal, the
// TGS exchange for HTTP/<service_host>@<realm>, and a SPNEGO initial token over that ticket.
negotiate_result negotiate_header(const kerberos_login& login, std::string_view service_host);

// The realm as krb5.conf and principals spell it: 1-255 of A-Z a-z 0-9 . - _ (Active Directory
// realms are the domain's DNS name in upper case). Pure.
bool valid_realm(std::string_view realm) noexcept;
// A keytab file's first bytes: version 0x0502 (the one MIT and Windows write). Pure.
bool looks_like_keytab(std::string_view bytes) noexcept;

}  // namespace certfleet::net
