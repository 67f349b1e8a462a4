#include "certfleet/api/router.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::api {

namespace {
using A = access;
using R = route_id;

// The one route table: the server dispatches on it (src/api/dispatch.cpp binds each row's handler
// by its id) and docs/api.md must describe every row.
constexpr std::array<route_def, route_count> table{{
    {R::healthz, "GET", "/healthz", A::none, false, false, false, {}},
    {R::readyz, "GET", "/readyz", A::none, false, false, false, {}},
    {R::metrics, "GET", "/metrics", A::none, false, false, false, {}},
    {R::projects, "GET", "/api/v1/projects", A::any_token, true, false, false, {}},
    {R::project_create, "POST", "/api/v1/projects", A::system_admin, true, true, false, {}},
    {R::project_delete, "DELETE", "/api/v1/projects/{p}", A::system_admin, true, true, false, {}},
    {R::jobs_list, "GET", "/api/v1/projects/{p}/jobs", A::viewer, true, false, false, {}},
    {R::jobs_enqueue, "POST", "/api/v1/projects/{p}/jobs", A::admin, true, true, false, {}},
    {R::job_get, "GET", "/api/v1/projects/{p}/jobs/{id}", A::viewer, true, false, false, {}},
    {R::job_retry, "POST", "/api/v1/projects/{p}/jobs/{id}/retry", A::admin, true, true, false, {}},
    {R::job_cancel, "POST", "/api/v1/projects/{p}/jobs/{id}/cancel", A::admin, true, true, false, {}},
    {R::job_logs, "GET", "/api/v1/projects/{p}/jobs/{id}/logs", A::viewer, true, false, false, {}},
    {R::job_log_stream, "GET", "/api/v1/projects/{p}/jobs/{id}/logs/stream", A::viewer, true, false, true, {}},
    {R::audit, "GET", "/api/v1/projects/{p}/audit", A::admin, true, false, false, {}},
    {R::settings_get, "GET", "/api/v1/settings", A::system_admin, true, false, false, {}},
    {R::settings_put, "PUT", "/api/v1/settings", A::system_admin, true, true, false, {}},
    {R::certificates_list, "GET", "/api/v1/projects/{p}/certificates", A::viewer, true, false, false, "certificate"},
    {R::certificate_create, "POST", "/api/v1/projects/{p}/certificates", A::admin, true, true, false, "certificate"},
    {R::certificate_get, "GET", "/api/v1/projects/{p}/certificates/{id}", A::viewer, true, false, false, "certificate"},
    {R::certificate_delete, "DELETE", "/api/v1/projects/{p}/certificates/{id}", A::admin, true, true, false, "certificate"},
    {R::credentials_list, "GET", "/api/v1/projects/{p}/credentials", A::viewer, true, false, false, "credential"},
    {R::credential_create, "POST", "/api/v1/projects/{p}/credentials", A::admin, true, true, false, "credential"},
    {R::credential_get, "GET", "/api/v1/projects/{p}/credentials/{id}", A::viewer, true, false, false, "credential"},
    {R::credential_delete, "DELETE", "/api/v1/projects/{p}/credentials/{id}", A::admin, true, true, false, "credential"},
    {R::targets_list, "GET", "/api/v1/projects/{p}/targets", A::viewer, true, false, false, "target"},
    {R::target_create, "POST", "/api/v1/projects/{p}/targets", A::admin, true, true, false, "target"},
    {R::target_get, "GET", "/api/v1/projects/{p}/targets/{id}", A::viewer, true, false, false, "target"},
    {R::target_delete, "DELETE", "/api/v1/projects/{p}/targets/{id}", A::admin, true, true, false, "target"},
    {R::target_scan_host_key, "POST", "/api/v1/projects/{p}/targets/{id}/scan-host-key", A::operator_, true, false, false, "target"},
    {R::channels_list, "GET", "/api/v1/projects/{p}/notification-channels", A::viewer, true, false, false, "notification_channel"},
    {R::channel_create, "POST", "/api/v1/projects/{p}/notification-channels", A::admin, true, true, false, "notification_channel"},
    {R::channel_get, "GET", "/api/v1/projects/{p}/notification-channels/{id}", A::viewer, true, false, false, "notification_channel"},
    {R::channel_delete, "DELETE", "/api/v1/projects/{p}/notification-channels/{id}", A::admin, true, true, false, "notification_channel"},
    {R::rules_list, "GET", "/api/v1/projects/{p}/notification-rules", A::viewer, true, false, false, "notification_rule"},
    {R::rule_create, "POST", "/api/v1/projects/{p}/notification-rules", A::admin, true, true, false, "notification_rule"},
    {R::rule_get, "GET", "/api/v1/projects/{p}/notification-rules/{id}", A::viewer, true, false, false, "notification_rule"},
    {R::rule_delete, "DELETE", "/api/v1/projects/{p}/notification-rules/{id}", A::admin, true, true, false, "notification_rule"},
    {R::distributions_list, "GET", "/api/v1/projects/{p}/distributions", A::viewer, true, false, false, "distribution"},
    {R::distribution_create, "POST", "/api/v1/projects/{p}/distributions", A::admin, true, true, false, "distribution"},
    {R::distribution_get, "GET", "/api/v1/projects/{p}/distributions/{id}", A::viewer, true, false, false, "distribution"},
    {R::distribution_delete, "DELETE", "/api/v1/projects/{p}/distributions/{id}", A::admin, true, true, false, "distribution"},
    {R::distribution_execute, "POST", "/api/v1/projects/{p}/distributions/{id}/execute", A::operator_, true, true, false, "distribution"},
    {R::distribution_rollback, "POST", "/api/v1/projects/{p}/distributions/{id}/rollback", A::operator_, true, true, false, "distribution"},
    {R::distribution_retry_failed, "POST", "/api/v1/projects/{p}/distributions/{id}/retry-failed", A::operator_, true, true, false, "distribution"},
    {R::distribution_cancel, "POST", "/api/v1/projects/{p}/distributions/{id}/cancel", A::operator_, true, true, false, "distribution"},
    {R::distribution_results, "GET", "/api/v1/projects/{p}/distributions/{id}/results", A::viewer, true, false, false, "distribution"},
}};

// Row i is route_id i: the handler binding and all_routes() users index by id.
constexpr bool rows_in_id_order() {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (static_cast<std::size_t>(table[i].id) != i) return false;
  return true;
}
static_assert(rows_in_id_order());

constexpr std::size_t max_segments = 16;

// Splits "/a/b/c" into segments; false when there are too many or the path has an empty one
// (a trailing slash or "//"), which no route has.
bool segments(std::string_view path, std::array<std::string_view, max_segments>& out, std::size_t& n) {
  n = 0;
  if (path.empty() || path[0] != '/') return false;
  path.remove_prefix(1);
  while (true) {
    auto slash = path.find('/');
    auto seg = path.substr(0, slash);
    if (seg.empty() || n == max_segments) return false;
    out[n++] = seg;
    if (slash == std::string_view::npos) return true;
    path.remove_prefix(slash + 1);
  }
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::span<const route_def> all_routes() noexcept { return table; }

std::optional<target_parts> split_target(std::string_view target) noexcept {
  if (target.empty() || target[0] != '/') return std::nullopt;
  auto q = target.find('?');
  if (q == std::string_view::npos) return target_parts{target, {}};
  return target_parts{target.substr(0, q), target.substr(q + 1)};
}

result<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || hex(s[i + 1]) < 0 || hex(s[i + 2]) < 0)
        return make_error(errc::invalid_argument, "bad percent-escape in the request target");
      c = static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return make_error(errc::invalid_argument, "NUL in the request target");
    out.push_back(c);
  }
  return out;
}

result<route_match> match_route(std::string_view method, std::string_view path) {
  std::array<std::string_view, max_segments> segs;
  std::size_t n = 0;
  if (!segments(path, segs, n)) return make_error(errc::not_found, "no such route", "path");
  route_match m;
  std::string allowed;
  for (const auto& r : table) {
    std::array<std::string_view, max_segments> pat;
    std::size_t pn = 0;
    segments(r.pattern, pat, pn);
    if (pn != n) continue;
    std::string_view p, id;
    bool ok = true;
    for (std::size_t i = 0; i < n && ok; ++i) {
      if (pat[i] == "{p}") p = segs[i];
      else if (pat[i] == "{id}") id = segs[i];
      else ok = pat[i] == segs[i];
    }
    if (!ok) continue;
    if (r.method != method) {
      if (allowed.find(r.method) == std::string::npos) allowed += allowed.empty() ? std::string(r.method) : fmt::format(", {}", r.method);
      continue;
    }
    auto dp = percent_decode(p, false);
    if (!dp) return make_error(errc::invalid_argument, dp.error().message, "project");
    auto di = percent_decode(id, false);
    if (!di) return make_error(errc::invalid_argument, di.error().message, "id");
    m.route = &r;
    m.project = std::move(*dp);
    m.id = std::move(*di);
    return m;
  }
  if (!allowed.empty())
    return make_error(errc::conflict, fmt::format("method {} is not allowed here; allowed: {}", method.substr(0, 16), allowed),
                      allowed);
  return make_error(errc::not_found, "no such route", "path");
}

result<query_params> parse_query(std::string_view query) {
  query_params out;
  if (query.empty()) return out;
  if (query.size() > 4096) return make_error(errc::invalid_argument, "the query string is longer than 4096 bytes", "query");
  while (true) {
    auto amp = query.find('&');
    auto part = query.substr(0, amp);
    if (!part.empty()) {
      auto eq = part.find('=');
      auto name = percent_decode(part.substr(0, eq), true);
      if (!name) return make_error(errc::invalid_argument, name.error().message, "query");
      if (name->empty()) return make_error(errc::invalid_argument, "a query parameter has no name", "query");
      auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : part.substr(eq + 1), true);
      if (!value) return make_error(errc::invalid_argument, value.error().message, *name);
      for (const auto& [k, v] : out)
        if (k == *name)
          return make_error(errc::invalid_argument, fmt::format("query parameter {} is repeated", k.substr(0, 64)), k.substr(0, 64));
      if (out.size() == 32) return make_error(errc::invalid_argument, "more than 32 query parameters", "query");
      out.emplace_back(std::move(*name), std::move(*value));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

}  // namespace certfleet::api
