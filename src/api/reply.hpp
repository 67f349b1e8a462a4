#pragma once
// What a route handler answers, and how our errors become HTTP statuses and JSON error bodies.
// No Beast here: the HTTP session turns a reply into a response.
#include "certfleet/core/error.hpp"

#include <boost/json/value.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::api {

struct reply {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;
  // A 500's cause (SQL, say): for the server log line of this request, with its request id;
  // never sent to the client.
  std::string internal_error;
};

unsigned status_for(errc e);
// {"error":{"code":…,"message":…,"field":…}}; no "field" when it is empty.
std::string error_body(std::string_view code, std::string_view message, std::string_view field);
reply error_reply(const error& e);
reply error_reply(errc code, std::string message, std::string field = {});
reply json_reply(unsigned status, const boost::json::value& v);

}  // namespace certfleet::api
