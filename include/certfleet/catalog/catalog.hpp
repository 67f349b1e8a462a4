#pragma once
// Catalog bodies (DESIGN §6) and the stored documents they become, parsed without I/O: the API
// checks a body with these before anything is stored, and the engine reads the stored document
// back through the same parsers. Secrets are sealed under the key-encryption key with an aad
// naming the row, and never appear in a document.
#include "certfleet/core/secrets.hpp"
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/module.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/delivery/ssh_target.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/value.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::catalog {

inline constexpr std::size_t max_name_length = 200;

// ---- certificates -------------------------------------------------------------------------

// One stored version of a certificate, as the versions list shows it.
struct certificate_version_info {
  std::int64_t version = 0;
  std::string serial, fingerprint_sha256;
  time_ms not_before = 0, not_after = 0, created_at = 0;
};

// The manual DNS path (DESIGN §9): an order whose DNS-01 records the operator creates by hand.
// The issue/renew job prepares it and ends at awaiting_validation; validate_manual_dns jobs
// check the records and carry the order on. The last one stays on the document (statuses valid
// or invalid) so the jobs' workflow can show it.
struct manual_challenge {
  std::string fqdn, value;  // the TXT record to create
  std::string authorization_url, challenge_url;
  std::string status = "pending";  // pending | valid | invalid
};
struct manual_order {
  std::string job_id;     // the issue/renew job that prepared it
  std::string order_url;
  std::int64_t from_version = 0;  // the certificate's version when it was prepared
  std::vector<manual_challenge> challenges;
  std::int64_t validations = 0;  // validate_manual_dns jobs enqueued for it (their keys count)
  std::string last_validation_job_id;
};

// Issuance approval (docs/approval.md): a project with issuance_requires_approval on keeps an
// issue request as status awaiting_approval until an admin other than the requester decides.
struct certificate_approval {
  std::string requested_by;  // the issue request's actor: "token:<id>", "cli"
  time_ms requested_at = 0;
  std::string decision = "pending";  // pending | approved | rejected
  std::string decided_by;
  time_ms decided_at = 0;
  std::string reason;  // rejected: why (the rejecting admin's words)
};

// What an ACME certificate (source "acme") is issued from and renewed with (DESIGN §9). Kept
// across versions: store_new_version carries it over.
struct certificate_acme {
  std::vector<std::string> domains;  // the order's identifiers, in order (the first is the CN)
  std::string key_type;              // acme::key_type_name of the certificate key
  std::string acme_account_id, dns_provider_id;
  std::string profile;  // a name from the CA's meta.profiles; "" for the CA's default
  bool auto_renew = true;
  std::string last_error;  // why the last issuance/renewal failed ("" after a success)
  std::optional<manual_order> manual;
  std::string last_job_id;  // the last issue/renew job enqueued for it (record_acme_job)
  std::optional<certificate_approval> approval;  // its issue request waited for an approval
  // The CA's renewal window (RFC 9773) as the renewal sweep last read it, for the version with
  // this serial; checked_at 0: never read (the lifetime rule applies).
  struct ari_window {
    std::string serial;
    time_ms start = 0, end = 0, checked_at = 0;
  } ari;
};

// What an AD CS certificate (source "msca") is enrolled and renewed with (DESIGN §13). Kept across
// versions: store_new_version carries it over.
struct certificate_msca {
  std::string msca_ca_id;
  std::string template_name;   // the template's commonName in the CA's policy
  std::string subject;         // RFC 4514, as requested ("" : the CA builds it)
  std::vector<std::string> sans;
  std::string key_type;        // acme::key_type_name of the certificate key
  bool auto_renew = true;
  // The last request at the CA: its id, the CA's disposition (issued | pending | denied) and its
  // message, the request's HRESULT when it failed.
  std::string request_id, disposition, disposition_message, error_code;
  std::string last_error;   // why the last enrollment/renewal failed ("" after a success)
  std::string last_job_id;  // the last msca job enqueued for it
  std::int64_t polls = 0;   // how often the last request was asked about before the CA issued it
};

// A revocation at the CA through certfleet (revoke_certificate): which version's serial, why.
struct certificate_revocation {
  std::string serial;      // the revoked leaf's serial (the version that was current)
  std::string reason;      // RFC 5280 reason name; "" when none was given
  time_ms revoked_at = 0;
  std::string job_id;      // the revoke_certificate job; empty when the revocation check saw it
  std::string source = "request";  // request (through certfleet) | crl | ocsp (the revocation check)
};

// What the last revocation_check learned about the current version (DESIGN §12).
struct revocation_check_info {
  std::string serial;      // the version it checked
  std::string status;      // good | revoked | unknown (the responder does not know it) | error
  std::string source;      // crl | ocsp | "" (nothing could answer)
  std::string detail;      // for error/unknown: what went wrong, in words (the CRL URL and why)
  time_ms checked_at = 0;
  time_ms next_update = 0;  // the CRL's or OCSP answer's nextUpdate, 0 when none
};

struct certificate_doc {
  std::string subject, issuer;
  std::vector<std::string> sans;
  time_ms not_before = 0, not_after = 0;
  std::string fingerprint_sha256;
  std::string serial;  // lower-case hex
  std::string cert_pem, chain_pem;
  bool expired = false;                 // marked by certificate_expiration_check
  std::vector<std::int64_t> notified_days;  // expiry thresholds already notified (of this version)
  // Versions (DESIGN §9): each new one (an upload to …/versions, an ACME issuance or renewal) gets
  // the next number; the earlier ones are kept as certificate_version objects. 0: none issued yet.
  std::int64_t version = 1;
  time_ms version_created_at = 0;
  std::vector<certificate_version_info> versions;  // every version, oldest first (the current one last)
  std::string source = "uploaded";  // uploaded | acme | msca
  std::string status = "active";    // active | expired | revoked | pending | failed
  std::optional<certificate_acme> acme;  // source "acme" only
  std::optional<certificate_msca> msca;  // source "msca" only
  std::optional<certificate_revocation> revocation;  // with status "revoked" (of the current version)
  std::optional<revocation_check_info> revocation_check;
};

struct new_certificate {
  std::string name;
  std::string key_pem;  // to be sealed
  certificate_doc doc;
};

// POST …/certificates {name, cert_pem, chain_pem?, key_pem}: PEM parsed and checked (key matches
// the leaf, chain in order, not expired).
result<new_certificate> parse_certificate_request(std::string_view body, time_ms now);
// POST …/certificates/{id}/versions {cert_pem, chain_pem?, key_pem}: the same checks, no name.
result<new_certificate> parse_certificate_version_request(std::string_view body, time_ms now);
// The stored object: {doc, sealed key, not_after}; `id` names the row the key is sealed to.
result<store::catalog_object> make_certificate_object(const new_certificate& c, const kek& key, std::string id,
                                                      std::string project_id, time_ms now);
// Fails (store_failure, field certificate_id) when the object holds no issued version yet, so
// a delivery never starts without a certificate; views and the lifecycle jobs ask with
// `allow_unissued` to read a certificate whose first issuance is still under way.
result<certificate_doc> parse_certificate_doc(const store::catalog_object& o, bool allow_unissued = false);
std::string certificate_doc_json(const certificate_doc& d);
result<std::string> open_certificate_key(const kek& key, const store::catalog_object& o);
// The API view: {id, name, subject, sans[], not_after, fingerprint_sha256, …} — never the key.
// A certificate object and its document (an unissued one too), read in a transaction or a read:
// not_found for a missing one or another project's, store_failure for an unreadable document.
struct certificate_with_doc {
  store::catalog_object object;
  certificate_doc doc;
};
result<certificate_with_doc> read_certificate(store::catalog_read& rd, std::string_view project_id, std::string_view id);

boost::json::object certificate_view(const store::catalog_object& o);

// What the expiration check does with one certificate (pure): mark it expired, record the
// thresholds it has now crossed, and send at most one notification (the tightest threshold newly
// crossed, or the expiry itself), never one it sent before.
struct expiry_step {
  bool mark_expired = false;
  bool expiring_soon = false;             // within the largest threshold, not expired
  std::vector<std::int64_t> newly_crossed;  // to add to notified_days (0 = expired)
  std::optional<std::int64_t> notify_days;  // the notification to send: days threshold, 0 = expired
};
// `thresholds`: largest first.
expiry_step plan_expiry(const certificate_doc& d, time_ms now, const std::vector<std::int64_t>& thresholds);

// ---- credentials --------------------------------------------------------------------------

struct credential_secret {
  std::string private_key_pem, passphrase, password;
  delivery::ssh_credential ssh() const { return {private_key_pem, passphrase, password}; }
};

struct new_credential {
  std::string name;
  std::string kind;  // ssh_key | password
  std::string public_key_fingerprint;
  std::string public_key;  // "type base64": what the targets' authorized_keys need
  std::string key_type;
  credential_secret secret;
};

// POST …/credentials {name, kind: "ssh_key"|"password", private_key_pem?, passphrase?, password?}
result<new_credential> parse_credential_request(std::string_view body);
result<store::catalog_object> make_credential_object(const new_credential& c, const kek& key, std::string id,
                                                     std::string project_id, time_ms now);
result<credential_secret> open_credential(const kek& key, const store::catalog_object& o);
boost::json::object credential_view(const store::catalog_object& o);

// ---- targets ------------------------------------------------------------------------------

struct target_spec {
  delivery::module_kind module = delivery::module_kind::ssh;
  delivery::ssh_target ssh;
  delivery::file_target file;
  std::string webhook_url;
  bool webhook_allow_http = false;
  std::string credential_id;  // ssh.credential_id or webhook.secret_credential_id
  // file targets: the system-admin token that created it ("token:<id>"), stamped into the stored
  // document by the service (a body cannot carry it). A file target without one was stored
  // before only system admins could create them, and is refused at delivery.
  std::string created_by_system_admin;
  // "host:port:path" (ssh), "file:path", "webhook:url": what two runs must not write at once.
  std::string lock_key() const;
};

struct new_target {
  std::string name;
  target_spec spec;
  std::string doc;  // the body without its name, as stored
};

// POST …/targets {name, module, ssh?|file?|webhook?, validate?}
result<new_target> parse_target_request(std::string_view body);
result<target_spec> parse_target_doc(const store::catalog_object& o);
// The stored document of a file target created by system-admin `actor` ("token:<id>").
std::string stamp_file_grant(std::string_view doc, std::string_view actor);
// The stored document of an ssh target with ssh.auth set (the default of a new target).
std::string stamp_ssh_auth(std::string_view doc, std::string_view auth);
boost::json::object target_view(const store::catalog_object& o);

}  // namespace certfleet::catalog
