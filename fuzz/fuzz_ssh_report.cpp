// parse_report over arbitrary remote stdout (a login shell's startup files may print anything
// before the script's markers): total, never undefined, and a report depends only on whole
// marker lines, the last of each kind winning.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "delivery/ssh/script.hpp"

using namespace certfleet::delivery::detail;

namespace {
bool same(const script_report& a, const script_report& b) {
  return a.started == b.started && a.installed == b.installed && a.restored == b.restored &&
         a.failed_step == b.failed_step && a.post_exit == b.post_exit;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string out(reinterpret_cast<const char*>(data), size);
  const auto r = parse_report(out);
  if (!same(r, parse_report(out))) std::abort();
  // A line end, or a line that is no marker, adds nothing.
  if (!same(r, parse_report(out + "\n"))) std::abort();
  if (!same(r, parse_report(out + "\nnot a marker\n"))) std::abort();
  // Text without the markers' common prefix is a report of nothing.
  if (out.find("certfleet-") == std::string::npos && !same(r, script_report{})) std::abort();
  // A marker line read first sets its flag and changes nothing else.
  auto first = parse_report(std::string(marker_started) + "\n" + out);
  if (!first.started) std::abort();
  first.started = r.started;
  if (!same(first, r)) std::abort();
  // The last step marker wins, whatever came before.
  auto last = parse_report(out + "\n" + marker_step + "3\n" + marker_post + "-1");
  if (last.failed_step != 3 || last.post_exit != -1) std::abort();
  return 0;
}
