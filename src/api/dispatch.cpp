// Routing an HTTP request to its handler: the route table (router.cpp) says what a route is,
// this file binds each route_id to the function that serves it.
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <utility>

namespace certfleet::api {

namespace {

// The handler each row of routes.def names, indexed by route_id.
constexpr std::array<route_handler, route_count> handlers{{
#define CERTFLEET_ROUTE(id, method, pattern, need, api_only, changes_state, websocket, object_kind, handler, summary, body) handler,
#include "certfleet/api/routes.def"
#undef CERTFLEET_ROUTE
}};

// The certificate a listener serves (tls_certificate) is this process's HTTPS identity: every
// project's tokens travel under its key, so changing it (a version, a renewal, revocation,
// deletion) is a system-level trust decision, not a project admin's (issue 28).
std::optional<error> listener_certificate_refusal(const server_state& s, const route_match& m, const caller& c) {
  if (!m.route->changes_state || m.route->object_kind != store::kind_certificate || m.id.empty()) return std::nullopt;
  const auto& served = s.opt.tls_certificate;
  if (!served || served->id != m.id || served->project != m.project) return std::nullopt;
  if (c.token && c.token->system) return std::nullopt;
  return make_error(errc::forbidden,
                    fmt::format("certificate {} is served by this server's HTTPS listener (tls_certificate): only a "
                                "system admin may change it",
                                m.id),
                    "id");
}

}  // namespace

boost::asio::awaitable<reply> dispatch(server_state& s, const request_view& req, std::string& route_name) {
  auto parts = split_target(req.target);
  if (!parts) co_return error_reply(errc::invalid_argument, "the request target must be a path", "path");
  // HEAD is GET without the body (RFC 9110 §9.3.2): the session drops the body of the answer.
  const std::string_view method = req.method == "HEAD" ? std::string_view("GET") : req.method;
  auto m = match_route(method, parts->path);
  if (req.health_only && !(m && (m->route->id == route_id::healthz || m->route->id == route_id::readyz ||
                                 m->route->id == route_id::metrics)))
    co_return error_reply(errc::not_found, "this listener (metrics_listen) serves only /healthz, /readyz and /metrics",
                          "path");
  if (!m) {
    if (m.error().is(errc::conflict)) {
      auto r = error_reply(make_error(errc::conflict, m.error().message, "method"));
      r.status = 405;
      r.body = error_body("method_not_allowed", m.error().message, "method");
      r.headers.emplace_back("Allow", m.error().field);
      co_return r;
    }
    if (s.opt.serve_api)
      if (auto ui = serve_ui(s, method, parts->path)) {
        route_name = "ui";
        co_return std::move(*ui);
      }
    co_return error_reply(m.error());
  }
  route_name = std::string(m->route->pattern);
  if (m->route->api_only && !s.opt.serve_api)
    co_return error_reply(errc::not_found, "this process serves only /healthz, /readyz and /metrics (mode)", "path");
  auto q = parse_query(parts->query);
  if (!q) co_return error_reply(q.error());
  if (m->route->websocket)
    co_return error_reply(make_error(errc::invalid_argument, "this route is a WebSocket: send an Upgrade request", "upgrade"));
  caller known;
  auto c = co_await authorize(s, req.cred, *m, &known);
  if (!c) {
    if (m->route->changes_state && (c.error().is(errc::unauthorized) || c.error().is(errc::forbidden)))
      co_await audit_refusal(s, known, *m, parts->path, c.error());
    co_return error_reply(c.error());
  }
  if (c->token) s.remember_token_name(*c->token);  // a job it makes names it at once
  if (!m->id.empty() && !is_object_id(m->id))
    co_return error_reply(errc::invalid_argument, "id must be a 24-character hex object id", "id");
  if (auto refusal = listener_certificate_refusal(s, *m, *c)) {
    co_await audit_refusal(s, *c, *m, parts->path, *refusal);
    co_return error_reply(*refusal);
  }
  const auto handler = handlers[static_cast<std::size_t>(m->route->id)];
  if (!handler) co_return error_reply(errc::not_found, "no such route", "path");
  const route_call call{*c, *m, *q, req.body, req.cred, req.content_type};
  auto r = co_await handler(s, call);
  // A certificate changed here (a new version, say): the listener serving a managed certificate
  // (tls_certificate) looks at once instead of at its next poll.
  if (m->route->changes_state && m->route->object_kind == store::kind_certificate && r.status < 300 && s.tls.wake)
    s.tls.wake();
  co_return r;
}

}  // namespace certfleet::api
