#include "table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace certfleet::app {

namespace {

// The length of the UTF-8 sequence starting at s[i], or 0 when it is not a valid one.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;  // overlong
  if (n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) return 0;  // C1 controls
  return n;
}

}  // namespace

std::size_t display_width(std::string_view utf8) {
  std::size_t n = 0;
  for (char c : utf8)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

std::string cell(std::string_view text, std::size_t width) {
  std::string clean;
  clean.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    std::size_t n = utf8_sequence(text, i);
    if (n == 0) {
      clean += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    if (n == 1 && (c < 0x20 || c == 0x7F)) {
      if (clean.empty() || clean.back() != ' ') clean += ' ';
    } else if (n == 1 && c == ' ') {
      if (clean.empty() || clean.back() != ' ') clean += ' ';
    } else {
      clean.append(text.substr(i, n));
    }
    i += n;
  }
  while (!clean.empty() && clean.back() == ' ') clean.pop_back();
  while (!clean.empty() && clean.front() == ' ') clean.erase(clean.begin());
  if (width == 0 || display_width(clean) <= width) return clean;
  // Keep width-1 code points, then "…".
  std::size_t kept = 0, i = 0;
  while (i < clean.size() && kept < width - 1) {
    i += utf8_sequence(clean, i);
    ++kept;
  }
  return clean.substr(0, i) + "\xE2\x80\xA6";
}

std::string render(const text_table& t) {
  const std::size_t cols = t.header.size();
  std::vector<std::vector<std::string>> lines;
  lines.reserve(t.rows.size() + 1);
  auto shown = [&](const std::vector<std::string>& row) {
    std::vector<std::string> out(cols);
    for (std::size_t c = 0; c < cols && c < row.size(); ++c)
      out[c] = cell(row[c], c < t.max_width.size() ? t.max_width[c] : 0);
    return out;
  };
  lines.push_back(shown(t.header));
  for (const auto& r : t.rows) lines.push_back(shown(r));
  std::vector<std::size_t> widths(cols, 0);
  for (const auto& l : lines)
    for (std::size_t c = 0; c < cols; ++c) widths[c] = std::max(widths[c], display_width(l[c]));
  std::string out;
  for (const auto& l : lines) {
    std::string line;
    for (std::size_t c = 0; c < cols; ++c) {
      line += l[c];
      if (c + 1 < cols) line.append(widths[c] - display_width(l[c]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string format_duration(std::int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 60'000) return fmt::format("{:.1f}s", static_cast<double>(ms) / 1000.0);
  const auto s = ms / 1000;
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace certfleet::app
