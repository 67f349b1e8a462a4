// The browser's sign-in (DESIGN §8): a token is exchanged once for a session cookie; the page
// then sends the cookie (and, on writes, the CSRF token) instead of the token.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/core/json.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::api {

namespace {

// The cookie's attributes: only HTTP sends it (no script reads it), never with a request another
// site starts, and over TLS never over plain HTTP (Secure): the UI is served only by the API
// listener, which is HTTPS whenever it has a certificate (the metrics listener serves no UI).
std::string session_cookie(const server_state& s, std::string_view value, std::int64_t max_age_s) {
  return fmt::format("{}={}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}", session_cookie_name, value, max_age_s,
                     s.tls.context ? "; Secure" : "");
}

// The session's answer: whom it acts as, until when, and the CSRF token for its writes.
boost::asio::awaitable<reply> session_answer(server_state& s, unsigned status, const store::token_record& t,
                                             std::int64_t expires_at, std::string_view cookie) {
  boost::json::value project = nullptr;
  auto projects = co_await s.timed("project_list", s.st.projects().list());
  if (!projects) co_return error_reply(projects.error());
  for (const auto& p : *projects)
    if (p.id == t.project_id) project = p.name;
  boost::json::object o;
  o["csrf_token"] = csrf_token_for(cookie);
  o["project"] = std::move(project);
  o["role"] = std::string(store::to_string(t.token_role));
  o["system"] = t.system;
  o["token_name"] = t.name;
  o["token_id"] = t.id;  // not a secret: "token:<id>" names a person's acts (jobs, approvals)
  o["expires_at"] = format_iso8601(expires_at);
  co_return json_reply(status, o);
}

}  // namespace

boost::asio::awaitable<reply> create_session(server_state& s, const route_call& call) {
  auto body = json::object_reader::parse(call.body);
  if (!body) co_return error_reply(body.error());
  if (auto only = body->only({"token"}); !only) co_return error_reply(only.error());
  auto text = body->required_string("token");
  if (!text) co_return error_reply(text.error());
  auto refused = make_error(errc::unauthorized, "invalid or revoked token", "token");
  if (!looks_like_token(*text)) {
    co_await audit_refusal(s, {}, call.match, "/api/v1/session", refused);
    co_return error_reply(refused);
  }
  auto t = co_await s.timed("token_find", s.st.auth().find_token(hash_token(*text)));
  if (!t) {
    if (!t.error().is(errc::not_found)) co_return error_reply(t.error());
    co_await audit_refusal(s, {}, call.match, "/api/v1/session", refused);
    co_return error_reply(refused);
  }
  const auto ttl_s = co_await s.setting_int("ui_session_ttl_s");
  const auto now = s.clock.now_ms();
  const auto expires_at = now + ttl_s * 1000;
  auto value = generate_token_text();
  value.replace(0, 3, "cs_");  // told apart from an API token at a glance
  auto made = co_await s.timed("session_create", s.st.auth().create_session(hash_token(value), t->id, expires_at, now));
  if (!made) co_return error_reply(made.error());
  caller c;
  c.token = *t;
  co_await s.audit(c, "session.create", "token/" + t->id, "ok");
  auto r = co_await session_answer(s, 201, *t, expires_at, value);
  r.headers.emplace_back("Set-Cookie", session_cookie(s, value, ttl_s));
  co_return r;
}

boost::asio::awaitable<reply> get_session(server_state& s, const route_call& call) {
  if (!call.who.by_session)
    co_return error_reply(errc::unauthorized, "no session: this request carries a bearer token, not the session cookie",
                          "session");
  co_return co_await session_answer(s, 200, *call.who.token, call.who.session_expires_at, call.cred.session_cookie);
}

boost::asio::awaitable<reply> delete_session(server_state& s, const route_call& call) {
  if (!call.who.by_session)
    co_return error_reply(errc::unauthorized, "no session: this request carries a bearer token, not the session cookie",
                          "session");
  auto gone = co_await s.timed("session_delete", s.st.auth().delete_session(hash_token(call.cred.session_cookie)));
  if (!gone) co_return error_reply(gone.error());
  co_await s.audit(call.who, "session.delete", "token/" + call.who.token->id, "ok");
  recheck_streams_now(s);  // the session's live log streams close now
  reply r;
  r.status = 204;
  r.body.clear();
  r.headers.emplace_back("Set-Cookie", session_cookie(s, "", 0));
  co_return r;
}

}  // namespace certfleet::api
