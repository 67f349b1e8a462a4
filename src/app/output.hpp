#pragma once
// How a command answers, in local and remote mode alike: a failure on stderr with its exit code
// (exit_codes.hpp), a result as one JSON line (--json, and the commands that change something),
// times in tables as "2026-12-03 08:33:16" (UTC).
#include "certfleet/core/error.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string>

namespace certfleet::app {

void print_error(const error& e);
// Prints the error; returns its exit code.
int fail(const error& e);
void print(const boost::json::value& v);
// A time in an answer (RFC 3339, or milliseconds since the epoch); "-" when absent or null.
std::string time_cell(const boost::json::value* v);
// An answer's member as a table cell: "" when absent or null, a string as it is, else its JSON.
std::string text_of(const boost::json::object& o, std::string_view key);
// The whole of a file named on the command line ("-": standard input); invalid_argument naming
// `field` when it cannot be read.
result<std::string> read_input(const std::string& path, std::string_view field);

}  // namespace certfleet::app
