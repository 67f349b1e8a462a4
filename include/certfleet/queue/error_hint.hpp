#pragma once
// The context hint for a job's error (DESIGN §8): one table, read by the API's `error_hint` and
// `error_class` fields, the UI's job detail and docs/ui.md. Pure: the error text and the job type
// in, the row out.
#include <optional>
#include <span>
#include <string_view>

namespace certfleet::queue {

struct error_hint {
  std::string_view error_class;  // stable name: "dns", "ssh_unreachable", "timeout", …
  std::string_view hint;         // what to check, for an operator
};

// The rows, in the order they are tried; docs/ui.md lists them.
std::span<const error_hint> all_error_hints() noexcept;

// The first row whose words appear in `error` (case-insensitive); nullopt for no error or none.
std::optional<error_hint> hint_for(std::string_view job_type, std::string_view error) noexcept;

}  // namespace certfleet::queue
