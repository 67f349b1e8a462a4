#pragma once
// Checks (DESIGN §12): the revocation check of managed certificates (CRL first, OCSP second) and
// the domain expiration check (RDAP, WHOIS as the fallback), with the domain objects they watch.
// The protocol work is delivery's (revocation.hpp, domain_registry.hpp); here is what the jobs
// decide and store. Operator page: docs/checks.md.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::checks {

// A domain object's document: what the last lookup found.
struct domain_doc {
  time_ms expires_at = 0;               // the registration's expiry; 0 until a lookup found one
  std::string registrar;
  std::vector<std::string> statuses;    // EPP status codes (clientTransferProhibited, …)
  std::string source;                   // rdap | whois | "" (never looked up)
  std::string server;                   // the server that answered (URL or host:port)
  time_ms checked_at = 0;               // the last lookup, successful or not
  std::string last_error;               // "" after a successful lookup
  std::vector<std::int64_t> notified_days;  // thresholds already notified for this expires_at
};

// POST …/domains {name}: the registered domain, lower-cased, without a trailing dot. Errors name
// the field (`name`, or the unknown member).
result<std::string> parse_domain_request(std::string_view body);
domain_doc parse_domain_doc(const store::catalog_object& o);
std::string domain_doc_json(const domain_doc& d);
// {id, name, created_at, expires_at, registrar, statuses, source, server, checked_at, last_error,
//  state}: state is unknown (never looked up), error (no lookup has succeeded yet), expiring (a
// threshold of domain_expiry_thresholds_days was crossed at the last lookup) or ok.
boost::json::object domain_view(const store::catalog_object& o);

// What one lookup changes (pure). A later expiry than the stored one (the domain was renewed)
// forgets the thresholds notified; then every threshold now crossed is recorded and one
// notification goes out, the tightest threshold newly crossed.
struct domain_expiry_step {
  bool renewed = false;
  std::vector<std::int64_t> newly_crossed;
  std::optional<std::int64_t> notify_days;
};
domain_expiry_step plan_domain_expiry(const domain_doc& before, time_ms expires_at, time_ms now,
                                      const std::vector<std::int64_t>& thresholds);

// Idempotency keys: the scheduler's hourly checks, and "check now" (one per domain per minute).
std::string revocation_check_key(time_ms now);
std::string domain_check_key(time_ms now);
std::string domain_check_now_key(std::string_view domain_id, time_ms now);

// The payload of domain_expiration_check: {} (every domain of the job's project, or of every
// project for the scheduler's job) or {"domain_id": id}.
struct domain_check_payload {
  std::string domain_id;
};
result<domain_check_payload> parse_domain_check_payload(std::string_view payload);
std::string domain_check_payload_json(std::string_view domain_id);

// delivery's messages name the allow-list they were given as "egress_allow_list"; the checks and
// discovery pass their own (check_allow_list, discovery_allow_list), and an operator must read
// the setting that actually refused.
std::string with_allow_list_named(std::string message, std::string_view setting);

struct check_options {
  boost::asio::thread_pool* cpu = nullptr;  // name resolution
  std::string rdap_bootstrap_file;          // process setting; empty: the shipped snapshot
  std::string ca_pem;                       // extra trust anchors for https CRL/OCSP/RDAP (tests)
};
// revocation_check and domain_expiration_check.
void register_check_handlers(queue::handler_registry& r, std::shared_ptr<const check_options> options);

// The catalog kinds this module owns (domains, discovery sources, discovered certificates), for the service's table of kinds.
std::span<const catalog::kind> kinds() noexcept;

}  // namespace certfleet::checks
