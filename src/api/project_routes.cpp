// Projects: list, create, delete (system-admin routes but the list).
#include "certfleet/api/requests.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>

namespace certfleet::api {

namespace {

// Project changes are audited in the project of the system-admin token that made them (like
// settings): the project itself may not exist before or after.
boost::asio::awaitable<void> audit_project(server_state& s, const caller& c, std::string_view action,
                                           std::string_view name, std::string_view outcome, std::string_view id) {
  caller in_own;
  in_own.token = c.token;
  boost::json::object d;
  d["name"] = name;
  if (!id.empty()) d["id"] = id;
  auto detail = boost::json::serialize(d);
  std::string object = "project/" + std::string(name);
  co_await s.audit(in_own, action, object, outcome, detail);
}

}  // namespace

boost::asio::awaitable<reply> list_projects(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto ps = co_await s.timed("project_list", s.st.projects().list());
  if (!ps) co_return error_reply(ps.error());
  boost::json::array items;
  for (const auto& p : *ps)
    if (c.token->system || p.id == c.token->project_id)
      items.push_back(boost::json::object{{"id", p.id}, {"name", p.name}, {"created_at", format_iso8601(p.created_at)}});
  co_return json_reply(200, boost::json::object{{"items", std::move(items)}});
}

boost::asio::awaitable<reply> create_project(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto name = parse_project_body(call.body);
  if (!name) {
    co_await audit_project(s, c, "project.create", "", errc_name(name.error().value()), "");
    co_return error_reply(name.error());
  }
  auto p = co_await s.timed("project_create", s.st.projects().create(*name, s.clock.now_ms()));
  // Named first: GCC 12 mishandles temporaries built inside a co_await expression.
  const std::string id = p ? p->id : std::string();
  co_await audit_project(s, c, "project.create", *name, p ? "ok" : errc_name(p.error().value()), id);
  if (!p) co_return error_reply(p.error());
  co_return json_reply(201, boost::json::object{{"id", p->id}, {"name", p->name}, {"created_at", format_iso8601(p->created_at)}});
}

boost::asio::awaitable<reply> delete_project(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string name = c.project->name;
  auto p = co_await s.timed("project_delete", s.st.projects().remove(name, s.clock.now_ms()));
  co_await audit_project(s, c, "project.delete", name, p ? "ok" : errc_name(p.error().value()), c.project->id);
  if (!p) co_return error_reply(p.error());
  s.auth.projects.erase(name);
  s.auth.tokens.clear();  // its tokens were revoked
  co_return json_reply(200, boost::json::object{{"id", p->id}, {"name", p->name}, {"deleted", true}});
}

}  // namespace certfleet::api
