#pragma once
// Every fact about an errc, one row each: its stable name (API error bodies, audit outcomes), its
// message (std::error_code::message), the HTTP status the API answers with (api/reply.cpp) and
// the kind of exit a CLI command makes (app/exit_codes.cpp). A code without its row, or rows out
// of enum order, fail the build (the static_assert below).
#include "certfleet/core/error.hpp"

#include <array>
#include <cstddef>
#include <string_view>

namespace certfleet {

// How a CLI command that failed with a code exits. Core knows no exit numbers: app/exit_codes.cpp
// gives each kind exactly one exit code (docs/cli.md lists them).
enum class errc_exit { failed, usage, not_found, conflict, unavailable, timeout };

struct errc_row {
  errc code;
  std::string_view name;  // a literal: errc_name hands out its data()
  std::string_view message;
  unsigned http_status;   // 500: internal, the API answers "see the server log" (api/reply.cpp)
  errc_exit exit;
};

// A row per code in enum order. Rows left out are value-initialised (errc::ok), so the check
// below sees them.
inline constexpr std::array<errc_row, static_cast<std::size_t>(errc::count_)> errc_table{{
    // ok is never an error: reported as one, it is a bug.
    {errc::ok, "ok", "success", 500, errc_exit::failed},
    {errc::invalid_argument, "invalid_argument", "invalid argument", 400, errc_exit::usage},
    {errc::not_found, "not_found", "not found", 404, errc_exit::not_found},
    {errc::conflict, "conflict", "conflict with the object's current state", 409, errc_exit::conflict},
    {errc::unknown_job_type, "unknown_job_type", "unknown or unsupported job type", 400, errc_exit::usage},
    {errc::payload_too_large, "payload_too_large", "payload too large", 413, errc_exit::usage},
    {errc::lease_lost, "lease_lost", "lease lost: another worker holds the job", 409, errc_exit::failed},
    {errc::cancelled, "cancelled", "cancelled", 409, errc_exit::failed},
    {errc::rate_limited, "rate_limited", "rate limited", 429, errc_exit::unavailable},
    {errc::store_busy, "store_busy", "store busy", 503, errc_exit::unavailable},
    {errc::store_failure, "store_failure", "store failure", 500, errc_exit::failed},
    {errc::store_disk_full, "store_disk_full", "the store's disk is full", 507, errc_exit::unavailable},
    {errc::unauthorized, "unauthorized", "unauthorized", 401, errc_exit::failed},
    {errc::forbidden, "forbidden", "forbidden", 403, errc_exit::failed},
    {errc::shutting_down, "shutting_down", "shutting down", 503, errc_exit::failed},
    {errc::too_many_connections, "too_many_connections", "too many connections", 503, errc_exit::failed},
    {errc::timeout, "timeout", "timed out", 504, errc_exit::timeout},
    {errc::config_invalid, "config_invalid", "invalid configuration", 500, errc_exit::usage},
    {errc::ssh_unreachable, "ssh_unreachable", "no SSH server answered", 502, errc_exit::failed},
}};

// What an error_code of our category whose value is no code (an int cast to errc) reads as.
inline constexpr errc_row errc_not_a_code{errc::count_, "unknown", "unknown certfleet error", 500, errc_exit::failed};

namespace detail {
constexpr bool errc_rows_in_enum_order() {
  for (std::size_t i = 0; i < errc_table.size(); ++i)
    if (static_cast<std::size_t>(errc_table[i].code) != i || errc_table[i].name.empty() ||
        errc_table[i].message.empty() || errc_table[i].http_status < 400 || errc_table[i].http_status > 599)
      return false;
  return true;
}
}  // namespace detail
static_assert(detail::errc_rows_in_enum_order(), "every errc needs its one row in errc_table, in enum order");

constexpr const errc_row& errc_row_of(errc e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i < errc_table.size() ? errc_table[i] : errc_not_a_code;
}

}  // namespace certfleet
