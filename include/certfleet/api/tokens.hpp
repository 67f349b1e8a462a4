#pragma once
// Access tokens: "cf_" + base64url of 32 random bytes. Only their SHA-256 is stored; the text is
// shown once, when the token is created.
#include "certfleet/core/clock.hpp"
#include "certfleet/store/auth.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace certfleet::api {

std::string generate_token_text();
// Lowercase hex SHA-256 of the token text: what the store keeps and looks tokens up by.
std::string hash_token(std::string_view text);
// True for something shaped like a token (cheap check before any store call).
bool looks_like_token(std::string_view text) noexcept;

struct issued_token {
  std::string text;  // the secret; never stored, never logged
  store::token_record record;
};

// Creates a token; first_only: only when the store has no token yet (first start), else nullopt.
// expires_at 0: never expires.
store::task<std::optional<issued_token>> issue_token(store::auth_store& auth, std::string project_id, store::role r,
                                                     bool system, std::string name, std::string created_by,
                                                     const clock_source& clock, bool first_only = false,
                                                     time_ms expires_at = 0);

// "active", "expired" or "revoked" at `now`.
std::string_view token_status(const store::token_record& t, time_ms now) noexcept;
// A token as the API, the CLI and the UI show it: never its text or hash.
boost::json::object token_answer(const store::token_record& t, time_ms now);

// A use of a token is written to the store at most once per this interval (per process).
inline constexpr time_ms token_touch_interval_ms = 60'000;

}  // namespace certfleet::api
