#pragma once
// What openapi.cpp (the document: paths, operations, error answers, components) takes from
// openapi_schemas.cpp beyond openapi.hpp's tables, private to src/api: the schemas that are not
// written down in a table but looked up by name or derived from the settings table.
#include <boost/json.hpp>

#include <string_view>

#include "certfleet/core/settings.hpp"

namespace certfleet::api::detail {

// A routes.def row's request body schema, by its name; throws std::logic_error for a name the
// body table lacks.
boost::json::value schema_of(std::string_view name);

// GET/PUT /api/v1/settings and …/projects/{p}/settings answers: every setting of the scope,
// integers as numbers, the rest as text.
boost::json::object settings_answer_schema(setting_scope scope);

}  // namespace certfleet::api::detail
