#pragma once
// An SMTP submission client (RFC 5321, RFC 6409) for email notifications: one message per
// connection on the caller's event loop. Name resolution on a thread pool, the egress allow-list
// checked against the resolved addresses BEFORE anything connects, then greeting, EHLO,
// STARTTLS (RFC 3207; the server's certificate verified against the system CA store and the
// extra trust anchors, by host name or IP), EHLO again, AUTH PLAIN or LOGIN (RFC 4954), MAIL
// FROM, RCPT TO for every recipient, DATA with dot-stuffing, QUIT. Every step has its own
// deadline inside an overall one. The protocol's pure parts are in smtp_protocol.hpp.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "certfleet/net/egress.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/net/phase_timing.hpp"

namespace certfleet::net {

struct smtp_options {
  std::string host;  // name or IP literal (IPv6 without brackets)
  std::uint16_t port = 587;
  // false only for a relay on this host: the client then refuses to talk to any address that is
  // not loopback (127.0.0.0/8, ::1), and never authenticates in the clear.
  bool starttls = true;
  std::string username;  // empty: no AUTH
  std::string password;  // never logged or put in an error
  std::chrono::milliseconds step_timeout{30'000};   // each reply awaited, the TLS handshake, connect
  std::chrono::milliseconds total_timeout{120'000};  // the whole exchange
  // Must outlive the awaited call; nullptr allows nothing, like an empty list (fail closed).
  const egress_policy* egress = nullptr;
  std::string ca_pem;  // extra trust anchors (PEM) beside the system CA store
  boost::asio::thread_pool* resolve_pool = nullptr;  // where getaddrinfo runs; nullptr: the module's
};

struct smtp_envelope {
  std::string from;             // MAIL FROM mailbox
  std::vector<std::string> to;  // RCPT TO mailboxes (1 or more)
  std::string message;          // RFC 5322 text (mime.hpp); dot-stuffed here
};

struct smtp_result {
  // none: the server took the message. network: DNS, refused, timeout, TLS handshake failure;
  // io_transient: a 4xx reply, the connection closed mid-exchange; auth: 535 and its kin, the
  // server's TLS certificate not trusted, AUTH asked of a server that offers no PLAIN/LOGIN;
  // validation: a 5xx (a refused recipient, a refused sender, a message refused), no STARTTLS
  // offered, egress refused, plain SMTP to a non-loopback address.
  error_class cls = error_class::none;
  std::string error;     // for operators: names the server by host:port; never a secret
  std::string phase;     // check, resolve, egress, connect, greeting, ehlo, starttls, tls, auth, mail, rcpt, data, quit
  int reply_code = 0;    // the last reply's code (0: none)
  std::string reply;     // the last reply's first line, "NNN text" (printable, secrets scrubbed)
  std::string refused_recipient;  // the recipient a 5xx/4xx to RCPT TO named
  std::vector<phase_timing> timings;

  bool ok() const { return cls == error_class::none; }
};

// One message. Never throws for expected failures. Arguments by value: the coroutine may
// outlive the caller's temporaries.
boost::asio::awaitable<smtp_result> send_mail(smtp_envelope envelope, smtp_options options);

}  // namespace certfleet::net
