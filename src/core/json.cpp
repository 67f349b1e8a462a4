#include "certfleet/core/json.hpp"

#include "certfleet/core/clock.hpp"

#include <boost/json/parse.hpp>
#include <fmt/format.h>
#include <simdjson.h>

#include <unordered_set>

namespace certfleet::json {

boost::json::value time_value(std::int64_t ms) {
  if (ms == 0) return nullptr;
  return boost::json::value(format_iso8601(ms));
}

boost::json::value text_value(std::string_view text) {
  if (text.empty()) return nullptr;
  return boost::json::value(text);
}

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

// A member's name in errors: a request body's members are named bare ("type"), any other
// document's after the document ("payload.ms"), so the client can find it in what it sent.
std::string member_path(std::string_view root, std::string_view key) {
  // An empty key is shown as "" so the field named is never empty (fuzz_catalog_body found a
  // duplicate "" key reported with no field).
  if (key.empty()) key = "\"\"";
  if (root.empty()) return std::string(key);
  return fmt::format("{}.{}", root, key);
}

std::string root_path(std::string_view what) { return what == "body" ? std::string() : std::string(what); }

// The first key given twice in one object, at any depth, as its path from the document. JSON
// leaves duplicates undefined and our readers disagree on them (simdjson finds the first,
// Boost.JSON keeps the last, the stored text keeps both), so a document with one is refused
// before anything reads it.
std::optional<std::string> first_duplicate_key(simdjson::dom::element e, const std::string& path) {
  if (e.type() == simdjson::dom::element_type::OBJECT) {
    simdjson::dom::object o = e.get_object().value_unsafe();
    std::unordered_set<std::string_view> seen;
    seen.reserve(o.size());
    for (auto field : o)
      if (!seen.insert(field.key).second) return member_path(path, field.key);
    for (auto field : o)
      if (auto d = first_duplicate_key(field.value, member_path(path, field.key))) return d;
  } else if (e.type() == simdjson::dom::element_type::ARRAY) {
    simdjson::dom::array a = e.get_array().value_unsafe();
    std::size_t i = 0;
    for (auto item : a) {
      if (auto d = first_duplicate_key(item, fmt::format("{}[{}]", path.empty() ? "body" : path, i))) return d;
      ++i;
    }
  }
  return std::nullopt;
}

result<void> refuse_duplicate_keys(simdjson::dom::element root, std::string_view what) {
  if (auto d = first_duplicate_key(root, root_path(what)))
    return make_error(errc::invalid_argument,
                      fmt::format("{} is given twice; each member of an object must be named once", *d), *d);
  return {};
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
  return refuse_duplicate_keys(root, field);
}

result<boost::json::value> parse_value(std::string_view text, std::string_view what, std::size_t max_depth) {
  boost::system::error_code ec;
  boost::json::parse_options opts;
  opts.max_depth = max_depth;
  auto v = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec, {}, opts);
  if (ec)
    return make_error(errc::invalid_argument, fmt::format("{} is not valid JSON: {}", what, ec.message()),
                      std::string(what));
  // Boost.JSON has already kept only the last of duplicate keys: look at the text again.
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text.data(), text.size(), true).get(root); err)
    return make_error(errc::invalid_argument,
                      fmt::format("{} is not valid JSON: {}", what, simdjson::error_message(err)), std::string(what));
  if (auto ok = refuse_duplicate_keys(root, what); !ok) return std::move(ok).error();
  return v;
}

struct object_reader::impl {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
  std::string root;  // what members' names in errors start with ("" for a body)

  std::string path(std::string_view key) const { return member_path(root, key); }

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
  if (auto ok = refuse_duplicate_keys(root, what); !ok) return std::move(ok).error();
  p->root = root_path(what);
  return object_reader(std::move(p));
}

bool object_reader::has(std::string_view key) const { return p_->find(key).has_value(); }

bool object_reader::is_null(std::string_view key) const {
  simdjson::dom::element e;
  return p_->object.at_key(key).get(e) == simdjson::SUCCESS && e.is_null();
}

static error wrong_type(const std::string& field, const char* want, simdjson::dom::element e) {
  return make_error(errc::invalid_argument, fmt::format("{} must be {}, not {}", field, want, type_name(e.type())), field);
}

result<std::string> object_reader::required_string(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return make_error(errc::invalid_argument, fmt::format("{} is required", p_->path(key)), p_->path(key));
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) return wrong_type(p_->path(key), "a string", *e);
  return std::string(s);
}

result<std::optional<std::string>> object_reader::optional_string(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::string>{};
  std::string_view s;
  if (e->get_string().get(s) != simdjson::SUCCESS) return wrong_type(p_->path(key), "a string", *e);
  return std::optional<std::string>(std::string(s));
}

result<std::optional<std::int64_t>> object_reader::optional_int(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::int64_t>{};
  std::int64_t v;
  if (e->get_int64().get(v) != simdjson::SUCCESS) return wrong_type(p_->path(key), "an integer", *e);
  return std::optional<std::int64_t>(v);
}

result<std::optional<double>> object_reader::optional_number(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<double>{};
  double v;
  if (e->get_double().get(v) != simdjson::SUCCESS) return wrong_type(p_->path(key), "a number", *e);
  return std::optional<double>(v);
}

result<std::optional<bool>> object_reader::optional_bool(std::string_view key) const {
  auto e = p_->find(key);
  if (!e) return std::optional<bool>{};
  bool v;
  if (e->get_bool().get(v) != simdjson::SUCCESS) return wrong_type(p_->path(key), "a boolean", *e);
  return std::optional<bool>(v);
}

result<std::optional<std::string>> object_reader::optional_raw(std::string_view key, bool object_only) const {
  auto e = p_->find(key);
  if (!e) return std::optional<std::string>{};
  if (object_only && e->type() != simdjson::dom::element_type::OBJECT) return wrong_type(p_->path(key), "an object", *e);
  return std::optional<std::string>(simdjson::minify(*e));
}

result<void> object_reader::only(std::initializer_list<std::string_view> allowed) const {
  for (auto field : p_->object) {
    bool ok = false;
    for (auto a : allowed) ok = ok || a == field.key;
    if (!ok)
      return make_error(errc::invalid_argument, fmt::format("unknown field {}", p_->path(field.key)),
                        p_->path(field.key));
  }
  return {};
}

}  // namespace certfleet::json
