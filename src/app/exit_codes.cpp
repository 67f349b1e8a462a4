#include "certfleet/app/exit_codes.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

namespace certfleet::app {

namespace {
using X = exit_code;
constexpr std::array<exit_code_def, 8> table{{
    {X::ok, "ok", "Done. With `--wait`/`--watch`: the job completed, or the distribution run succeeded."},
    {X::failed, "failed",
     "The job ended failed, dead or cancelled, or the distribution run ended failed or cancelled; or the "
     "command failed for a reason not below (the message says which).",
     errc_exit::failed},
    {X::usage, "usage",
     "Bad usage or input: an unknown command or flag, a bad value, an invalid config setting. The message "
     "names the flag, field or setting.",
     errc_exit::usage},
    {X::not_found, "not_found", "No such job, distribution, project or token (in that project).", errc_exit::not_found},
    {X::conflict, "conflict",
     "Wrong state for the request: retrying a job that did not fail, cancelling a finished one, executing a "
     "distribution that is running, restoring over an existing store without --force.",
     errc_exit::conflict},
    {X::unavailable, "unavailable",
     "Try again later: the store is busy (another process held its write lock past store_busy_timeout_ms), its "
     "disk is full, or the project's manual retries per minute (job_retry_per_minute) are used up.",
     errc_exit::unavailable},
    {X::partial, "partial",
     "With `--wait`/`--watch`: the distribution run ended partial, or the job completed partial (some targets "
     "failed)."},
    {X::timeout, "timeout", "`--timeout` passed before the job or the run ended (it goes on; nothing was stopped).",
     errc_exit::timeout},
}};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < table.size(); ++i)
    if (static_cast<std::size_t>(table[i].code) != i) return false;
  return true;
}
static_assert(rows_in_order());

// The one exit code of an errc kind. A kind with none or with two is a throw, so a build error
// where it is evaluated at compile time: for every errc row, below.
constexpr exit_code exit_of(errc_exit kind) {
  const exit_code_def* found = nullptr;
  for (const auto& d : table) {
    if (d.for_errc != kind) continue;
    if (found) throw std::logic_error("an errc exit kind with two exit codes");
    found = &d;
  }
  if (!found) throw std::logic_error("an errc exit kind without an exit code");
  return found->code;
}

constexpr bool every_errc_has_one_exit() {
  for (const auto& r : errc_table) exit_of(r.exit);
  exit_of(errc_not_a_code.exit);
  return true;
}
static_assert(every_errc_has_one_exit());
}  // namespace

std::span<const exit_code_def> all_exit_codes() noexcept { return table; }

exit_code exit_code_for(const error& e) noexcept { return exit_of(errc_row_of(e.value()).exit); }

std::string exit_codes_markdown() {
  std::string out = "| code | name | meaning |\n|---|---|---|\n";
  for (const auto& d : table) out += fmt::format("| {} | `{}` | {} |\n", to_int(d.code), d.name, d.meaning);
  return out;
}

}  // namespace certfleet::app
