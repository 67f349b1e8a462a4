#include "certfleet/core/crash.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

namespace certfleet {

namespace {
struct crash_config {
  std::string name;
  long after = 1;
  std::atomic<long> hits{0};
  std::string fail;
  crash_config() {
    if (const char* f = std::getenv("CERTFLEET_FAIL_AT")) fail = f;
    if (const char* n = std::getenv("CERTFLEET_CRASH_AT")) name = n;
    if (const char* a = std::getenv("CERTFLEET_CRASH_AFTER")) after = std::max(1L, std::atol(a));
  }
};
crash_config& config() {
  static crash_config c;
  return c;
}
}  // namespace

void crash_point(std::string_view name) {
  auto& c = config();
  if (c.name.empty() || c.name != name) return;
  if (c.hits.fetch_add(1) + 1 >= c.after) std::raise(SIGKILL);
}

bool fault_point(std::string_view name) {
  auto& c = config();
  return !c.fail.empty() && c.fail == name;
}

}  // namespace certfleet
