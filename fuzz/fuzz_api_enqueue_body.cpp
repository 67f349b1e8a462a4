// The body of POST …/jobs, and the ISO-8601 times its run_at takes.
#include "certfleet/api/requests.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto b = certfleet::api::parse_enqueue_body(in);
  if (b && b->run_at < 0) __builtin_trap();  // never a negative run_at
  (void)certfleet::api::parse_iso8601(in);
  return 0;
}
