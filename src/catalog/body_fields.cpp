// The strict readers every kind's body is read with (body_fields.hpp).
#include "certfleet/catalog/body_fields.hpp"

#include "certfleet/catalog/catalog.hpp"  // max_name_length
#include "certfleet/core/json.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::catalog {

namespace json = boost::json;

namespace body_fields {

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}

// A request body: one JSON object whose members are all known.
result<json::object> body_object(std::string_view body, std::initializer_list<std::string_view> allowed) {
  auto parsed = certfleet::json::parse_value(body, "body", 16);
  if (!parsed) return std::move(parsed).error();
  auto& v = *parsed;
  if (!v.is_object()) return bad("body", "body must be a JSON object");
  for (const auto& [k, _] : v.as_object())
    if (std::find(allowed.begin(), allowed.end(), std::string_view(k)) == allowed.end())
      // A member named "" still gets a field to point at: the body.
      return bad(k.empty() ? std::string("body") : std::string(k), fmt::format("unknown field \"{}\"", std::string_view(k)));
  return std::move(v.as_object());
}

result<std::string> text(const json::object& o, std::string_view key, bool required, std::size_t max,
                         std::string_view prefix) {
  std::string field = std::string(prefix) + std::string(key);
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) {
    if (required) return bad(field, fmt::format("{} is required", field));
    return std::string();
  }
  if (!p->is_string()) return bad(field, fmt::format("{} must be a string", field));
  if (required && p->as_string().empty()) return bad(field, fmt::format("{} must not be empty", field));
  if (p->as_string().size() > max) return bad(field, fmt::format("{} is longer than {} bytes", field, max));
  if (std::find(p->as_string().begin(), p->as_string().end(), '\0') != p->as_string().end())
    return bad(field, fmt::format("{} must not contain NUL", field));
  return std::string(p->as_string());
}

result<bool> boolean(const json::object& o, std::string_view key, bool fallback) {
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) return fallback;
  if (!p->is_bool()) return bad(std::string(key), fmt::format("{} must be true or false", key));
  return p->as_bool();
}

result<std::string> name_of(const json::object& o) {
  auto n = text(o, "name", true, max_name_length);
  if (!n) return n;
  for (unsigned char c : *n)
    if (c < 0x20 || c == 0x7f) return bad("name", "name must not contain control characters");
  return n;
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

result<std::string> id_field(const json::object& o, std::string_view key, bool required, std::string_view prefix) {
  auto t = text(o, key, required, 64, prefix);
  if (!t) return t;
  if (!t->empty() && !valid_id(*t)) return bad(std::string(prefix) + std::string(key), "not a valid id");
  return t;
}

json::object parse_doc(const store::catalog_object& o) {
  boost::system::error_code ec;
  auto v = json::parse(o.doc, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string aad_for(const store::catalog_object& o, std::string_view what) {
  return fmt::format("{}:{}:{}", o.kind, o.id, what);
}

json::object document_view(const store::catalog_object& o) {
  auto v = base_view(o);
  for (auto& [k, val] : parse_doc(o)) v[k] = val;
  return v;
}

json::object base_view(const store::catalog_object& o) {
  return json::object{{"id", o.id}, {"name", o.name}, {"created_at", certfleet::json::time_value(o.created_at)}};
}

}  // namespace body_fields

}  // namespace certfleet::catalog
