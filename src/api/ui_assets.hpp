#pragma once
// The web UI's files, embedded in the binary at build time (cmake/embed_ui.cmake writes the
// definitions from ui/): no file is read at run time.
#include <span>
#include <string_view>

namespace certfleet::api {

struct ui_file {
  std::string_view path;  // relative to ui/, e.g. "index.html", "jobs.js"
  std::string_view body;  // index.html already points at /assets/<ui_version()>
};

std::span<const ui_file> ui_files() noexcept;
// A hash over every file: assets live under /assets/<version>/, so each can be cached forever.
std::string_view ui_version() noexcept;

}  // namespace certfleet::api
