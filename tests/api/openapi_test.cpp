// The OpenAPI document (GET /api/v1/openapi.json) is generated from the route table: every route
// of the router is in it with its method, every body a row names has a schema, every $ref
// resolves, and it states the time convention. The npm validator's test (api_openapi_validates)
// checks it against the OpenAPI 3.1 schema.
#include "certfleet/api/openapi.hpp"
#include "certfleet/api/requests.hpp"
#include "certfleet/api/router.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

using namespace certfleet::api;
using namespace std::chrono_literals;

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

void collect_refs(const boost::json::value& v, std::set<std::string>& out) {
  if (v.is_object()) {
    for (const auto& [k, x] : v.as_object()) {
      if (k == "$ref" && x.is_string()) out.insert(std::string(x.as_string()));
      collect_refs(x, out);
    }
  } else if (v.is_array()) {
    for (const auto& x : v.as_array()) collect_refs(x, out);
  }
}

// Every route of the table, as the document has it; the count of operations equals the rows.
void expect_every_route(const boost::json::value& doc) {
  const auto& paths = doc.at("paths").as_object();
  std::size_t operations = 0;
  for (const auto& [path, item] : paths)
    for (const auto& [method, op] : item.as_object())
      if (method != "parameters") ++operations;
  EXPECT_EQ(operations, all_routes().size());
  for (const auto& r : all_routes()) {
    const auto* item = paths.if_contains(r.pattern);
    ASSERT_NE(item, nullptr) << "missing path " << r.pattern;
    const auto* op = item->as_object().if_contains(lower(r.method));
    ASSERT_NE(op, nullptr) << "missing " << r.method << " " << r.pattern;
    EXPECT_EQ(std::string_view(op->at("summary").as_string()), r.summary);
    EXPECT_EQ(op->as_object().contains("requestBody"), !r.body.empty()) << r.method << " " << r.pattern;
    // Public routes say so; the others take the document's bearer/cookie security.
    EXPECT_EQ(op->as_object().contains("security"), r.need == access::none) << r.pattern;
  }
}

}  // namespace

TEST(api_openapi, generated_from_the_route_table) {
  auto doc = boost::json::parse(openapi_document("test"));
  EXPECT_EQ(doc.at("openapi"), "3.1.0");
  EXPECT_EQ(doc.at("info").at("version"), "test");
  const std::string description(doc.at("info").at("description").as_string());
  EXPECT_NE(description.find("RFC 3339 UTC string with milliseconds"), std::string::npos);
  expect_every_route(doc);
  EXPECT_EQ(doc.at("components").at("schemas").at("Time").at("format"), "date-time");
}

TEST(api_openapi, every_body_and_ref_resolves) {
  for (const auto& r : all_routes()) {
    if (r.body.empty() || r.body == "settings" || r.body == "project_settings") continue;
    bool found = false;
    for (const auto& b : all_body_schemas()) found = found || b.name == r.body;
    EXPECT_TRUE(found) << r.pattern << " names the body " << r.body;
  }
  // Every schema in the table is used by some route (no dead second copy of a body).
  for (const auto& b : all_body_schemas()) {
    bool used = false;
    for (const auto& r : all_routes()) used = used || r.body == b.name;
    EXPECT_TRUE(used) << b.name;
  }
  auto doc = boost::json::parse(openapi_document("test"));
  std::set<std::string> refs;
  collect_refs(doc, refs);
  const auto& schemas = doc.at("components").at("schemas").as_object();
  const auto& responses = doc.at("components").at("responses").as_object();
  for (const auto& ref : refs) {
    if (ref.rfind("#/components/responses/", 0) == 0) {
      EXPECT_TRUE(responses.contains(ref.substr(std::string("#/components/responses/").size()))) << ref;
      continue;
    }
    ASSERT_EQ(ref.rfind("#/components/schemas/", 0), 0u) << ref;
    EXPECT_TRUE(schemas.contains(ref.substr(std::string("#/components/schemas/").size()))) << ref;
  }
  // The settings body is the settings table's system settings.
  const auto& settings = schemas.at("settings_body").at("properties").as_object();
  EXPECT_TRUE(settings.contains("distribution_fanout_threshold"));
  EXPECT_EQ(settings.at("distribution_fanout_threshold").at("maximum"), 500);
  EXPECT_FALSE(settings.contains("listen"));  // a process setting
}

TEST(api_openapi, served_to_tokens_and_docs_link_it) {
  testbed::temp_dir dir("certfleet-openapi");
  auto data = dir.file("var");
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) << line;
  testbed::http_client c("127.0.0.1", static_cast<unsigned short>(std::stoi(m[1])));
  std::ifstream tf(data + "/owner-token");
  std::string token;
  std::getline(tf, token);
  EXPECT_EQ(c.get("/api/v1/openapi.json").status, 401);
  auto r = c.get("/api/v1/openapi.json", token);
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = r.json();
  ASSERT_TRUE(doc.is_object()) << r.body.substr(0, 200);
  EXPECT_EQ(doc.at("info").at("version"), CERTFLEET_VERSION_FOR_TESTS);
  expect_every_route(doc);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0);

  std::ifstream api_md(std::string(CERTFLEET_SOURCE_DIR) + "/docs/api.md");
  std::stringstream ss;
  ss << api_md.rdbuf();
  EXPECT_NE(ss.str().find("/api/v1/openapi.json"), std::string::npos);
}

// Each operation: its row's id as operationId (unique), a success answer with a schema (the
// WebSocket aside), and at least one 4xx; routes that read query parameters list them.
TEST(api_openapi, operations_have_ids_answers_and_errors) {
  auto doc = boost::json::parse(openapi_document("test"));
  std::set<std::string> ids;
  for (const auto& r : all_routes()) {
    const auto& op = doc.at("paths").at(r.pattern).at(lower(r.method)).as_object();
    const std::string id(op.at("operationId").as_string());
    EXPECT_EQ(id, r.name);
    EXPECT_TRUE(ids.insert(id).second) << id;
    bool success = false, client_error = false;
    for (const auto& [status, answer] : op.at("responses").as_object()) {
      if (status.size() == 3 && (status[0] == '2' || status == "101")) success = true;
      if (status.size() == 3 && status[0] == '4') client_error = true;
    }
    EXPECT_TRUE(success) << r.pattern;
    EXPECT_TRUE(client_error) << r.pattern;
    const auto params = route_query_params(r.id);
    const auto* listed = op.if_contains("parameters");
    EXPECT_EQ(listed ? listed->as_array().size() : 0u, params.size()) << r.pattern;
  }
  // The error codes are the errc table's names and the session's two.
  const auto& codes = doc.at("components").at("schemas").at("Error").at("properties").at("error").at("properties")
                          .at("code").at("enum").as_array();
  std::set<std::string> names;
  for (const auto& c : codes) names.insert(std::string(c.as_string()));
  EXPECT_TRUE(names.contains("invalid_argument"));
  EXPECT_TRUE(names.contains("store_disk_full"));
  EXPECT_TRUE(names.contains("unsupported_media_type"));
  EXPECT_FALSE(names.contains("ok"));
}

// The query parameters the document lists are the ones each route's parser takes: every listed
// one is accepted with a value its schema allows, and an unknown one is refused with exactly the
// listed names (one table feeds both).
TEST(api_openapi, query_parameters_are_what_the_parsers_take) {
  auto parse_for = [](route_id id, const query_params& q) -> std::optional<certfleet::error> {
    auto err = [](auto r) -> std::optional<certfleet::error> {
      if (r) return std::nullopt;
      return r.error();
    };
    switch (id) {
      case route_id::jobs_list: return err(parse_job_list_query(q));
      case route_id::job_logs: return err(parse_log_query(q, false));
      case route_id::job_log_stream: return err(parse_log_query(q, true));
      case route_id::distribution_results: return err(parse_results_query(q));
      case route_id::discovered_certificates_list: return err(parse_discovered_query(q));
      case route_id::msca_ca_templates: return err(parse_refresh_query(q));
      default: return err(parse_page_query(q));
    }
  };
  auto example = [](std::string_view name) -> std::string {
    if (name == "status") return "failed";
    if (name == "cursor") return "0123456789abcdef01234567";
    if (name == "type" || name == "error_class" || name == "source" || name == "finding") return "x";
    return "1";
  };
  std::size_t routes_with_params = 0;
  for (const auto& r : all_routes()) {
    const auto params = route_query_params(r.id);
    if (params.empty()) continue;
    ++routes_with_params;
    std::string names;
    for (const auto& p : params) {
      EXPECT_FALSE(parse_for(r.id, {{std::string(p.name), example(p.name)}})) << r.pattern << " ?" << p.name;
      names += (names.empty() ? "" : ", ") + std::string(p.name);
    }
    // An integer's bounds in the document are the parser's: the bound is taken, one past it refused.
    for (const auto& p : params) {
      const auto schema = boost::json::parse(p.schema).as_object();
      const std::string name(p.name);
      if (const auto* max = schema.if_contains("maximum")) {
        EXPECT_FALSE(parse_for(r.id, {{name, std::to_string(max->to_number<std::int64_t>())}})) << r.pattern << " " << name;
        EXPECT_TRUE(parse_for(r.id, {{name, std::to_string(max->to_number<std::int64_t>() + 1)}})) << r.pattern << " " << name;
      }
      if (const auto* min = schema.if_contains("minimum")) {
        EXPECT_FALSE(parse_for(r.id, {{name, std::to_string(min->to_number<std::int64_t>())}})) << r.pattern << " " << name;
        EXPECT_TRUE(parse_for(r.id, {{name, std::to_string(min->to_number<std::int64_t>() - 1)}})) << r.pattern << " " << name;
      }
    }
    auto refused = parse_for(r.id, {{"no_such_parameter", "1"}});
    ASSERT_TRUE(refused) << r.pattern;
    EXPECT_EQ(refused->field, "no_such_parameter");
    EXPECT_NE(refused->message.find("this route takes " + names), std::string::npos) << refused->message;
  }
  EXPECT_EQ(routes_with_params, 18u);
}
