#include "certfleet/queue/job_types.hpp"

#include <array>

namespace certfleet::queue {

namespace {
namespace n = job_names;
constexpr std::array<job_type, 19> table{{
    {n::issue_certificate, lane_main, 3, true},
    {n::renew_certificate, lane_main, 3, true},
    {n::validate_manual_dns, lane_main, 3, false},
    {n::cleanup_dns, lane_main, 3, false},
    {n::revoke_certificate, lane_main, 3, true},
    {n::msca_issue_certificate, lane_main, 3, false},
    {n::msca_renew_certificate, lane_main, 3, false},
    {n::msca_poll_pending, lane_main, 3, false},
    {n::distribution_execute, lane_dist, 1, false, true},
    {n::distribution_rollback, lane_dist, 3, false, true},
    {n::kek_rotation_orchestrate, lane_main, 3, false},
    {n::kek_rotation_collection, lane_main, 3, false},
    {n::certificate_expiration_check, lane_main, 3, true},
    {n::domain_expiration_check, lane_main, 3, true},
    {n::revocation_check, lane_main, 3, true},
    {n::notification_send, lane_main, 3, false},
    {n::discovery_execute, lane_main, 1, true},
    {n::noop, lane_main, 3, true},
    {n::maintenance_sweep, lane_main, 1, false},  // the scheduler's sweeps, one per name per cycle
}};
}  // namespace

std::span<const job_type> all_job_types() noexcept { return table; }

const job_type* find_job_type(std::string_view name) noexcept {
  for (const auto& t : table)
    if (t.name == name) return &t;
  return nullptr;
}

bool driven_by_distribution(std::string_view name) noexcept {
  const job_type* t = find_job_type(name);
  return t && t->driven_by_distribution;
}

}  // namespace certfleet::queue
