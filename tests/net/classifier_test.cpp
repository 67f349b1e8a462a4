// The error classifier: a pure function, tested exhaustively.
#include <gtest/gtest.h>
#include <netdb.h>

#include <boost/asio/error.hpp>
#include <cerrno>
#include <set>

#include "certfleet/net/error_class.hpp"

using namespace certfleet::net;


TEST(delivery_classifier, class_names_round_trip_and_retryable_matches_design) {
  const std::vector<std::pair<error_class, bool>> design{
      {error_class::network, true},       {error_class::io_transient, true}, {error_class::io_permanent, false},
      {error_class::auth, false},         {error_class::validation, false},  {error_class::worker_lost, true},
      {error_class::unknown, false},      {error_class::none, false}};
  for (auto [c, r] : design) {
    EXPECT_EQ(retryable(c), r) << error_class_name(c);
    auto back = parse_error_class(error_class_name(c));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, c);
  }
  EXPECT_FALSE(parse_error_class("Network").has_value());
  EXPECT_FALSE(parse_error_class("").has_value());
}

// Target results store the class by name; the retry wave decides from that name. Both forms
// read one table, so they agree for every class, and a name that is no class is never retried.
TEST(delivery_classifier, retryable_by_stored_name_agrees_with_the_enum) {
  for (int i = 0; i <= static_cast<int>(error_class::unknown); ++i) {
    auto c = static_cast<error_class>(i);
    EXPECT_EQ(retryable(std::string_view(error_class_name(c))), retryable(c)) << error_class_name(c);
  }
  EXPECT_TRUE(retryable(std::string_view("network")));
  EXPECT_TRUE(retryable(std::string_view("io_transient")));
  EXPECT_TRUE(retryable(std::string_view("worker_lost")));
  for (const char* n : {"", "Network", "network ", "io_permanent", "auth", "validation", "unknown", "none", "timeout"})
    EXPECT_FALSE(retryable(std::string_view(n))) << n;
}

TEST(delivery_classifier, every_libssh2_code_has_a_class_and_a_name) {
  // -1..-49 are every code libssh2 1.10 defines; none may fall through to "unknown" by accident
  // except the few that are programming errors or allocation failures.
  const std::set<long long> unknown_on_purpose{-6, -34, -35, -38, -39, -41, -49};
  for (long long code = -1; code >= -49; --code) {
    auto c = classify(cause_kind::libssh2, code);
    EXPECT_NE(c, error_class::none) << code;
    EXPECT_EQ(c == error_class::unknown, unknown_on_purpose.count(code) == 1) << code;
    EXPECT_EQ(describe({cause_kind::libssh2, code}).rfind("LIBSSH2_ERROR_", 0), 0u) << code;
  }
  EXPECT_EQ(classify(cause_kind::libssh2, 0), error_class::none);
  EXPECT_EQ(classify(cause_kind::libssh2, -50), error_class::unknown);
  EXPECT_EQ(classify(cause_kind::libssh2, 7), error_class::unknown);
  // The ones DESIGN/TESTBED name explicitly.
  EXPECT_EQ(classify(cause_kind::libssh2, -9), error_class::network);    // TIMEOUT
  EXPECT_EQ(classify(cause_kind::libssh2, -30), error_class::network);   // SOCKET_TIMEOUT
  EXPECT_EQ(classify(cause_kind::libssh2, -43), error_class::io_transient);  // SOCKET_RECV: reset
  EXPECT_EQ(classify(cause_kind::libssh2, -7), error_class::io_transient);   // SOCKET_SEND: broken pipe
  EXPECT_EQ(classify(cause_kind::libssh2, -18), error_class::auth);      // AUTHENTICATION_FAILED
  EXPECT_EQ(classify(cause_kind::libssh2, -19), error_class::auth);      // PUBLICKEY_UNVERIFIED
  EXPECT_EQ(classify(cause_kind::libssh2, -2), error_class::network);    // BANNER_RECV
  EXPECT_EQ(classify(cause_kind::libssh2, -5), error_class::network);    // KEX_FAILURE
}

TEST(delivery_classifier, sftp_statuses) {
  EXPECT_EQ(classify(cause_kind::sftp_status, 0), error_class::none);
  EXPECT_EQ(classify(cause_kind::sftp_status, 2), error_class::io_permanent);   // NO_SUCH_FILE
  EXPECT_EQ(classify(cause_kind::sftp_status, 3), error_class::io_permanent);   // PERMISSION_DENIED
  EXPECT_EQ(classify(cause_kind::sftp_status, 4), error_class::io_transient);   // FAILURE
  EXPECT_EQ(classify(cause_kind::sftp_status, 7), error_class::io_transient);   // CONNECTION_LOST
  EXPECT_EQ(classify(cause_kind::sftp_status, 12), error_class::io_permanent);  // WRITE_PROTECT
  EXPECT_EQ(classify(cause_kind::sftp_status, 14), error_class::io_permanent);  // NO_SPACE
  EXPECT_EQ(classify(cause_kind::sftp_status, 15), error_class::io_permanent);  // QUOTA
  for (long long s = 1; s <= 21; ++s) {
    EXPECT_NE(classify(cause_kind::sftp_status, s), error_class::unknown) << s;
    EXPECT_EQ(describe({cause_kind::sftp_status, s}).rfind("SSH_FX_", 0), 0u) << s;
  }
  EXPECT_EQ(classify(cause_kind::sftp_status, 22), error_class::unknown);
  EXPECT_EQ(classify(cause_kind::sftp_status, -1), error_class::unknown);
  EXPECT_EQ(describe({cause_kind::sftp_status, 99}), "SFTP status 99");
}

TEST(delivery_classifier, errno_and_asio_errors) {
  EXPECT_EQ(classify(cause_kind::posix_errno, ECONNREFUSED), error_class::network);
  EXPECT_EQ(classify(cause_kind::posix_errno, ETIMEDOUT), error_class::network);
  EXPECT_EQ(classify(cause_kind::posix_errno, EHOSTUNREACH), error_class::network);
  EXPECT_EQ(classify(cause_kind::posix_errno, ENETUNREACH), error_class::network);
  EXPECT_EQ(classify(cause_kind::posix_errno, ECONNRESET), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::posix_errno, EPIPE), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::posix_errno, EACCES), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::posix_errno, ENOSPC), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::posix_errno, EROFS), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::posix_errno, 0), error_class::none);
  EXPECT_EQ(classify(cause_kind::posix_errno, 99999), error_class::unknown);
  namespace ae = boost::asio::error;
  EXPECT_EQ(classify(make_error_code(ae::connection_refused)), error_class::network);
  EXPECT_EQ(classify(make_error_code(ae::timed_out)), error_class::network);
  EXPECT_EQ(classify(make_error_code(ae::connection_reset)), error_class::io_transient);
  EXPECT_EQ(classify(make_error_code(ae::broken_pipe)), error_class::io_transient);
  EXPECT_EQ(classify(make_error_code(ae::host_not_found)), error_class::network);
  EXPECT_EQ(classify(make_error_code(ae::host_not_found_try_again)), error_class::network);
  EXPECT_EQ(classify(make_error_code(ae::eof)), error_class::io_transient);
  EXPECT_EQ(classify(std::error_code(ECONNREFUSED, std::generic_category())), error_class::network);
  EXPECT_EQ(classify(std::error_code()), error_class::none);
  EXPECT_EQ(classify(cause_kind::asio, ECONNRESET), error_class::io_transient);
}

TEST(delivery_classifier, resolver_exit_status_steps_and_checks) {
  for (int e : {EAI_NONAME, EAI_AGAIN, EAI_FAIL, EAI_NODATA}) EXPECT_EQ(classify(cause_kind::resolver, e), error_class::network) << e;
  EXPECT_EQ(classify(cause_kind::resolver, EAI_SERVICE), error_class::validation);
  EXPECT_FALSE(describe({cause_kind::resolver, EAI_NONAME}).empty());
  EXPECT_EQ(classify(cause_kind::exit_status, 0), error_class::none);
  EXPECT_EQ(classify(cause_kind::exit_status, 1), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::exit_status, 255), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::exit_status, -1), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::backup)), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::install)), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::owner_mode)), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::missing_backup)), error_class::io_permanent);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::post_command)), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::remote_step, int(remote_step::restore)), error_class::io_transient);
  EXPECT_EQ(classify(cause_kind::remote_step, 77), error_class::unknown);
  EXPECT_EQ(classify(cause_kind::deadline), error_class::network);
  EXPECT_EQ(classify(cause_kind::host_key_mismatch), error_class::auth);
  EXPECT_EQ(classify(cause_kind::host_key_type), error_class::auth);
  EXPECT_EQ(classify(cause_kind::tls_mismatch), error_class::validation);
  EXPECT_EQ(classify(cause_kind::remote_hash_mismatch), error_class::validation);
  EXPECT_EQ(classify(cause_kind::bad_input), error_class::validation);
  EXPECT_EQ(classify(cause_kind::tls_handshake), error_class::network);
  EXPECT_EQ(classify(cause_kind::worker_lost), error_class::worker_lost);
  EXPECT_EQ(classify(cause_kind::count_), error_class::unknown);
  // Every kind, every code in a band: total, never throws, always a named class.
  for (int k = 0; k <= static_cast<int>(cause_kind::count_) + 2; ++k)
    for (long long code = -200; code <= 200; ++code) {
      cause c{static_cast<cause_kind>(k), code};
      auto cls = classify(c);
      EXPECT_TRUE(parse_error_class(error_class_name(cls)).has_value());
      EXPECT_FALSE(describe(c).empty());
    }
}
