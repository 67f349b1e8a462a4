#pragma once
// The readers the ACME kinds' bodies share (private to src/lifecycle): acme_catalog.cpp and
// acme_requests.cpp. `bad` is the catalog's (body_fields.hpp).
#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/catalog/body_fields.hpp"

namespace certfleet::lifecycle::detail {

using catalog::body_fields::bad;

// A nested reader's error names its member inside the outer one ("eab.kid"). (object_reader
// already names its fields after the document it was given: those stay.)
error nested(error e, std::string_view prefix);
// `name`: required, not empty, at most max_name_length, no control characters.
result<std::string> name_field(const certfleet::json::object_reader& r);
// No spaces or control characters.
bool printable(std::string_view s);
// A 24-hex catalog id, as the routes use.
result<std::string> id_field(const certfleet::json::object_reader& r, std::string_view key);

}  // namespace certfleet::lifecycle::detail
