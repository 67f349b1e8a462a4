#include "certfleet/api/router.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::api {

namespace {
using A = access;
using R = route_id;

// The route table of routes.def, without the handlers (matching, the fuzz targets and the docs
// test need no I/O).
constexpr std::array<route_def, route_count> table{{
#define CERTFLEET_ROUTE(id, method, pattern, need, api_only, changes_state, websocket, object_kind, handler, summary, body) \
  {R::id, #id, method, pattern, A::need, api_only, changes_state, websocket, object_kind, summary, body},
#include "certfleet/api/routes.def"
#undef CERTFLEET_ROUTE
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

namespace {
constexpr std::string_view json_media[] = {"application/json"};
// JSON lines under both names clients use; catalog::import_format_of reads the same three.
constexpr std::string_view import_media[] = {"application/x-ndjson", "application/jsonl", "text/csv"};
}  // namespace

bool takes_bulk_body(const route_def& r) noexcept { return r.body == "target_import"; }

std::span<const std::string_view> body_media_types(const route_def& r) noexcept {
  if (takes_bulk_body(r)) return import_media;
  return json_media;
}

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
