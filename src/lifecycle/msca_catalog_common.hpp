#pragma once
// What msca_catalog.cpp (the CA) and msca_requests.cpp (the enroll body, the held request, the
// poll payload) share, private to src/lifecycle: lenient readers of a stored document's members,
// the sealing context of an object's secret, the template name field.
#include "lifecycle/acme_catalog_common.hpp"

#include "certfleet/core/json.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace certfleet::lifecycle::detail::msca_doc {

// A stored document's members, read leniently (certfleet wrote them): "", 0 or false when a
// member is absent or of another type, an empty object for a document that is not one.
inline boost::json::object parse_object(std::string_view text) {
  boost::system::error_code ec;
  auto v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

inline std::string str(const boost::json::object& o, std::string_view k) {
  auto* p = o.if_contains(k);
  return p && p->is_string() ? std::string(p->as_string()) : std::string();
}

inline std::int64_t num(const boost::json::object& o, std::string_view k) {
  auto* p = o.if_contains(k);
  return p && p->is_int64() ? p->as_int64() : p && p->is_uint64() ? static_cast<std::int64_t>(p->as_uint64()) : 0;
}

inline bool boolean(const boost::json::object& o, std::string_view k) {
  auto* p = o.if_contains(k);
  return p && p->is_bool() && p->as_bool();
}

// Text an operator typed: 1..max bytes, no control characters.
inline bool plain_text(std::string_view s, std::size_t max) {
  return !s.empty() && s.size() <= max &&
         std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
}

// A certificate template's name as the CA's policy lists it ("" when absent).
inline result<std::string> template_name_field(const certfleet::json::object_reader& r, std::string_view key) {
  auto t = r.optional_string(key);
  if (!t) return std::move(t).error();
  if (!*t || (*t)->empty()) return std::string();
  if (!plain_text(**t, 256))
    return bad(std::string(key), fmt::format("{} must be a certificate template's name (at most 256 characters, no "
                                             "control characters), as the CA's policy lists it",
                                             key));
  return std::move(**t);
}

}  // namespace certfleet::lifecycle::detail::msca_doc
