#pragma once
// The delivery phases this process timed, for /metrics (issue 20): one histogram per long-tail
// phase (run_view's tail_phases), fed by the engine as each target's result is recorded. Owned
// by the process's one event loop (no locks).
#include "certfleet/core/histogram.hpp"
#include "certfleet/delivery/module.hpp"

#include <string>
#include <utility>
#include <vector>

namespace certfleet::distribution {

class delivery_phase_metrics {
 public:
  delivery_phase_metrics();
  // Every tail phase among a delivery's timings; other phases are not kept.
  void observe(const std::vector<net::phase_timing>& timings);
  // (phase, histogram of its seconds), in tail_phases order.
  const std::vector<std::pair<std::string, histogram>>& phases() const noexcept { return phases_; }
  // Seconds, 5 ms to 60 s: a phase runs from a loopback millisecond to a 60 s command deadline.
  static const std::vector<double>& bounds();

 private:
  std::vector<std::pair<std::string, histogram>> phases_;
};

}  // namespace certfleet::distribution
