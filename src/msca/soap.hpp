#pragma once
// What the MS-XCEP and MS-WSTEP messages share: the namespaces, the SOAP 1.2 envelope with its
// WS-Addressing and WS-Security headers, the SOAP fault, and the strict readers of the schema's
// simple types (integers, booleans, base64).
#include "certfleet/core/error.hpp"
#include "certfleet/msca/protocol.hpp"
#include "msca/xml_reader.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::msca::detail {

inline constexpr std::string_view ns_soap = "http://www.w3.org/2003/05/soap-envelope";
inline constexpr std::string_view ns_wsa = "http://www.w3.org/2005/08/addressing";
inline constexpr std::string_view ns_wsse =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
inline constexpr std::string_view ns_wsu =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd";
inline constexpr std::string_view ns_xsd = "http://www.w3.org/2001/XMLSchema";
inline constexpr std::string_view ns_xcep = "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy";
inline constexpr std::string_view ns_wst = "http://docs.oasis-open.org/ws-sx/ws-trust/200512";
inline constexpr std::string_view ns_wstep = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment";
inline constexpr std::string_view ns_auth = "http://schemas.xmlsoap.org/ws/2006/12/authorization";

inline constexpr std::string_view wsa_anonymous = "http://www.w3.org/2005/08/addressing/anonymous";
inline constexpr std::string_view wsse_password_text =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText";

// The SOAP 1.2 envelope around `body` (already XML): wsa:Action, MessageID, ReplyTo (anonymous),
// To, and a wsse:Security UsernameToken when security.username is set. Every value is escaped.
std::string soap_envelope(std::string_view action, std::string_view to, std::string_view message_id,
                          const message_security& security, std::string_view body);

// The Envelope's Body element, checked: the root is a SOAP 1.2 Envelope with one Body.
result<const xml_element*> soap_body(const xml_element& root);

// The SOAP 1.2 Fault in a Body, with MS-WSTEP's CertificateEnrollmentWSDetail when present.
// invalid_argument when the fault itself is malformed.
result<soap_fault> read_fault(const xml_element& fault);

// Strict readers of the schema's simple types (whitespace collapsed first); nullopt when the
// text is not one.
std::optional<std::int64_t> read_int(std::string_view text, std::int64_t min, std::int64_t max);
std::optional<bool> read_bool(std::string_view text);
// base64 with line breaks and spaces allowed between the characters (what servers wrap it with);
// anything else is refused.
std::optional<std::string> read_base64(std::string_view text);

}  // namespace certfleet::msca::detail
