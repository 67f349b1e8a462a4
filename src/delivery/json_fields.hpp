#pragma once
// Reading a target's JSON section (`ssh`, `file`): errors name the field as "<section>.<key>"
// (private to src/delivery).
#include <boost/json/object.hpp>

#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"

namespace certfleet::delivery {

// A string member: absent or null is fine unless `required`; any other type is refused.
inline result<void> string_member(const boost::json::object& o, std::string_view section, const char* key,
                                  std::string& out, bool required) {
  const std::string field = std::string(section) + "." + key;
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) {
    if (required) return make_error(errc::invalid_argument, "missing", field);
    return {};
  }
  if (!p->is_string()) return make_error(errc::invalid_argument, "must be a string", field);
  out = std::string(p->as_string());
  return {};
}

}  // namespace certfleet::delivery
