// `certfleet token …` and `certfleet project …` in remote mode: the token and project routes of
// the API (docs/api.md, Tokens and Projects). Answers print as the API gives them (one JSON line
// for a change, a table or --json for a list).
#include "remote_admin.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "output.hpp"
#include "table.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <iostream>

namespace certfleet::app {

namespace {

namespace json = boost::json;

// text_of, with a true flag as "yes" and a false one as nothing (the SYSTEM column).
std::string text(const json::object& o, std::string_view k) {
  if (const auto* v = o.if_contains(k); v && v->is_bool()) return v->as_bool() ? "yes" : "";
  return text_of(o, k);
}
std::string when(const json::object& o, std::string_view k, std::string_view none) {
  const auto* v = o.if_contains(k);
  return v && !v->is_null() ? time_cell(v) : std::string(none);
}
const json::array* items_of(const json::value& v) {
  if (!v.is_object()) return nullptr;
  const auto* items = v.as_object().if_contains("items");
  return items && items->is_array() ? &items->as_array() : nullptr;
}

}  // namespace

void print_token_table(const json::array& items, std::string_view project, bool wide) {
  text_table t{{"ID", "PROJECT", "ROLE", "SYSTEM", "NAME", "STATUS", "CREATED", "EXPIRES", "LAST USED"},
               {},
               {24, 63, 8, 6, 40, 7, 19, 19, 19}};
  if (wide) {
    t.header.push_back("CREATED BY");
    t.max_width.push_back(40);
  }
  for (const auto& v : items) {
    if (!v.is_object()) continue;
    const auto& o = v.as_object();
    const auto p = text(o, "project");
    t.rows.push_back({text(o, "id"), p.empty() ? std::string(project) : p, text(o, "role"), text(o, "system"),
                      text(o, "name"), text(o, "status"), when(o, "created_at", "-"), when(o, "expires_at", "never"),
                      when(o, "last_used_at", "")});
    if (wide) t.rows.back().push_back(text(o, "created_by"));
  }
  std::cout << render(t);
}

int remote_token(const remote_client& c, const std::string& cmd, const remote_token_args& a) {
  auto path = project_path(a.project, "/tokens");
  if (!path) return fail(path.error());
  if (cmd == "create") {
    if (a.system)
      return fail(make_error(errc::invalid_argument,
                             "system tokens are made on the store's host (certfleet token create --system without "
                             "--server)",
                             "system"));
    json::object body{{"name", a.name.empty() ? std::string("cli") : a.name}, {"role", a.role}};
    if (a.ttl_s) body["ttl_s"] = *a.ttl_s;
    auto r = c.call("POST", *path, json::value(std::move(body)));
    if (!r) return fail(r.error());
    if (r->body.is_object()) r->body.as_object()["project"] = a.project;
    print(r->body);  // holds the token's text, once
    return 0;
  }
  if (cmd == "list") {
    if (a.all)
      return fail(make_error(errc::invalid_argument, "--all reads every project's tokens from the store: use --project P",
                             "all"));
    auto r = c.call("GET", *path);
    if (!r) return fail(r.error());
    if (a.json) {
      print(r->body);
      return 0;
    }
    static const json::array none;
    print_token_table(items_of(r->body) ? *items_of(r->body) : none, a.project, a.wide);
    return 0;
  }
  if (cmd == "revoke") {
    auto one = project_path(a.project, "/tokens/" + query_escape(a.id));
    if (!one) return fail(one.error());
    auto r = c.call("DELETE", *one);
    if (!r) return fail(r.error());
    print(r->body);
    return 0;
  }
  return to_int(exit_code::usage);
}

int remote_project(const remote_client& c, const std::string& cmd, const std::string& name, bool json_out) {
  if (cmd == "list") {
    auto r = c.call("GET", "/api/v1/projects");
    if (!r) return fail(r.error());
    if (json_out) {
      print(r->body);
      return 0;
    }
    text_table t{{"NAME", "ID", "CREATED"}, {}, {}};
    if (const auto* items = items_of(r->body))
      for (const auto& v : *items)
        if (v.is_object())
          t.rows.push_back({text(v.as_object(), "name"), text(v.as_object(), "id"), when(v.as_object(), "created_at", "-")});
    std::cout << render(t);
    return 0;
  }
  if (cmd == "create") {
    auto r = c.call("POST", "/api/v1/projects", json::value(json::object{{"name", name}}));
    if (!r) return fail(r.error());
    print(r->body);
    return 0;
  }
  if (cmd == "delete") {
    auto path = project_path(name, "");
    if (!path) return fail(path.error());
    auto r = c.call("DELETE", *path);
    if (!r) return fail(r.error());
    print(r->body);
    return 0;
  }
  return to_int(exit_code::usage);
}

}  // namespace certfleet::app
