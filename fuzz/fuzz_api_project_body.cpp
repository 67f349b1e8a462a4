// The body of POST /api/v1/projects: whatever it accepts is a name the project grammar allows.
#include "certfleet/api/requests.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto n = certfleet::api::parse_project_body(in);
  if (!n) {
    if (n.error().field.empty()) __builtin_trap();
    return 0;
  }
  if (n->empty() || n->size() > 63 || n->front() == '-' || n->back() == '-') __builtin_trap();
  for (char c : *n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) __builtin_trap();
  if (!certfleet::api::check_project_name(*n)) __builtin_trap();
  return 0;
}
