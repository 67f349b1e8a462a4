#pragma once
// JSON in: simdjson (parse and check bodies, payloads). JSON out: Boost.JSON values.
// Every reading error names the field it is about.
#include "certfleet/core/error.hpp"

#include <boost/json/value.hpp>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::json {

inline constexpr std::size_t max_payload_bytes = 1u << 20;  // 1 MiB

// One JSON object of at most max_bytes, else invalid_argument/payload_too_large naming `field`.
result<void> check_object(std::string_view text, std::string_view field,
                          std::size_t max_bytes = max_payload_bytes);

// The one parse of a document into a Boost.JSON value, for readers that walk it themselves
// (settings and catalog bodies): invalid JSON, nesting deeper than max_depth, or a key given
// twice in any object (at any depth) is invalid_argument naming the field. Every body, payload
// and stored document certfleet reads from a client goes through this, check_object or
// object_reader::parse, which all refuse duplicate keys the same way.
result<boost::json::value> parse_value(std::string_view text, std::string_view what, std::size_t max_depth);

// A time in an answer (DESIGN §6): RFC 3339 UTC with milliseconds, "2026-11-29T09:05:18.123Z";
// null for 0 (never set). The store and job payloads keep milliseconds since the epoch.
boost::json::value time_value(std::int64_t ms);
// A text in an answer that may be unset: null for "" (never set), else the text.
boost::json::value text_value(std::string_view text);

// Reads the members of one JSON object (a request body) by name. Errors name a member by its
// path from what the client sent: bare in a "body" ("type"), else after the document's name
// ("payload.ms").
class object_reader {
 public:
  // `what` names the whole document in errors ("body").
  static result<object_reader> parse(std::string_view text, std::string_view what = "body");
  object_reader(object_reader&&) noexcept;
  object_reader& operator=(object_reader&&) noexcept;
  ~object_reader();

  // Present and not JSON null (the typed readers treat null as absent).
  bool has(std::string_view key) const;
  // Present as JSON null.
  bool is_null(std::string_view key) const;
  result<std::string> required_string(std::string_view key) const;
  result<std::optional<std::string>> optional_string(std::string_view key) const;
  result<std::optional<std::int64_t>> optional_int(std::string_view key) const;
  result<std::optional<double>> optional_number(std::string_view key) const;
  result<std::optional<bool>> optional_bool(std::string_view key) const;
  // The member as minified JSON text, whatever its type; must be an object when object_only.
  result<std::optional<std::string>> optional_raw(std::string_view key, bool object_only) const;
  // Refuses any member not in `allowed`, naming it.
  result<void> only(std::initializer_list<std::string_view> allowed) const;

 private:
  struct impl;
  explicit object_reader(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

}  // namespace certfleet::json
