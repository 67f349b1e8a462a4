#include "certfleet/distribution/phase_metrics.hpp"

#include "certfleet/distribution/run_view.hpp"

namespace certfleet::distribution {

const std::vector<double>& delivery_phase_metrics::bounds() {
  static const std::vector<double> b{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60};
  return b;
}

delivery_phase_metrics::delivery_phase_metrics() {
  for (auto p : tail_phases) phases_.emplace_back(std::string(p), histogram(bounds()));
}

void delivery_phase_metrics::observe(const std::vector<net::phase_timing>& timings) {
  for (const auto& t : timings)
    for (auto& [phase, h] : phases_)
      if (phase == t.phase) h.observe(static_cast<double>(t.ms) / 1000.0);
}

}  // namespace certfleet::distribution
