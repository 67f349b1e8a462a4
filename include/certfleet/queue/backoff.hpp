#pragma once
#include "certfleet/core/clock.hpp"

namespace certfleet::queue {

// Delay before the next attempt after `attempts` failed ones: min(30 s × 2^(attempts−1), 10 min).
time_ms backoff_ms(int attempts) noexcept;

}  // namespace certfleet::queue
