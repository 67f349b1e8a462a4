#pragma once
// The route table (DESIGN §6), request-target matching and query-string parsing. Pure: no I/O,
// so the fuzz targets and the docs test use it directly.
#include "certfleet/core/error.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::api {

// One enumerator per row of routes.def, in its order.
enum class route_id {
#define CERTFLEET_ROUTE(id, ...) id,
#include "certfleet/api/routes.def"
#undef CERTFLEET_ROUTE
};
inline constexpr std::size_t route_count = 0
#define CERTFLEET_ROUTE(...) +1
#include "certfleet/api/routes.def"
#undef CERTFLEET_ROUTE
    ;

// What a caller needs: no token, a token with at least this role in the project, or a
// system-admin token.
enum class access { none, any_token, viewer, operator_, admin, owner, system_admin };

struct route_def {
  route_id id;
  std::string_view name;  // the row's id as text: the OpenAPI operationId
  std::string_view method;
  std::string_view pattern;  // "/api/v1/projects/{p}/jobs/{id}"; {p} project name, {id} object id
  access need;
  bool api_only;        // served in api/all mode only (worker/scheduler serve health and metrics)
  // Audited: a refused call (401/403) and, for catalog routes, every answer. The row's handler
  // (routes.def) is called by src/api/dispatch.cpp: handlers are not part of this pure library.
  bool changes_state;
  bool websocket;
  std::string_view object_kind;  // the catalog object kind ("certificate", …); empty for other routes
  std::string_view summary;      // one line (the OpenAPI document's summary)
  std::string_view body;         // the request body's schema name (openapi_schemas.cpp's body table); empty: none
};

std::span<const route_def> all_routes() noexcept;

// The media types a route's body may be sent as: application/json, except the bulk target import
// (JSON lines or CSV). The session refuses any other with 415; the OpenAPI document lists these.
std::span<const std::string_view> body_media_types(const route_def& r) noexcept;
// A route whose body may be larger than body_limit (up to server_options::bulk_body_limit): the
// session raises the limit only once the caller is authorized for it.
bool takes_bulk_body(const route_def& r) noexcept;

struct route_match {
  const route_def* route = nullptr;
  std::string project;  // {p}, percent-decoded
  std::string id;       // {id}, percent-decoded
};

// Splits "path?query"; nullopt when the target is not origin-form ("/..."). 
struct target_parts {
  std::string_view path;
  std::string_view query;
};
std::optional<target_parts> split_target(std::string_view target) noexcept;

// not_found (no route has this path) or conflict (the path exists, not with this method: 405,
// field names the allowed methods, comma-separated).
result<route_match> match_route(std::string_view method, std::string_view path);

// One query string; '+' is a space, %XX is decoded; a repeated or empty name, a bad escape or
// a NUL is invalid_argument naming it.
using query_params = std::vector<std::pair<std::string, std::string>>;
result<query_params> parse_query(std::string_view query);

result<std::string> percent_decode(std::string_view s, bool plus_is_space);

}  // namespace certfleet::api
