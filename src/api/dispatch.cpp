// Routing an HTTP request to its handler: the route table (router.cpp) says what a route is,
// this file binds each route_id to the function that serves it.
#include "certfleet/core/object_id.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <array>
#include <utility>

namespace certfleet::api {

namespace {

using R = route_id;

// One row per route_id, in the table's order (checked below). job_log_stream has none: it is a
// WebSocket, served by the log stream session.
constexpr std::array<std::pair<route_id, route_handler>, route_count> handlers{{
    {R::healthz, get_healthz},
    {R::readyz, get_readyz},
    {R::metrics, get_metrics},
    {R::projects, list_projects},
    {R::project_create, create_project},
    {R::project_delete, delete_project},
    {R::jobs_list, list_jobs},
    {R::jobs_enqueue, enqueue_job},
    {R::job_get, get_job},
    {R::job_retry, retry_job},
    {R::job_cancel, cancel_job},
    {R::job_logs, read_job_logs},
    {R::job_log_stream, nullptr},
    {R::audit, list_audit},
    {R::settings_get, get_settings},
    {R::settings_put, put_settings},
    {R::certificates_list, list_catalog_objects},
    {R::certificate_create, create_catalog_object},
    {R::certificate_get, get_catalog_object},
    {R::certificate_delete, delete_catalog_object},
    {R::credentials_list, list_catalog_objects},
    {R::credential_create, create_catalog_object},
    {R::credential_get, get_catalog_object},
    {R::credential_delete, delete_catalog_object},
    {R::targets_list, list_catalog_objects},
    {R::target_create, create_catalog_object},
    {R::target_get, get_catalog_object},
    {R::target_delete, delete_catalog_object},
    {R::target_scan_host_key, scan_target_host_key},
    {R::channels_list, list_catalog_objects},
    {R::channel_create, create_catalog_object},
    {R::channel_get, get_catalog_object},
    {R::channel_delete, delete_catalog_object},
    {R::rules_list, list_catalog_objects},
    {R::rule_create, create_catalog_object},
    {R::rule_get, get_catalog_object},
    {R::rule_delete, delete_catalog_object},
    {R::distributions_list, list_distributions},
    {R::distribution_create, create_distribution},
    {R::distribution_get, get_distribution},
    {R::distribution_delete, delete_distribution},
    {R::distribution_execute, execute_distribution},
    {R::distribution_rollback, rollback_distribution},
    {R::distribution_retry_failed, retry_failed_distribution},
    {R::distribution_cancel, cancel_distribution},
    {R::distribution_results, distribution_results},
}};

constexpr bool bound_in_id_order() {
  for (std::size_t i = 0; i < handlers.size(); ++i)
    if (static_cast<std::size_t>(handlers[i].first) != i) return false;
  return true;
}
static_assert(bound_in_id_order(), "one handler row per route_id, in route_id order");

}  // namespace

boost::asio::awaitable<reply> dispatch(server_state& s, const request_view& req, std::string& route_name) {
  auto parts = split_target(req.target);
  if (!parts) co_return error_reply(errc::invalid_argument, "the request target must be a path", "path");
  auto m = match_route(req.method, parts->path);
  if (!m) {
    if (m.error().is(errc::conflict)) {
      auto r = error_reply(make_error(errc::conflict, m.error().message, "method"));
      r.status = 405;
      r.body = error_body("method_not_allowed", m.error().message, "method");
      r.headers.emplace_back("Allow", m.error().field);
      co_return r;
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
  auto c = co_await authorize(s, req.authorization, *m, &known);
  if (!c) {
    if (m->route->changes_state && (c.error().is(errc::unauthorized) || c.error().is(errc::forbidden)))
      co_await audit_refusal(s, known, *m, parts->path, c.error());
    co_return error_reply(c.error());
  }
  if (!m->id.empty() && !is_object_id(m->id))
    co_return error_reply(errc::invalid_argument, "id must be a 24-character hex object id", "id");
  const auto handler = handlers[static_cast<std::size_t>(m->route->id)].second;
  if (!handler) co_return error_reply(errc::not_found, "no such route", "path");
  const route_call call{*c, *m, *q, req.body};
  co_return co_await handler(s, call);
}

}  // namespace certfleet::api
