#pragma once
// Text for people at a terminal: aligned columns (`certfleet jobs list` and the other lists).
// Cells may hold text from peers (a job's error): control characters are shown as spaces, so a
// cell is one line and cannot move the cursor or recolour the terminal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::app {

struct text_table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The most characters (code points) a column's cells show; 0: no limit. Longer cells end in "…".
  std::vector<std::size_t> max_width;
};

// One line per row, columns separated by two spaces, left-aligned; the last column is not padded.
std::string render(const text_table& t);

// `text` as one cell: control characters (C0, DEL, C1) and invalid UTF-8 bytes become spaces or
// U+FFFD, runs of spaces collapse, and at most `width` code points are kept (the last one "…").
std::string cell(std::string_view text, std::size_t width = 0);

// Code points in valid UTF-8 text (what a terminal shows, near enough for alignment).
std::size_t display_width(std::string_view utf8);

// "850ms", "12.3s", "4m05s", "2h01m".
std::string format_duration(std::int64_t ms);

}  // namespace certfleet::app
