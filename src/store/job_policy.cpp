#include "certfleet/store/job_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace certfleet::store {

reap_transition reap_transition_of(const job_record& j, time_ms now) noexcept {
  if (j.attempts < j.max_attempts && !j.cancel_requested)
    return {job_status::pending, "lease expired: worker lost; returned to pending", lease_lost_code, lease_lost_class, 0};
  if (j.cancel_requested) return {job_status::cancelled, "cancelled on request (worker lost)", cancelled_code, {}, now};
  return {job_status::dead, "lease expired: worker lost", lease_lost_code, lease_lost_class, now};
}

std::optional<error> retry_refusal(const job_record& j) {
  if (j.status != job_status::failed && j.status != job_status::dead)
    return make_error(errc::conflict,
                      fmt::format("job {} is {}; only failed or dead jobs can be retried", j.id, to_string(j.status)),
                      "status");
  if (is_distribution_child(j))
    return make_error(errc::conflict,
                      fmt::format("job {} is a fan-out child of distribution {}: use the distribution's "
                                  "retry-failed instead",
                                  j.id, j.distribution_id),
                      "id");
  return std::nullopt;
}

result<rate_window> count_retry(const std::optional<rate_window>& stored, time_ms now, int per_minute) {
  const std::int64_t window = now / retry_window_ms;
  if (!stored || stored->window != window) return rate_window{window, 1};
  if (stored->count >= per_minute) {
    auto e = make_error(errc::rate_limited, fmt::format("more than {} job retries this minute in this project", per_minute));
    e.retry_after_s = std::max<std::int64_t>(1, ((window + 1) * retry_window_ms - now + 999) / 1000);
    return e;
  }
  return rate_window{window, stored->count + 1};
}

std::vector<target_result> target_outcomes(std::vector<target_result> results) {
  auto key = [](const target_result& r) { return std::tie(r.target_id, r.retry_attempt, r.fence, r.job_id); };
  // Stable: of two rows alike in the whole key, the later one given is kept.
  std::stable_sort(results.begin(), results.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  std::vector<target_result> out;
  for (auto& r : results) {
    if (!out.empty() && out.back().target_id == r.target_id) out.back() = std::move(r);
    else out.push_back(std::move(r));
  }
  return out;
}

}  // namespace certfleet::store
