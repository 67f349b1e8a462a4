#pragma once
// Who is calling and whether they may use a route: bearer tokens, the project of {p}, roles;
// the token and project caches; the bounded auditing of refused state-changing calls.
#include "certfleet/api/router.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/auth.hpp"

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
};

// The request's Authorization fields, as the session read them.
struct authorization_header {
  std::size_t count = 0;    // how many Authorization fields
  std::string_view value;   // the first one's value
};

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
boost::asio::awaitable<result<caller>> authorize(server_state& s, authorization_header auth, const route_match& m,
                                                 caller* known = nullptr);

// A refused (401/403) state-changing call: an audit entry, within the per-minute bound.
boost::asio::awaitable<void> audit_refusal(server_state& s, caller c, const route_match& m, std::string_view path,
                                           const error& e);

}  // namespace certfleet::api
