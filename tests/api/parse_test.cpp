// The pure parts: route matching, query strings, body parsers, tokens; and docs/api.md covering
// every route of the router.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/router.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/api/ws_frame.hpp"
#include "certfleet/core/errc_table.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

using namespace certfleet;
using namespace certfleet::api;

namespace {

TEST(api_router, matches_routes_and_captures) {
  auto m = match_route("GET", "/api/v1/projects/default/jobs/0123456789abcdef01234567/logs/stream");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->route->id, route_id::job_log_stream);
  EXPECT_EQ(m->project, "default");
  EXPECT_EQ(m->id, "0123456789abcdef01234567");
  m = match_route("POST", "/api/v1/projects/my%20proj/jobs");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->route->id, route_id::jobs_enqueue);
  EXPECT_EQ(m->project, "my proj");
  auto bad = match_route("PATCH", "/api/v1/settings");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::conflict));
  EXPECT_EQ(bad.error().field, "GET, PUT");
  for (const char* p : {"", "/", "//", "/api/v1/projects/", "/healthz/", "/api/v1/projects/a/jobs/b/c/d/e", "healthz",
                        "/api/v1/projects/%zz/jobs"})
    EXPECT_FALSE(match_route("GET", p)) << p;
  EXPECT_FALSE(match_route("GET", "/api/v1/projects/%00/jobs"));
}

TEST(api_router, every_route_matches_its_own_pattern) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const auto& r : all_routes()) {
    EXPECT_TRUE(seen.emplace(r.method, r.pattern).second) << "duplicate route " << r.pattern;
    std::string path(r.pattern);
    for (auto [from, to] : {std::pair<std::string, std::string>{"{p}", "default"}, {"{id}", "0123456789abcdef01234567"}})
      if (auto pos = path.find(from); pos != std::string::npos) path.replace(pos, from.size(), to);
    auto m = match_route(r.method, path);
    ASSERT_TRUE(m) << r.pattern;
    EXPECT_EQ(m->route->id, r.id) << r.pattern;
  }
}

// The row names its object kind: the catalog handlers serve every kind by it.
TEST(api_router, catalog_rows_name_their_object_kind) {
  const std::pair<std::string_view, std::string_view> by_collection[] = {
      {"/certificates", "certificate"},           {"/credentials", "credential"},
      {"/targets", "target"},                     {"/notification-channels", "notification_channel"},
      {"/notification-rules", "notification_rule"}, {"/distributions", "distribution"},
      {"/acme-accounts", "acme_account"},         {"/dns-providers", "dns_provider"},
      {"/domains", "domain"},                     {"/discovery-sources", "discovery_source"},
      {"/discovered-certificates", "discovered_certificate"}, {"/msca-cas", "msca_ca"}};
  std::size_t i = 0;
  for (const auto& r : all_routes()) {
    EXPECT_EQ(static_cast<std::size_t>(r.id), i++) << "rows are in route_id order: " << r.pattern;
    std::string_view expect;
    for (auto [collection, kind] : by_collection)
      if (r.pattern.find(collection) != std::string_view::npos) expect = kind;
    EXPECT_EQ(r.object_kind, expect) << r.method << " " << r.pattern;
  }
  EXPECT_EQ(i, route_count);
}

TEST(api_query, parses_decodes_and_refuses) {
  auto q = parse_query("a=1&b=x+y%21&c=&&d");
  ASSERT_TRUE(q);
  ASSERT_EQ(q->size(), 4u);
  EXPECT_EQ((*q)[1], (std::pair<std::string, std::string>{"b", "x y!"}));
  EXPECT_EQ((*q)[2].second, "");
  EXPECT_EQ((*q)[3].first, "d");
  EXPECT_FALSE(parse_query("a=1&a=2"));
  EXPECT_FALSE(parse_query("=1"));
  EXPECT_FALSE(parse_query("a=%4"));
  EXPECT_FALSE(parse_query("a=%00"));
  EXPECT_FALSE(parse_query(std::string(5000, 'a')));
  auto split = split_target("/x?y=1");
  ASSERT_TRUE(split);
  EXPECT_EQ(split->path, "/x");
  EXPECT_EQ(split->query, "y=1");
  EXPECT_FALSE(split_target("http://host/x"));
}

TEST(api_requests, job_list_query) {
  auto q = parse_job_list_query(*parse_query("status=failed&type=noop&page=2&page_size=200"));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, store::job_status::failed);
  EXPECT_EQ(q->page, 2);
  EXPECT_EQ(q->page_size, 200);
  EXPECT_EQ(parse_job_list_query({})->page_size, 0);  // the settings default applies
  for (const char* bad : {"page_size=201", "page_size=0", "page=-1", "status=running", "page=1x", "x=1"}) {
    auto r = parse_job_list_query(*parse_query(bad));
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_FALSE(r.error().field.empty()) << bad;
    }
  }
}

TEST(api_requests, enqueue_body) {
  auto b = parse_enqueue_body(R"({"type":"noop","payload":{"a":[1,2]},"idempotency_key":"k","run_at":"1970-01-01T00:00:01.5+00:00"})");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->payload, R"({"a":[1,2]})");
  EXPECT_EQ(b->run_at, 1500);
  EXPECT_EQ(parse_iso8601("2026-11-29T10:05:18+01:00"), parse_iso8601("2026-11-29T09:05:18Z"));
  EXPECT_FALSE(parse_iso8601("2026-02-30T00:00:00Z"));
  EXPECT_FALSE(parse_iso8601("2026-11-29 09:05:18Z"));
  EXPECT_FALSE(parse_enqueue_body(R"({"type":"noop","run_at":1e3})"));
  EXPECT_FALSE(parse_enqueue_body(R"({"type":"noop","extra":1})"));
  EXPECT_FALSE(parse_enqueue_body(R"({"type":"noop"} trailing)"));
}

TEST(api_requests, settings_body) {
  auto s = parse_settings_body(R"({"jobs_page_size_default":"30","egress_allow_list":"a,b"})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->at("jobs_page_size_default"), "30");
  EXPECT_FALSE(parse_settings_body(R"({"mode":"api"})"));
  EXPECT_FALSE(parse_settings_body(R"({"jobs_page_size_default":{"a":1}})"));
  EXPECT_FALSE(parse_settings_body(std::string(20, '[') + std::string(20, ']')));
}

// The hub's frames go to subscribers byte for byte: the length encoding at each boundary.
TEST(api_requests, transfer_encoding) {
  EXPECT_FALSE(transfer_encoding_problem(11, "chunked"));
  EXPECT_FALSE(transfer_encoding_problem(11, " Chunked\t"));
  for (const char* te : {"gzip", "identity", "chunked, identity", "gzip, chunked", "chunked, chunked", "", "chunked,"})
    EXPECT_TRUE(transfer_encoding_problem(11, te)) << te;
  auto p = transfer_encoding_problem(10, "chunked");
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("HTTP/1.0"), std::string::npos) << *p;
  p = transfer_encoding_problem(11, "gzip\r\nX-Evil: 1");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->find('\r'), std::string::npos) << *p;
}

TEST(api_ws_frame, header_at_each_length_boundary) {
  auto header = [](std::size_t n) {
    auto f = ws_text_frame(std::string(n, 'x'));
    EXPECT_EQ(f.size() - n, n < 126 ? 2u : n <= 0xffff ? 4u : 10u) << n;
    EXPECT_EQ(f.substr(f.size() - n), std::string(n, 'x'));
    std::vector<unsigned> out;
    for (std::size_t i = 0; i < f.size() - n; ++i) out.push_back(static_cast<unsigned char>(f[i]));
    return out;
  };
  auto bytes = [](std::initializer_list<unsigned> b) { return std::vector<unsigned>(b); };
  EXPECT_EQ(header(0), bytes({0x81, 0}));
  EXPECT_EQ(header(125), bytes({0x81, 125}));
  EXPECT_EQ(header(126), bytes({0x81, 126, 0, 126}));
  EXPECT_EQ(header(65535), bytes({0x81, 126, 0xff, 0xff}));
  EXPECT_EQ(header(65536), bytes({0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(api_tokens, shape_and_hash) {
  auto a = generate_token_text(), b = generate_token_text();
  EXPECT_NE(a, b);
  EXPECT_TRUE(looks_like_token(a));
  EXPECT_EQ(a.size(), 46u);
  EXPECT_FALSE(looks_like_token("cf_short"));
  EXPECT_FALSE(looks_like_token(a.substr(0, 45) + "!"));
  EXPECT_EQ(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hash_token(a).size(), 64u);
}

// docs/api.md must describe every route the router has: "METHOD /path" as a heading or line.
TEST(api_docs, api_md_describes_every_route) {
  std::ifstream in(std::string(CERTFLEET_SOURCE_DIR) + "/docs/api.md");
  ASSERT_TRUE(in) << "docs/api.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  auto doc = ss.str();
  for (const auto& r : all_routes()) {
    auto needle = std::string(r.method) + " " + std::string(r.pattern);
    EXPECT_NE(doc.find(needle), std::string::npos) << "docs/api.md does not describe " << needle;
  }
}

// docs/api.md names every error code a body can carry and has a row for every status the errc
// table answers with.
TEST(api_docs, api_md_lists_every_error_code_and_its_status) {
  std::ifstream in(std::string(CERTFLEET_SOURCE_DIR) + "/docs/api.md");
  ASSERT_TRUE(in) << "docs/api.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = ss.str();
  for (const auto& row : errc_table) {
    if (row.code == errc::ok) continue;  // never an error body
    const auto name = "`" + std::string(row.name) + "`";
    EXPECT_NE(doc.find(name), std::string::npos) << "docs/api.md's error codes lack " << name;
    const auto status = "| " + std::to_string(row.http_status) + " |";
    EXPECT_NE(doc.find(status), std::string::npos) << "docs/api.md's status table lacks " << row.http_status << " ("
                                                   << row.name << ")";
  }
}

}  // namespace
