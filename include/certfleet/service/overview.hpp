#pragma once
// The project's overview (issue 31: the console's landing page): what needs an operator, from the
// catalog — certificates expired or expiring within the expiry window and the soonest of them,
// ACME certificates not issued yet, distributions running and those whose last run failed, the
// domain checks and discovery findings. Built without I/O from the objects one read returned; the
// job counts are the API's (api/dashboard_routes.cpp), from the store's exact tab counts.
#include "certfleet/core/clock.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/object.hpp>

#include <cstddef>
#include <vector>

namespace certfleet::service {

// Each list of the overview holds at most this many entries (the counts are always whole).
inline constexpr std::size_t overview_list_max = 10;
// What one overview reads at most per kind; a larger project says `truncated`.
inline constexpr int overview_read_max = 100'000;

struct overview_input {
  std::vector<store::catalog_object> certificates, domains, discovered;
  std::vector<store::distribution_record> distributions;
  bool truncated = false;  // a kind held more than overview_read_max objects: counts are lower bounds
};

// {certificates: {total, expired, expiring_soon, window_days, not_issued, soonest[]},
//  distributions: {total, running, failed, running_list[], failed_list[]},
//  checks: {domains: {total, ok, expiring, error, unknown}, discovered: {total, with_findings},
//           findings: {name: count}}, truncated}
// `window` is the expiry window (gauges.hpp: the largest certificate_expiry_thresholds_days).
boost::json::object overview_json(const overview_input& in, time_ms now, time_ms window);

}  // namespace certfleet::service
