// The Cookie header's certfleet_session value (any bytes a browser or an attacker sends): the
// answer is a piece of the header after "certfleet_session=", without the pair separator.
#include "certfleet/api/requests.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet::api;
  std::string_view header(reinterpret_cast<const char*>(data), size);
  auto v = session_cookie_in(header);
  if (v.empty()) return 0;
  if (v.data() < header.data() || v.data() + v.size() > header.data() + header.size()) __builtin_trap();
  if (v.find(';') != std::string_view::npos) __builtin_trap();
  const auto name_at = static_cast<std::size_t>(v.data() - header.data()) - session_cookie_name.size() - 1;
  if (header.substr(name_at, session_cookie_name.size() + 1) != "certfleet_session=") __builtin_trap();
  return 0;
}
