#pragma once
// The context hint for a job's error (DESIGN §8): one table, read by the API's `error_hint` and
// `error_class` fields, the UI's job detail and docs/ui.md. Pure: a stored class (or, once, an
// error text and the job type) in, the row out.
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
// The worker asks it once, when it stores an error whose module named no class.
std::optional<error_hint> hint_for(std::string_view job_type, std::string_view error) noexcept;

// The row of a stored class (store::job_record::error_class); nullopt for none.
std::optional<error_hint> hint_of_class(std::string_view error_class) noexcept;

// A job's class and hint: the stored class's row; for a row stored before classes were (no
// class, no code), the words of its error.
std::optional<error_hint> hint_of_job(std::string_view job_type, std::string_view error_class,
                                      std::string_view error_code, std::string_view error) noexcept;

}  // namespace certfleet::queue
