#pragma once
// Who is calling and whether they may use a route: bearer tokens, the project of {p}, roles;
// the token and project caches; the bounded auditing of refused state-changing calls.
#include "certfleet/api/router.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/auth.hpp"
#include "stream_watch.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace certfleet::api {

struct server_state;

struct caller {
  std::optional<store::token_record> token;
  std::optional<store::project> project;
  bool by_session = false;  // authenticated by the session cookie, not a bearer token
  std::int64_t session_expires_at = 0;
};

// What a request says about who sends it, as the session read it: a bearer token or the
// browser's session cookie (DESIGN §8).
struct credentials {
  std::string_view method;
  std::size_t authorization_count = 0;  // how many Authorization fields
  std::string_view authorization;       // the first one's value
  std::string_view session_cookie;      // the certfleet_session cookie's value; empty: none
  std::string_view csrf_token;          // X-CSRF-Token
  std::string_view origin;              // Origin, when the browser sent one
  std::string_view host;                // Host
  bool websocket = false;               // an Upgrade request
};

// The CSRF token that goes with a session: derived from the cookie's value, so nothing but the
// cookie's hash is stored and only the cookie's holder can compute it.
std::string csrf_token_for(std::string_view session_cookie);

struct auth_caches {
  using steady = std::chrono::steady_clock;
  struct cached_token {
    store::token_record rec;
    steady::time_point expires;
  };
  std::unordered_map<std::string, cached_token> tokens;  // by token hash
  // Projects are never renamed; a deleted one leaves this process's cache at once and other
  // processes' caches within auth_cache_ttl (like a revoked token).
  struct cached_project {
    store::project p;
    steady::time_point expires;
  };
  std::unordered_map<std::string, cached_project> projects;  // by name
  // Refusal audit entries of the current minute, and refusals not written since the last one.
  steady::time_point refusal_window{};
  int refusals_in_window = 0;
  std::int64_t refusals_unaudited = 0;
};

// The project by name, through the cache.
boost::asio::awaitable<result<store::project>> project_by_name(server_state& s, const std::string& name);

// Who is calling and may they use this route on this project? The error is the reply.
// `known`, when given, gets who the caller is as far as it was learnt (for auditing a refusal).
boost::asio::awaitable<result<caller>> authorize(server_state& s, const credentials& cred, const route_match& m,
                                                 caller* known = nullptr);

// What the stream watch rechecks for a caller that `authorize` admitted with `cred`.
stream_credential stream_credential_of(const credentials& cred, const caller& c);

// A refused (401/403) state-changing call: an audit entry, within the per-minute bound.
boost::asio::awaitable<void> audit_refusal(server_state& s, caller c, const route_match& m, std::string_view path,
                                           const error& e);

}  // namespace certfleet::api
