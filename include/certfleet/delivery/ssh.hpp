#pragma once
// SSH delivery of one certificate to one target (DESIGN §4): libssh2 in non-blocking mode over an
// Asio socket, every phase under its own deadline, on the caller's event loop. The libssh2 header
// stays in src/.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/delivery/egress.hpp"
#include "certfleet/delivery/error_class.hpp"
#include "certfleet/delivery/module.hpp"  // cert_bundle, delivery_result
#include "certfleet/delivery/ssh_target.hpp"

namespace certfleet::delivery {

// The secret used to log in. Never logged, never put on a command line.
struct ssh_credential {
  std::string private_key_pem;  // ed25519/ECDSA, OpenSSH or PEM format; empty: use password
  std::string passphrase;       // for an encrypted private key
  std::string password;
};

// Deadlines per phase (milliseconds) and limits; DESIGN §1: every network await has one.
struct ssh_options {
  std::chrono::milliseconds resolve_timeout{5000};
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds handshake_timeout{15000};  // SSH banner + key exchange + host key
  std::chrono::milliseconds auth_timeout{15000};
  std::chrono::milliseconds transfer_timeout{30000};   // each SFTP operation (hash read, one upload)
  std::chrono::milliseconds exec_timeout{60000};       // the install script incl. post command
  std::chrono::milliseconds validate_timeout{15000};   // TLS validation, polled until it matches
  std::chrono::milliseconds shutdown_timeout{3000};
  std::size_t max_remote_file_bytes = 4 * 1024 * 1024; // hash-skip reads at most this much
  // Where blocking name resolution runs (DESIGN: the cpu pool); nullptr: the module's own pool.
  boost::asio::thread_pool* resolve_pool = nullptr;
  // The system setting ssh_allow_list (egress_allow_list grammar and rule, special addresses
  // included): every SSH destination and TLS validation endpoint is checked against what its
  // name resolved to, before connecting, and only checked addresses are used. nullptr or an
  // empty list: any destination.
  const egress_policy* allow = nullptr;
};

// One delivery, DESIGN §4 step by step. `run_id` names the backup ([A-Za-z0-9._-]{1,64}).
// Arguments are taken by value: the coroutine may outlive the caller's temporaries (co_spawn).
boost::asio::awaitable<delivery_result> deliver_ssh(ssh_target target, ssh_credential cred, cert_bundle bundle,
                                                    std::string run_id, ssh_options opts = {});

// Puts back the files that were in place before run `run_id` on this target, runs the post
// command, validates (remote hash against the backup). Fails with io_permanent when that run
// left no backup there.
boost::asio::awaitable<delivery_result> rollback_ssh(ssh_target target, ssh_credential cred, std::string run_id,
                                                     ssh_options opts = {});

struct scanned_host_key {
  std::string line;         // "ssh-ed25519 AAAA…", ready to pin
  std::string fingerprint;  // "SHA256:…"
};
// Resolves `host` and checks it against opts.allow: invalid_argument naming `field` when the
// list refuses it or the name does not resolve (the list cannot be applied). No list: ok, no
// resolution.
boost::asio::awaitable<result<void>> check_ssh_destination(std::string host, std::uint16_t port, std::string field,
                                                           ssh_options opts);

// Connects once per supported key type and returns every host key the server offers. Nothing is
// trusted or stored: an operator compares the fingerprint out of band and pins the line.
// Destinations are checked against opts.allow (invalid_argument, field "ssh.host"). Every other
// failure (no such name, closed, filtered, not SSH, too slow, no ed25519/ECDSA key) is the same
// ssh_unreachable "no SSH server answered at HOST:PORT", so the route does not work as a port
// scanner; the cause goes to the server log.
boost::asio::awaitable<result<std::vector<scanned_host_key>>> scan_host_key(std::string host, std::uint16_t port,
                                                                           ssh_options opts = {});

}  // namespace certfleet::delivery
