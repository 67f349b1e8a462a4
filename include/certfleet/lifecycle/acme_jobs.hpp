#pragma once
// The certificate lifecycle jobs that drive the ACME client (DESIGN §9): issue_certificate and
// renew_certificate run one RFC 8555 order with DNS-01 through the certificate's RFC 2136
// provider and store the result as the certificate's next version — in the transaction that
// opens the runs of its auto_execute distributions (certificates.hpp). Also: the account
// registration the acme-accounts route does synchronously, and the renewal sweep's decision.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace certfleet::lifecycle {

// The CA's suggested renewal window for one certificate (RFC 9773), in unix ms.
struct acme_renewal_window {
  time_ms start = 0, end = 0;
};

struct acme_job_options {
  const kek* key = nullptr;                 // opens the account key, the TSIG secret; seals the new key
  boost::asio::thread_pool* cpu = nullptr;  // key generation, name resolution
  std::string ca_pem;                       // extra trust anchors for every CA (tests: pebble's TLS CA)
  // register_acme_account: the system setting acme_allow_list as the caller read it (jobs read it
  // themselves); nullopt: the setting's default.
  std::optional<std::string> acme_allow_list;
};

// Makes the account key (cpu pool) and registers it at the CA (newAccount: terms, contact, EAB):
// fills secret.account_key_pem, spec.account_url and spec.status. A CA's refusal comes back as
// an error carrying its problem verbatim (acme::failure::to_error), the field "directory_url" or
// "eab" when it is about them.
boost::asio::awaitable<result<void>> register_acme_account(new_acme_account& account, const acme_job_options& opt);

// issue_certificate and renew_certificate (payload {"certificate_id", "version"?}); validate_manual_dns
// (payload {"certificate_id", "order_job_id"}, acme_catalog.hpp); revoke_certificate
// (payload: acme_catalog.hpp's revoke_job); cleanup_dns (payload {"job_id", "fence"}).
void register_acme_handlers(queue::handler_registry& r, std::shared_ptr<const acme_job_options> options);

// The payload of both jobs: {"certificate_id", "version"?}; a renewal names the version it
// replaces (a retried attempt that finds a later one renews nothing).
std::string acme_job_payload(std::string_view certificate_id, std::int64_t version = 0);
// That payload checked (the validator of issue_certificate, renew_certificate and the AD CS
// msca_issue_certificate / msca_renew_certificate, which take the same one).
result<void> check_certificate_job_payload(const std::string& payload);

// Whether an issued ACME certificate is due for renewal now (acme::decide_renewal): auto_renew
// and, with the CA's renewal information (RFC 9773) when it has some, at the point drawn in its
// suggested window (seeded by the serial: the same point every sweep); else inside the last third
// of its lifetime. Pure.
struct renewal_due {
  bool due = false;
  time_ms renew_at = 0;
  std::string source;  // "ari" | "lifetime"
  std::string reason;
};
renewal_due acme_renewal_due(const catalog::certificate_doc& d, time_ms now,
                             std::optional<acme_renewal_window> ari = std::nullopt);

// The renewal sweep: asks each account's CA for the renewal information of its certificates when
// its directory offers renewalInfo (unauthenticated GETs; any failure falls back to the lifetime
// rule and is logged), then enqueues renew_certificate (key renew:<cert>:<expires_at_unix>) for
// each certificate that is due. `opt` null: lifetime rule only. Returns how many jobs it created
// (an existing key is not counted).
using sweep_logger = std::function<boost::asio::awaitable<void>(std::string level, std::string message)>;
boost::asio::awaitable<result<int>> enqueue_due_renewals(store::store& st, const clock_source& clock,
                                                         const acme_job_options* opt = nullptr, sweep_logger log = {});

// The DNS cleanup sweep: one cleanup_dns (key cleanup_dns:<job>:<fence>) for each job attempt
// that is over and left challenge records in a zone (a crash between presenting and removing
// them, a removal that failed). Returns how many jobs it created.
boost::asio::awaitable<result<int>> enqueue_dns_cleanups(store::store& st, const clock_source& clock,
                                                         sweep_logger log = {});

}  // namespace certfleet::lifecycle
