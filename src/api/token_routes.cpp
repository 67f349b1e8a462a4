// A project's access tokens (issue 35 §3): list, create with a role and an expiry, revoke.
// Who may make or end which token: an admin up to its own role, an owner any role of its project,
// a system admin any; system tokens themselves are made only by the local CLI.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/core/json.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::api {

namespace {

// May the caller make or end a token of role `r` (`system`: a system token)?
result<void> may_manage(const caller& c, store::role r, bool system, std::string_view verb) {
  const auto& me = *c.token;
  if (me.system) return {};
  if (system)
    return make_error(errc::forbidden, fmt::format("only a system-admin token may {} a system token", verb), "role");
  if (r > me.token_role)
    return make_error(errc::forbidden,
                      fmt::format("a token with the {} role may {} tokens up to its own role, not {}",
                                  store::to_string(me.token_role), verb, store::to_string(r)),
                      "role");
  return {};
}

std::string actor_of(const caller& c) { return "token:" + c.token->id; }

// `detail`: JSON text. (Callers name their values first: GCC 12 mishandles temporaries built
// inside a co_await expression.)
boost::asio::awaitable<void> audit_token(server_state& s, const caller& c, std::string_view action, std::string_view id,
                                         std::string_view outcome, std::string_view detail) {
  const std::string object = id.empty() ? std::string("token") : "token/" + std::string(id);
  co_await s.audit(c, action, object, outcome, detail);
}

std::string message_detail(const error& e) { return boost::json::serialize(boost::json::object{{"message", e.message}}); }

}  // namespace

boost::asio::awaitable<reply> list_project_tokens(server_state& s, const route_call& call) {
  auto tokens = co_await s.timed("token_list", s.st.auth().list_tokens(call.who.project->id));
  if (!tokens) co_return error_reply(tokens.error());
  const auto now = s.clock.now_ms();
  boost::json::array items;
  for (auto it = tokens->rbegin(); it != tokens->rend(); ++it) items.push_back(token_answer(*it, now));  // newest first
  co_return json_reply(200, boost::json::object{{"items", std::move(items)}});
}

boost::asio::awaitable<reply> create_project_token(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto body = parse_token_body(call.body);
  if (!body) {
    const auto detail = message_detail(body.error());
    co_await audit_token(s, c, "token.create", "", errc_name(body.error().value()), detail);
    co_return error_reply(body.error());
  }
  const auto now = s.clock.now_ms();
  std::optional<error> refused;
  if (auto may = may_manage(c, body->token_role, false, "create"); !may) refused = may.error();
  const time_ms expires_at = body->ttl_s == 0 ? 0 : now + body->ttl_s * 1000;
  // A token cannot mint itself a longer life: what it creates expires no later than it does.
  if (!refused && c.token->expires_at && (expires_at == 0 || expires_at > c.token->expires_at))
    refused = make_error(errc::invalid_argument,
                         fmt::format("the new token would outlive the token creating it, which expires at {}; ask for "
                                     "a ttl_s of at most {}",
                                     format_iso8601(c.token->expires_at), (c.token->expires_at - now) / 1000),
                         "ttl_s");
  if (refused) {
    const auto detail = message_detail(*refused);
    co_await audit_token(s, c, "token.create", "", errc_name(refused->value()), detail);
    co_return error_reply(*refused);
  }
  auto issued = co_await s.timed("token_create", issue_token(s.st.auth(), c.project->id, body->token_role, false,
                                                             body->name, actor_of(c), s.clock, false, expires_at));
  if (!issued) {
    const auto detail = message_detail(issued.error());
    co_await audit_token(s, c, "token.create", "", errc_name(issued.error().value()), detail);
    co_return error_reply(issued.error());
  }
  const auto& rec = (*issued)->record;
  const auto detail = boost::json::serialize(boost::json::object{{"name", rec.name},
                                                                 {"role", std::string(store::to_string(rec.token_role))},
                                                                 {"expires_at", json::time_value(rec.expires_at)}});
  co_await audit_token(s, c, "token.create", rec.id, "ok", detail);
  auto o = token_answer(rec, now);
  o["token"] = (*issued)->text;  // shown once; only its hash is stored
  co_return json_reply(201, o);
}

boost::asio::awaitable<reply> revoke_project_token(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string id(call.match.id);
  auto tokens = co_await s.timed("token_list", s.st.auth().list_tokens(c.project->id));
  if (!tokens) co_return error_reply(tokens.error());
  const store::token_record* target = nullptr;
  for (const auto& t : *tokens)
    if (t.id == id) target = &t;
  std::optional<error> refused;
  // Another project's token answers 404, like one that does not exist.
  if (!target)
    refused = make_error(errc::not_found, fmt::format("token {} not found in project {}", id, c.project->name), "id");
  else if (auto may = may_manage(c, target->token_role, target->system, "revoke"); !may)
    refused = may.error();
  if (refused) {
    const auto detail = message_detail(*refused);
    co_await audit_token(s, c, "token.revoke", id, errc_name(refused->value()), detail);
    co_return error_reply(*refused);
  }
  auto r = co_await s.timed("token_revoke", s.st.auth().revoke_token(id, s.clock.now_ms()));
  const std::string_view outcome = r ? std::string_view("ok") : errc_name(r.error().value());
  co_await audit_token(s, c, "token.revoke", id, outcome, "");
  if (!r) co_return error_reply(r.error());
  // This process stops accepting it now; others within auth_cache_ttl (sessions: at once). Its
  // live log streams close now here, within a second in other processes (stream_watch.hpp).
  s.auth.tokens.clear();
  recheck_streams_now(s);
  co_return json_reply(200, token_answer(*r, s.clock.now_ms()));
}

}  // namespace certfleet::api
