// The one table of outbound failure causes (HTTP, SMTP, TLS, SSH) -> DESIGN §4 classes. Every mapping lives here so an
// operator-visible class never depends on which call site noticed the failure.
#include "certfleet/net/error_class.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <netdb.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace certfleet::net {
namespace {

struct libssh2_row {
  int code;
  const char* name;
  error_class cls;
};
// libssh2 1.10 codes (include/libssh2.h); src/delivery/ssh/session.cpp static_asserts the ones
// it relies on. A reset or EOF on an established connection is io_transient ("connection reset",
// "broken pipe"); failing to get a session up at all (banner, kex, timeout) is network.
constexpr std::array<libssh2_row, 49> libssh2_table{{
    {-1, "SOCKET_NONE", error_class::network},
    {-2, "BANNER_RECV", error_class::network},
    {-3, "BANNER_SEND", error_class::network},
    {-4, "INVALID_MAC", error_class::io_transient},
    {-5, "KEX_FAILURE", error_class::network},
    {-6, "ALLOC", error_class::unknown},
    {-7, "SOCKET_SEND", error_class::io_transient},
    {-8, "KEY_EXCHANGE_FAILURE", error_class::network},
    {-9, "TIMEOUT", error_class::network},
    {-10, "HOSTKEY_INIT", error_class::auth},
    {-11, "HOSTKEY_SIGN", error_class::auth},
    {-12, "DECRYPT", error_class::io_transient},
    {-13, "SOCKET_DISCONNECT", error_class::io_transient},
    {-14, "PROTO", error_class::io_transient},
    {-15, "PASSWORD_EXPIRED", error_class::auth},
    {-16, "FILE", error_class::auth},  // private key file/memory could not be read
    {-17, "METHOD_NONE", error_class::auth},  // no common algorithm / auth method
    {-18, "AUTHENTICATION_FAILED", error_class::auth},
    {-19, "PUBLICKEY_UNVERIFIED", error_class::auth},
    {-20, "CHANNEL_OUTOFORDER", error_class::io_transient},
    {-21, "CHANNEL_FAILURE", error_class::io_transient},
    {-22, "CHANNEL_REQUEST_DENIED", error_class::io_permanent},
    {-23, "CHANNEL_UNKNOWN", error_class::io_transient},
    {-24, "CHANNEL_WINDOW_EXCEEDED", error_class::io_transient},
    {-25, "CHANNEL_PACKET_EXCEEDED", error_class::io_transient},
    {-26, "CHANNEL_CLOSED", error_class::io_transient},
    {-27, "CHANNEL_EOF_SENT", error_class::io_transient},
    {-28, "SCP_PROTOCOL", error_class::io_transient},
    {-29, "ZLIB", error_class::io_transient},
    {-30, "SOCKET_TIMEOUT", error_class::network},
    {-31, "SFTP_PROTOCOL", error_class::io_transient},  // refined by the SFTP status when known
    {-32, "REQUEST_DENIED", error_class::io_permanent},  // e.g. sftp subsystem refused
    {-33, "METHOD_NOT_SUPPORTED", error_class::auth},
    {-34, "INVAL", error_class::unknown},
    {-35, "INVALID_POLL_TYPE", error_class::unknown},
    {-36, "PUBLICKEY_PROTOCOL", error_class::auth},
    {-37, "EAGAIN", error_class::io_transient},
    {-38, "BUFFER_TOO_SMALL", error_class::unknown},
    {-39, "BAD_USE", error_class::unknown},
    {-40, "COMPRESS", error_class::io_transient},
    {-41, "OUT_OF_BOUNDARY", error_class::unknown},
    {-42, "AGENT_PROTOCOL", error_class::auth},
    {-43, "SOCKET_RECV", error_class::io_transient},
    {-44, "ENCRYPT", error_class::io_transient},
    {-45, "BAD_SOCKET", error_class::network},
    {-46, "KNOWN_HOSTS", error_class::auth},
    {-47, "CHANNEL_WINDOW_FULL", error_class::io_transient},
    {-48, "KEYFILE_AUTH_FAILED", error_class::auth},
    {-49, "RANDGEN", error_class::unknown},
}};

struct sftp_row {
  const char* name;
  error_class cls;
};
// SSH_FX_* (draft-ietf-secsh-filexfer), index = status.
constexpr std::array<sftp_row, 22> sftp_table{{
    {"SSH_FX_OK", error_class::none},
    {"SSH_FX_EOF", error_class::io_transient},
    {"SSH_FX_NO_SUCH_FILE", error_class::io_permanent},
    {"SSH_FX_PERMISSION_DENIED", error_class::io_permanent},
    {"SSH_FX_FAILURE", error_class::io_transient},  // generic; OpenSSH uses it for many errnos
    {"SSH_FX_BAD_MESSAGE", error_class::io_transient},
    {"SSH_FX_NO_CONNECTION", error_class::io_transient},
    {"SSH_FX_CONNECTION_LOST", error_class::io_transient},
    {"SSH_FX_OP_UNSUPPORTED", error_class::io_permanent},
    {"SSH_FX_INVALID_HANDLE", error_class::io_transient},
    {"SSH_FX_NO_SUCH_PATH", error_class::io_permanent},
    {"SSH_FX_FILE_ALREADY_EXISTS", error_class::io_transient},
    {"SSH_FX_WRITE_PROTECT", error_class::io_permanent},
    {"SSH_FX_NO_MEDIA", error_class::io_permanent},
    {"SSH_FX_NO_SPACE_ON_FILESYSTEM", error_class::io_permanent},
    {"SSH_FX_QUOTA_EXCEEDED", error_class::io_permanent},
    {"SSH_FX_UNKNOWN_PRINCIPAL", error_class::io_permanent},
    {"SSH_FX_LOCK_CONFLICT", error_class::io_transient},
    {"SSH_FX_DIR_NOT_EMPTY", error_class::io_permanent},
    {"SSH_FX_NOT_A_DIRECTORY", error_class::io_permanent},
    {"SSH_FX_INVALID_FILENAME", error_class::validation},
    {"SSH_FX_LINK_LOOP", error_class::io_permanent},
}};

error_class classify_errno(long long e) noexcept {
  switch (e) {
    case ECONNREFUSED: case ETIMEDOUT: case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN:
    case EHOSTDOWN: case EADDRNOTAVAIL: case EINPROGRESS: case EALREADY:
      return error_class::network;
    case ECONNRESET: case EPIPE: case ECONNABORTED: case ENOTCONN: case ESHUTDOWN:
    case EAGAIN: case EINTR: case EIO: case ENOBUFS: case ENOMEM: case EMFILE: case ENFILE:
      return error_class::io_transient;
    case EACCES: case EPERM: case ENOSPC: case EDQUOT: case EROFS: case ENOENT: case ENOTDIR:
    case EISDIR: case EEXIST: case EFBIG:
      return error_class::io_permanent;
    case EINVAL: case ENAMETOOLONG:
      return error_class::validation;
    case ECANCELED:
      return error_class::network;  // our deadlines cancel operations
    default:
      return error_class::unknown;
  }
}

error_class classify_resolver(long long e) noexcept {
  switch (e) {
    case EAI_NONAME: case EAI_AGAIN: case EAI_FAIL: case EAI_NODATA: case EAI_ADDRFAMILY:
    case EAI_SYSTEM:
      return error_class::network;  // DNS resolution (DESIGN: network, retried)
    case EAI_MEMORY:
      return error_class::io_transient;
    case EAI_SERVICE: case EAI_FAMILY: case EAI_SOCKTYPE: case EAI_BADFLAGS:
      return error_class::validation;
    default:
      return error_class::network;
  }
}

}  // namespace

namespace {
struct class_row {
  error_class cls;
  const char* name;
  bool retryable;  // DESIGN §4: a retry wave takes it (the failure may pass on its own)
};
// Every class, in enum order: its stored name and whether a retry wave takes it. The enum form
// and the stored-name form (target results hold the name) both read this one table.
constexpr std::array<class_row, 8> class_table{{
    {error_class::none, "none", false},
    {error_class::network, "network", true},
    {error_class::io_transient, "io_transient", true},
    {error_class::io_permanent, "io_permanent", false},
    {error_class::auth, "auth", false},
    {error_class::validation, "validation", false},
    {error_class::worker_lost, "worker_lost", true},
    {error_class::unknown, "unknown", false},
}};
constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < class_table.size(); ++i)
    if (static_cast<std::size_t>(class_table[i].cls) != i) return false;
  return class_table.size() == static_cast<std::size_t>(error_class::unknown) + 1;
}
static_assert(in_enum_order(), "class_table is indexed by error_class");

const class_row& row_of(error_class c) noexcept {
  auto i = static_cast<std::size_t>(c);
  return i < class_table.size() ? class_table[i] : class_table.back();
}
}  // namespace

const char* error_class_name(error_class c) noexcept { return row_of(c).name; }

std::optional<error_class> parse_error_class(std::string_view n) noexcept {
  for (const auto& r : class_table)
    if (n == r.name) return r.cls;
  return std::nullopt;
}

bool retryable(error_class c) noexcept { return row_of(c).retryable; }

bool retryable(std::string_view class_name) noexcept {
  auto c = parse_error_class(class_name);
  return c && retryable(*c);
}

error_class classify(cause c) noexcept {
  switch (c.kind) {
    case cause_kind::libssh2:
      if (c.code == 0) return error_class::none;
      for (const auto& r : libssh2_table)
        if (r.code == c.code) return r.cls;
      return error_class::unknown;
    case cause_kind::sftp_status:
      if (c.code >= 0 && c.code < static_cast<long long>(sftp_table.size())) return sftp_table[c.code].cls;
      return error_class::unknown;
    case cause_kind::posix_errno:
      return c.code == 0 ? error_class::none : classify_errno(c.code);
    case cause_kind::asio:
      return classify(std::error_code(static_cast<int>(c.code), std::system_category()));
    case cause_kind::resolver:
      return c.code == 0 ? error_class::none : classify_resolver(c.code);
    case cause_kind::exit_status:
      // A post-deploy command that fails (or is killed) is worth another try: services reload
      // again fine once whatever held them is gone (DESIGN §4: io_transient).
      return c.code == 0 ? error_class::none : error_class::io_transient;
    case cause_kind::remote_step:
      switch (static_cast<remote_step>(c.code)) {
        case remote_step::backup:
        case remote_step::install:
        case remote_step::owner_mode:
        case remote_step::missing_backup:
          return error_class::io_permanent;  // permission/space/unknown owner: not fixed by a retry
        case remote_step::post_command:
        case remote_step::restore:
          return error_class::io_transient;
      }
      return error_class::unknown;
    case cause_kind::deadline:
      return error_class::network;
    case cause_kind::host_key_mismatch:
    case cause_kind::host_key_type:
      return error_class::auth;
    case cause_kind::tls_mismatch:
    case cause_kind::remote_hash_mismatch:
    case cause_kind::bad_input:
      return error_class::validation;
    case cause_kind::tls_handshake:
      return error_class::network;
    case cause_kind::worker_lost:
      return error_class::worker_lost;
    case cause_kind::count_:
      break;
  }
  return error_class::unknown;
}

error_class classify(const std::error_code& ec) noexcept {
  if (!ec) return error_class::none;
  const auto& cat = ec.category();
  if (cat == std::system_category() || cat == std::generic_category() ||
      cat == boost::system::system_category() || cat == boost::system::generic_category())
    return classify_errno(ec.value());
  if (cat == boost::asio::error::get_netdb_category()) return error_class::network;
  if (cat == boost::asio::error::get_addrinfo_category()) return error_class::network;
  if (cat == boost::asio::error::get_misc_category()) {
    if (ec.value() == boost::asio::error::eof) return error_class::io_transient;
    return error_class::unknown;
  }
  if (cat == boost::asio::error::get_ssl_category() || cat == boost::asio::ssl::error::get_stream_category())
    return error_class::network;  // the TLS endpoint could not be talked to
  return error_class::unknown;
}

std::string describe(cause c) {
  switch (c.kind) {
    case cause_kind::libssh2:
      for (const auto& r : libssh2_table)
        if (r.code == c.code) return std::string("LIBSSH2_ERROR_") + r.name;
      return "libssh2 error " + std::to_string(c.code);
    case cause_kind::sftp_status:
      if (c.code >= 0 && c.code < static_cast<long long>(sftp_table.size())) return sftp_table[c.code].name;
      return "SFTP status " + std::to_string(c.code);
    case cause_kind::posix_errno: {
      char buf[128];
      const char* s = strerror_r(static_cast<int>(c.code), buf, sizeof buf);
      return s ? std::string(s) : "errno " + std::to_string(c.code);
    }
    case cause_kind::asio:
      return std::error_code(static_cast<int>(c.code), std::system_category()).message();
    case cause_kind::resolver:
      return gai_strerror(static_cast<int>(c.code));
    case cause_kind::exit_status:
      return c.code < 0 ? "remote command killed" : "remote command exited " + std::to_string(c.code);
    case cause_kind::remote_step:
      switch (static_cast<remote_step>(c.code)) {
        case remote_step::backup: return "backup of the current files failed";
        case remote_step::install: return "moving the new files into place failed";
        case remote_step::owner_mode: return "setting owner/mode failed";
        case remote_step::post_command: return "post-deploy command failed";
        case remote_step::restore: return "restore from backup failed";
        case remote_step::missing_backup: return "no backup for this run";
      }
      return "remote step " + std::to_string(c.code);
    case cause_kind::deadline: return "deadline expired";
    case cause_kind::host_key_mismatch: return "host key mismatch";
    case cause_kind::host_key_type: return "no host key of the pinned type";
    case cause_kind::tls_mismatch: return "served certificate differs";
    case cause_kind::remote_hash_mismatch: return "remote file hash differs";
    case cause_kind::tls_handshake: return "TLS handshake failed";
    case cause_kind::bad_input: return "invalid input";
    case cause_kind::worker_lost: return "worker lost";
    case cause_kind::count_: break;
  }
  return "unknown cause";
}

}  // namespace certfleet::net
