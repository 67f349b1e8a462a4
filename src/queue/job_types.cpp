#include "certfleet/queue/job_types.hpp"

#include <array>

namespace certfleet::queue {

namespace {
constexpr std::array<job_type, 19> table{{
    {"issue_certificate", lane_main, 3, true},
    {"renew_certificate", lane_main, 3, true},
    {"validate_manual_dns", lane_main, 3, false},
    {"cleanup_dns", lane_main, 3, false},
    {"revoke_certificate", lane_main, 3, true},
    {"msca_issue_certificate", lane_main, 3, false},
    {"msca_renew_certificate", lane_main, 3, false},
    {"msca_poll_pending", lane_main, 3, false},
    {"distribution_execute", lane_dist, 1, false},
    {"distribution_rollback", lane_dist, 3, false},
    {"kek_rotation_orchestrate", lane_main, 3, false},
    {"kek_rotation_collection", lane_main, 3, false},
    {"certificate_expiration_check", lane_main, 3, true},
    {"domain_expiration_check", lane_main, 3, true},
    {"revocation_check", lane_main, 3, true},
    {"notification.send", lane_main, 3, false},
    {"discovery_execute", lane_main, 1, true},
    {"noop", lane_main, 3, true},
    {"maintenance_sweep", lane_main, 1, false},  // the scheduler's sweeps, one per name per cycle
}};
}  // namespace

std::span<const job_type> all_job_types() noexcept { return table; }

const job_type* find_job_type(std::string_view name) noexcept {
  for (const auto& t : table)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace certfleet::queue
