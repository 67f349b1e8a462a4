#pragma once
// Who made a job: the names a system writer puts in a job's triggered_by (DESIGN §3), each with
// the words the API and the UI show for it (trigger_in_words, DESIGN §8 "Triggered By"). Code
// names a trigger by these constants, never by a string of its own; a new one is a constant and
// its row. A person's trigger is "token:<id>": the API shows the token's name, so it has no words.
#include "certfleet/queue/job_types.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::queue {

namespace triggers {
// A prefix: the scheduler adds its holder id ("scheduler:host:123:abcd").
inline constexpr std::string_view scheduler = "scheduler:";
inline constexpr std::string_view cli = "cli";
// Checks: their events' notifications name the check's job type.
inline constexpr std::string_view certificate_expiration_check = job_names::certificate_expiration_check;
inline constexpr std::string_view revocation_check = job_names::revocation_check;
inline constexpr std::string_view domain_expiration_check = job_names::domain_expiration_check;
// ACME jobs: the notifications of the certificate events they fire name the job's type.
inline constexpr std::string_view issue_certificate = job_names::issue_certificate;
inline constexpr std::string_view renew_certificate = job_names::renew_certificate;
inline constexpr std::string_view validate_manual_dns = job_names::validate_manual_dns;
inline constexpr std::string_view revoke_certificate = job_names::revoke_certificate;
inline constexpr std::string_view renewal_sweep = "renewal_sweep";
inline constexpr std::string_view dns_cleanup_sweep = "dns_cleanup_sweep";
inline constexpr std::string_view acme_workflow = "acme_workflow";
// AD CS: the poll chain of a request held for approval (each poll enqueues the next).
inline constexpr std::string_view msca_workflow = "msca_workflow";
inline constexpr std::string_view msca_issue_certificate = job_names::msca_issue_certificate;
inline constexpr std::string_view msca_renew_certificate = job_names::msca_renew_certificate;
inline constexpr std::string_view retry_wave = "retry_wave";
inline constexpr std::string_view distribution_sweep = "distribution_sweep";
inline constexpr std::string_view distribution = "distribution";  // a run's fan-out and its events
inline constexpr std::string_view job_dead = "job_dead";          // a job.dead notification
inline constexpr std::string_view kek_rotation = "kek_rotation";
// A prefix: "token:<token id>".
inline constexpr std::string_view token = "token:";
}  // namespace triggers

struct trigger_def {
  std::string_view name;  // a prefix when it ends in ':'
  std::string_view words;
};

// Every system trigger with its words, read by trigger_in_words.
inline constexpr std::array<trigger_def, 20> trigger_table{{
    {triggers::scheduler, "scheduler"},
    {triggers::cli, "command line"},
    {triggers::certificate_expiration_check, "expiry sweep"},
    {triggers::revocation_check, "revocation check"},
    {triggers::domain_expiration_check, "domain check"},
    {triggers::issue_certificate, "certificate issuance"},
    {triggers::renew_certificate, "certificate renewal"},
    {triggers::validate_manual_dns, "manual DNS validation"},
    {triggers::revoke_certificate, "certificate revocation"},
    {triggers::renewal_sweep, "renewal sweep"},
    {triggers::dns_cleanup_sweep, "DNS cleanup sweep"},
    {triggers::acme_workflow, "certificate workflow"},
    {triggers::msca_workflow, "AD CS approval poll"},
    {triggers::msca_issue_certificate, "AD CS enrollment"},
    {triggers::msca_renew_certificate, "AD CS renewal"},
    {triggers::retry_wave, "retry wave"},
    {triggers::distribution_sweep, "distribution sweep"},
    {triggers::distribution, "fan-out"},
    {triggers::job_dead, "dead job"},
    {triggers::kek_rotation, "KEK rotation"},
}};

namespace detail {
constexpr bool trigger_rows_have_words_and_unique_names() {
  for (std::size_t i = 0; i < trigger_table.size(); ++i) {
    if (trigger_table[i].name.empty() || trigger_table[i].words.empty()) return false;
    for (std::size_t j = 0; j < i; ++j)
      if (trigger_table[j].name == trigger_table[i].name) return false;
  }
  return true;
}
}  // namespace detail
static_assert(detail::trigger_rows_have_words_and_unique_names());

inline std::string scheduler_trigger(std::string_view holder_id) {
  return std::string(triggers::scheduler).append(holder_id);
}
constexpr bool from_scheduler(std::string_view triggered_by) noexcept {
  return triggered_by.starts_with(triggers::scheduler);
}
inline std::string token_trigger(std::string_view token_id) { return std::string(triggers::token).append(token_id); }
// The token id of a person's trigger; nullopt for any other.
constexpr std::optional<std::string_view> token_of(std::string_view triggered_by) noexcept {
  if (!triggered_by.starts_with(triggers::token)) return std::nullopt;
  return triggered_by.substr(triggers::token.size());
}

}  // namespace certfleet::queue
