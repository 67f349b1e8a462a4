#pragma once
// DESIGN §6: every time in an answer is an RFC 3339 UTC string with milliseconds, or null. A
// member is a time when its name ends in "_at" or is not_before/not_after; the check walks the
// whole answer (items, nested views, job results) so a new view that answers milliseconds fails.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <string_view>

namespace testbed {

inline bool is_time_member(std::string_view k) {
  return k == "not_before" || k == "not_after" || (k.size() > 3 && k.substr(k.size() - 3) == "_at");
}

// Returns how many time members it saw (a caller can insist the answer had some).
inline int expect_answer_times(const boost::json::value& v, const std::string& where) {
  static const std::regex rfc3339_ms(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)");
  int seen = 0;
  if (v.is_array()) {
    for (const auto& x : v.as_array()) seen += expect_answer_times(x, where);
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.as_object()) {
      if (is_time_member(k)) {
        ++seen;
        EXPECT_TRUE(x.is_null() || (x.is_string() && std::regex_match(std::string(x.as_string()), rfc3339_ms)))
            << where << ": \"" << std::string_view(k) << "\" is " << boost::json::serialize(x);
      } else {
        seen += expect_answer_times(x, where + "." + std::string(k));
      }
    }
  }
  return seen;
}

}  // namespace testbed
