#pragma once
// Microsoft AD CS enrollment from a non-Windows host (DESIGN §13): the messages of the
// Certificate Enrollment Policy service (MS-XCEP: GetPolicies) and of the Certificate Enrollment
// Web Service (MS-WSTEP: WS-Trust RequestSecurityToken for a new certificate, a renewal, and the
// status of a pending request), built and parsed without I/O. SOAP 1.2 with WS-Addressing; the
// optional WS-Security UsernameToken is the username/password authentication (sent over TLS
// only: the caller checks the scheme). Every answer is parsed by a hardened XML reader (no DTD,
// no entities, no network, size and depth capped); a malformed or hostile answer is an error,
// never a crash. The jobs that drive these messages live in lifecycle (msca_jobs.hpp).
#include "certfleet/core/error.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::msca {

// Answers larger than this are refused before they are parsed.
inline constexpr std::size_t max_answer_bytes = 4 * 1024 * 1024;

// The Content-Type of every request: SOAP 1.2 carries the action in it as well as in wsa:Action.
std::string soap_content_type(std::string_view action);

// The SOAP header's WS-Security part: a UsernameToken when `username` is not empty.
struct message_security {
  std::string username;
  std::string password;
};

// A request ready to POST: its action (the Content-Type's action parameter) and the envelope.
struct soap_request {
  std::string action;
  std::string envelope;
};

// ---- MS-XCEP: the enrollment policy ----------------------------------------------------------

// How a CES endpoint authenticates its clients (MS-XCEP 3.1.4.1.3.8 ClientAuthentication).
enum class ces_auth : std::uint32_t {
  anonymous = 1,
  kerberos = 2,
  username_password = 4,
  client_certificate = 8,
};
std::string_view ces_auth_name(ces_auth a) noexcept;  // "anonymous", "kerberos", …

struct policy_ces_endpoint {
  std::string url;  // https://…/CES
  ces_auth authentication = ces_auth::kerberos;
  std::int32_t priority = 0;  // lower first
  bool renewal_only = false;
};

struct policy_ca {
  std::int64_t reference = 0;  // CAReferenceID, what templates name
  std::string name;            // the CN of the CA's certificate in the policy ("" when absent: XCEP has
                               // no name element for a CA)
  std::vector<policy_ces_endpoint> endpoints;
};

struct policy_template {
  std::string name;          // attributes/commonName: what a RequestSecurityToken names
  std::string display_name;  // the defaultName of the template's OID (XCEP has no displayName
                             // attribute); `name` when the policy gives none
  std::string oid;           // the template's OID (the policy's oIDReference resolved), "" when absent
  std::int32_t major_version = 0, minor_version = 0;
  std::int32_t schema_version = 0;
  std::string key_algorithm;  // "RSA", "ECDSA_P256", "ECDSA_P384", … ("" : RSA, the XCEP default)
  std::int32_t min_key_size = 0;  // privateKeyAttributes/minimalKeyLength
  std::int32_t key_spec = 0;      // privateKeyAttributes/keySpec (1 exchange, 2 signature)
  bool subject_from_request = false;  // the enrollee supplies the subject (CT_FLAG_ENROLLEE_SUPPLIES_SUBJECT)
  std::vector<std::int64_t> ca_references;
  // The CES endpoints of the CAs that issue this template, in priority order (resolved from
  // ca_references; duplicates removed).
  std::vector<policy_ces_endpoint> endpoints;
};

struct enrollment_policy {
  std::string policy_id;
  std::string friendly_name;
  std::int32_t next_update_hours = 0;  // 0: not given
  std::vector<policy_ca> cas;
  std::vector<policy_template> templates;
};

// GetPolicies to `cep_url`, with a fresh `message_id` ("urn:uuid:…").
soap_request get_policies_request(std::string_view cep_url, std::string_view message_id,
                                  const message_security& security);

// The GetPoliciesResponse. A SOAP fault comes back as an error whose message carries the fault's
// code and reason, field "Fault" (unauthorized for a WS-Security fault such as
// FailedAuthentication, invalid_argument otherwise); a document that is not a
// GetPoliciesResponse (wrong namespace, missing policy) is invalid_argument naming the element's
// path ("GetPoliciesResponse/response/policyID", "…/policy[0]/attributes/commonName"). A
// reference the answer cannot resolve (policyOIDReference, algorithmOIDReference, cAReference)
// is refused as well.
result<enrollment_policy> parse_get_policies_response(std::string_view xml);

// ---- MS-WSTEP: enrollment --------------------------------------------------------------------

enum class request_kind {
  issue,  // RequestType …/Issue with a PKCS#10 (new key)
  renew,  // RequestType …/Issue with a PKCS#7 signed by the current certificate's key (MS-WSTEP
          // 3.1.4.2.1.1: new and renewal requests are both Issue; the token's ValueType says which)
  query,  // RequestType …/QueryTokenStatus for a pending request id
};

struct enroll_request {
  request_kind kind = request_kind::issue;
  std::string template_name;  // AdditionalContext CertificateTemplate (issue, renew)
  std::string token_der;      // the PKCS#10 (issue) or PKCS#7 (renew), DER
  std::string request_id;     // query: the pending request's id
};

soap_request enrollment_request(std::string_view ces_url, std::string_view message_id, const enroll_request& r,
                                const message_security& security);

enum class disposition { issued, pending, refused };

// The CA's answer. `refused` comes from a SOAP fault: the CA denied the request, the template is
// not allowed, the service failed; `fault` says which.
struct soap_fault {
  std::string code;     // e.g. "s:Receiver"
  std::string subcode;  // e.g. "a:InternalServiceFault" ("" when none)
  std::string reason;   // the Reason text
  std::optional<std::int64_t> error_code;  // CertificateEnrollmentWSDetail/ErrorCode (an HRESULT, signed)
  std::string request_id;                  // CertificateEnrollmentWSDetail/RequestID ("" when none)
  bool invalid_request = false;            // CertificateEnrollmentWSDetail/InvalidRequest
};

struct enroll_response {
  disposition status = disposition::refused;
  std::string request_id;           // RequestID (issued and pending answers carry one)
  std::string disposition_message;  // DispositionMessage, as the CA wrote it
  std::string certificate_der;      // issued: RequestedSecurityToken's certificate
  std::vector<std::string> chain_der;  // issued: the certificates of the PKCS#7 answer other than the leaf
  soap_fault fault;                    // refused
};

// A RequestSecurityTokenResponseCollection or a SOAP fault. Malformed XML, a hostile document or
// an answer of the wrong shape is an error (invalid_argument naming what is wrong).
result<enroll_response> parse_enrollment_response(std::string_view xml);

// ---- what a refusal means -------------------------------------------------------------------

// The classes DESIGN §13 names for an AD CS failure, each with an error-hint row.
enum class failure_class {
  auth,                  // 401, a SOAP security fault, SPNEGO failure
  template_not_allowed,  // the caller may not enroll for the template, or the CA does not issue it
  denied,                // denied by policy or by a certificate manager
  pending,               // still waiting for approval (not a failure of the job)
  ca_unavailable,        // the CA (or the CES in front of it) cannot be reached or is down
  bad_request,           // the CA refused the request's content (subject, key size, extension)
  other,
};
std::string_view failure_class_name(failure_class c) noexcept;  // "msca_auth", "msca_template_not_allowed", …

// From a fault's HRESULT (documented CERTSRV_E_* / RPC codes) and code; pure.
failure_class classify_fault(const soap_fault& f) noexcept;

// "0x80094012" for an HRESULT held signed (or unsigned); a value outside 32 bits is no HRESULT
// and is written as its decimal number.
std::string hresult_text(std::int64_t code);
// The documented name of a known HRESULT ("CERTSRV_E_TEMPLATE_DENIED"), "" for any other.
std::string_view hresult_name(std::int64_t code) noexcept;

// ---- requests ---------------------------------------------------------------------------------

// The PKCS#10 (DER) of a new enrollment: subject (an RFC 4514 string such as
// "CN=web01.corp.example,O=Example"; "" for none), DNS names as subjectAltName, and the
// certificate template extension (szOID_CERTIFICATE_TEMPLATE 1.3.6.1.4.1.311.21.7 with the OID
// and versions when the template's OID is known, else szOID_ENROLL_CERTTYPE_EXTENSION
// 1.3.6.1.4.1.311.20.2 with its name), signed with `key_pem`. invalid_argument names "subject" or
// "sans[i]".
result<std::string> make_enrollment_csr(std::string_view key_pem, std::string_view subject,
                                        const std::vector<std::string>& sans, const policy_template& tmpl);

// The PKCS#7 (DER, SignedData) of a renewal signed with the current certificate (MS-WSTEP's
// renewal): the new PKCS#10 as content, signed by `current_key_pem` with `current_cert_pem`
// included.
result<std::string> make_renewal_request(std::string_view csr_der, std::string_view current_cert_pem,
                                         std::string_view current_key_pem);

}  // namespace certfleet::msca
