#include "certfleet/core/json.hpp"

#include <fmt/format.h>
#include <simdjson.h>

namespace certfleet::json {

namespace {
const char* type_name(simdjson::dom::element_type t) {
  using T = simdjson::dom::element_type;
  switch (t) {
    case T::ARRAY: return "an array";
    case T::OBJECT: return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE: return "a number";
    case T::STRING: return "a string";
    case T::BOOL: return "a boolean";
    case T::NULL_VALUE: return "null";
  }
  return "unknown";
}
}  // namespace

result<void> check_object(std::string_view text, std::string_view field, std::size_t max_bytes) {
  if (text.size() > max_bytes)
    return make_error(errc::payload_too_large,
                      fmt::format("{} is {} bytes; the limit is {} bytes", field, text.size(), max_bytes),
                      std::string(field));
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text.data(), text.size(), true).get(root); err)
    return make_error(errc::invalid_argument,
                      fmt::format("{} is not valid JSON: {}", field, simdjson::error_message(err)),
                      std::string(field));
  if (root.type() != simdjson::dom::element_type::OBJECT)
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be a JSON object, not {}", field, type_name(root.type())),
                      std::string(field));
  return {};
}

struct object_reader::impl {
  simdjson::dom::parser parser;
  simdjson::dom::object object;

  // The member, or nullopt when absent or JSON null.
  std::optional<simdjson::dom::element> find(std::string_view key) const {
    simdjson::dom::element e;
    if (object.at_key(key).get(e) != simdjson::SUCCESS) return std::nullopt;
    if (e.is_null()) return std::nullopt;
    return e;
  }
};

object_reader::object_reader(std::unique_ptr<impl> p) : p_(std::move(p)) {}
object_reader::object_reader(object_reader&&) noexcept = default;
object_reader& object_reader::operator=(object_reader&&) noexcept = default;
object_reader::~object_reader() = default;

result<object_reader> object_reader::parse(std::string_view text, std::string_view what) {
  auto p = std::make_unique<impl>();
  simdjson::dom::element root;
  if (auto err = p->parser.parse(text.data(), text.size(), true).get(root); err)
    return make_error(errc::invalid_argument,
                      fmt::format("{} is not valid JSON: {}", what, simdjson::error_message(err)),
                      std::string(what));
  if (root.get_object().get(p->object) != simdjson::SUCCESS)
    return make_error(errc::invalid_argument,
                      fmt::format("{} must be a JSON object, not {}", what, type_name(root.type())),
                      std::string(what));
  return object_reader(std::move(p));
}

bool object_reader::has(std::string_view key) const { return p_->find(key).has_value(); }

static error wrong_type(std::string_view key, const char* want, simdjson::dom::element e) {
  return make_error(errc::invalid_argument,
                    fmt::format("{} must be {}, not {}", key, want, type_name(e.type())), std::string(key));
}

result<std::string> object_reader::required_string(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return make_error(errc::invalid_argument, fmt::format("{} is required", key), std::string(key));
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) return wrong_type(key, "a string", *e);
  return std::string(s);
}

result<std::optional<std::string>> object_reader::optional_string(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::string>{};
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) return wrong_type(key, "a string", *e);
  return std::optional<std::string>(std::string(s));
}

result<std::optional<std::int64_t>> object_reader::optional_int(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::int64_t>{};
  std::int64_t v;
  if (e->get_int64().get(v) != simdjson::SUCCESS) return wrong_type(key, "an integer", *e);
  return std::optional<std::int64_t>(v);
}

result<std::optional<double>> object_reader::optional_number(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<double>{};
  double v;
  if (e->get_double().get(v) != simdjson::SUCCESS) return wrong_type(key, "a number", *e);
  return std::optional<double>(v);
}

result<std::optional<bool>> object_reader::optional_bool(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<bool>{};
  bool v;
  if (e->get_bool().get(v) != simdjson::SUCCESS) return wrong_type(key, "a boolean", *e);
  return std::optional<bool>(v);
}

result<std::optional<std::string>> object_reader::optional_raw(std::string_view key, bool object_only) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::string>{};
  if (object_only && e->type() != simdjson::dom::element_type::OBJECT) return wrong_type(key, "an object", *e);
  return std::optional<std::string>(simdjson::minify(*e));
}

result<void> object_reader::only(std::initializer_list<std::string_view> allowed) const {
  for (auto field : p_->object) {
    bool ok = false;
    for (auto a : allowed) ok = ok || a == field.key;
    if (!ok)
      return make_error(errc::invalid_argument, fmt::format("unknown field {}", field.key),
                        std::string(field.key));
  }
  return {};
}

}  // namespace certfleet::json
