// Catalog objects and system settings over the API (docs/api.md: Certificates, Targets,
// Credentials, Settings). Bodies are the API's own: `create --from-file F` sends F as it is
// (`-` reads stdin), so what docs/api.md shows is what the CLI takes.
#include "remote_catalog.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "output.hpp"
#include "table.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace certfleet::app {

namespace {

namespace json = boost::json;

// The columns a kind's list shows after ID and NAME.
struct kind_columns {
  std::string_view kind;
  std::vector<std::string_view> members;
  std::vector<std::string> headers;
};
const kind_columns columns[] = {
    {"certificates", {"source", "status", "version", "not_after"}, {"SOURCE", "STATUS", "VERSION", "NOT AFTER"}},
    {"targets", {"module"}, {"MODULE"}},
    {"credentials", {"kind", "key_type", "public_key_fingerprint"}, {"KIND", "KEY TYPE", "FINGERPRINT"}},
};

int answer(const result<remote_answer>& r) {
  if (!r) return fail(r.error());
  print(r->body);
  return 0;
}

}  // namespace

int remote_catalog(const remote_client& c, const std::string& kind, const std::string& cmd, const catalog_args& a) {
  auto base = project_path(a.project, "/" + kind);
  if (!base) return fail(base.error());
  const std::string one = *base + "/" + query_escape(a.id);
  if (cmd == "list") {
    auto r = c.call("GET", *base + "?page_size=200");
    if (!r) return fail(r.error());
    if (a.json) {
      print(r->body);
      return 0;
    }
    const kind_columns* k = nullptr;
    for (const auto& col : columns)
      if (col.kind == kind) k = &col;
    text_table t{{"ID", "NAME"}, {}, {24, 60}};
    for (const auto& h : k->headers) t.header.push_back(h);
    t.header.push_back("CREATED");
    const auto* items = r->body.is_object() ? r->body.as_object().if_contains("items") : nullptr;
    if (items && items->is_array())
      for (const auto& v : items->as_array()) {
        if (!v.is_object()) continue;
        const auto& o = v.as_object();
        std::vector<std::string> row{text_of(o, "id"), text_of(o, "name")};
        for (auto m : k->members) row.push_back(m == "not_after" ? time_cell(o.if_contains(m)) : text_of(o, m));
        row.push_back(time_cell(o.if_contains("created_at")));
        t.rows.push_back(std::move(row));
      }
    std::cout << render(t);
    if (const auto* total = r->body.as_object().if_contains("total"); total && total->is_int64() && total->as_int64() > 200)
      std::cout << fmt::format("the first 200 of {} (-o json for the page; the API pages with ?page=)\n", total->as_int64());
    return 0;
  }
  if (cmd == "import") return import_targets(&c, a);
  if (cmd == "show") return answer(c.call("GET", one));
  if (cmd == "delete") return answer(c.call("DELETE", one));
  if (cmd == "create") {
    auto text_body = read_input(a.from_file, "from_file");
    if (!text_body) return fail(text_body.error());
    boost::system::error_code ec;
    auto body = json::parse(*text_body, ec);
    if (ec || !body.is_object())
      return fail(make_error(errc::invalid_argument,
                             fmt::format("--from-file {} must hold one JSON object: the API's request body "
                                         "(docs/api.md)",
                                         a.from_file),
                             "from_file"));
    return answer(c.call("POST", *base, body));
  }
  // Certificates only, below.
  if (cmd == "upload") {
    json::object body{{"name", a.name}};
    for (auto [flag, member, path] : {std::tuple{"--cert", "cert_pem", a.cert_file}, std::tuple{"--key", "key_pem", a.key_file},
                                      std::tuple{"--chain", "chain_pem", a.chain_file}}) {
      if (path.empty()) continue;
      auto pem = read_input(path, std::string_view(flag).substr(2));
      if (!pem) return fail(pem.error());
      body[member] = *pem;
    }
    // A new version of an existing certificate, or a new certificate.
    if (!a.id.empty()) {
      body.erase("name");
      return answer(c.call("POST", one + "/versions", json::value(std::move(body))));
    }
    return answer(c.call("POST", *base, json::value(std::move(body))));
  }
  if (cmd == "issue") {
    json::array domains;
    for (const auto& d : a.domains) domains.emplace_back(d);
    json::object body{{"name", a.name}, {"domains", std::move(domains)}, {"acme_account_id", a.acme_account},
                      {"dns_provider_id", a.dns_provider}};
    if (!a.key_type.empty()) body["key_type"] = a.key_type;
    if (!a.profile.empty()) body["profile"] = a.profile;
    return answer(c.call("POST", *base + "/issue", json::value(std::move(body))));
  }
  if (cmd == "renew") return answer(c.call("POST", one + "/renew", json::value(json::object{})));
  // Issuance approval (docs/approval.md): another admin than the requester decides.
  if (cmd == "approve") return answer(c.call("POST", one + "/approve", json::value(json::object{})));
  if (cmd == "reject") return answer(c.call("POST", one + "/reject", json::value(json::object{{"reason", a.reason}})));
  if (cmd == "revoke") {
    json::object body;
    if (!a.reason.empty()) body["reason"] = a.reason;
    return answer(c.call("POST", one + "/revoke", json::value(std::move(body))));
  }
  return to_int(exit_code::usage);
}

int remote_settings(const remote_client& c, const std::string& cmd, const catalog_args& a) {
  // --project P: that project's settings (docs/approval.md); without it the system-wide ones.
  std::string path = "/api/v1/settings";
  if (a.settings_project) {
    auto p = project_path(a.project, "/settings");
    if (!p) return fail(p.error());
    path = *p;
  }
  if (cmd == "get") {
    auto r = c.call("GET", path);
    if (!r) return fail(r.error());
    if (!r->body.is_object()) return fail(make_error(errc::store_busy, "the settings answer is not an object", "server"));
    const auto& o = r->body.as_object();
    if (!a.name.empty()) {
      const auto* v = o.if_contains(a.name);
      if (!v)
        return fail(make_error(errc::not_found,
                               fmt::format("no {} setting {}", a.settings_project ? "project" : "system", a.name), "name"));
      std::cout << (v->is_string() ? std::string(v->as_string()) : json::serialize(*v)) << "\n";
      return 0;
    }
    if (a.json) {
      print(r->body);
      return 0;
    }
    text_table t{{"SETTING", "VALUE"}, {}, {40, 200}};
    for (const auto& kv : o)
      t.rows.push_back({std::string(kv.key()), kv.value().is_string() ? std::string(kv.value().as_string())
                                                                      : json::serialize(kv.value())});
    std::cout << render(t);
    return 0;
  }
  if (cmd == "set") {
    // NAME=VALUE…: one PUT, all of it or none (the API checks each against the settings table).
    json::object body;
    for (const auto& kv : a.assignments) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail(make_error(errc::invalid_argument, fmt::format("{}: expected NAME=VALUE", kv), "setting"));
      body[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return answer(c.call("PUT", path, json::value(std::move(body))));
  }
  return to_int(exit_code::usage);
}

}  // namespace certfleet::app
