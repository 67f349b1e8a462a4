#pragma once
// A certificate's versions (DESIGN §9). Storing a new version — an upload to …/versions, an ACME
// issuance or renewal — keeps the previous one as a certificate_version object and, in the same
// transaction, opens a run of every distribution of the certificate that executes by itself, so a
// new certificate reaches its fleet without a person.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace certfleet::distribution {

struct version_stored {
  std::int64_t version = 0;
  std::vector<std::string> runs_opened;    // distributions whose run opened with this version
  std::vector<store::enqueue_outcome> jobs;  // their runs' jobs (lanes to wake after the commit)
  // Distributions in the middle of a run: the distributions sweep opens their run for this
  // version once that run has ended (run_pending_auto_executes).
  std::vector<std::string> runs_deferred;
};

// Inside `tx`: the current version of `cert` (if one was issued) becomes a certificate_version
// object with its key re-sealed to that object; `next` becomes current (version + 1, its expiry
// notifications reset, status active, source kept); then every distribution of the certificate
// with auto_execute that is not running opens a run (trigger renewal_run_trigger) as `actor`.
result<version_stored> store_new_version(store::catalog_tx& tx, const kek& key, const store::catalog_object& cert,
                                         const catalog::new_certificate& next, const run_settings& rs, time_ms now,
                                         std::string_view actor);

// Whether a distribution's next run is owed to a newer version of its certificate: it executes
// by itself, ran before, is not running, and its last run opened with an older version.
bool owes_auto_execute(const store::distribution_record& d, std::int64_t certificate_version);

// The distributions sweep's part: opens the runs that store_new_version deferred (or that a crash
// between two transactions lost). Returns how many it opened.
boost::asio::awaitable<result<int>> run_pending_auto_executes(store::store& st, const clock_source& clock);

}  // namespace certfleet::distribution
