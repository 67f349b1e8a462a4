// Any bytes as a cell of `certfleet jobs list` (a job's error comes from peers): the cell is one
// line of valid UTF-8 with no control character (C0, DEL, C1) and at most `width` code points.
#include "table.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {
bool valid_utf8_without_controls(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    if (n == 1 && (c < 0x20 || c == 0x7F)) return false;
    if (n == 2 && (c < 0xC2 || (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0))) return false;
    i += n;
  }
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t width = data[0] % 80;  // 0: no limit
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto c = certfleet::app::cell(text, width);
  if (!valid_utf8_without_controls(c)) std::abort();
  if (width > 0 && certfleet::app::display_width(c) > width) std::abort();
  const auto t = certfleet::app::render({{"A", "B"}, {{std::string(text), "x"}}, {width, 0}});
  if (t.find('\r') != std::string::npos || std::count(t.begin(), t.end(), '\n') != 2) std::abort();
  return 0;
}
