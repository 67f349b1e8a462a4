// The Transfer-Encoding check: the first byte picks HTTP/1.0 or 1.1, the rest is the fields'
// joined value. The check must accept exactly a lone "chunked" on HTTP/1.1, whatever the bytes.
#include "certfleet/api/requests.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet::api;
  if (size == 0) return 0;
  const unsigned version = (data[0] & 1) ? 11 : 10;
  std::string_view v(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto problem = transfer_encoding_problem(version, v);
  if (version == 10 && !problem) __builtin_trap();  // HTTP/1.0 never has a transfer coding
  if (problem && problem->size() > 400) __builtin_trap();  // the message is bounded
  if (!problem && v.find(',') != std::string_view::npos) __builtin_trap();  // never a list
  return 0;
}
