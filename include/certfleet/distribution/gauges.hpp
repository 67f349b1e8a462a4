#pragma once
// The catalog's gauges of /metrics, decided here so the route only renders them: which
// certificates are expiring soon or expired (the expiry window), and which distribution runs run
// longer than expected.
#include "certfleet/core/settings.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

#include <cstdint>
#include <vector>

namespace certfleet::distribution {

inline constexpr time_ms day_ms = 86'400'000;
// A run still in progress this long after it started runs longer than expected.
inline constexpr time_ms expected_run_ms = 3'600'000;

// The expiry window: a certificate whose not_after is less than this far away is expiring soon.
// It is the largest of certificate_expiry_thresholds_days (`thresholds_days` largest first, as
// parse_expiry_thresholds gives them; empty: 0).
time_ms expiry_window_ms(const std::vector<std::int64_t>& thresholds_days) noexcept;
// The same from the settings (a value that does not parse: the setting's default).
time_ms expiry_window_ms(const settings_map& settings);

bool running_longer_than_expected(const store::distribution_record& d, time_ms now) noexcept;

struct catalog_gauges {
  std::int64_t certificates_expiring_soon = 0;  // not_after within the window, not yet passed
  std::int64_t certificates_expired = 0;        // not_after passed
  std::int64_t distributions_running = 0;
  std::int64_t distributions_running_long = 0;  // running_longer_than_expected
  std::int64_t certificates_revoked = 0;        // status revoked (through certfleet, or seen by revocation_check)
};
// From what catalog_read::certificates_expiring(now + window) and distributions_in_status("running")
// returned.
catalog_gauges count_gauges(const std::vector<store::catalog_object>& expiring_certificates,
                            const std::vector<store::distribution_record>& running, time_ms now);
// Certificates whose document says status "revoked".
std::int64_t count_revoked(const std::vector<store::catalog_object>& certificates);
// Reads them in one snapshot.
store::task<catalog_gauges> read_catalog_gauges(store::store& st, time_ms now, time_ms expiry_window);

}  // namespace certfleet::distribution
