#include "output.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>

#include <iostream>

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

}  // namespace certfleet::app
