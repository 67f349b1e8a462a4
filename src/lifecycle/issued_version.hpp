#pragma once
// Storing what a CA issued as a certificate's next version (private to src/lifecycle): the ACME
// order job and the AD CS jobs share it, so both check the certificate against its key, refuse
// to stack a second version on one another job stored, fire certificate.issued / .renewed in the
// same transaction and log the runs their auto_execute distributions opened.
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace certfleet::lifecycle::detail {

// The leaf and chain a CA sent as the next version of certificate `name`, checked against the key
// the request was made with (a certificate for another key, an expired one or a chain out of
// order is refused: invalid_argument with the bundle check's words).
result<catalog::new_certificate> issued_version(std::string_view name, const std::string& leaf_pem,
                                                const std::string& chain_pem, std::string key_pem, time_ms now);

// Who stored it, for the certificate event: the job, its type, the names the event lists.
struct issued_by {
  std::string job_id, job_type;
  std::vector<std::string> names;
};

// Inside `tx`: `got` (read in this transaction; its document as the next version carries it on)
// gets `next` as its next version, unless it is no longer at `expected_version` (conflict naming
// "version": another job stored one meanwhile, not stored twice); certificate.issued (version 1)
// or certificate.renewed fires in the same transaction.
result<distribution::version_stored> store_issued_version(store::catalog_tx& tx, const kek& key,
                                                          const catalog::certificate_with_doc& got,
                                                          std::int64_t expected_version,
                                                          const catalog::new_certificate& next,
                                                          const distribution::run_settings& rs, time_ms now,
                                                          const issued_by& by);

// The job log after the store: the version and its serial, the runs it opened, the ones left to
// the distributions sweep.
boost::asio::awaitable<void> log_stored_version(queue::job_context& ctx, const std::string& certificate_id,
                                                const distribution::version_stored& stored,
                                                const catalog::new_certificate& next);

}  // namespace certfleet::lifecycle::detail
