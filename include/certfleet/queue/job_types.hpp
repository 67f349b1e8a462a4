#pragma once
// The one job-type table (DESIGN §3): lane, default attempts, whether the generic jobs API may
// enqueue it. Enqueue validation, the worker lanes and docs/jobs.md read it.
#include <span>
#include <string_view>

namespace certfleet::queue {

inline constexpr std::string_view lane_main = "main";
inline constexpr std::string_view lane_dist = "dist";

struct job_type {
  std::string_view name;
  std::string_view lane;
  int max_attempts;
  bool user_triggerable;  // accepted by POST …/jobs
};

std::span<const job_type> all_job_types() noexcept;
const job_type* find_job_type(std::string_view name) noexcept;

}  // namespace certfleet::queue
