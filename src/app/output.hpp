#pragma once
// How a command answers, in local and remote mode alike: a failure on stderr with its exit code
// (exit_codes.hpp), a result as one JSON line (--json, and the commands that change something),
// times in tables as "2026-12-03 08:33:16" (UTC).
#include "certfleet/core/error.hpp"

#include <boost/json/value.hpp>

#include <string>

namespace certfleet::app {

void print_error(const error& e);
// Prints the error; returns its exit code.
int fail(const error& e);
void print(const boost::json::value& v);
// A time in an answer (RFC 3339, or milliseconds since the epoch); "-" when absent or null.
std::string time_cell(const boost::json::value* v);

}  // namespace certfleet::app
