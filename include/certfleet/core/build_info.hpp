#pragma once
// What this build is: `certfleet --version`, the certfleet_build_info gauge and the package read
// it here (one place). Set at configure time (src/CMakeLists.txt) into one small file, so a new
// commit recompiles only that file.
#include <string_view>

namespace certfleet {

struct build_info {
  std::string_view version;   // the project's version (CMakeLists.txt)
  std::string_view commit;    // git rev-parse --short=12 HEAD at configure time; "unknown" outside git
  std::string_view date;      // the commit's date, YYYY-MM-DD (not the clock's: two builds of a commit are alike)
  std::string_view compiler;  // "gcc 12.2.0", "clang 16.0.6 …"
};

const build_info& this_build() noexcept;

}  // namespace certfleet
