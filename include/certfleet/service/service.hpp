#pragma once
// What the catalog and distribution routes do (DESIGN §6), independent of HTTP: each operation
// checks its input, reads or writes the store, and returns the JSON view the API sends. Errors
// are values naming the field (invalid_argument → 400, not_found → 404, conflict → 409).
#include "certfleet/catalog/target_import.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/distribution/run_view.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::service {

template <class T>
using op = boost::asio::awaitable<result<T>>;

// Who asks for a change: the audit actor ("token:<id>") and whether it is a system admin.
struct requester {
  std::string actor;
  bool system_admin = false;
};

class service {
 public:
  // `key` may be null: then every route that seals or opens a secret answers 503.
  service(store::store& st, queue::queue_service& queue, const clock_source& clock, const kek* key,
          boost::asio::thread_pool* cpu = nullptr, std::string ca_pem = {});

  // Objects by kind (store::kind_certificate, kind_credential, kind_target, kind_channel, kind_rule).
  // A `file` target writes and runs commands on the worker host: only a system admin may create
  // one (forbidden otherwise, nothing stored), and its paths must lie under the system setting
  // file_target_base_dirs (invalid_argument naming the path's field). This is the one place a
  // target enters the store.
  op<boost::json::value> create(std::string_view kind, std::string project_id, std::string body, requester who = {});
  // POST …/targets:import (catalog/target_import.hpp): every row checked as create checks one
  // target, then all stored in one transaction, or none. Bad rows come back in the outcome's
  // `refused` (each named by its line), not as an error: the caller answers with all of them.
  struct target_import_outcome {
    std::vector<std::string> ids;   // in the body's order
    std::optional<catalog::target_import> refused;
  };
  op<target_import_outcome> import_targets(std::string project_id, std::string body, catalog::import_format format,
                                           requester who = {});
  op<boost::json::value> get(std::string_view kind, std::string project_id, std::string id);
  op<boost::json::value> list(std::string_view kind, std::string project_id, int page, int page_size);
  // Refused with conflict while another object or a distribution uses it.
  op<boost::json::value> remove(std::string_view kind, std::string project_id, std::string id);

  op<boost::json::value> create_distribution(std::string project_id, std::string body);
  op<boost::json::value> get_distribution(std::string project_id, std::string id);
  op<boost::json::value> list_distributions(std::string project_id, int page, int page_size);
  op<boost::json::value> remove_distribution(std::string project_id, std::string id);
  // Opens a new run: fan-out batch children or one normal job, enqueued with the run in one
  // transaction. Conflict while a run is going.
  op<boost::json::value> execute(std::string project_id, std::string id, std::string actor);
  // POST …/certificates/{id}/versions: a new version of an uploaded certificate; every
  // distribution of it with auto_execute opens a run in the same transaction (certificates.hpp).
  op<boost::json::value> add_certificate_version(std::string project_id, std::string id, std::string body,
                                                 std::string actor);
  // POST …/certificates/issue: an ACME certificate (source acme, version 0, status pending) and
  // its issue_certificate job (key issue:<id>) in one transaction → {certificate_id, job_id,
  // status}. When the project's issuance_requires_approval is on, the certificate is stored as
  // awaiting_approval with no job (job_id null) and certificate.approval_requested fires.
  op<boost::json::value> issue_certificate(std::string project_id, std::string body, std::string actor);
  // POST …/certificates/enroll (msca_catalog.hpp): an AD CS certificate (source msca, version 0,
  // status pending) and its msca_issue_certificate job (key issue:<id>) in one transaction →
  // {certificate_id, job_id, status}. The template (else the CA's default_template) must be in
  // the CA's cached policy and the key type must meet it: refused naming "template" / "key_type".
  op<boost::json::value> enroll_certificate(std::string project_id, std::string body, std::string actor);
  // GET …/msca-cas/{id}/templates[?refresh=1]: the CA's cached policy; refresh fetches it from the
  // policy service first and keeps it (an error from the service is the answer, nothing kept).
  op<boost::json::value> msca_templates(std::string project_id, std::string id, bool refresh);
  // POST …/certificates/{id}/approve: an admin other than the requester lets a waiting issue
  // request go on: status pending, its issue job enqueued (key issue:<id>), certificate.approved,
  // one transaction → {certificate_id, job_id, status}. approval.hpp says who may decide.
  op<boost::json::value> approve_certificate(std::string project_id, std::string id, std::string actor);
  // POST …/certificates/{id}/reject {reason}: status rejected, nothing issued, certificate.rejected
  // → the certificate's view.
  op<boost::json::value> reject_certificate(std::string project_id, std::string id, std::string body,
                                            std::string actor);
  // GET|PUT …/projects/{p}/settings: every project setting's value (approval.hpp); a PUT of
  // validated values (the API parses them) merges them into the project's settings object.
  op<boost::json::value> project_settings(std::string project_id);
  op<boost::json::value> put_project_settings(std::string project_id, std::map<std::string, std::string> values);
  // POST …/certificates/{id}/renew: renew_certificate keyed renew:<id>:<expires_at_unix>, so a
  // second request while one is pending answers the same job → {job_id, created}.
  op<boost::json::value> renew_certificate(std::string project_id, std::string id, std::string actor);
  // POST …/certificates/renew (acme_catalog.hpp's bulk_renew_request): one renew_certificate per
  // certificate, each under the key a single renew and the renewal sweep use (a certificate
  // already queued answers its job, created: false), all in one transaction → {requested, created,
  // jobs[{certificate_id, name, job_id, created}], skipped[{certificate_id, name, reason}]}. By
  // ids: any id that is missing or not renewable refuses the whole call, naming it.
  op<boost::json::value> renew_certificates(std::string project_id, std::string body, std::string actor);
  // GET …/dashboard's catalog part (overview.hpp): one read of the project's certificates,
  // distributions, domains and discovered certificates.
  op<boost::json::value> overview(std::string project_id);
  // POST …/certificates/{id}/revoke {reason?}: revoke_certificate for the current version (key
  // revoke:<id>:<version>, payload with its serial) → {job_id, created}. Refused (conflict) for a
  // certificate not from ACME, one never issued, or one already revoked; bad input names "reason".
  op<boost::json::value> revoke_certificate(std::string project_id, std::string id, std::string body, std::string actor);
  // POST …/jobs/{id}/validate-dns: the manual order's next validate_manual_dns, or the one
  // already waiting (acme_workflow.hpp) → {job_id, created}.
  // POST …/domains/{id}/check: a domain_expiration_check of that domain now (202 {job_id, created}).
  op<boost::json::value> check_domain(std::string project_id, std::string id, std::string actor);
  // Discovery: POST …/discovery-sources/{id}/run (202 {job_id, created}); the discovered
  // certificates, filtered by source and finding and paged; an import as a managed certificate
  // (the operator brings the key: a scan never sees one).
  op<boost::json::value> run_discovery(std::string project_id, std::string id, std::string actor);
  op<boost::json::value> list_discovered(std::string project_id, std::string source, std::string finding, int page,
                                         int page_size);
  op<boost::json::value> import_discovered(std::string project_id, std::string id, std::string body, requester who);
  op<boost::json::value> validate_manual_dns(std::string project_id, std::string job_id, std::string actor);
  // The `workflow` member of an ACME or AD CS job's detail (acme_workflow.hpp, msca_jobs.hpp); null
  // for other types.
  op<boost::json::value> job_workflow(store::job_record job);
  // A new run over the failed (and cancelled) targets of the last run.
  op<boost::json::value> retry_failed(std::string project_id, std::string id, std::string actor);
  // Re-drives one job's failed targets, or named targets, of the last run once it has ended, in
  // that run (redrive.hpp): one retry job, the run reopened until it reports.
  op<boost::json::value> retry_targets(std::string project_id, std::string id, std::string body, std::string actor);
  // A new run that puts back what run `run_no` (0: the last delivery run) replaced.
  op<boost::json::value> rollback(std::string project_id, std::string id, std::string body, std::string actor);
  // Cancels pending and held children, asks active ones to stop; the run ends cancelled.
  op<boost::json::value> cancel(std::string project_id, std::string id);
  // A run's outcomes (one per target, pending included for the current run) that pass `filter`,
  // paged; with the counts per status and error class and the long tail of the whole run.
  op<boost::json::value> results(std::string project_id, std::string id, std::int64_t run_no, int page, int page_size,
                                 distribution::result_filter filter = {});
  // The host keys a target's server offers: shown for an operator to compare and pin.
  op<boost::json::value> scan_host_key(std::string project_id, std::string target_id);
  // Sends a test message to a notification channel now and says what happened (notify.hpp's
  // send_report_view); a failed delivery is an answer, not an error.
  op<boost::json::value> test_channel(std::string project_id, std::string channel_id);

 private:
  op<boost::json::value> open_run(std::string project_id, std::string id, std::string actor, distribution::run_kind kind,
                                  std::int64_t rollback_of);
  store::store& st_;
  queue::queue_service& queue_;
  const clock_source& clock_;
  const kek* key_;
  boost::asio::thread_pool* cpu_;
  std::string ca_pem_;
};

// The distribution's API view: definition, current run, fan-out counters (with the batches and
// the retry-wave children apart), target summary and the run's long tail.
boost::json::object distribution_view(const store::distribution_record& d,
                                      const std::vector<store::target_result>& outcomes,
                                      const std::vector<store::finalized_child>& finalized);

}  // namespace certfleet::service
