#include "certfleet/queue/backoff.hpp"

namespace certfleet::queue {

time_ms backoff_ms(int attempts) noexcept {
  constexpr time_ms base = 30'000, cap = 600'000;
  if (attempts < 1) attempts = 1;
  if (attempts > 6) return cap;  // 30 s × 2^5 = 16 min already exceeds the cap
  time_ms d = base << (attempts - 1);
  return d < cap ? d : cap;
}

}  // namespace certfleet::queue
