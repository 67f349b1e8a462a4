// The body of POST /api/v1/projects/{p}/tokens: whatever it accepts is a name, role and lifetime
// inside the documented ranges, and writing the accepted value back as a body gives it again.
#include "certfleet/api/requests.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace api = certfleet::api;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto b = api::parse_token_body(in);
  if (!b) {
    if (b.error().field.empty()) __builtin_trap();
    return 0;
  }
  if (b->name.empty() || b->name.size() > api::token_name_max) __builtin_trap();
  for (char c : b->name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
  if (!certfleet::store::parse_role(certfleet::store::to_string(b->token_role))) __builtin_trap();
  if (b->ttl_s != 0 && (b->ttl_s < api::token_ttl_min_s || b->ttl_s > api::token_ttl_max_s)) __builtin_trap();
  // Round trip: the accepted value, written as a body, parses to the same value.
  auto again_text = boost::json::serialize(boost::json::object{
      {"name", b->name}, {"role", std::string(certfleet::store::to_string(b->token_role))}, {"ttl_s", b->ttl_s}});
  auto again = api::parse_token_body(again_text);
  if (!again || again->name != b->name || again->token_role != b->token_role || again->ttl_s != b->ttl_s) __builtin_trap();
  return 0;
}
