// The results route's query (run, page, filters) and what the route computes from a run's
// stored results: the first line of the input is the query string, every further line one
// result's stored detail (its timings JSON). The filter must accept only known values; the long
// tail's percentiles must be ordered and its slowest targets sorted, whatever the details hold.
#include "certfleet/api/requests.hpp"
#include "certfleet/distribution/run_view.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view query = in.substr(0, nl);
  std::string_view rest = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);

  distribution::result_filter filter;
  if (auto q = api::parse_query(query)) {
    if (auto rq = api::parse_results_query(*q)) {
      if (auto f = distribution::parse_result_filter(rq->status, rq->error_class)) {
        if (!f->status.empty() &&
            std::find(distribution::result_statuses.begin(), distribution::result_statuses.end(), f->status) ==
                distribution::result_statuses.end())
          __builtin_trap();  // an unknown status got through
        filter = *f;
      }
    }
  }

  std::vector<store::target_result> results;
  std::size_t i = 0;
  while (!rest.empty() && results.size() < 2000) {
    auto end = rest.find('\n');
    store::target_result r;
    r.target_id = "t" + std::to_string(i);
    r.status = std::string(distribution::result_statuses[i % distribution::result_statuses.size()]);
    r.error_class = i % 3 ? "network" : "";
    r.started_at = static_cast<std::int64_t>(i) * 7;
    r.finished_at = r.started_at + static_cast<std::int64_t>(rest.substr(0, end).size());
    r.detail = std::string(rest.substr(0, end));
    results.push_back(std::move(r));
    ++i;
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
  }
  for (const auto& r : results) (void)filter.matches(r);
  auto facets = distribution::facet_counts(results);
  (void)distribution::facets_json(facets);
  auto tail = distribution::compute_long_tail(results, 10);
  if (tail.phases.size() != distribution::tail_phases.size() || tail.slowest.size() > 10) __builtin_trap();
  for (const auto& p : tail.phases)
    if (p.p50_ms > p.p90_ms || p.p90_ms > p.p99_ms || p.p99_ms > p.max_ms || p.count < 0) __builtin_trap();
  for (std::size_t k = 1; k < tail.slowest.size(); ++k)
    if (tail.slowest[k - 1].total_ms < tail.slowest[k].total_ms) __builtin_trap();
  (void)distribution::long_tail_json(tail);
  return 0;
}
