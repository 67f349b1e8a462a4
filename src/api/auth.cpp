#include "auth.hpp"

#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <openssl/crypto.h>

#include <cctype>

namespace certfleet::api {

namespace {

using steady = std::chrono::steady_clock;

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

store::role role_for(access a) {
  switch (a) {
    case access::operator_: return store::role::operator_;
    case access::admin: return store::role::admin;
    case access::owner: return store::role::owner;
    default: return store::role::viewer;
  }
}

}  // namespace

boost::asio::awaitable<result<store::project>> project_by_name(server_state& s, const std::string& name) {
  auto& cache = s.auth.projects;
  if (auto it = cache.find(name); it != cache.end() && it->second.expires > steady::now()) co_return it->second.p;
  auto p = co_await s.timed("project_find", s.st.projects().find_by_name(name));
  if (p) {
    if (cache.size() >= 10'000) cache.clear();
    cache[name] = auth_caches::cached_project{*p, steady::now() + s.opt.auth_cache_ttl};
  }
  co_return p;
}

// Entries are bounded per minute: anyone can send 401s as fast as the network allows, and each
// would be a row kept for audit_retention_s. Beyond the bound the refusals are counted, and the
// next entry written says how many were not.
boost::asio::awaitable<void> audit_refusal(server_state& s, caller c, const route_match& m, std::string_view path,
                                           const error& e) {
  auto& a = s.auth;
  const auto now = steady::now();
  if (now - a.refusal_window >= std::chrono::minutes(1)) {
    a.refusal_window = now;
    a.refusals_in_window = 0;
  }
  if (a.refusals_in_window >= s.opt.refusal_audit_per_minute) {
    ++a.refusals_unaudited;
    s.metrics.refusal_unaudited();
    co_return;
  }
  ++a.refusals_in_window;
  // An anonymous caller of a project route: the project's own log, when the project exists.
  if (!c.project && !c.token && !m.project.empty()) {
    auto p = co_await project_by_name(s, m.project);
    if (p) c.project = std::move(*p);
  }
  boost::json::object d;
  d["message"] = e.message;
  if (a.refusals_unaudited > 0) d["unaudited_refusals_before"] = a.refusals_unaudited;
  a.refusals_unaudited = 0;
  auto detail = boost::json::serialize(d);
  const auto action = fmt::format("{} {}", m.route->method, m.route->pattern);
  co_await s.audit(c, action, path.substr(0, 300), errc_name(e.value()), detail);
}

std::string csrf_token_for(std::string_view session_cookie) {
  std::string material = "certfleet csrf:";
  material += session_cookie;
  return hash_token(material);
}

namespace {

bool same_text(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// "http://host:port" against the Host header.
bool same_origin(std::string_view origin, std::string_view host) {
  for (std::string_view scheme : {"http://", "https://"})
    if (origin.substr(0, scheme.size()) == scheme) return iequals(origin.substr(scheme.size()), host);
  return false;
}

// A token found by its text or a session: refused once expired (also when the cache still
// holds it), and its use recorded at most once a minute. A failed write of the use does not
// refuse the request: last_used_at is for people, not for access.
template <class Mark>
boost::asio::awaitable<result<void>> admit_token(server_state& s, store::token_record& t, std::string_view field,
                                                 Mark mark_used) {
  const auto now = s.clock.now_ms();
  if (t.expires_at && t.expires_at <= now)
    co_return make_error(errc::unauthorized,
                         fmt::format("the token \"{}\" expired at {}; an admin of its project creates a new one "
                                     "(Tokens page, POST /api/v1/projects/{{p}}/tokens or certfleet token create)",
                                     t.name.substr(0, 100), format_iso8601(t.expires_at)),
                         std::string(field));
  if (now - t.last_used_at >= token_touch_interval_ms) {
    mark_used(now);  // before the write: requests meanwhile do not write again
    t.last_used_at = now;
    (void)co_await s.timed("token_touch", s.st.auth().touch_token(t.id, now, token_touch_interval_ms));
  }
  co_return result<void>{};
}

// The token's text of an Authorization value, or nullopt when it is not "Bearer <token>".
std::optional<std::string_view> bearer_text(std::string_view hv) {
  if (hv.size() < 7 || !iequals(hv.substr(0, 7), "Bearer ")) return std::nullopt;
  auto text = hv.substr(7);
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  return text;
}

boost::asio::awaitable<result<store::token_record>> bearer_token(server_state& s, std::string_view hv) {
  const auto bearer = bearer_text(hv);
  if (!bearer)
    co_return make_error(errc::unauthorized, "the Authorization header must be \"Bearer <token>\"", "authorization");
  const auto text = *bearer;
  if (!looks_like_token(text)) co_return make_error(errc::unauthorized, "invalid or revoked token", "authorization");
  auto hash = hash_token(text);
  auto now = steady::now();
  auto& tokens = s.auth.tokens;
  store::token_record rec;
  if (auto it = tokens.find(hash); it != tokens.end() && it->second.expires > now) {
    rec = it->second.rec;
  } else {
    auto t = co_await s.timed("token_find", s.st.auth().find_token(hash));
    if (!t) {
      if (t.error().is(errc::not_found)) co_return make_error(errc::unauthorized, "invalid or revoked token", "authorization");
      co_return std::move(t).error();
    }
    if (tokens.size() >= 10'000) tokens.clear();
    tokens[hash] = auth_caches::cached_token{*t, now + s.opt.auth_cache_ttl};
    rec = std::move(*t);
  }
  auto used = co_await admit_token(s, rec, "authorization", [&s, &hash](time_ms at) {
    if (auto it = s.auth.tokens.find(hash); it != s.auth.tokens.end()) it->second.rec.last_used_at = at;
  });
  if (!used) co_return std::move(used).error();
  co_return rec;
}

// Not cached: signing out must end the session at once, in every process.
boost::asio::awaitable<result<store::ui_session>> session_of(server_state& s, const credentials& cred) {
  auto sess = co_await s.timed("session_find", s.st.auth().find_session(hash_token(cred.session_cookie), s.clock.now_ms()));
  if (!sess) {
    if (sess.error().is(errc::not_found))
      co_return make_error(errc::unauthorized, "the session expired or was signed out; sign in again", "session");
    co_return std::move(sess).error();
  }
  // A browser sends the cookie with every request to this origin, also with one a foreign page
  // makes it send. A state change must carry the token that only this origin's page can read.
  if (cred.method != "GET" && cred.method != "HEAD" && !same_text(cred.csrf_token, csrf_token_for(cred.session_cookie)))
    co_return make_error(errc::forbidden,
                         "a request signed in by the session cookie that changes state needs the X-CSRF-Token header "
                         "given at sign-in",
                         "csrf_token");
  // A WebSocket handshake is a GET that no CSRF header can guard: the origin must be ours.
  if (cred.websocket && !cred.origin.empty() && !same_origin(cred.origin, cred.host))
    co_return make_error(errc::forbidden, "a WebSocket with the session cookie must come from this server's own pages",
                         "origin");
  auto used = co_await admit_token(s, sess->token, "session", [](time_ms) {});
  if (!used) co_return std::move(used).error();
  co_return std::move(*sess);
}

}  // namespace

boost::asio::awaitable<result<caller>> authorize(server_state& s, const credentials& cred, const route_match& m,
                                                 caller* known) {
  caller c;
  const auto& r = *m.route;
  // Which of two would count is ambiguous (a proxy in front may have checked the other).
  if (cred.authorization_count > 1)
    co_return make_error(errc::invalid_argument, "the request has more than one Authorization header; send one",
                         "authorization");
  if (r.need == access::none) co_return c;
  if (!cred.authorization.empty()) {
    auto t = co_await bearer_token(s, cred.authorization);
    if (!t) co_return std::move(t).error();
    c.token = std::move(*t);
  } else if (!cred.session_cookie.empty()) {
    auto sess = co_await session_of(s, cred);
    if (!sess) co_return std::move(sess).error();
    c.token = std::move(sess->token);
    c.by_session = true;
    c.session_expires_at = sess->expires_at;
  } else {
    co_return make_error(errc::unauthorized, "this route needs Authorization: Bearer <token> (or a signed-in session)",
                         "authorization");
  }
  if (r.pattern.find("{p}") != std::string_view::npos) {
    // Another project's objects answer 404, exactly like objects that do not exist.
    auto not_found = make_error(errc::not_found, fmt::format("project {} not found", m.project.substr(0, 100)), "project");
    auto p = co_await project_by_name(s, m.project);
    if (!p) co_return p.error().is(errc::not_found) ? not_found : std::move(p).error();
    if (!c.token->system && c.token->project_id != p->id) co_return not_found;
    c.project = std::move(*p);
  }
  if (known) *known = c;
  if (r.need == access::system_admin) {
    if (!c.token->system) co_return make_error(errc::forbidden, "this route needs a system-admin token", "authorization");
  } else if (r.need != access::any_token && c.token->token_role < role_for(r.need)) {
    co_return make_error(errc::forbidden,
                         fmt::format("this route needs the {} role; the token has {}", store::to_string(role_for(r.need)),
                                     store::to_string(c.token->token_role)),
                         "authorization");
  }
  co_return c;
}

stream_credential stream_credential_of(const credentials& cred, const caller& c) {
  stream_credential out;
  if (c.by_session) {
    out.hash = hash_token(cred.session_cookie);
    out.session = true;
    out.expires_at = c.session_expires_at;
  } else if (auto text = bearer_text(cred.authorization)) {
    out.hash = hash_token(*text);
  }
  if (c.token && c.token->expires_at && (out.expires_at == 0 || c.token->expires_at < out.expires_at))
    out.expires_at = c.token->expires_at;
  return out;
}

}  // namespace certfleet::api
