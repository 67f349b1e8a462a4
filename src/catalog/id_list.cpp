#include "certfleet/catalog/id_list.hpp"

#include "certfleet/core/object_id.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::catalog {

result<std::vector<std::string>> parse_id_list(std::string_view raw, std::string_view field, std::size_t max,
                                               std::string_view what) {
  auto bad = [](std::string f, std::string message) { return make_error(errc::invalid_argument, std::move(message), std::move(f)); };
  boost::system::error_code ec;
  auto v = boost::json::parse(raw, ec);
  if (ec || !v.is_array() || v.as_array().empty() || v.as_array().size() > max)
    return bad(std::string(field), fmt::format("{} must be a list of 1 to {} {} ids", field, max, what));
  std::vector<std::string> out;
  const auto& ids = v.as_array();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto element = fmt::format("{}[{}]", field, i);
    if (!ids[i].is_string() || !is_object_id(ids[i].as_string()))
      return bad(element, fmt::format("{} must be a 24-character hex {} id", element, what));
    std::string id(ids[i].as_string());
    if (std::find(out.begin(), out.end(), id) != out.end())
      return bad(element, fmt::format("{} repeats {} {}", element, what, id));
    out.push_back(std::move(id));
  }
  return out;
}

}  // namespace certfleet::catalog
