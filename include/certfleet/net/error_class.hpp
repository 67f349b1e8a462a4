#pragma once
// The error classes of every outbound exchange and of a target result (DESIGN §4), and the one
// classifier that maps every concrete cause to them. net owns them because the HTTP, SMTP and
// TLS clients report in them and the delivery modules above pass those classes on unchanged. Pure: no I/O, no libssh2 header (the libssh2/SFTP codes are plain ints here, mirrored
// from libssh2 1.10 and checked against the real header in src/).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace certfleet::net {

enum class error_class { none = 0, network, io_transient, io_permanent, auth, validation, worker_lost, unknown };

// Stable names as stored in target results: "network", "io_transient", …; "none" for success.
const char* error_class_name(error_class c) noexcept;
std::optional<error_class> parse_error_class(std::string_view name) noexcept;
// Whether a retry wave takes a target that failed with this class (DESIGN §4: network,
// io_transient, worker_lost). The stored-name form is what a target result holds; a name that
// is no class is not retryable.
bool retryable(error_class c) noexcept;
bool retryable(std::string_view class_name) noexcept;

// Where a failure came from. The same code means different things from different sources
// (an errno 13 is not a libssh2 -13), so a cause is always (kind, code).
enum class cause_kind : std::uint8_t {
  libssh2 = 0,        // a LIBSSH2_ERROR_* return code (negative)
  sftp_status,        // an SSH_FX_* status from libssh2_sftp_last_error()
  posix_errno,        // errno from a socket/file call
  asio,               // an error_code from Asio (system or netdb/addrinfo/misc category)
  resolver,           // getaddrinfo() EAI_* return code
  exit_status,        // exit status of the remote post-deploy command (code = status, -1 = killed/unknown)
  remote_step,        // a step of the install script failed: code = remote_step value
  deadline,           // a phase deadline expired: code = 0
  host_key_mismatch,  // the offered host key is not the pinned one (code = 0)
  host_key_type,      // the server offers no key of the pinned type (code = 0)
  tls_mismatch,       // served leaf certificate differs from the delivered one
  remote_hash_mismatch,
  tls_handshake,      // TLS validation endpoint could not be reached / handshake failed
  bad_input,          // target spec / bundle invalid: relative path, cert/key mismatch…
  worker_lost,        // the worker died before the target got a result
  count_,
};

// Steps of the one exec script, reported through its exit status (see src/delivery/ssh/script).
enum class remote_step : int { backup = 1, install = 2, owner_mode = 3, post_command = 4, restore = 5, missing_backup = 6 };

struct cause {
  cause_kind kind;
  long long code = 0;
};

error_class classify(cause c) noexcept;
inline error_class classify(cause_kind k, long long code = 0) noexcept { return classify(cause{k, code}); }
// Asio/system error codes, by category (system, netdb, addrinfo, misc, ssl).
error_class classify(const std::error_code& ec) noexcept;

// A human-readable name for a cause ("LIBSSH2_ERROR_SOCKET_RECV", "SSH_FX_PERMISSION_DENIED"),
// for error messages; never empty.
std::string describe(cause c);

}  // namespace certfleet::net
