#pragma once
// ACME catalog objects (DESIGN §9), parsed without I/O: an ACME account (a CA's directory, the
// contact, terms, optional External Account Binding and private-CA trust, the account key sealed),
// a DNS provider for DNS-01 (RFC 2136 server, zone, TSIG key; its secret sealed), and the body of
// POST …/certificates/issue. The API checks a body with these before anything is stored; the ACME
// jobs read the stored documents back through the same parsers. Secrets are sealed to the row
// ("<kind>:<id>:secret") and never appear in a document, a view, a log line or an error.
#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/store/catalog.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::lifecycle {

// ---- ACME accounts ------------------------------------------------------------------------

inline constexpr std::size_t max_acme_contacts = 10;

struct acme_account_spec {
  std::string directory_url;         // https://…
  std::vector<std::string> contact;  // "mailto:ops@example.com"
  bool terms_agreed = false;
  std::string eab_kid;        // "" without External Account Binding
  std::string ca_bundle_pem;  // extra trust anchors for the CA's HTTPS (a private CA); public material
  std::string account_url;    // the CA's account URL, once registered
  std::string status;         // the CA's account status ("valid"), once registered
};

struct acme_account_secret {
  std::string account_key_pem;  // PKCS#8 PEM of the ES256 account key
  std::string eab_hmac_key;     // base64url as the CA gave it; "" without EAB
};

struct new_acme_account {
  std::string name;
  acme_account_spec spec;
  acme_account_secret secret;  // the key is filled in by the caller (made on the cpu pool)
};

// POST …/acme-accounts {name, directory_url, contact_email?: "a@b" | ["a@b", …],
// eab?: {kid, hmac_key}, ca_bundle_pem?, terms_agreed: true}. Errors name the field
// ("eab.hmac_key", "contact_email[1]"); the HMAC key is never quoted.
result<new_acme_account> parse_acme_account_request(std::string_view body);
std::string acme_account_doc_json(const acme_account_spec& a);
result<acme_account_spec> parse_acme_account_doc(const store::catalog_object& o);
result<store::catalog_object> make_acme_account_object(const new_acme_account& a, const kek& key, std::string id,
                                                       std::string project_id, time_ms now);
result<acme_account_secret> open_acme_account_secret(const kek& key, const store::catalog_object& o);

// ---- DNS providers ------------------------------------------------------------------------

// The limits of the providers that present through a program or an HTTP API
// (docs/acme-dns-providers.md).
inline constexpr std::int64_t exec_timeout_min_s = 1, exec_timeout_max_s = 600, exec_timeout_default_s = 60;
inline constexpr std::int64_t http_provider_timeout_min_s = 1, http_provider_timeout_max_s = 120,
                              http_provider_timeout_default_s = 30;
inline constexpr std::size_t exec_env_max = 32;
inline constexpr std::size_t exec_env_value_max = 4096;

// The kinds of DNS provider, in the order the API's enum lists them.
inline constexpr std::string_view dns_provider_kinds[] = {"rfc2136", "manual", "exec", "httpreq", "powerdns"};

struct dns_provider_spec {
  std::string kind = "rfc2136";  // one of dns_provider_kinds
  // rfc2136
  std::string server;  // "host:port" as given (checked by acme::dns::parse_server)
  std::string zone;    // "" : found per record (rfc2136: the SOA walk; powerdns: the server's zone list)
  std::string tsig_key_name;
  std::string tsig_algorithm = "hmac-sha256";
  // manual: where validate_manual_dns looks for the records the operator created; "": nowhere
  // (the CA's own validation is the check).
  std::string check_server;
  // exec: the program run as `program present|cleanup FQDN VALUE` (lego's exec interface), the
  // names of the environment variables it gets (their values are the sealed secret), and the
  // system admin who created it (an exec provider without one never runs).
  std::string program;
  std::vector<std::string> env_names;
  std::string created_by_system_admin;
  // httpreq: the base URL (POST {endpoint}/present and /cleanup), the basic-auth user (its
  // password is the sealed secret). powerdns: the API's base URL and server id (its X-API-Key is
  // the sealed secret). Both: plain http allowed, extra trust anchors for the API's TLS.
  std::string endpoint;
  std::string username;
  std::string api_url;
  std::string server_id = "localhost";
  bool allow_plain_http = false;
  std::string ca_bundle_pem;
  // exec, httpreq, powerdns: the deadline of one call, and whether the job waits for the zone's
  // authoritative servers (found through acme_dns_resolver) to answer the record afterwards.
  std::int64_t timeout_s = exec_timeout_default_s;
  bool check_propagation = true;

  bool manual() const noexcept { return kind == "manual"; }
  bool exec() const noexcept { return kind == "exec"; }
  bool rfc2136() const noexcept { return kind == "rfc2136"; }
  bool httpreq() const noexcept { return kind == "httpreq"; }
  bool powerdns() const noexcept { return kind == "powerdns"; }
  // Providers certfleet does not talk DNS to: their records are checked at the zone's servers as
  // the system resolver names them.
  bool through_api() const noexcept { return exec() || httpreq() || powerdns(); }
  // What the job log and errors name as where the records go ("127.0.0.1:53", "exec /usr/…",
  // "httpreq https://dns-api.example/acme", "powerdns http://127.0.0.1:8081").
  std::string where() const;
};

struct new_dns_provider {
  std::string name;
  dns_provider_spec spec;
  std::string tsig_secret;  // rfc2136: base64, sealed
  // exec: the environment (NAME → value); httpreq: {password}; powerdns: {api_key}. Sealed as
  // one JSON object.
  std::vector<std::pair<std::string, std::string>> secrets;
};

// POST …/dns-providers, one section per kind (errors name the field, "exec.timeout_s"):
//   {name, kind: "rfc2136", rfc2136: {server, zone?, tsig_key_name, tsig_algorithm?, tsig_secret}}
//   {name, kind: "manual", manual?: {check_server?}}                       (no secret)
//   {name, kind: "exec", exec: {program, timeout_s?: 60, env?: {NAME: value}, check_propagation?}}
//       (only a system admin may create one: the caller decides and sets created_by_system_admin)
//   {name, kind: "httpreq", httpreq: {endpoint, username?, password?, allow_plain_http?,
//       ca_bundle_pem?, timeout_s?: 30, check_propagation?}}
//   {name, kind: "powerdns", powerdns: {api_url, api_key, server_id?: "localhost", zone?,
//       allow_plain_http?, ca_bundle_pem?, timeout_s?: 30, check_propagation?}}
result<new_dns_provider> parse_dns_provider_request(std::string_view body);
std::string dns_provider_doc_json(const dns_provider_spec& p);
result<dns_provider_spec> parse_dns_provider_doc(const store::catalog_object& o);
result<store::catalog_object> make_dns_provider_object(const new_dns_provider& p, const kek& key, std::string id,
                                                       std::string project_id, time_ms now);
// rfc2136: the TSIG secret; the others: the JSON object of `secrets` (parse_provider_secrets).
result<std::string> open_dns_provider_secret(const kek& key, const store::catalog_object& o);
result<std::vector<std::pair<std::string, std::string>>> parse_provider_secrets(std::string_view sealed_json);

// ---- ACME certificates --------------------------------------------------------------------

struct acme_issue_request {
  std::string name;
  catalog::certificate_acme acme;
};

// POST …/certificates/issue {name, domains[], acme_account_id, dns_provider_id, key_type?,
// profile?, auto_renew=true}: domains checked by acme::check_domains; a wildcard needs DNS-01,
// which is the only challenge certfleet answers, so wildcards are accepted.
result<acme_issue_request> parse_acme_issue_request(std::string_view body);
// The certificate object of an issuance not done yet: source "acme", version 0, status
// "pending", no key (the issue_certificate job stores version 1 with its key).
// Notes `job_id` as the certificate's last issue/renew job (its view's last_job_id), in the
// transaction that enqueued the job. A certificate that is gone or not from ACME is left alone.
result<void> record_acme_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id);

store::catalog_object make_unissued_acme_certificate(const acme_issue_request& r, std::string id,
                                                     std::string project_id, time_ms now);

// ---- bulk renewal ---------------------------------------------------------------------------

// At most this many certificates renewed by one call (one transaction enqueues them all).
inline constexpr std::size_t bulk_renew_max = 1000;

// POST …/certificates/renew: exactly one of
//   {certificate_ids: [id, …]}     1 to bulk_renew_max distinct object ids; every one must be an
//                                  issued ACME certificate of the project, else nothing is enqueued
//   {expiring_within_days: N}      1 to 365: every issued ACME certificate of the project whose
//                                  not_after is within N days (expired ones included); the others
//                                  that match (uploaded, not issued yet) are listed as skipped
struct bulk_renew_request {
  std::vector<std::string> certificate_ids;
  int expiring_within_days = 0;  // 0: by ids
};
result<bulk_renew_request> parse_bulk_renew_request(std::string_view body);

// ---- revocation ---------------------------------------------------------------------------

// POST …/certificates/{id}/revoke {reason?}: `reason` an RFC 5280 reason name ("keyCompromise",
// case as in the RFC) or its code (1); an empty body, {} or a null reason revokes without one.
// Errors: invalid_argument naming "reason" (or an unknown member).
struct revoke_request {
  std::optional<int> reason;  // the RFC 5280 code; nullopt: none given
};
result<revoke_request> parse_revoke_request(std::string_view body);

// The revoke_certificate job's payload {certificate_id, serial?, reason?}: `serial` is the
// current version's when the revocation was asked (the job then refuses to revoke another
// version); without it (POST …/jobs) the job revokes whatever version is current. `reason` as in
// the body (name or code), stored as the code. Errors name "payload.<member>".
struct revoke_job {
  std::string certificate_id;
  std::string serial;
  std::optional<int> reason;
};
std::string revoke_job_payload(const revoke_job& j);
result<revoke_job> parse_revoke_job_payload(std::string_view payload);

// The idempotency keys of the ACME jobs (DESIGN §9): one issuance per certificate, one renewal
// per certificate version (`expires_at_unix`: its not_after in whole seconds), one revocation per
// version (revoke:<certificate>:<version>).
std::string issue_job_key(std::string_view certificate_id);
std::string renew_job_key(std::string_view certificate_id, time_ms not_after);
std::string revoke_job_key(std::string_view certificate_id, std::int64_t version);

// cleanup_dns removes the challenge records one job attempt presented and left (store::dns_record):
// payload {"job_id", "fence"}, key cleanup_dns:<job>:<fence> (one per attempt, whoever enqueues
// it: the job itself when a removal failed, or the scheduler's DNS cleanup sweep after a crash).
std::string cleanup_dns_payload(std::string_view job_id, std::int64_t fence);
struct cleanup_dns_target {
  std::string job_id;
  std::int64_t fence = 0;
};
result<cleanup_dns_target> parse_cleanup_dns_payload(std::string_view payload);
std::string cleanup_dns_key(std::string_view job_id, std::int64_t fence);

// validate_manual_dns carries on the manual order an issue/renew job prepared: payload
// {"certificate_id", "order_job_id"}, key validate-dns:<order job>:<n> (n counts the validations
// of that order: the first is enqueued by the job itself, the next by POST …/validate-dns).
struct validate_dns_target {
  std::string certificate_id, order_job_id;
};
std::string validate_dns_payload(std::string_view certificate_id, std::string_view order_job_id);
result<validate_dns_target> parse_validate_dns_payload(std::string_view payload);
std::string validate_dns_key(std::string_view order_job_id, std::int64_t n);

// The catalog kinds this module owns (ACME accounts, DNS providers), for the service's table of kinds.
std::span<const catalog::kind> kinds() noexcept;

}  // namespace certfleet::lifecycle
