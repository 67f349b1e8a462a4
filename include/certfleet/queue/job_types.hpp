#pragma once
// The one job-type table (DESIGN §3): lane, default attempts, whether the generic jobs API may
// enqueue it, whether a distribution drives it. Enqueue validation, the worker lanes, the retry
// rule, the distribution's terminal hook and docs/jobs.md read it; code names a type by the
// constants below, never by a string of its own.
#include <span>
#include <string_view>

namespace certfleet::queue {

inline constexpr std::string_view lane_main = "main";
inline constexpr std::string_view lane_dist = "dist";

namespace job_names {
inline constexpr std::string_view issue_certificate = "issue_certificate";
inline constexpr std::string_view renew_certificate = "renew_certificate";
inline constexpr std::string_view validate_manual_dns = "validate_manual_dns";
inline constexpr std::string_view cleanup_dns = "cleanup_dns";
inline constexpr std::string_view revoke_certificate = "revoke_certificate";
inline constexpr std::string_view msca_issue_certificate = "msca_issue_certificate";
inline constexpr std::string_view msca_renew_certificate = "msca_renew_certificate";
inline constexpr std::string_view msca_poll_pending = "msca_poll_pending";
inline constexpr std::string_view distribution_execute = "distribution_execute";
inline constexpr std::string_view distribution_rollback = "distribution_rollback";
inline constexpr std::string_view kek_rotation_orchestrate = "kek_rotation_orchestrate";
inline constexpr std::string_view kek_rotation_collection = "kek_rotation_collection";
inline constexpr std::string_view certificate_expiration_check = "certificate_expiration_check";
inline constexpr std::string_view domain_expiration_check = "domain_expiration_check";
inline constexpr std::string_view revocation_check = "revocation_check";
inline constexpr std::string_view notification_send = "notification.send";
inline constexpr std::string_view discovery_execute = "discovery_execute";
inline constexpr std::string_view noop = "noop";
inline constexpr std::string_view maintenance_sweep = "maintenance_sweep";
}  // namespace job_names

struct job_type {
  std::string_view name;
  std::string_view lane;
  int max_attempts;
  bool user_triggerable;  // accepted by POST …/jobs
  // A job of a distribution run: reported to its run when it ends, and re-driven only through
  // its distribution (a new run over the failed targets), never retried alone.
  bool driven_by_distribution = false;
};

std::span<const job_type> all_job_types() noexcept;
const job_type* find_job_type(std::string_view name) noexcept;
// Whether `name` is a type of the table that a distribution drives (false for unknown types).
bool driven_by_distribution(std::string_view name) noexcept;

}  // namespace certfleet::queue
