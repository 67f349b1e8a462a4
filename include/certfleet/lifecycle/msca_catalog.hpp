#pragma once
// AD CS catalog objects (DESIGN §13), parsed without I/O: a CA reached through its enrollment
// policy (CEP) and enrollment (CES) services with the authentication it takes (a password or a
// client key sealed), its cached policy; the body of POST …/certificates/enroll; the record of a
// request the CA holds for approval (its private key sealed until the certificate comes); the
// msca jobs' payloads and keys. Secrets never appear in a document, a view, a log line or an error.
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/msca/protocol.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/object.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::lifecycle {

// The authentication kinds DESIGN §13 names, in the order the API's enum lists them.
inline constexpr std::string_view msca_auth_kinds[] = {"username_password", "client_certificate", "kerberos"};
inline constexpr std::string_view msca_renewal_modes[] = {"new_key", "renew_with_current"};

// The policy as certfleet keeps it: what GetPolicies said, when.
struct msca_cached_policy {
  time_ms fetched_at = 0;  // 0: never fetched
  std::string policy_id;
  std::int32_t next_update_hours = 0;
  std::vector<msca::policy_template> templates;
};

struct msca_ca_spec {
  std::string cep_url;
  std::string ces_url;  // "" : the policy's endpoint for the template and this authentication
  std::string auth_kind = "username_password";
  std::string username;         // username_password
  std::string client_cert_pem;  // client_certificate (public; its key is the secret)
  std::string client_cert_subject;  // as parsed at creation, for the view
  time_ms client_cert_not_after = 0;
  std::string principal;        // kerberos: "svc-certfleet" or "svc-certfleet@CORP.EXAMPLE"
  std::string realm;            // kerberos: "CORP.EXAMPLE"
  std::string kdc;              // kerberos: "host:port", "" : the system's krb5.conf
  std::string krb_credential;   // kerberos: "password" | "keytab" (which secret is sealed)
  std::string ca_bundle_pem;    // trust anchors of the services' TLS (public)
  std::string default_template;
  std::string renewal_mode = "new_key";
  msca_cached_policy policy;

  msca::ces_auth ces_authentication() const noexcept;
};

struct msca_ca_secret {
  std::string password;        // username_password, or kerberos with a password
  std::string client_key_pem;  // client_certificate
  std::string keytab;          // kerberos with a keytab: the file's bytes
  ~msca_ca_secret();           // wiped
};

struct new_msca_ca {
  std::string name;
  msca_ca_spec spec;
  msca_ca_secret secret;
};

// POST …/msca-cas {name, cep_url, ces_url?, auth: {kind: "username_password", username, password} |
// {kind: "client_certificate", cert_pem, key_pem} | {kind: "kerberos", principal, realm,
// password? | keytab_b64?, kdc?}, ca_bundle_pem?, default_template?, renewal_mode?}. URLs are
// https://; the client certificate must match its key and be valid `now`; a keytab must be one
// (version 0x0502). Errors name the field ("auth.password"); a secret is never quoted.
result<new_msca_ca> parse_msca_ca_request(std::string_view body, time_ms now);
std::string msca_ca_doc_json(const msca_ca_spec& s);
result<msca_ca_spec> parse_msca_ca_doc(const store::catalog_object& o);
result<store::catalog_object> make_msca_ca_object(const new_msca_ca& c, const kek& key, std::string id,
                                                  std::string project_id, time_ms now);
result<msca_ca_secret> open_msca_ca_secret(const kek& key, const store::catalog_object& o);
// The API's view: the document without secrets, the client certificate summarised (subject,
// not_after), the policy as templates_view.
boost::json::object msca_ca_view(const store::catalog_object& o);
// GET …/msca-cas/{id}/templates: {fetched_at, policy_id, templates: [{name, display_name, oid,
// key_algorithm, min_key_size, key_spec, ces_urls[]}]}.
boost::json::object msca_templates_view(const msca_ca_spec& s);
// The policy into the document (the spec's policy member replaced).
msca_cached_policy cache_policy(const msca::enrollment_policy& p, time_ms now);
const msca::policy_template* find_template(const msca_cached_policy& p, std::string_view name) noexcept;

// The CES URL a request for `tmpl` goes to: the CA's ces_url when set, else the policy's first
// endpoint (lowest priority number) that takes this CA's authentication (renewal-only endpoints
// only for a renewal). not_found naming "ces_url" when none does.
result<std::string> ces_url_for(const msca_ca_spec& ca, const msca::policy_template& tmpl, bool renewal);

// The key type a certificate of `tmpl` gets: `requested` (an acme::key_type_name) when it meets
// the template's algorithm and minimal size, else refused naming "key_type"; "" : the smallest
// one that meets it.
result<std::string> msca_key_type_for(const msca::policy_template& tmpl, std::string_view requested);

// ---- enrollment -------------------------------------------------------------------------------

struct msca_enroll_request {
  std::string name;
  catalog::certificate_msca msca;
};

// POST …/certificates/enroll {name, msca_ca_id, template?, subject, sans[]?, key_type?,
// auto_renew=true}: subject an RFC 4514 string (checked again by make_enrollment_csr), sans DNS
// names. The template and key type are checked against the CA's cached policy by the service.
result<msca_enroll_request> parse_msca_enroll_request(std::string_view body);
// The certificate of an enrollment not done yet: source "msca", version 0, status "pending", no
// key; ref_id the CA (so the CA cannot be deleted while it is used).
store::catalog_object make_unissued_msca_certificate(const msca_enroll_request& r, std::string id,
                                                     std::string project_id, time_ms now);
// Notes `job_id` as the certificate's last msca job in the transaction that enqueued it.
result<void> record_msca_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id);

// ---- a request held by the CA -------------------------------------------------------------

struct msca_request_doc {
  std::string certificate_id;
  std::string request_id;  // the CA's
  std::string template_name;
  std::string key_type;
  bool renewal = false;
  std::int64_t from_version = 0;  // the certificate's version when the request was made
  std::string submitted_by;       // the job that submitted it
  time_ms submitted_at = 0;
  std::int64_t polls = 0;
  // pending | issued | denied | abandoned. "issued": the CA's certificate is kept here (with the
  // key) until the version is stored, so a worker lost in between leaves the next attempt the
  // certificate to store, not a second request to make.
  std::string status = "pending";
  std::string reason;              // denied/abandoned: why
  std::string disposition_message;  // issued: the CA's words
  std::string leaf_pem, chain_pem;  // issued: the certificate and its chain (public)
};
std::string msca_request_doc_json(const msca_request_doc& d);
result<msca_request_doc> parse_msca_request_doc(const store::catalog_object& o);
// name "<certificate>:<request id>" (unique per project: one record per request), ref_id the
// certificate, the private key sealed ("msca_request:<id>:key").
result<store::catalog_object> make_msca_request_object(const msca_request_doc& d, std::string_view key_pem,
                                                       const kek& key, std::string id, std::string project_id,
                                                       time_ms now);
result<std::string> open_msca_request_key(const kek& key, const store::catalog_object& o);

// ---- the jobs' payloads and keys ----------------------------------------------------------

// msca_issue_certificate / msca_renew_certificate: {"certificate_id", "version"?} (acme_job_payload's
// shape); keys issue:<cert> and renew:<cert>:<expires_at_unix> as ACME's (acme_catalog.hpp).
// msca_poll_pending: {"certificate_id", "request_id", "n"}; key msca_poll:<cert>:<request id>:<n>.
struct msca_poll_target {
  std::string certificate_id, request_id;
  std::int64_t n = 1;  // this poll's number in the chain (1 for the first)
};
std::string msca_poll_payload(const msca_poll_target& t);
result<msca_poll_target> parse_msca_poll_payload(std::string_view payload);
std::string msca_poll_key(const msca_poll_target& t);

// The wait before poll n+1 after poll n found the request still pending: first·2^(n-1), at most
// cap (seconds). Pure.
std::int64_t msca_poll_delay_s(std::int64_t n, std::int64_t first_s, std::int64_t cap_s) noexcept;

// The catalog kinds this module owns for AD CS (msca_ca, msca_request).
std::span<const catalog::kind> msca_kinds() noexcept;

}  // namespace certfleet::lifecycle
