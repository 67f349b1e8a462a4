#include "reply.hpp"

#include "certfleet/core/errc_table.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdint>

namespace certfleet::api {

unsigned status_for(errc e) { return errc_row_of(e).http_status; }

std::string error_body(std::string_view code, std::string_view message, std::string_view field) {
  boost::json::object e{{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  return boost::json::serialize(boost::json::object{{"error", std::move(e)}});
}

reply error_reply(const error& e) {
  reply r;
  r.status = status_for(e.value());
  // Store failures are internal: their text (SQL) is for the log, not the client.
  if (r.status == 500) {
    r.internal_error = e.message;
    r.body = error_body(errc_name(e.value()), "internal error; see the server log", "");
  } else {
    r.body = error_body(errc_name(e.value()), e.message, e.field);
  }
  if (e.is(errc::rate_limited) || e.is(errc::too_many_connections))
    r.headers.emplace_back("Retry-After", std::to_string(std::max<std::int64_t>(1, e.retry_after_s)));
  return r;
}

reply error_reply(errc code, std::string message, std::string field) {
  return error_reply(make_error(code, std::move(message), std::move(field)));
}

reply json_reply(unsigned status, const boost::json::value& v) {
  reply r;
  r.status = status;
  r.body = boost::json::serialize(v);
  return r;
}

}  // namespace certfleet::api
