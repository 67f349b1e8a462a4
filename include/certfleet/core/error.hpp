#pragma once
// Expected failures travel as values: an `error` (our errc, a message for humans, the field it is
// about) inside a `result<T>`. Exceptions are reserved for bugs.
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace certfleet {

enum class errc {
  ok = 0,
  invalid_argument,   // bad input: the field is named
  not_found,
  conflict,           // wrong state for the operation
  unknown_job_type,   // not in the type table, or no handler in this build
  payload_too_large,
  lease_lost,         // the caller is no longer the lock holder (fence moved on)
  cancelled,
  rate_limited,
  store_busy,         // the store stayed locked past its busy timeout
  store_failure,      // the store reported an error
  store_disk_full,    // the store's file system is full: nothing was written (HTTP 507)
  unauthorized,
  forbidden,
  shutting_down,
  too_many_connections,  // the server's or this client address's connection limit
  timeout,
  config_invalid,
  ssh_unreachable,    // scan-host-key: no SSH server answered (one answer whatever the cause)
  count_,             // not a code: how many there are. A new code goes above, with its row in
                      // core/errc_table.hpp (name, message, HTTP status, exit), or the build fails.
};

const std::error_category& certfleet_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), certfleet_category()}; }
// Stable machine-readable name of a code ("invalid_argument"), used in API error bodies
// (core/errc_table.hpp holds each code's name, message, HTTP status and exit).
const char* errc_name(errc e) noexcept;

struct error {
  std::error_code code;
  std::string message;
  std::string field;              // empty when the error is not about one field
  std::int64_t retry_after_s = 0; // set with rate_limited

  errc value() const noexcept {
    return code.category() == certfleet_category() ? static_cast<errc>(code.value()) : errc::store_failure;
  }
  bool is(errc e) const noexcept { return code == make_error_code(e); }
};

inline error make_error(errc e, std::string message, std::string field = {}) {
  return error{make_error_code(e), std::move(message), std::move(field), 0};
}

// Thrown only by result::value() on misuse (reading a value that is an error): a bug.
class bad_result_access : public std::exception {
 public:
  explicit bad_result_access(error e) : e_(std::move(e)) {}
  const char* what() const noexcept override { return e_.message.c_str(); }
  const certfleet::error& err() const noexcept { return e_; }

 private:
  certfleet::error e_;
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  result(certfleet::error e) : v_(std::in_place_index<1>, std::move(e)) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const certfleet::error& error() const& { return std::get<1>(v_); }
  certfleet::error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (!has_value()) throw bad_result_access(std::get<1>(v_));
  }
  std::variant<T, certfleet::error> v_;
};

template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(certfleet::error e) : e_(std::move(e)) {}
  bool has_value() const noexcept { return !e_; }
  explicit operator bool() const noexcept { return has_value(); }
  void value() const {
    if (e_) throw bad_result_access(*e_);
  }
  const certfleet::error& error() const& { return *e_; }
  certfleet::error&& error() && { return std::move(*e_); }

 private:
  std::optional<certfleet::error> e_;
};

}  // namespace certfleet

template <>
struct std::is_error_code_enum<certfleet::errc> : std::true_type {};
