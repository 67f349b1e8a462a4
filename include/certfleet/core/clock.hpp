#pragma once
// Time is milliseconds since the Unix epoch everywhere (the store keeps it as an integer: SQLite
// 3.40 has no sub-second unixepoch). The clock is injected so tests can move time.
#include <atomic>
#include <cstdint>
#include <string>

namespace certfleet {

using time_ms = std::int64_t;

class clock_source {
 public:
  virtual ~clock_source() = default;
  virtual time_ms now_ms() const = 0;
};

class system_clock_source final : public clock_source {
 public:
  time_ms now_ms() const override;
};

// A clock tests set by hand; thread-safe.
class manual_clock final : public clock_source {
 public:
  explicit manual_clock(time_ms start = 1'700'000'000'000) : now_(start) {}
  time_ms now_ms() const override { return now_.load(); }
  void set(time_ms t) { now_.store(t); }
  void advance(time_ms d) { now_.fetch_add(d); }

 private:
  std::atomic<time_ms> now_;
};

const clock_source& system_clock();
// "2026-11-29T09:05:18.123Z"; empty for 0 (never set).
std::string format_iso8601(time_ms t);

}  // namespace certfleet
