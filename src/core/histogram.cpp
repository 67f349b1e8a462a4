#include "certfleet/core/histogram.hpp"

#include <fmt/format.h>

namespace certfleet {

const std::vector<double>& histogram::default_bounds() {
  static const std::vector<double> b{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  return b;
}

histogram::histogram() : histogram(default_bounds()) {}

histogram::histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::uint64_t cum = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  cum += counts_.back();
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, labels, cum);
  std::string_view l = labels;
  if (!l.empty() && l.back() == ',') l.remove_suffix(1);
  out += fmt::format("{}_sum{}{}{} {}\n", name, l.empty() ? "" : "{", l, l.empty() ? "" : "}", sum_);
  out += fmt::format("{}_count{}{}{} {}\n", name, l.empty() ? "" : "{", l, l.empty() ? "" : "}", count_);
}

}  // namespace certfleet
