#include "certfleet/core/clock.hpp"

#include <chrono>
#include <ctime>
#include <fmt/format.h>

namespace certfleet {

time_ms system_clock_source::now_ms() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

const clock_source& system_clock() {
  static const system_clock_source instance;
  return instance;
}

std::string format_iso8601(time_ms t) {
  if (t == 0) return {};
  std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(t % 1000));
}

}  // namespace certfleet
