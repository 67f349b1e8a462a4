// Any bytes as a client's ALPN protocol list: the offset found must point at "http/1.1" inside
// the list, at a name boundary the walk reached.
#include "certfleet/api/alpn.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto at = certfleet::api::find_alpn_protocol({data, size}, "http/1.1");
  if (at) {
    if (*at < 1 || *at + 8 > size || data[*at - 1] != 8 || std::memcmp(data + *at, "http/1.1", 8) != 0) std::abort();
  }
  return 0;
}
