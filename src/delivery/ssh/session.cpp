#include "delivery/ssh/session.hpp"

#include "certfleet/net/resolve.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <netdb.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <cstring>
#include <memory>
#include <mutex>

namespace certfleet::delivery::detail {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

// The classifier (error_class.cpp) mirrors these codes without including libssh2.h.
static_assert(LIBSSH2_ERROR_SOCKET_RECV == -43 && LIBSSH2_ERROR_SOCKET_SEND == -7 && LIBSSH2_ERROR_TIMEOUT == -9 &&
              LIBSSH2_ERROR_AUTHENTICATION_FAILED == -18 && LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED == -19 &&
              LIBSSH2_ERROR_SFTP_PROTOCOL == -31 && LIBSSH2_ERROR_EAGAIN == -37 && LIBSSH2_ERROR_RANDGEN == -49 &&
              LIBSSH2_ERROR_KEX_FAILURE == -5 && LIBSSH2_ERROR_SOCKET_DISCONNECT == -13);
static_assert(LIBSSH2_FX_PERMISSION_DENIED == 3 && LIBSSH2_FX_NO_SUCH_FILE == 2 && LIBSSH2_FX_WRITE_PROTECT == 12 &&
              LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM == 14 && LIBSSH2_FX_LINK_LOOP == 21);

namespace {

void init_libssh2_once() {
  static std::once_flag once;
  std::call_once(once, [] { libssh2_init(0); });
}

const char* host_key_type_name(int t) {
  switch (t) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: return "ssh-rsa";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return "ecdsa-sha2-nistp256";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return "ecdsa-sha2-nistp384";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return "ecdsa-sha2-nistp521";
    case LIBSSH2_HOSTKEY_TYPE_ED25519: return "ssh-ed25519";
    default: return nullptr;
  }
}

}  // namespace

awaitable<step> resolve_on_pool(const ssh_options& opts, const std::string& host, std::uint16_t port,
                                std::vector<tcp::endpoint>& out) {
  auto r = co_await net::resolve_host(host, port, opts.resolve_pool, opts.resolve_timeout);
  if (!r.ok()) co_return failure{r.cls, std::move(r.error)};
  out = std::move(r.endpoints);
  co_return std::nullopt;
}

session::session(asio::any_io_executor ex, const ssh_options& opts)
    : ex_(ex), opts_(opts), sock_(ex), timer_(ex) {
  init_libssh2_once();
}

session::~session() {
  // Only reached with a live session when close() was not awaited (a bug or an exception):
  // shut the socket first so libssh2's teardown sees errors at once instead of EAGAIN.
  if (s_) {
    boost::system::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    if (sftp_) {
      for (int i = 0; i < 100 && libssh2_sftp_shutdown(sftp_) == LIBSSH2_ERROR_EAGAIN; ++i) {}
      sftp_ = nullptr;
    }
    for (int i = 0; i < 100 && libssh2_session_free(s_) == LIBSSH2_ERROR_EAGAIN; ++i) {}
    s_ = nullptr;
  }
}

awaitable<step> session::resolve(const std::string& host, std::uint16_t port, std::vector<tcp::endpoint>& out) {
  peer_ = host + ":" + std::to_string(port);
  co_return co_await resolve_on_pool(opts_, host, port, out);
}

awaitable<step> session::connect(const std::vector<tcp::endpoint>& eps) {
  auto deadline = steady::now() + opts_.connect_timeout;
  boost::system::error_code last;
  for (const auto& ep : eps) {
    boost::system::error_code ec;
    if (sock_.is_open()) sock_.close(ec);
    sock_.open(ep.protocol(), ec);
    if (ec) { last = ec; continue; }
    timer_.expires_at(deadline);
    auto r = co_await (sock_.async_connect(ep, tuple_awaitable) || timer_.async_wait(tuple_awaitable));
    if (r.index() == 1)
      co_return failure{classify(cause_kind::deadline), "connecting to " + peer_ + " took longer than " + ms_text(opts_.connect_timeout)};
    auto [cec] = std::get<0>(r);
    if (!cec) {
      sock_.set_option(tcp::no_delay(true), ec);
      // libssh2 calls recv/send on the descriptor itself: it must never block the loop, whatever
      // Asio happens to have set internally.
      sock_.non_blocking(true, ec);
      if (ec) co_return failure{error_class::unknown, "cannot make the socket non-blocking: " + ec.message()};
      co_return std::nullopt;
    }
    last = cec;
  }
  co_return failure{classify(last), "cannot connect to " + peer_ + ": " + last.message()};
}

awaitable<bool> session::wait_socket(steady::time_point deadline) {
  if (steady::now() >= deadline) co_return false;
  int dir = libssh2_session_block_directions(s_);
#ifdef TCP_QUICKACK
  // sshd leaves Nagle on for non-interactive sessions, so some of its replies wait for our ACK
  // of the previous packet; Linux delays that ACK by up to 40 ms while we only wait to read
  // (measured: ~45 ms of every SFTP phase). Quick-ack mode is not sticky: set it before each wait.
  if (dir & LIBSSH2_SESSION_BLOCK_INBOUND) {
    int one = 1;
    (void)::setsockopt(sock_.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
  }
#endif
  timer_.expires_at(deadline);
  if ((dir & LIBSSH2_SESSION_BLOCK_INBOUND) && (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND)) {
    auto r = co_await (sock_.async_wait(tcp::socket::wait_read, tuple_awaitable) ||
                       sock_.async_wait(tcp::socket::wait_write, tuple_awaitable) || timer_.async_wait(tuple_awaitable));
    co_return r.index() != 2;
  }
  if (dir & LIBSSH2_SESSION_BLOCK_INBOUND) {
    auto r = co_await (sock_.async_wait(tcp::socket::wait_read, tuple_awaitable) || timer_.async_wait(tuple_awaitable));
    co_return r.index() == 0;
  }
  if (dir & LIBSSH2_SESSION_BLOCK_OUTBOUND) {
    auto r = co_await (sock_.async_wait(tcp::socket::wait_write, tuple_awaitable) || timer_.async_wait(tuple_awaitable));
    co_return r.index() == 0;
  }
  // EAGAIN with no direction (libssh2 gave up a partial step): retry soon.
  timer_.expires_at(std::min(deadline, steady::now() + std::chrono::milliseconds(1)));
  co_await timer_.async_wait(tuple_awaitable);
  co_return true;
}

template <class F>
awaitable<long long> session::call(F&& f, steady::time_point deadline, bool& timed_out) {
  timed_out = false;
  for (;;) {
    long long rc = f();
    if (rc != LIBSSH2_ERROR_EAGAIN) co_return rc;
    if (!co_await wait_socket(deadline)) {
      timed_out = true;
      co_return LIBSSH2_ERROR_TIMEOUT;
    }
  }
}

failure session::fail_from(long long rc, bool timed_out, const std::string& what, std::chrono::milliseconds limit,
                           bool sftp_call) const {
  if (timed_out) return {classify(cause_kind::deadline), what + " took longer than " + ms_text(limit)};
  if (rc == LIBSSH2_ERROR_SFTP_PROTOCOL && sftp_call && sftp_) {
    cause c{cause_kind::sftp_status, static_cast<long long>(libssh2_sftp_last_error(sftp_))};
    return {classify(c), what + ": " + describe(c)};
  }
  cause c{cause_kind::libssh2, rc};
  std::string detail = describe(c);
  char* msg = nullptr;
  int len = 0;
  if (s_ && libssh2_session_last_error(s_, &msg, &len, 0) == rc && msg && len > 0)
    detail += " (" + std::string(msg, static_cast<std::size_t>(len)) + ")";
  return {classify(c), what + ": " + detail};
}

awaitable<step> session::handshake(const std::string& host_key_types) {
  auto deadline = steady::now() + opts_.handshake_timeout;
  s_ = libssh2_session_init();
  if (!s_) co_return failure{error_class::unknown, "libssh2_session_init failed"};
  libssh2_session_set_blocking(s_, 0);
  // libssh2 1.10 prefers ECDSA host keys: ask for the pinned type first (TESTBED.md), or a
  // server holding both would show a key we cannot compare with the pin.
  if (libssh2_session_method_pref(s_, LIBSSH2_METHOD_HOSTKEY, host_key_types.c_str()) != 0)
    co_return failure{error_class::validation, "unsupported host key type list " + host_key_types};
  bool to = false;
  auto fd = sock_.native_handle();
  long long rc = co_await call([&] { return libssh2_session_handshake(s_, fd); }, deadline, to);
  if (rc != 0) co_return fail_from(rc, to, "SSH handshake with " + peer_, opts_.handshake_timeout);
  co_return std::nullopt;
}

std::optional<host_key> session::offered_host_key() const {
  std::size_t len = 0;
  int type = 0;
  const char* key = s_ ? libssh2_session_hostkey(s_, &len, &type) : nullptr;
  if (!key || len == 0) return std::nullopt;
  const char* name = host_key_type_name(type);
  if (!name) return std::nullopt;
  return host_key{name, std::string(key, len)};
}

awaitable<step> session::authenticate(const std::string& user, const ssh_credential& cred) {
  auto deadline = steady::now() + opts_.auth_timeout;
  bool to = false;
  long long rc;
  if (!cred.private_key_pem.empty()) {
    const char* pass = cred.passphrase.empty() ? nullptr : cred.passphrase.c_str();
    rc = co_await call(
        [&] {
          return libssh2_userauth_publickey_frommemory(s_, user.data(), user.size(), nullptr, 0,
                                                       cred.private_key_pem.data(), cred.private_key_pem.size(), pass);
        },
        deadline, to);
  } else if (!cred.password.empty()) {
    rc = co_await call(
        [&] {
          return libssh2_userauth_password_ex(s_, user.data(), static_cast<unsigned>(user.size()), cred.password.data(),
                                              static_cast<unsigned>(cred.password.size()), nullptr);
        },
        deadline, to);
  } else {
    co_return failure{error_class::auth, "the credential has neither a private key nor a password"};
  }
  if (rc != 0) {
    auto f = fail_from(rc, to, "authentication of " + user + "@" + peer_, opts_.auth_timeout);
    if (rc == LIBSSH2_ERROR_FILE)
      f.message = "authentication of " + user + "@" + peer_ +
                  ": the private key could not be read (wrong passphrase, or not an ed25519/ECDSA key)";
    co_return f;
  }
  co_return std::nullopt;
}

awaitable<step> session::sftp_start() {
  auto deadline = steady::now() + opts_.transfer_timeout;
  bool to = false;
  long long rc = co_await call(
      [&]() -> long long {
        sftp_ = libssh2_sftp_init(s_);
        return sftp_ ? 0 : libssh2_session_last_errno(s_);
      },
      deadline, to);
  if (rc != 0) co_return fail_from(rc, to, "starting SFTP on " + peer_, opts_.transfer_timeout);
  co_return std::nullopt;
}

awaitable<step> session::read_file(const std::string& path, remote_read& out) {
  auto deadline = steady::now() + opts_.transfer_timeout;
  out = remote_read{};
  bool to = false;
  LIBSSH2_SFTP_HANDLE* h = nullptr;
  long long rc = co_await call(
      [&]() -> long long {
        h = libssh2_sftp_open_ex(sftp_, path.data(), static_cast<unsigned>(path.size()), LIBSSH2_FXF_READ, 0,
                                 LIBSSH2_SFTP_OPENFILE);
        return h ? 0 : libssh2_session_last_errno(s_);
      },
      deadline, to);
  if (rc != 0) {
    if (!to && rc == LIBSSH2_ERROR_SFTP_PROTOCOL) {
      auto st = libssh2_sftp_last_error(sftp_);
      if (st == LIBSSH2_FX_NO_SUCH_FILE || st == LIBSSH2_FX_NO_SUCH_PATH) {
        out.missing = true;
        co_return std::nullopt;
      }
      if (st == LIBSSH2_FX_PERMISSION_DENIED) {
        out.unreadable = true;
        co_return std::nullopt;
      }
    }
    co_return fail_from(rc, to, "reading " + path, opts_.transfer_timeout, true);
  }
  char buf[32768];
  step result;
  for (;;) {
    long long n = co_await call([&] { return static_cast<long long>(libssh2_sftp_read(h, buf, sizeof buf)); }, deadline, to);
    if (n < 0) {
      result = fail_from(n, to, "reading " + path, opts_.transfer_timeout, true);
      break;
    }
    if (n == 0) break;
    if (out.data.size() + static_cast<std::size_t>(n) > opts_.max_remote_file_bytes) {
      out.too_big = true;
      out.data.clear();
      break;
    }
    out.data.append(buf, static_cast<std::size_t>(n));
  }
  // Close under its own short deadline even when the read timed out.
  auto close_deadline = steady::now() + opts_.shutdown_timeout;
  co_await call([&] { return static_cast<long long>(libssh2_sftp_close_handle(h)); }, close_deadline, to);
  co_return result;
}

awaitable<step> session::write_file(const std::string& path, const std::string& data, unsigned mode) {
  auto deadline = steady::now() + opts_.transfer_timeout;
  bool to = false;
  LIBSSH2_SFTP_HANDLE* h = nullptr;
  long long rc = co_await call(
      [&]() -> long long {
        h = libssh2_sftp_open_ex(sftp_, path.data(), static_cast<unsigned>(path.size()),
                                 LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC, static_cast<long>(mode),
                                 LIBSSH2_SFTP_OPENFILE);
        return h ? 0 : libssh2_session_last_errno(s_);
      },
      deadline, to);
  if (rc != 0) co_return fail_from(rc, to, "creating " + path, opts_.transfer_timeout, true);
  step result;
  std::size_t off = 0;
  while (off < data.size()) {
    // On EAGAIN libssh2 wants the very same arguments again (it has queued part of them).
    long long n = co_await call(
        [&] { return static_cast<long long>(libssh2_sftp_write(h, data.data() + off, data.size() - off)); }, deadline, to);
    if (n < 0) {
      result = fail_from(n, to, "writing " + path, opts_.transfer_timeout, true);
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  if (!result) {
    // The mode exactly, whatever the server's umask: the install script then needs no chmod
    // (one process fewer per file on the target).
    LIBSSH2_SFTP_ATTRIBUTES attrs{};
    attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
    attrs.permissions = mode;
    long long src = co_await call([&] { return static_cast<long long>(libssh2_sftp_fsetstat(h, &attrs)); }, deadline, to);
    if (src != 0) result = fail_from(src, to, "setting the mode of " + path, opts_.transfer_timeout, true);
  }
  auto close_deadline = result ? steady::now() + opts_.shutdown_timeout : deadline;
  long long crc = co_await call([&] { return static_cast<long long>(libssh2_sftp_close_handle(h)); }, close_deadline, to);
  if (!result && crc != 0) result = fail_from(crc, to, "closing " + path, opts_.transfer_timeout, true);
  co_return result;
}

awaitable<step> session::remove_file(const std::string& path) {
  auto deadline = steady::now() + opts_.transfer_timeout;
  bool to = false;
  long long rc = co_await call(
      [&] { return static_cast<long long>(libssh2_sftp_unlink_ex(sftp_, path.data(), static_cast<unsigned>(path.size()))); },
      deadline, to);
  if (rc != 0) co_return fail_from(rc, to, "removing " + path, opts_.transfer_timeout, true);
  co_return std::nullopt;
}

awaitable<step> session::home_dir(std::string& out) {
  auto deadline = steady::now() + opts_.transfer_timeout;
  bool to = false;
  char buf[4096];
  long long rc = co_await call(
      [&] { return static_cast<long long>(libssh2_sftp_symlink_ex(sftp_, ".", 1, buf, sizeof buf - 1, LIBSSH2_SFTP_REALPATH)); },
      deadline, to);
  if (rc < 0) co_return fail_from(rc, to, "finding the home directory on " + peer_, opts_.transfer_timeout, true);
  out.assign(buf, static_cast<std::size_t>(rc));
  co_return std::nullopt;
}

awaitable<void> session::make_dir(const std::string& path, unsigned mode) {
  auto deadline = steady::now() + opts_.transfer_timeout;
  bool to = false;
  co_await call(
      [&] {
        return static_cast<long long>(
            libssh2_sftp_mkdir_ex(sftp_, path.data(), static_cast<unsigned>(path.size()), static_cast<long>(mode)));
      },
      deadline, to);
}

awaitable<step> session::exec(const std::string& command, exec_output& out) {
  auto deadline = steady::now() + opts_.exec_timeout;
  bool to = false;
  LIBSSH2_CHANNEL* ch = nullptr;
  long long rc = co_await call(
      [&]() -> long long {
        ch = libssh2_channel_open_session(s_);
        return ch ? 0 : libssh2_session_last_errno(s_);
      },
      deadline, to);
  if (rc != 0) co_return fail_from(rc, to, "opening an exec channel on " + peer_, opts_.exec_timeout);
  step result;
  rc = co_await call(
      [&] {
        return static_cast<long long>(libssh2_channel_process_startup(ch, "exec", 4, command.data(),
                                                                      static_cast<unsigned>(command.size())));
      },
      deadline, to);
  if (rc != 0) result = fail_from(rc, to, "starting the remote command on " + peer_, opts_.exec_timeout);
  constexpr std::size_t cap = 64 * 1024;  // keep what a chatty post command prints bounded
  char buf[16384];
  while (!result) {
    long long n1 = libssh2_channel_read_ex(ch, 0, buf, sizeof buf);
    if (n1 > 0 && out.out.size() < cap) out.out.append(buf, static_cast<std::size_t>(std::min<long long>(n1, cap - out.out.size())));
    long long n2 = libssh2_channel_read_ex(ch, SSH_EXTENDED_DATA_STDERR, buf, sizeof buf);
    if (n2 > 0 && out.err.size() < cap) out.err.append(buf, static_cast<std::size_t>(std::min<long long>(n2, cap - out.err.size())));
    if (n1 > 0 || n2 > 0) continue;
    if (n1 < 0 && n1 != LIBSSH2_ERROR_EAGAIN) { result = fail_from(n1, false, "reading the remote command's output", opts_.exec_timeout); break; }
    if (n2 < 0 && n2 != LIBSSH2_ERROR_EAGAIN) { result = fail_from(n2, false, "reading the remote command's output", opts_.exec_timeout); break; }
    // Both streams drained: done once the remote side sent EOF, else wait for more.
    if (libssh2_channel_eof(ch)) break;
    // Reading stderr may have pulled stdout data (and the EOF behind it) off the socket into
    // libssh2's queue: then nothing more arrives to wake a socket wait, and the command would
    // "time out" after it finished (seen once in ~200 CI runs of a fan-out test, under ASan).
    unsigned long queued = 0;
    libssh2_channel_window_read_ex(ch, &queued, nullptr);
    if (queued > 0) continue;
    if (!co_await wait_socket(deadline)) {
      result = failure{classify(cause_kind::deadline), "the remote command took longer than " + ms_text(opts_.exec_timeout)};
      out.timed_out = true;
      break;
    }
  }
  auto close_deadline = result ? steady::now() + opts_.shutdown_timeout : deadline;
  long long crc = co_await call([&] { return static_cast<long long>(libssh2_channel_close(ch)); }, close_deadline, to);
  if (crc == 0) co_await call([&] { return static_cast<long long>(libssh2_channel_wait_closed(ch)); }, close_deadline, to);
  if (!result) {
    char* sig = nullptr;
    std::size_t siglen = 0;
    libssh2_channel_get_exit_signal(ch, &sig, &siglen, nullptr, nullptr, nullptr, nullptr);
    out.exit_status = sig ? -1 : libssh2_channel_get_exit_status(ch);
    if (sig) libssh2_free(s_, sig);
  }
  co_await call([&] { return static_cast<long long>(libssh2_channel_free(ch)); }, close_deadline, to);
  co_return result;
}

awaitable<void> session::close() {
  if (!s_) {
    boost::system::error_code ec;
    sock_.close(ec);
    co_return;
  }
  auto deadline = steady::now() + opts_.shutdown_timeout;
  bool to = false;
  if (sftp_) {
    co_await call([&] { return static_cast<long long>(libssh2_sftp_shutdown(sftp_)); }, deadline, to);
    sftp_ = nullptr;
  }
  if (!to)
    co_await call([&] { return static_cast<long long>(libssh2_session_disconnect(s_, "certfleet: done")); }, deadline, to);
  if (to) {
    // The peer stopped reading: make every further socket call fail so free() cannot block.
    boost::system::error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    deadline = steady::now() + opts_.shutdown_timeout;
  }
  co_await call([&] { return static_cast<long long>(libssh2_session_free(s_)); }, deadline, to);
  if (to) {
    for (int i = 0; i < 100 && libssh2_session_free(s_) == LIBSSH2_ERROR_EAGAIN; ++i) {}
  }
  s_ = nullptr;
  boost::system::error_code ec;
  sock_.close(ec);
}

}  // namespace certfleet::delivery::detail
