#pragma once
// The workflow of an ACME job as its detail shows it (DESIGN §9): where the job is in the fixed
// list of steps, the manual DNS challenges waiting for the operator, the records it presented;
// and the operator's "the records are in place" (POST …/jobs/{id}/validate-dns). Synchronous
// code over one store read or transaction.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/job.hpp"

#include <boost/json/object.hpp>

#include <span>
#include <string>
#include <string_view>

namespace certfleet::lifecycle {

// initialized, awaiting_validation, dns_presenting, dns_propagating, validating, finalizing,
// downloading, storing, completed. A job's progress is its step's position in this list (1-based).
std::span<const std::string_view> acme_workflow_steps() noexcept;

// issue_certificate, renew_certificate, validate_manual_dns.
bool has_acme_workflow(std::string_view job_type) noexcept;

// The job's `workflow` member: {kind: "acme", step, steps, failed_step?, skipped_steps, manual_challenges:
// [{fqdn, value, status}], presented_records: [{fqdn, provider, at, removed_at}]}. The manual
// challenges are the certificate's manual order when this job prepared it or validates it.
result<boost::json::object> acme_workflow_view(store::catalog_read& rd, const store::job_record& j);

// POST …/jobs/{id}/validate-dns on the job that prepared a manual order or one of its
// validate_manual_dns jobs: the order's next validate_manual_dns, or the one of that order that
// is running or due now (created false; one due later, such as the job's own first check in 30 s,
// does not count: the operator asked for now). Conflict (naming the field "id") when the job has no manual order
// waiting; not_found for a job of another project.
result<store::enqueue_outcome> enqueue_manual_validation(store::catalog_tx& tx, const std::string& project_id,
                                                         const std::string& job_id, const std::string& actor,
                                                         time_ms now);

}  // namespace certfleet::lifecycle
