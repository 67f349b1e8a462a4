#pragma once
// What the results route and the distribution view compute from a run's stored results, without
// I/O: the status / error-class filter of the results route, the counts behind its filter menus,
// and the long tail — per-phase percentiles over the run and its slowest targets (issue 20).
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::distribution {

// A target's status in a run's results: a result's status (store::target_status), or `pending`
// for a target of the current run that has none yet.
inline constexpr std::string_view result_pending = "pending";
inline constexpr std::array<std::string_view, 5> result_statuses{
    to_string(store::target_status::succeeded), to_string(store::target_status::failed),
    to_string(store::target_status::skipped), to_string(store::target_status::cancelled), result_pending};

// A results page ({items: [...]}) as a role below admin sees it: without `error_detail`, the
// precise cause behind a deliberately uniform error ("could not connect to HOST:PORT" hides
// refused / timed out / no banner from every role, issue 28; admins keep the cause).
void strip_admin_detail(boost::json::value& results_page);

// `GET …/results?status=&error_class=`; empty: no filter on that field.
struct result_filter {
  std::string status;
  std::string error_class;
  bool matches(const store::target_result& r) const noexcept;
};
// Refuses a value that is no status (field "status") or no error class of the delivery table
// (field "error_class"), naming the values it takes.
result<result_filter> parse_result_filter(std::string_view status, std::string_view error_class);

// How many of a run's results have each status and each error class (every status is listed,
// with 0; classes only when some result has one), for the filter menus.
struct result_facets {
  std::map<std::string, std::int64_t> status;
  std::map<std::string, std::int64_t> error_class;
};
result_facets facet_counts(const std::vector<store::target_result>& results);
boost::json::object facets_json(const result_facets& f);

// The phases whose spread the long tail shows, in delivery order (the timings_ms keys of an SSH
// delivery; a module that has no such phase contributes nothing to it).
inline constexpr std::array<std::string_view, 6> tail_phases{"connect", "handshake", "auth",
                                                             "upload",  "install",   "validate"};

struct phase_spread {
  std::string phase;
  std::int64_t count = 0;  // results that went through the phase
  std::int64_t p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};

struct slow_target {
  std::string target_id;
  std::string status;
  std::int64_t total_ms = 0;         // finished_at - started_at: from its start (after any wait for a session)
  std::int64_t session_wait_ms = 0;  // waited for a session to its host before it started
  std::vector<std::pair<std::string, std::int64_t>> phases_ms;  // every phase it timed, in order
};

struct long_tail {
  std::int64_t timed = 0;  // results that carry timings
  std::vector<phase_spread> phases;  // one per tail phase, in tail_phases order
  std::vector<slow_target> slowest;  // longest total first (ties: target id), at most `top`
};

// The nearest-rank percentile (q in (0, 1]) of ascending `sorted` values: the smallest value at
// or above which a share q of the values lie; 0 for none.
std::int64_t percentile(const std::vector<std::int64_t>& sorted, double q) noexcept;

// Over a run's results (one per target: its outcome) and their stored timings (`detail`, the
// JSON the engine writes: {"timings_ms": {phase: ms, …}, "session_wait_ms"?: ms}). A detail
// that does not parse counts as untimed. Pending results are skipped.
long_tail compute_long_tail(const std::vector<store::target_result>& results, std::size_t top = 10);
boost::json::object long_tail_json(const long_tail& t);

}  // namespace certfleet::distribution
