#pragma once
// SSH delivery of one certificate to one target (DESIGN §4): libssh2 in non-blocking mode over an
// Asio socket, every phase under its own deadline, on the caller's event loop. The libssh2 header
// stays in src/.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/net/error_class.hpp"
#include "certfleet/delivery/module.hpp"  // cert_bundle, delivery_result
#include "certfleet/delivery/ssh_target.hpp"

namespace certfleet::delivery {

// The secret used to log in. Never logged, never put on a command line.
struct ssh_credential {
  std::string private_key_pem;  // ed25519/ECDSA, OpenSSH or PEM format; empty: use password
  std::string passphrase;       // for an encrypted private key
  std::string password;
};

// The default of the system setting ssh_allow_list (the same text as its row in
// src/core/settings.cpp, which core cannot take from here): every public IPv4 and IPv6
// destination; the allow-list rule keeps this host's own and link-local addresses out.
inline constexpr std::string_view default_ssh_allow_list_text = "0.0.0.0/0, ::/0";

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
  // name resolved to, before connecting, and only checked addresses are used. An empty list
  // allows nothing; nullptr is the setting's default, default_ssh_allow_list_text (public
  // destinations only: never loopback, link-local, unspecified or a cloud metadata address,
  // fd00:ec2::254 included, unless a list names them).
  const egress_policy* allow = nullptr;
};

// An SSH connection kept open between deliveries (issue 20): the next target that logs in to
// the same host the same way (ssh_connection_key) goes over it — one TCP connect, handshake,
// host-key check and login for several targets, each with its own SFTP reads and writes and its
// own exec channel, one target after another. Used by one coroutine at a time; close() is awaited
// before the object goes (the destructor only drops what is left, without a goodbye).
class ssh_connection {
 public:
  explicit ssh_connection(boost::asio::any_io_executor ex);
  ~ssh_connection();
  ssh_connection(const ssh_connection&) = delete;
  ssh_connection& operator=(const ssh_connection&) = delete;

  bool is_open() const noexcept;
  // The key of the targets it serves ("" when closed).
  const std::string& key() const noexcept;
  // Deliveries that went over it since it was opened.
  int uses() const noexcept;
  // Orderly shutdown under the options' shutdown deadline; a closed connection stays closed.
  boost::asio::awaitable<void> close();

  struct state;  // deliver.cpp

 private:
  boost::asio::any_io_executor ex_;
  std::unique_ptr<state> s_;
  friend state& connection_state(ssh_connection& c);
};

// Targets with equal keys may share a connection: host, port, user, how they log in, the pinned
// host key and the credential's secret (as a hash; no copy of the secret is kept).
std::string ssh_connection_key(const ssh_target& t, const ssh_credential& cred);

// One delivery, DESIGN §4 step by step. `run_id` names the backup ([A-Za-z0-9._-]{1,64}).
// Arguments are taken by value: the coroutine may outlive the caller's temporaries (co_spawn).
boost::asio::awaitable<delivery_result> deliver_ssh(ssh_target target, ssh_credential cred, cert_bundle bundle,
                                                    std::string run_id, ssh_options opts = {});
// The same over `conn`: reused when it is open with this target's key, else (closed first and)
// opened for it. A success leaves it open for the next target; a failure closes it (a connection
// in an unknown state is not handed on). A reused connection found dead before anything was
// written (the server dropped it while idle) is replaced by a new one, once.
boost::asio::awaitable<delivery_result> deliver_ssh(ssh_target target, ssh_credential cred, cert_bundle bundle,
                                                    std::string run_id, ssh_options opts, ssh_connection& conn);

// Puts back the files that were in place before run `run_id` on this target, runs the post
// command, validates (remote hash against the backup). Fails with io_permanent when that run
// left no backup there.
boost::asio::awaitable<delivery_result> rollback_ssh(ssh_target target, ssh_credential cred, std::string run_id,
                                                     ssh_options opts = {});
// The same over `conn`, as deliver_ssh above.
boost::asio::awaitable<delivery_result> rollback_ssh(ssh_target target, ssh_credential cred, std::string run_id,
                                                     ssh_options opts, ssh_connection& conn);

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
