#pragma once
// A real SMTP server on 127.0.0.1 for notification tests (TESTBED.md: python3-aiosmtpd): the
// script tests/testbed/smtp_server.py run by /usr/bin/python3, optionally with STARTTLS (a
// certificate for 127.0.0.1 and localhost signed by a CA of its own, ca_pem()) and AUTH, stopped
// by its PID. Every message it accepts is kept, parsed by Python's email package (headers, MIME
// parts), for the test to assert. Faults: a refused (550) or deferred (450) recipient, a
// connection dropped in the middle of DATA.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"

namespace testbed {

struct smtp_server_options {
  bool starttls = true;           // offer (and require) STARTTLS
  std::string user, password;     // non-empty user: AUTH PLAIN and LOGIN offered, this pair accepted
  std::vector<std::string> auth_exclude;  // mechanisms not to offer ("PLAIN")
  bool plain_auth = false;        // accept AUTH without TLS (a loopback relay)
  std::string refuse_rcpt_suffix;  // recipients ending with it: 550
  std::string defer_rcpt_suffix;   // recipients ending with it: 450
  bool drop_data = false;          // 354, read a little, close
};

struct received_mail {
  std::string mail_from;
  std::vector<std::string> rcpt_tos;
  bool tls = false;
  bool authenticated = false;
  std::string auth_login;
  std::string content_type;  // of the whole message
  std::vector<std::pair<std::string, std::string>> headers;  // as parsed, decoded (RFC 2047)
  struct part {
    std::string content_type, charset, transfer_encoding, text;  // text: decoded
  };
  std::vector<part> parts;  // the leaves of the MIME tree, in order
  std::string raw;          // the message bytes as received

  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
  const part* part_of(std::string_view content_type) const;
};

class smtp_server {
 public:
  explicit smtp_server(const std::filesystem::path& dir, smtp_server_options o = {});
  ~smtp_server();  // SIGTERM, then SIGKILL
  smtp_server(const smtp_server&) = delete;
  smtp_server& operator=(const smtp_server&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& ca_pem() const { return ca_pem_; }  // trust anchor of its certificate
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stderr_text() : ""; }

  std::vector<received_mail> messages() const;
  std::size_t count() const;
  // Waits until at least `n` messages were accepted; false on timeout.
  bool wait_for(std::size_t n, std::chrono::milliseconds timeout) const;

 private:
  std::filesystem::path dir_, mail_dir_;
  std::uint16_t port_ = 0;
  std::string ca_pem_;
  std::unique_ptr<process> proc_;
};

}  // namespace testbed
