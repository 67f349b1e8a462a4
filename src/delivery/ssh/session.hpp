#pragma once
// One SSH connection driven by coroutines: libssh2 in non-blocking mode over an Asio TCP socket.
// One coroutine owns a session; every call has a deadline; close() must be awaited before the
// session is destroyed (the destructor only frees what a failed close left behind).
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "certfleet/net/error_class.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "delivery/recorder.hpp"
#include "delivery/ssh/outcome.hpp"  // exec_output, ms_text

struct _LIBSSH2_SESSION;
struct _LIBSSH2_SFTP;

namespace certfleet::delivery::detail {

using steady = std::chrono::steady_clock;

struct remote_read {
  bool missing = false;   // no such file
  bool too_big = false;   // larger than the read limit: treated as "different"
  bool unreadable = false;  // permission denied (a root-owned key on a sudo target): "cannot tell"
  std::string data;
};

class session {
 public:
  session(boost::asio::any_io_executor ex, const ssh_options& opts);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  // Name resolution on the resolve pool (DESIGN: never on the loop), under resolve_timeout.
  boost::asio::awaitable<step> resolve(const std::string& host, std::uint16_t port,
                                       std::vector<boost::asio::ip::tcp::endpoint>& out);
  boost::asio::awaitable<step> connect(const std::vector<boost::asio::ip::tcp::endpoint>& eps);
  // SSH handshake with `host_key_types` as the host-key algorithm preference (comma list).
  boost::asio::awaitable<step> handshake(const std::string& host_key_types);
  // The host key the server proved it holds during the handshake.
  std::optional<host_key> offered_host_key() const;
  boost::asio::awaitable<step> authenticate(const std::string& user, const ssh_credential& cred);
  boost::asio::awaitable<step> sftp_start();
  boost::asio::awaitable<step> read_file(const std::string& path, remote_read& out);
  boost::asio::awaitable<step> write_file(const std::string& path, const std::string& data, unsigned mode);
  boost::asio::awaitable<step> remove_file(const std::string& path);
  // The login user's home directory as the SFTP server sees it (realpath of ".").
  boost::asio::awaitable<step> home_dir(std::string& out);
  // mkdir with `mode`; an existing directory is fine (SFTP v3 reports it as a plain failure).
  boost::asio::awaitable<void> make_dir(const std::string& path, unsigned mode);
  boost::asio::awaitable<step> exec(const std::string& command, exec_output& out);
  // Orderly shutdown (SFTP, disconnect, free), EAGAIN loops under shutdown_timeout.
  boost::asio::awaitable<void> close();

  const std::string& peer() const { return peer_; }

 private:
  template <class F>
  boost::asio::awaitable<long long> call(F&& f, steady::time_point deadline, bool& timed_out);
  boost::asio::awaitable<bool> wait_socket(steady::time_point deadline);
  failure fail_from(long long rc, bool timed_out, const std::string& what, std::chrono::milliseconds limit,
                    bool sftp_call = false) const;

  boost::asio::any_io_executor ex_;
  const ssh_options& opts_;
  boost::asio::ip::tcp::socket sock_;
  boost::asio::steady_timer timer_;
  _LIBSSH2_SESSION* s_ = nullptr;
  _LIBSSH2_SFTP* sftp_ = nullptr;
  std::string peer_;
};

// net::resolve_host with the options' pool and deadline, as a step (TLS validation uses it too).
boost::asio::awaitable<step> resolve_on_pool(const ssh_options& opts, const std::string& host, std::uint16_t port,
                                             std::vector<boost::asio::ip::tcp::endpoint>& out);

}  // namespace certfleet::delivery::detail
