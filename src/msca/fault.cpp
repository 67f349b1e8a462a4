// What an AD CS refusal means (DESIGN §13's failure classes), from the HRESULT a CES fault
// carries in CertificateEnrollmentWSDetail/ErrorCode and, without one, from the fault's code.
#include "certfleet/msca/protocol.hpp"

#include <cstdio>

namespace certfleet::msca {

namespace {

struct hresult_row {
  std::uint32_t code;
  std::string_view name;
  failure_class cls;
};

// Only documented codes. Where each is documented:
//  [com]  "COM Error Codes (Security and Setup)", learn.microsoft.com/windows/win32/com/com-error-codes-4
//         (the CERTSRV_E_* codes of winerror.h, with their messages);
//  [wcce] MS-WCCE, the CA's processing rules that name the code it returns (e.g. 3.2.2.6.2.1.4.3:
//         "The returned error code MUST be 0x80094012 (CERTSRV_E_TEMPLATE_DENIED)");
//  [gen]  "COM Error Codes (Generic)" / "Common HRESULT Values", learn.microsoft.com/windows/win32/seccrypto/common-hresult-values
//         and the RPC codes of "System Error Codes (1700-3999)" as HRESULT_FROM_WIN32.
constexpr hresult_row hresults[] = {
    // The request's content.
    {0x80094001, "CERTSRV_E_BAD_REQUESTSUBJECT", failure_class::bad_request},       // [com]
    {0x80094007, "CERTSRV_E_ENCODING_LENGTH", failure_class::bad_request},          // [com]
    {0x8009400C, "CERTSRV_E_BAD_REQUEST_KEY_ARCHIVAL", failure_class::bad_request}, // [com]
    {0x8009400E, "CERTSRV_E_BAD_RENEWAL_CERT_ATTRIBUTE", failure_class::bad_request}, // [com]
    {0x80094016, "CERTSRV_E_WEAK_SIGNATURE_OR_KEY", failure_class::bad_request},    // [com]
    {0x80094801, "CERTSRV_E_NO_CERT_TYPE", failure_class::bad_request},             // [com]
    {0x80094803, "CERTSRV_E_SUBJECT_ALT_NAME_REQUIRED", failure_class::bad_request}, // [com]
    {0x80094806, "CERTSRV_E_BAD_RENEWAL_SUBJECT", failure_class::bad_request},      // [com]
    {0x80094807, "CERTSRV_E_BAD_TEMPLATE_VERSION", failure_class::bad_request},     // [com]
    {0x8009480D, "CERTSRV_E_SUBJECT_UPN_REQUIRED", failure_class::bad_request},     // [com]
    {0x8009480F, "CERTSRV_E_SUBJECT_DNS_REQUIRED", failure_class::bad_request},     // [com]
    {0x80094811, "CERTSRV_E_KEY_LENGTH", failure_class::bad_request},               // [com]
    {0x80094812, "CERTSRV_E_SUBJECT_EMAIL_REQUIRED", failure_class::bad_request},   // [com]
    {0x80094816, "CERTSRV_E_RENEWAL_BAD_PUBLIC_KEY", failure_class::bad_request},   // [com]
    {0x80070057, "E_INVALIDARG", failure_class::bad_request},                       // [gen]
    // The template.
    {0x80094012, "CERTSRV_E_TEMPLATE_DENIED", failure_class::template_not_allowed},  // [com] [wcce]
    {0x80094800, "CERTSRV_E_UNSUPPORTED_CERT_TYPE", failure_class::template_not_allowed}, // [com]
    {0x80094802, "CERTSRV_E_TEMPLATE_CONFLICT", failure_class::template_not_allowed},  // [com]
    {0x80094813, "CERTSRV_E_UNKNOWN_CERT_TYPE", failure_class::template_not_allowed},  // [com]
    // Policy and people.
    {0x80094011, "CERTSRV_E_ENROLL_DENIED", failure_class::denied},          // [com]
    {0x80094014, "CERTSRV_E_ADMIN_DENIED_REQUEST", failure_class::denied},   // [com]
    {0x80094009, "CERTSRV_E_RESTRICTEDOFFICER", failure_class::denied},      // [com]
    {0x80094808, "CERTSRV_E_TEMPLATE_POLICY_REQUIRED", failure_class::denied}, // [com]
    {0x80094809, "CERTSRV_E_SIGNATURE_POLICY_REQUIRED", failure_class::denied}, // [com]
    {0x8009480B, "CERTSRV_E_SIGNATURE_REJECTED", failure_class::denied},     // [com]
    // Who is asking.
    {0x80070005, "E_ACCESSDENIED", failure_class::auth},                     // [gen]
    // The CA behind the CES.
    {0x800706BA, "RPC_S_SERVER_UNAVAILABLE", failure_class::ca_unavailable}, // [gen] (1722)
    {0x800706BE, "RPC_S_CALL_FAILED", failure_class::ca_unavailable},        // [gen] (1726)
    {0x80094006, "CERTSRV_E_SERVER_SUSPENDED", failure_class::ca_unavailable}, // [com]
    {0x8009400F, "CERTSRV_E_NO_DB_SESSIONS", failure_class::ca_unavailable},  // [com]
    // The request's state: QueryTokenStatus of an id the CA does not have, or cannot answer for.
    {0x80094002, "CERTSRV_E_NO_REQUEST", failure_class::other},              // [com]
    {0x80094003, "CERTSRV_E_BAD_REQUESTSTATUS", failure_class::other},       // [com]
};

const hresult_row* find_hresult(std::int64_t code) {
  // Held signed (xs:int) or unsigned: both name the same 32 bits.
  if (code < INT32_MIN || code > static_cast<std::int64_t>(UINT32_MAX)) return nullptr;
  const auto bits = static_cast<std::uint32_t>(code);
  for (const auto& row : hresults)
    if (row.code == bits) return &row;
  return nullptr;
}

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

}  // namespace

std::string_view failure_class_name(failure_class c) noexcept {
  switch (c) {
    case failure_class::auth: return "msca_auth";
    case failure_class::template_not_allowed: return "msca_template_not_allowed";
    case failure_class::denied: return "msca_denied";
    case failure_class::pending: return "msca_pending";
    case failure_class::ca_unavailable: return "msca_ca_unavailable";
    case failure_class::bad_request: return "msca_bad_request";
    case failure_class::other: return "msca_other";
  }
  return "msca_other";
}

failure_class classify_fault(const soap_fault& f) noexcept {
  if (f.error_code)
    if (const auto* row = find_hresult(*f.error_code)) return row->cls;
  // No HRESULT we know: WS-Security's fault codes (WS-Security 1.1 §12) are the credentials;
  // WCF's ActionNotSupported / DestinationUnreachable are a wrong or absent service.
  std::string_view sub = f.subcode;
  if (contains(sub, "FailedAuthentication") || contains(sub, "InvalidSecurity") || contains(sub, "FailedCheck") ||
      contains(sub, "SecurityTokenUnavailable"))
    return failure_class::auth;
  if (contains(sub, "DestinationUnreachable") || contains(sub, "EndpointUnavailable") ||
      contains(sub, "ServiceTooBusy"))
    return failure_class::ca_unavailable;
  if (f.invalid_request) return failure_class::bad_request;
  return failure_class::other;
}

std::string hresult_text(std::int64_t code) {
  // Outside 32 bits it is no HRESULT: shown as the number it is, never as a wrapped code.
  if (code < INT32_MIN || code > static_cast<std::int64_t>(UINT32_MAX)) return std::to_string(code);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", static_cast<std::uint32_t>(code));
  return buf;
}

std::string_view hresult_name(std::int64_t code) noexcept {
  const auto* row = find_hresult(code);
  return row ? row->name : std::string_view();
}

}  // namespace certfleet::msca
