#pragma once
// A Prometheus histogram (cumulative buckets, sum, count) and its exposition text: the API's
// latencies and the delivery phases of /metrics use it. Not synchronized: one event loop owns it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet {

class histogram {
 public:
  histogram();  // default_bounds()
  explicit histogram(std::vector<double> bounds);  // ascending upper bounds, +Inf added
  void observe(double value);
  // Lines "name_bucket{labels,le=…} n", _sum, _count; `labels` is "" or `a="b",`.
  void render(std::string& out, std::string_view name, std::string_view labels) const;
  std::uint64_t count() const noexcept { return count_; }
  // Seconds from 0.5 ms to 10 s: request and store-call latencies.
  static const std::vector<double>& default_bounds();

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, then +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace certfleet
