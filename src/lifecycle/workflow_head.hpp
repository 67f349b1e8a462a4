#pragma once
// The head of a job's workflow view, the same for ACME and AD CS (private to src/lifecycle):
// which step the job reached, from its progress (current of total is the step's number).
#include "certfleet/store/job.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <span>
#include <string_view>

namespace certfleet::lifecycle::detail {

// {kind, step, steps[], failed_step when the job failed or is dead}; `at` is the step's index, 0
// (the first) when the job's progress is not this workflow's.
inline boost::json::object workflow_head(std::string_view kind, std::span<const std::string_view> steps,
                                         const store::job_record& j, std::size_t& at) {
  boost::json::array names;
  for (auto s : steps) names.emplace_back(s);
  const auto n = static_cast<std::int64_t>(steps.size());
  at = j.progress_total == n && j.progress_current >= 1 && j.progress_current <= n
           ? static_cast<std::size_t>(j.progress_current - 1)
           : 0;
  boost::json::object w{{"kind", kind}, {"step", steps[at]}, {"steps", std::move(names)}};
  if (j.status == store::job_status::failed || j.status == store::job_status::dead) w["failed_step"] = steps[at];
  return w;
}

}  // namespace certfleet::lifecycle::detail
