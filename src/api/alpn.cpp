#include "certfleet/api/alpn.hpp"

#include <algorithm>

namespace certfleet::api {

std::optional<std::size_t> find_alpn_protocol(std::span<const unsigned char> list, std::string_view protocol) {
  for (std::size_t i = 0; i < list.size();) {
    const std::size_t len = list[i];
    if (len == 0 || len > list.size() - i - 1) return std::nullopt;
    const auto name = list.subspan(i + 1, len);
    if (len == protocol.size() &&
        std::equal(name.begin(), name.end(), protocol.begin(), [](unsigned char a, char b) {
          return a == static_cast<unsigned char>(b);
        }))
      return i + 1;
    i += 1 + len;
  }
  return std::nullopt;
}

}  // namespace certfleet::api
