#include "output.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace certfleet::app {

void print_error(const error& e) {
  std::cerr << "certfleet: " << e.message;
  if (!e.field.empty() && e.message.find(e.field) == std::string::npos) std::cerr << " (field " << e.field << ")";
  std::cerr << "\n";
}

int fail(const error& e) {
  print_error(e);
  return to_int(exit_code_for(e));
}

void print(const boost::json::value& v) { std::cout << boost::json::serialize(v) << "\n"; }

std::string time_cell(const boost::json::value* v) {
  std::string text;
  if (!v) return "-";
  if (v->is_string()) text = std::string(v->as_string());
  else if (v->is_int64() && v->as_int64() > 0) text = format_iso8601(v->as_int64());
  if (text.size() < 19) return text.empty() ? "-" : text;
  text[10] = ' ';
  return text.substr(0, 19);
}

std::string text_of(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return std::string(v->as_string());
  return boost::json::serialize(*v);
}

result<std::string> read_input(const std::string& path, std::string_view field) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::invalid_argument, fmt::format("{} cannot be read", path), std::string(field));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace certfleet::app
