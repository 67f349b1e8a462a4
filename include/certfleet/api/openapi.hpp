#pragma once
// GET /api/v1/openapi.json: the API as an OpenAPI 3.1 document, generated from the route table
// (routes.def: paths, methods, roles, summaries, body names) and the request-body schemas
// (openapi_schemas.cpp's body table, the one place they are written down). Pure: no I/O.
#include <span>
#include <string>
#include <string_view>

namespace certfleet::api {

struct body_schema {
  std::string_view name;    // what a routes.def row's body column names
  std::string_view schema;  // JSON Schema (2020-12) text; "$ref": "#/components/schemas/…" allowed
};
// Every request-body schema, by name.
std::span<const body_schema> all_body_schemas() noexcept;

// The answers' schemas (components/schemas), by name; each route's success statuses name them.
struct response_schema {
  std::string_view name;
  std::string_view schema;
};
std::span<const response_schema> all_response_schemas() noexcept;

// The document as JSON text. `version`: the server's version (info.version).
std::string openapi_document(std::string_view version);

}  // namespace certfleet::api
