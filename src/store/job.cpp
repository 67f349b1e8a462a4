#include "certfleet/store/job.hpp"

#include <array>

namespace certfleet::store {

namespace {
constexpr std::array<std::string_view, 6> names{"pending", "active", "completed", "failed", "dead", "cancelled"};
}

std::string_view to_string(job_status s) noexcept { return names[static_cast<std::size_t>(s)]; }

std::optional<job_status> parse_job_status(std::string_view s) noexcept {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == s) return static_cast<job_status>(i);
  return std::nullopt;
}

}  // namespace certfleet::store
