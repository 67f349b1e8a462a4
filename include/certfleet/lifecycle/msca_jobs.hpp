#pragma once
// The certificate lifecycle jobs that enroll at Microsoft AD CS (DESIGN §13):
// msca_issue_certificate and msca_renew_certificate make the key and the request, send it to
// the CA's enrollment service and store what comes back as the certificate's next version (the
// path ACME uses, so auto_execute distributions run); a request the CA holds for a certificate
// manager is kept (its key sealed) and msca_poll_pending asks again with a growing delay until
// it is issued, denied or given up. Also: the policy fetch the msca-cas routes do synchronously,
// the MSCA workflow of a job's detail, and the renewal sweep's part for AD CS certificates.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>

namespace certfleet::lifecycle {

struct msca_job_options {
  const kek* key = nullptr;                 // opens the CA's secret and the held keys; seals new keys
  boost::asio::thread_pool* cpu = nullptr;  // key generation, name resolution
  std::string ca_pem;                       // extra trust anchors for every CA (tests: the test server's CA)
};

void register_msca_handlers(queue::handler_registry& r, std::shared_ptr<const msca_job_options> options);

// GetPolicies at the CA's policy service, as the CA's row says (msca_allow_list and
// msca_timeout_s read from the settings): the policy, or an error whose message says what failed
// ("AD CS [msca_auth]: …"), its field "cep_url" or "auth".
boost::asio::awaitable<result<msca_cached_policy>> fetch_msca_policy(store::store& st, const msca_ca_spec& ca,
                                                                    const msca_ca_secret& secret,
                                                                    const msca_job_options& opt, time_ms now);

// Fetches a CA's policy again and keeps it on the CA (GET …/templates?refresh=1 and the
// msca_policy sweep): the policy, or fetch_msca_policy's error; not_found when the CA was deleted
// meanwhile.
boost::asio::awaitable<result<msca_cached_policy>> refresh_msca_policy(store::store& st, const store::catalog_object& ca,
                                                                      const msca_job_options& opt, time_ms now);

// The msca_policy sweep: each CA (all projects) whose cached policy is older than its
// nextUpdateHours (8 h when the policy names none) gets refresh_msca_policy. A CA that cannot be
// reached keeps the policy it has and is logged ("warn"); the others go on. How many were refreshed.
boost::asio::awaitable<result<int>> refresh_stale_msca_policies(
    store::store& st, const clock_source& clock, const msca_job_options& opt,
    std::function<boost::asio::awaitable<void>(std::string level, std::string message)> log = {});

// initialized, fetching_policy, generating_key, submitting, pending_approval, retrieving,
// storing, completed.
std::span<const std::string_view> msca_workflow_steps() noexcept;
bool has_msca_workflow(std::string_view job_type) noexcept;
// The job's `workflow` member: {kind: "msca", step, steps, failed_step?, skipped_steps, template,
// request_id, poll_count, renewal_mode, subject, terminal_reason, started_at}.
result<boost::json::object> msca_workflow_view(store::catalog_read& rd, const store::job_record& j);

// Whether an issued AD CS certificate is due for renewal now: auto_renew and inside the last third
// of its lifetime. Pure.
bool msca_renewal_due(const catalog::certificate_doc& d, time_ms now);

}  // namespace certfleet::lifecycle
