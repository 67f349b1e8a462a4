#pragma once
// The states of a distribution's run as the catalog stores them (DESIGN §4): the run's status and
// mode (distribution_record), a target's result (target_result) and a fan-out child's outcome
// (finalized_child). The records keep the stored words as strings, so no stored document
// changes; code names a state through these enums and writes or compares its word, to_string.
#include <array>
#include <optional>
#include <string_view>

namespace certfleet::store {

namespace detail {
template <class E, std::size_t N>
constexpr std::optional<E> parse_state(const std::array<std::string_view, N>& names, std::string_view s) noexcept {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}
}  // namespace detail

// distribution_record::status: idle before the first run, running while one is open, then how the
// last run ended.
enum class run_status { idle, running, success, partial, failed, cancelled };
inline constexpr std::array<std::string_view, 6> run_status_names{"idle",    "running", "success",
                                                                  "partial", "failed",  "cancelled"};
constexpr std::string_view to_string(run_status s) noexcept { return run_status_names[static_cast<std::size_t>(s)]; }
constexpr std::optional<run_status> parse_run_status(std::string_view s) noexcept {
  return detail::parse_state<run_status>(run_status_names, s);
}

// distribution_record::mode, of the current run: none ("") before the first run.
enum class run_mode { none, normal, fan_out, rollback };
inline constexpr std::array<std::string_view, 4> run_mode_names{"", "normal", "fan_out", "rollback"};
constexpr std::string_view to_string(run_mode m) noexcept { return run_mode_names[static_cast<std::size_t>(m)]; }
constexpr std::optional<run_mode> parse_run_mode(std::string_view s) noexcept {
  return detail::parse_state<run_mode>(run_mode_names, s);
}

// target_result::status: one target's result from one attempt.
enum class target_status { succeeded, failed, skipped, cancelled };
inline constexpr std::array<std::string_view, 4> target_status_names{"succeeded", "failed", "skipped", "cancelled"};
constexpr std::string_view to_string(target_status s) noexcept {
  return target_status_names[static_cast<std::size_t>(s)];
}
constexpr std::optional<target_status> parse_target_status(std::string_view s) noexcept {
  return detail::parse_state<target_status>(target_status_names, s);
}

// finalized_child::outcome: the counter (fan_out_succeeded, ...) a fan-out child incremented.
enum class fan_out_outcome { succeeded, failed, partial, cancelled };
inline constexpr std::array<std::string_view, 4> fan_out_outcome_names{"succeeded", "failed", "partial", "cancelled"};
constexpr std::string_view to_string(fan_out_outcome o) noexcept {
  return fan_out_outcome_names[static_cast<std::size_t>(o)];
}
constexpr std::optional<fan_out_outcome> parse_fan_out_outcome(std::string_view s) noexcept {
  return detail::parse_state<fan_out_outcome>(fan_out_outcome_names, s);
}

}  // namespace certfleet::store
