#include "certfleet/api/ws_frame.hpp"

#include <cstdint>

namespace certfleet::api {

std::string ws_text_frame(std::string_view payload) {
  const std::uint64_t n = payload.size();
  std::string out;
  out.reserve(payload.size() + 10);
  out.push_back(static_cast<char>(0x81));  // FIN, text
  if (n < 126) {
    out.push_back(static_cast<char>(n));
  } else if (n <= 0xffff) {
    out.push_back(static_cast<char>(126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xff));
  } else {
    out.push_back(static_cast<char>(127));
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((n >> shift) & 0xff));
  }
  out.append(payload);
  return out;
}

}  // namespace certfleet::api
