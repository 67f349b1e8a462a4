#include "certfleet/app/exit_codes.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::app {

namespace {
using X = exit_code;
constexpr std::array<exit_code_def, 8> table{{
    {X::ok, "ok", "Done. With `--wait`/`--watch`: the job completed, or the distribution run succeeded."},
    {X::failed, "failed",
     "The job ended failed, dead or cancelled, or the distribution run ended failed or cancelled; or the "
     "command failed for a reason not below (the message says which)."},
    {X::usage, "usage",
     "Bad usage or input: an unknown command or flag, a bad value, an invalid config setting. The message "
     "names the flag, field or setting."},
    {X::not_found, "not_found", "No such job, distribution, project or token (in that project)."},
    {X::conflict, "conflict",
     "Wrong state for the request: retrying a job that did not fail, cancelling a finished one, executing a "
     "distribution that is running, restoring over an existing store without --force."},
    {X::unavailable, "unavailable",
     "Try again later: the store is busy (another process held its write lock past store_busy_timeout_ms), its "
     "disk is full, or the project's manual retries per minute (job_retry_per_minute) are used up."},
    {X::partial, "partial",
     "With `--wait`/`--watch`: the distribution run ended partial, or the job completed partial (some targets "
     "failed)."},
    {X::timeout, "timeout", "`--timeout` passed before the job or the run ended (it goes on; nothing was stopped)."},
}};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (static_cast<std::size_t>(table[i].code) != i) return false;
  return true;
}
static_assert(rows_in_order());
}  // namespace

std::span<const exit_code_def> all_exit_codes() noexcept { return table; }

exit_code exit_code_for(const error& e) noexcept {
  switch (e.value()) {
    case errc::invalid_argument:
    case errc::config_invalid:
    case errc::unknown_job_type:
    case errc::payload_too_large: return X::usage;
    case errc::not_found: return X::not_found;
    case errc::conflict: return X::conflict;
    case errc::rate_limited:
    case errc::store_busy:
    case errc::store_disk_full: return X::unavailable;
    case errc::timeout: return X::timeout;
    default: return X::failed;
  }
}

std::string exit_codes_markdown() {
  std::string out = "| code | name | meaning |\n|---|---|---|\n";
  for (const auto& d : table) out += fmt::format("| {} | `{}` | {} |\n", to_int(d.code), d.name, d.meaning);
  return out;
}

}  // namespace certfleet::app
