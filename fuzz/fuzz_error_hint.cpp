// The error-hint lookup over job error texts (which carry what SSH servers, resolvers and CAs
// sent): any bytes, any type; a hint, when found, is a row of the one table.
#include "certfleet/queue/error_hint.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet::queue;
  if (size == 0) return 0;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  const auto type = (data[0] & 1) ? std::string_view("noop") : std::string_view("distribution_execute");
  auto h = hint_for(type, all.substr(1));
  if (!h) return 0;
  bool in_table = false;
  for (const auto& row : all_error_hints())
    if (row.error_class == h->error_class && row.hint == h->hint) in_table = true;
  if (!in_table || h->hint.empty()) __builtin_trap();
  return 0;
}
