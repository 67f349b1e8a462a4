// Request ids and the process log (issue 19): every response carries X-Request-Id (a sane
// client id echoed, anything else replaced by a new one), each request has an access log line
// with its id, and with log_format = json every line the real `certfleet serve` writes to stderr
// is one JSON object with time (RFC 3339 UTC, ms), level and message.
#include "certfleet/api/requests.hpp"
#include "certfleet/core/log.hpp"
#include "certfleet/core/object_id.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <signal.h>

#include <regex>
#include <thread>
#include <map>
#include <sstream>

using namespace std::chrono_literals;

namespace {

unsigned short port_of(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

const std::regex rfc3339_utc_ms(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$)");

}  // namespace

TEST(request_id, client_ids_kept_only_when_sane) {
  using certfleet::api::is_valid_request_id;
  using certfleet::api::request_id_for;
  EXPECT_TRUE(is_valid_request_id("abc-123_X.y"));
  EXPECT_TRUE(is_valid_request_id(std::string(64, 'a')));
  EXPECT_FALSE(is_valid_request_id(std::string(65, 'a')));
  EXPECT_FALSE(is_valid_request_id(""));
  for (std::string_view bad : {"a b", "a\r\nX-Evil: 1", "a\"b", "a/b", "ünï", "a\\b", "a:b"})
    EXPECT_FALSE(is_valid_request_id(bad)) << bad;
  EXPECT_EQ(request_id_for("trace-42"), "trace-42");
  EXPECT_TRUE(certfleet::is_object_id(request_id_for("a b")));
  EXPECT_TRUE(certfleet::is_object_id(request_id_for("")));
  EXPECT_NE(request_id_for(""), request_id_for(""));
}

TEST(json_log, a_line_is_one_object_whatever_the_message) {
  const auto line = certfleet::log::json_line(1'700'000'000'123, "warn", "a \"quoted\"\nsecond line\t\x01",
                                              {.job_id = "66a1f0c2e4b5a6c7d8e9f001", .request_id = "r-1"});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  auto v = boost::json::parse(line).as_object();
  EXPECT_EQ(v.at("time"), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(v.at("level"), "warn");
  EXPECT_EQ(v.at("message"), "a \"quoted\"\nsecond line\t\x01");
  EXPECT_EQ(v.at("job_id"), "66a1f0c2e4b5a6c7d8e9f001");
  EXPECT_EQ(v.at("request_id"), "r-1");
  EXPECT_FALSE(v.contains("route"));  // only the fields a line has
}

TEST(json_log, serve_writes_only_json_lines_and_ids_on_every_response) {
  testbed::temp_dir dir("certfleet-json-log");
  auto data = dir.file("var");
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--set", "log_format=json",
                      "--set", "log_level=debug"},
                     {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  auto port = port_of(line);
  ASSERT_NE(port, 0) << line;

  testbed::http_client c("127.0.0.1", port);
  auto echoed = c.request("GET", "/healthz", {}, {}, {{"X-Request-Id", "ci-run.7_a-b"}});
  EXPECT_EQ(echoed.status, 200);
  EXPECT_EQ(echoed.header("x-request-id"), "ci-run.7_a-b");
  auto generated = c.get("/healthz");
  EXPECT_TRUE(certfleet::is_object_id(generated.header("x-request-id"))) << generated.header("x-request-id");
  auto replaced = c.request("GET", "/healthz", {}, {}, {{"X-Request-Id", std::string(65, 'x')}});
  EXPECT_TRUE(certfleet::is_object_id(replaced.header("x-request-id"))) << replaced.header("x-request-id");
  auto bad = c.request("GET", "/healthz", {}, {}, {{"X-Request-Id", "has space"}});
  EXPECT_TRUE(certfleet::is_object_id(bad.header("x-request-id")));
  // Errors carry it too: an unknown route, a refused token.
  auto missing = c.request("GET", "/api/v1/nothing-here", {}, {}, {{"X-Request-Id", "nf-1"}});
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.header("x-request-id"), "nf-1");
  auto refused = c.request("GET", "/api/v1/projects/default/jobs", {}, "cf_not_a_token", {{"X-Request-Id", "auth-1"}});
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.header("x-request-id"), "auth-1");
  // A malformed request, answered before any route: a new id.
  auto raw = c.raw("GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_NE(raw.find("400"), std::string::npos) << raw;
  EXPECT_NE(raw.find("X-Request-Id: "), std::string::npos) << raw;

  p.signal(SIGTERM);
  ASSERT_EQ(p.wait(30s), 0) << p.stderr_text();

  const auto lines = lines_of(p.stderr_text());
  ASSERT_FALSE(lines.empty());
  bool access_echoed = false, access_refused = false, shutdown_seen = false;
  for (const auto& l : lines) {
    boost::system::error_code ec;
    auto v = boost::json::parse(l, ec);
    ASSERT_FALSE(ec) << "not JSON: " << l;
    ASSERT_TRUE(v.is_object()) << l;
    const auto& o = v.as_object();
    ASSERT_TRUE(o.contains("time") && o.at("time").is_string()) << l;
    EXPECT_TRUE(std::regex_match(std::string(o.at("time").as_string()), rfc3339_utc_ms)) << l;
    ASSERT_TRUE(o.contains("level") && o.at("level").is_string()) << l;
    ASSERT_TRUE(o.contains("message") && o.at("message").is_string()) << l;
    const std::string message(o.at("message").as_string());
    if (o.contains("request_id") && o.at("request_id") == "ci-run.7_a-b") {
      access_echoed = true;
      EXPECT_EQ(o.at("route"), "/healthz") << l;
      EXPECT_EQ(o.at("level"), "info") << l;
      EXPECT_NE(message.find("GET /healthz 200"), std::string::npos) << l;
    }
    if (o.contains("request_id") && o.at("request_id") == "auth-1") {
      access_refused = true;
      EXPECT_EQ(o.at("route"), "/api/v1/projects/{p}/jobs") << l;
      EXPECT_NE(message.find(" 401 "), std::string::npos) << l;
    }
    if (message.find("shutting down") != std::string::npos) shutdown_seen = true;
  }
  EXPECT_TRUE(access_echoed) << p.stderr_text();
  EXPECT_TRUE(access_refused) << p.stderr_text();
  EXPECT_TRUE(shutdown_seen) << p.stderr_text();
}

// Issue 36: an access line carries method, route, status, bytes, duration_ms, client and
// request_id as members; a job's end is one line with job_id, type and project at a level that
// means something (finished info, a failed attempt warn, dead error).
TEST(json_log, access_members_and_job_lifecycle_lines_one_can_query) {
  testbed::temp_dir dir("certfleet-json-log");
  auto data = dir.file("var");
  ASSERT_EQ(testbed::run_command(testbed::certfleet_command(data, {"store", "init"})).first, 0);
  auto [st, out] = testbed::run_command(testbed::certfleet_command(data, {"token", "create", "--role", "admin", "--name", "ci"}));
  ASSERT_EQ(st, 0) << out;
  const std::string token(boost::json::parse(out).at("token").as_string());
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--set", "log_format=json",
                      "--set", "log_level=debug"},
                     {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  testbed::http_client c("127.0.0.1", port_of(line));
  std::map<std::string, std::string> ids;  // what → job id
  for (auto [what, body] : std::vector<std::pair<std::string, std::string>>{
           {"ok", R"({"type":"noop"})"}, {"dead", R"({"type":"noop","payload":{"fail_times":5,"permanent":true}})"},
           {"retried", R"({"type":"noop","payload":{"fail_times":1}})"}}) {
    auto r = c.post("/api/v1/projects/default/jobs", body, token);
    ASSERT_EQ(r.status, 201) << r.body;
    ids[what] = std::string(boost::json::parse(r.body).at("id").as_string());
  }
  // event → the job's line of that event.
  auto lines_by_event = [&] {
    std::map<std::pair<std::string, std::string>, boost::json::object> seen;  // (job id, event)
    for (const auto& l : lines_of(p.stderr_text())) {
      boost::system::error_code ec;
      auto v = boost::json::parse(l, ec);
      if (ec || !v.is_object() || !v.as_object().contains("job_id") || !v.as_object().contains("event")) continue;
      const auto& o = v.as_object();
      seen[{std::string(o.at("job_id").as_string()), std::string(o.at("event").as_string())}] = o;
    }
    return seen;
  };
  std::map<std::pair<std::string, std::string>, boost::json::object> seen;
  for (int i = 0; i < 300; ++i) {
    seen = lines_by_event();
    if (seen.count({ids["ok"], "finished"}) && seen.count({ids["dead"], "dead"}) && seen.count({ids["retried"], "retried"}))
      break;
    std::this_thread::sleep_for(100ms);
  }
  auto expect_line = [&](const std::string& what, const std::string& event, const std::string& level) {
    auto it = seen.find({ids[what], event});
    ASSERT_NE(it, seen.end()) << what << " " << event << "\n" << p.stderr_text();
    EXPECT_EQ(it->second.at("level").as_string(), level) << boost::json::serialize(it->second);
    EXPECT_EQ(it->second.at("type"), "noop") << boost::json::serialize(it->second);
    EXPECT_TRUE(certfleet::is_object_id(it->second.at("project").as_string())) << boost::json::serialize(it->second);
  };
  expect_line("ok", "enqueued", "debug");
  expect_line("ok", "claimed", "debug");
  expect_line("ok", "finished", "info");
  expect_line("retried", "retried", "warn");
  expect_line("dead", "dead", "error");
  EXPECT_EQ(seen.count({ids["ok"], "dead"}), 0u);

  p.signal(SIGTERM);
  ASSERT_EQ(p.wait(30s), 0) << p.stderr_text();
  int access = 0;
  for (const auto& l : lines_of(p.stderr_text())) {
    auto v = boost::json::parse(l).as_object();
    if (!v.contains("event") || v.at("event") != "access") continue;
    ++access;
    for (const char* member : {"method", "route", "status", "bytes", "duration_ms", "client", "request_id"})
      EXPECT_TRUE(v.contains(member)) << member << " missing: " << l;
    EXPECT_TRUE(v.at("status").is_int64()) << l;
    EXPECT_TRUE(v.at("bytes").is_int64()) << l;
    EXPECT_TRUE(v.at("duration_ms").is_number()) << l;
    if (v.at("method") == "POST") {
      EXPECT_EQ(v.at("route"), "/api/v1/projects/{p}/jobs") << l;
      EXPECT_EQ(v.at("status").as_int64(), 201) << l;
      EXPECT_GT(v.at("bytes").as_int64(), 0) << l;
      EXPECT_EQ(std::string(v.at("client").as_string()).rfind("127.0.0.1", 0), 0u) << l;
    }
  }
  EXPECT_EQ(access, 3) << p.stderr_text();
}

TEST(json_log, text_format_names_the_request_id_and_a_bad_format_is_refused) {
  testbed::temp_dir dir("certfleet-text-log");
  auto data = dir.file("var");
  {
    testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve"));
    auto line = p.wait_for_stdout("serving:", 20s);
    ASSERT_FALSE(line.empty()) << p.stderr_text();
    testbed::http_client c("127.0.0.1", port_of(line));
    EXPECT_EQ(c.request("GET", "/healthz", {}, {}, {{"X-Request-Id", "text-1"}}).status, 200);
    p.signal(SIGTERM);
    ASSERT_EQ(p.wait(30s), 0);
    EXPECT_TRUE(std::regex_search(p.stderr_text(), std::regex(R"(GET /healthz 200 .* request_id=text-1 route=/healthz)")))
        << p.stderr_text();
  }
  auto [st, out] = testbed::run_command({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--set",
                                         "log_format=yaml"});
  EXPECT_EQ(st, 2);
  testbed::process q({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {{"CERTFLEET_LOG_FORMAT", "xml"}},
                     dir.file("serve-bad"));
  EXPECT_EQ(q.wait(20s), 2);
  EXPECT_NE(q.stderr_text().find("log_format"), std::string::npos) << q.stderr_text();
  EXPECT_NE(q.stderr_text().find("text|json"), std::string::npos) << q.stderr_text();
}
