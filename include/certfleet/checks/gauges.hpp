#pragma once
// The catalog's gauges of /metrics, decided here so the route only renders them: which
// certificates are expiring soon or expired (the expiry window), and which distribution runs run
// longer than expected.
#include "certfleet/core/settings.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace certfleet::checks {

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

// One certificate's series (issue 36: as cert-manager and x509-certificate-exporter publish them).
struct certificate_series {
  std::string project, name, issuer;
  time_ms not_before = 0, not_after = 0;
  time_ms renewal_due = 0;  // ACME auto-renew certificates only (the lifetime rule); 0: none
};
// One distribution's current (or last) run.
struct distribution_series {
  std::string project, name;
  std::string status;         // a run_status
  time_ms run_finished_at = 0;  // 0: no run finished yet
};
// One target's latest successful delivery (targets never delivered to have none).
struct target_series {
  std::string project, name;
  time_ms last_success = 0;
};
// Each family is cut at this many series: one per catalog object, and a scrape stays bounded.
inline constexpr int max_series_per_family = 100'000;

struct catalog_gauges {
  std::int64_t certificates_expiring_soon = 0;  // not_after within the window, not yet passed
  std::int64_t certificates_expired = 0;        // not_after passed
  std::int64_t distributions_running = 0;
  std::int64_t distributions_running_long = 0;  // running_longer_than_expected
  std::int64_t certificates_revoked = 0;        // status revoked (through certfleet, or seen by revocation_check)
  std::vector<certificate_series> certificates;   // issued ones, by project then name
  std::vector<distribution_series> distributions; // by project then name
  std::vector<target_series> targets;             // delivered to at least once, by project then name
};
// From what catalog_read::certificates_expiring(now + window) and distributions_in_status("running")
// returned.
catalog_gauges count_gauges(const std::vector<store::catalog_object>& expiring_certificates,
                            const std::vector<store::distribution_record>& running, time_ms now);
// Certificates whose document says status "revoked".
std::int64_t count_revoked(const std::vector<store::catalog_object>& certificates);
// The per-certificate series of these certificate objects (not yet issued ones and documents
// that do not parse are left out); `project_names` maps project ids to names. Pure.
std::vector<certificate_series> certificate_series_of(const std::vector<store::catalog_object>& certificates,
                                                      const std::map<std::string, std::string>& project_names,
                                                      time_ms now);
// Reads them in one snapshot.
store::task<catalog_gauges> read_catalog_gauges(store::store& st, time_ms now, time_ms expiry_window);

}  // namespace certfleet::checks
