// The authorization matrix: every route × viewer/operator/admin/owner × another project's owner ×
// a system admin × no token, each cell's status asserted. A route missing from the table fails.
#include "api_fixture.hpp"
#include "certfleet/api/router.hpp"

#include <set>

using namespace api_test;

namespace {

class api_authz : public api_fixture {};

enum col { none, viewer, operator_, admin, owner, foreign, system_admin, n_cols };
const char* col_names[] = {"no token", "viewer", "operator", "admin", "owner", "foreign owner", "system admin"};
const char* col_tokens[] = {"", "viewer", "operator", "admin", "owner", "foreign", "system"};

struct row {
  api::route_id id;
  const char* method;
  // Builds the request target (fresh objects per cell, so a success never depends on an earlier cell).
  std::function<std::string(api_authz&)> target;
  std::string body;
  std::array<int, n_cols> expect;
};

TEST_F(api_authz, every_route_every_role) {
  start();
  const std::string p = "/api/v1/projects/default";
  auto pending_job = [](api_authz& t) { return t.job_path(t.enqueue()); };
  const std::vector<row> rows = {
      {api::route_id::healthz, "GET", [](auto&) { return "/healthz"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::readyz, "GET", [](auto&) { return "/readyz"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::metrics, "GET", [](auto&) { return "/metrics"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::projects, "GET", [](auto&) { return "/api/v1/projects"; }, "", {401, 200, 200, 200, 200, 200, 200}},
      {api::route_id::jobs_list, "GET", [&](auto&) { return p + "/jobs"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::jobs_enqueue, "POST", [&](auto&) { return p + "/jobs"; }, R"({"type":"noop"})",
       {401, 403, 403, 201, 201, 404, 201}},
      {api::route_id::job_get, "GET", pending_job, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::job_retry, "POST", [](api_authz& t) { return t.job_path(t.make_dead()) + "/retry"; }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::job_cancel, "POST", [=](api_authz& t) { return pending_job(t) + "/cancel"; }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::job_logs, "GET", [=](api_authz& t) { return pending_job(t) + "/logs"; }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::job_log_stream, "WS", [=](api_authz& t) { return pending_job(t) + "/logs/stream"; }, "",
       {401, 101, 101, 101, 101, 404, 101}},
      {api::route_id::audit, "GET", [&](auto&) { return p + "/audit"; }, "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::settings_get, "GET", [](auto&) { return "/api/v1/settings"; }, "", {401, 403, 403, 403, 403, 403, 200}},
      {api::route_id::settings_put, "PUT", [](auto&) { return "/api/v1/settings"; }, R"({"jobs_page_size_default":30})",
       {401, 403, 403, 403, 403, 403, 200}},
  };

  std::set<api::route_id> covered;
  for (const auto& r : rows) covered.insert(r.id);
  for (const auto& r : api::all_routes())
    EXPECT_TRUE(covered.contains(r.id)) << "route " << r.method << " " << r.pattern << " has no authorization row";

  auto c = client();
  for (const auto& r : rows) {
    for (int col = 0; col < n_cols; ++col) {
      auto target = r.target(*this);
      std::string token = col_tokens[col][0] ? tok[col_tokens[col]] : std::string();
      int status = 0;
      std::string body;
      if (std::string_view(r.method) == "WS") {
        testbed::ws_client ws("127.0.0.1", port);
        status = ws.connect(target, token);
        body = ws.rejection();
        ws.close();
      } else {
        auto res = c.request(r.method, target, r.body, token);
        status = res.status;
        body = res.body;
      }
      EXPECT_EQ(status, r.expect[col]) << r.method << " " << target << " as " << col_names[col] << ": " << body;
    }
  }
}

// A project token never learns whether another project's object exists: the same 404 for a real
// foreign job id as for a made-up one, on every job route.
TEST_F(api_authz, foreign_objects_are_indistinguishable_from_missing_ones) {
  start();
  auto c = client();
  auto foreign_job = enqueue("{}", 0, other_id);
  for (const char* suffix : {"", "/logs", "/retry", "/cancel"}) {
    bool post = std::string_view(suffix) == "/retry" || std::string_view(suffix) == "/cancel";
    auto real = c.request(post ? "POST" : "GET", job_path(foreign_job) + suffix, "", tok["owner"]);
    auto made_up = c.request(post ? "POST" : "GET", job_path("0123456789abcdef01234567") + suffix, "", tok["owner"]);
    EXPECT_EQ(real.status, 404) << suffix;
    EXPECT_EQ(made_up.status, 404) << suffix;
    EXPECT_EQ(error_code_of(real), error_code_of(made_up)) << suffix;
  }
  // And the foreign job is untouched.
  auto j = run_sync(st->jobs().get(other_id, foreign_job));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, store::job_status::pending);
}

}  // namespace
