// Catalog routes (certificates, credentials, targets, notification channels and rules): the
// distribution service does the work, by the route row's object_kind; this maps its answer to
// HTTP and audits every state change.
#include "certfleet/api/requests.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include "certfleet/catalog/target_import.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::api {

using steady = std::chrono::steady_clock;

boost::asio::awaitable<reply> catalog_answer(server_state& s, const route_call& call, std::string_view verb,
                                             unsigned ok_status, result<boost::json::value> r, steady::time_point t0) {
  const std::string kind(call.match.route->object_kind);
  s.metrics.store_call(kind + (verb.empty() ? std::string("_read") : "_" + std::string(verb)),
                       std::chrono::duration<double>(steady::now() - t0).count());
  if (call.match.route->changes_state) {
    std::string object = kind + "/";
    if (!call.match.id.empty()) object += call.match.id;
    else if (r && r->is_object())
      if (auto* id = r->as_object().if_contains("id"); id && id->is_string()) object += std::string(id->as_string());
    const std::string action = kind + "." + std::string(verb);
    co_await s.audit(call.who, action, object, r ? "ok" : errc_name(r.error().value()));
  }
  if (!r) co_return error_reply(r.error());
  co_return json_reply(ok_status, *r);
}

boost::asio::awaitable<reply> list_catalog_objects(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto pq = parse_page_query(call.query);
  if (!pq) co_return error_reply(pq.error());
  const std::string kind(call.match.route->object_kind);
  auto r = co_await s.catalog.list(kind, call.who.project->id, pq->page, pq->page_size);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> create_catalog_object(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string kind(call.match.route->object_kind);
  const auto& c = call.who;
  const std::string actor = c.token ? "token:" + c.token->id : "anonymous";
  service::requester who{actor, c.token && c.token->system};  // named: GCC 12 and co_await temporaries
  auto r = co_await s.catalog.create(kind, c.project->id, call.body, who);
  co_return co_await catalog_answer(s, call, "create", 201, std::move(r), t0);
}

// POST …/targets:import: 201 {imported, ids} in the body's order, or 400 with every bad row
// (up to catalog::max_import_problems) in `errors`, each named by its line; nothing stored then.
boost::asio::awaitable<reply> import_targets(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const auto format = catalog::import_format_of(call.content_type);
  if (!format)  // the session refuses other media types first (415); this is the handler's own guard
    co_return error_reply(errc::invalid_argument, "send Content-Type: application/x-ndjson or text/csv", "content-type");
  const auto& c = call.who;
  const std::string actor = c.token ? "token:" + c.token->id : "anonymous";
  service::requester who{actor, c.token && c.token->system};  // named: GCC 12 and co_await temporaries
  std::string project_id = c.project->id;
  std::string body = call.body;
  auto r = co_await s.catalog.import_targets(project_id, std::move(body), *format, who);
  s.metrics.store_call("target_import", std::chrono::duration<double>(steady::now() - t0).count());
  if (!r) {
    co_await s.audit(call.who, "target.import", "target/", errc_name(r.error().value()));
    co_return error_reply(r.error());
  }
  if (r->refused) {
    const auto& t = *r->refused;
    co_await s.audit(call.who, "target.import", "target/", "invalid_argument");
    boost::json::array errors;
    for (const auto& p : t.problems)
      errors.push_back(boost::json::object{{"line", p.line}, {"field", p.field}, {"message", p.message}});
    const auto& first = t.problems.front();
    boost::json::object e{{"code", "invalid_argument"},
                          {"message", catalog::describe_import_problems(t)},
                          {"field", first.line > 0 ? fmt::format("line {}: {}", first.line, first.field) : first.field}};
    co_return json_reply(400, boost::json::object{{"error", std::move(e)}, {"error_count", t.problem_count},
                                                  {"errors", std::move(errors)}});
  }
  co_await s.audit(call.who, "target.import", fmt::format("target/{} targets", r->ids.size()), "ok");
  boost::json::array ids;
  ids.reserve(r->ids.size());
  for (auto& id : r->ids) ids.emplace_back(std::move(id));
  co_return json_reply(201, boost::json::object{{"imported", ids.size()}, {"ids", std::move(ids)}});
}

boost::asio::awaitable<reply> get_catalog_object(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string kind(call.match.route->object_kind);
  auto r = co_await s.catalog.get(kind, call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> delete_catalog_object(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string kind(call.match.route->object_kind);
  auto r = co_await s.catalog.remove(kind, call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "delete", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> add_certificate_version(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.add_certificate_version(call.who.project->id, call.match.id, call.body, actor);
  co_return co_await catalog_answer(s, call, "version", 201, std::move(r), t0);
}

boost::asio::awaitable<reply> issue_acme_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.issue_certificate(call.who.project->id, call.body, actor);
  co_return co_await catalog_answer(s, call, "issue", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> enroll_msca_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.enroll_certificate(call.who.project->id, call.body, actor);
  co_return co_await catalog_answer(s, call, "enroll", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> get_msca_templates(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto refresh = parse_refresh_query(call.query);
  if (!refresh) co_return error_reply(refresh.error());
  auto r = co_await s.catalog.msca_templates(call.who.project->id, call.match.id, *refresh);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> approve_acme_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.approve_certificate(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "approve", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> reject_acme_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.reject_certificate(call.who.project->id, call.match.id, call.body, actor);
  co_return co_await catalog_answer(s, call, "reject", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> renew_acme_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.renew_certificate(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "renew", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> renew_acme_certificates(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.renew_certificates(call.who.project->id, call.body, actor);
  co_return co_await catalog_answer(s, call, "bulk_renew", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> revoke_acme_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.revoke_certificate(call.who.project->id, call.match.id, call.body, actor);
  co_return co_await catalog_answer(s, call, "revoke", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> check_domain(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.check_domain(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "check", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> run_discovery_source(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = call.who.token ? "token:" + call.who.token->id : "anonymous";
  auto r = co_await s.catalog.run_discovery(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "run", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> list_discovered_certificates(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto q = parse_discovered_query(call.query);
  if (!q) co_return error_reply(q.error());
  auto r = co_await s.catalog.list_discovered(call.who.project->id, q->source, q->finding, q->page, q->page_size);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> import_discovered_certificate(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const auto& c = call.who;
  service::requester who{c.token ? "token:" + c.token->id : "anonymous", c.token && c.token->system};
  auto r = co_await s.catalog.import_discovered(c.project->id, call.match.id, call.body, who);
  co_return co_await catalog_answer(s, call, "import", 201, std::move(r), t0);
}

boost::asio::awaitable<reply> scan_target_host_key(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.scan_host_key(call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

// A test message, sent now: 200 with what happened, delivered or not (a refusal by the channel's
// server is the answer the admin asked for, not an API error).
boost::asio::awaitable<reply> test_notification_channel(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.test_channel(call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "test", 200, std::move(r), t0);
}

}  // namespace certfleet::api
