#pragma once
// What every kind's file shares (catalog, notification channels, ACME accounts, domains, …):
// the strict readers of a request body's members, each error naming its field, and the stored
// document's basics. A module that parses a body of its own kind reads it through these, so every
// body refuses the same things with the same words.
#include <boost/json.hpp>

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

namespace certfleet::catalog::body_fields {

error bad(std::string field, std::string message);
// A request body: one JSON object whose members are all known.
result<boost::json::object> body_object(std::string_view body, std::initializer_list<std::string_view> allowed);
// A string member (`prefix` + `key` is the field an error names): NUL refused, at most `max` bytes.
result<std::string> text(const boost::json::object& o, std::string_view key, bool required, std::size_t max = 64 * 1024,
                         std::string_view prefix = {});
result<bool> boolean(const boost::json::object& o, std::string_view key, bool fallback);
// `name`: required, at most max_name_length, no control characters.
result<std::string> name_of(const boost::json::object& o);
bool valid_id(std::string_view id);
result<std::string> id_field(const boost::json::object& o, std::string_view key, bool required, std::string_view prefix = {});
// The stored document as an object ({} when it does not parse).
boost::json::object parse_doc(const store::catalog_object& o);
// The additional data a sealed field of this object is bound to.
std::string aad_for(const store::catalog_object& o, std::string_view what);
boost::json::object base_view(const store::catalog_object& o);
// base_view with the stored document's members.
boost::json::object document_view(const store::catalog_object& o);

}  // namespace certfleet::catalog::body_fields
