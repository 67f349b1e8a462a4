// SOAP 1.2 envelopes, faults and simple types shared by the MS-XCEP and MS-WSTEP messages.
#include "msca/soap.hpp"

#include "certfleet/core/base64.hpp"

#include <charconv>
#include <cstdint>

namespace certfleet::msca::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string soap_envelope(std::string_view action, std::string_view to, std::string_view message_id,
                          const message_security& security, std::string_view body) {
  std::string x;
  x.reserve(body.size() + 1024);
  x += "<s:Envelope xmlns:s=\"";
  x += ns_soap;
  x += "\" xmlns:a=\"";
  x += ns_wsa;
  x += "\"";
  if (!security.username.empty()) {
    x += " xmlns:u=\"";
    x += ns_wsu;
    x += "\"";
  }
  x += "><s:Header><a:Action s:mustUnderstand=\"1\">";
  x += xml_escape(action);
  x += "</a:Action><a:MessageID>";
  x += xml_escape(message_id);
  x += "</a:MessageID><a:ReplyTo><a:Address>";
  x += wsa_anonymous;
  x += "</a:Address></a:ReplyTo><a:To s:mustUnderstand=\"1\">";
  x += xml_escape(to);
  x += "</a:To>";
  if (!security.username.empty()) {
    // WS-Security UsernameToken with the password in clear text (PasswordText): the message
    // authentication CES's UsernamePassword endpoints take; the caller sends it over TLS only.
    x += "<o:Security s:mustUnderstand=\"1\" xmlns:o=\"";
    x += ns_wsse;
    x += "\"><o:UsernameToken u:Id=\"uuid-";
    // The token's id only has to be unique in the message; the message id is.
    std::string_view id = message_id;
    if (id.substr(0, 9) == "urn:uuid:") id.remove_prefix(9);
    x += xml_escape(id);
    x += "-1\"><o:Username>";
    x += xml_escape(security.username);
    x += "</o:Username><o:Password Type=\"";
    x += wsse_password_text;
    x += "\">";
    x += xml_escape(security.password);
    x += "</o:Password></o:UsernameToken></o:Security>";
  }
  x += "</s:Header><s:Body xmlns:xsi=\"";
  x += ns_xsi;
  x += "\" xmlns:xsd=\"";
  x += ns_xsd;
  x += "\">";
  x += body;
  x += "</s:Body></s:Envelope>";
  return x;
}

result<const xml_element*> soap_body(const xml_element& root) {
  if (!root.is(ns_soap, "Envelope"))
    return make_error(errc::invalid_argument,
                      "the answer is not a SOAP 1.2 envelope (root element {" + root.ns + "}" + root.name + ")",
                      "Envelope");
  auto bodies = root.children_named(ns_soap, "Body");
  if (bodies.size() != 1)
    return make_error(errc::invalid_argument, "the SOAP envelope has " + std::to_string(bodies.size()) + " Body elements",
                      "Envelope/Body");
  return bodies.front();
}

result<soap_fault> read_fault(const xml_element& fault) {
  soap_fault f;
  const auto* code = fault.child(ns_soap, "Code");
  const auto* value = code ? code->child(ns_soap, "Value") : nullptr;
  if (!value || value->trimmed_text().empty())
    return make_error(errc::invalid_argument, "the SOAP fault has no Code/Value", "Fault/Code");
  f.code = std::string(value->trimmed_text());
  if (const auto* sub = code->child(ns_soap, "Subcode"))
    if (const auto* sv = sub->child(ns_soap, "Value")) f.subcode = std::string(sv->trimmed_text());
  if (const auto* reason = fault.child(ns_soap, "Reason")) {
    // One Text per language; the first is the server's own (CES writes one).
    if (const auto* t = reason->child(ns_soap, "Text")) f.reason = std::string(t->trimmed_text());
  }
  const auto* detail = fault.child(ns_soap, "Detail");
  const auto* ws = detail ? detail->child(ns_wstep, "CertificateEnrollmentWSDetail") : nullptr;
  if (ws && !ws->nil()) {
    if (const auto* ec = ws->child(ns_wstep, "ErrorCode"); ec && !ec->nil()) {
      // xs:int: an HRESULT written signed (-2146877422); some servers write it unsigned.
      auto v = read_int(ec->trimmed_text(), INT32_MIN, UINT32_MAX);
      if (!v) return make_error(errc::invalid_argument, "ErrorCode is not a 32-bit integer", "Fault/Detail/ErrorCode");
      f.error_code = *v > INT32_MAX ? *v - 0x100000000LL : *v;
    }
    if (const auto* rid = ws->child(ns_wstep, "RequestID"); rid && !rid->nil())
      f.request_id = std::string(rid->trimmed_text());
    if (const auto* inv = ws->child(ns_wstep, "InvalidRequest"); inv && !inv->nil()) {
      auto b = read_bool(inv->trimmed_text());
      if (!b) return make_error(errc::invalid_argument, "InvalidRequest is not a boolean", "Fault/Detail/InvalidRequest");
      f.invalid_request = *b;
    }
  }
  return f;
}

std::optional<std::int64_t> read_int(std::string_view text, std::int64_t min, std::int64_t max) {
  text = trim(text);
  if (text.size() > 1 && text.front() == '+' && text[1] >= '0' && text[1] <= '9') text.remove_prefix(1);
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < min || v > max) return std::nullopt;
  return v;
}

std::optional<bool> read_bool(std::string_view text) {
  text = trim(text);
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  return std::nullopt;
}

std::optional<std::string> read_base64(std::string_view text) {
  std::string compact;
  compact.reserve(text.size());
  for (char c : text) {
    if (is_space(c)) continue;
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                    c == '/' || c == '=';
    if (!ok) return std::nullopt;
    compact += c;
  }
  return base64_decode(compact);
}

}  // namespace certfleet::msca::detail
