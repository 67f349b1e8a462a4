// MS-WSTEP: the RequestSecurityToken of a new certificate, a renewal and a pending request's
// status, and the CA's answer: RequestSecurityTokenResponseCollection (issued or pending) or a
// SOAP fault with CertificateEnrollmentWSDetail (refused).
#include "certfleet/core/base64.hpp"
#include "certfleet/msca/protocol.hpp"
#include "core/openssl_ptr.hpp"
#include "msca/soap.hpp"

#include <openssl/cms.h>
#include <openssl/x509.h>

#include <algorithm>

namespace certfleet::msca {

using namespace detail;

namespace {

// MS-WSTEP 3.1.4.2: every request goes to the one action; the RequestType says what it is.
constexpr std::string_view rst_action = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment/RST/wstep";
constexpr std::string_view token_type_x509v3 =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3";
constexpr std::string_view request_type_issue = "http://docs.oasis-open.org/ws-sx/ws-trust/200512/Issue";
constexpr std::string_view request_type_query = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment/QueryTokenStatus";
constexpr std::string_view value_type_pkcs10 = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment#PKCS10";
constexpr std::string_view value_type_pkcs7 = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment#PKCS7";
constexpr std::string_view encoding_base64 =
    "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd#base64binary";

error bad(std::string message, std::string field) { return make_error(errc::invalid_argument, std::move(message), std::move(field)); }

// The DER is one whole X.509 certificate (nothing before or after it).
bool is_certificate(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ossl_ptr<X509, X509_free> cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  return cert && p == reinterpret_cast<const unsigned char*>(der.data()) + der.size();
}

void free_x509_stack(STACK_OF(X509)* s) { sk_X509_pop_free(s, X509_free); }

// The certificates of a PKCS#7/CMS SignedData (a CMC Full PKI Response or a certs-only
// degenerate one), each as DER; an error when the bytes are not one SignedData.
result<std::vector<std::string>> signed_data_certificates(std::string_view der, const std::string& field) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ossl_ptr<CMS_ContentInfo, CMS_ContentInfo_free> cms(d2i_CMS_ContentInfo(nullptr, &p, static_cast<long>(der.size())));
  if (!cms || p != reinterpret_cast<const unsigned char*>(der.data()) + der.size())
    return bad("the PKCS#7 answer is not a DER PKCS#7/CMS structure", field);
  if (OBJ_obj2nid(CMS_get0_type(cms.get())) != NID_pkcs7_signed)
    return bad("the PKCS#7 answer is not a SignedData", field);
  std::vector<std::string> out;
  ossl_ptr<STACK_OF(X509), free_x509_stack> certs(CMS_get1_certs(cms.get()));
  if (!certs) return out;  // a SignedData may carry no certificate
  for (int i = 0; i < sk_X509_num(certs.get()); ++i) {
    unsigned char* buf = nullptr;
    int n = i2d_X509(sk_X509_value(certs.get(), i), &buf);
    if (n <= 0) return bad("a certificate of the PKCS#7 answer does not encode", field);
    out.emplace_back(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
    OPENSSL_free(buf);
  }
  return out;
}

}  // namespace

soap_request enrollment_request(std::string_view ces_url, std::string_view message_id, const enroll_request& r,
                                const message_security& security) {
  std::string body;
  body += "<wst:RequestSecurityToken PreferredLanguage=\"en-US\" xmlns:wst=\"";
  body += ns_wst;
  body += "\"><wst:TokenType>";
  body += token_type_x509v3;
  body += "</wst:TokenType><wst:RequestType>";
  body += r.kind == request_kind::query ? request_type_query : request_type_issue;
  body += "</wst:RequestType>";
  if (r.kind == request_kind::query) {
    // MS-WSTEP 3.1.4.2.1.2: the pending request is named by its RequestID alone.
    body += "<RequestID xmlns=\"";
    body += ns_wstep;
    body += "\">";
    body += xml_escape(r.request_id);
    body += "</RequestID>";
  } else {
    // MS-WSTEP 3.1.4.2.1.1: a new certificate and a renewal are both Issue; a renewal's token
    // is the PKCS#7 signed with the current certificate's key, a new one's the PKCS#10.
    body += "<wsse:BinarySecurityToken ValueType=\"";
    body += r.kind == request_kind::renew ? value_type_pkcs7 : value_type_pkcs10;
    body += "\" EncodingType=\"";
    body += encoding_base64;
    body += "\" xmlns:wsse=\"";
    body += ns_wsse;
    body += "\">";
    body += base64_encode(r.token_der);
    body += "</wsse:BinarySecurityToken>";
    if (!r.template_name.empty()) {
      body += "<ac:AdditionalContext xmlns:ac=\"";
      body += ns_auth;
      body += "\"><ac:ContextItem Name=\"CertificateTemplate\"><ac:Value>";
      body += xml_escape(r.template_name);
      body += "</ac:Value></ac:ContextItem></ac:AdditionalContext>";
    }
  }
  body += "</wst:RequestSecurityToken>";
  return soap_request{std::string(rst_action), soap_envelope(rst_action, ces_url, message_id, security, body)};
}

result<enroll_response> parse_enrollment_response(std::string_view xml) {
  auto root = parse_xml(xml);
  if (!root) return std::move(root).error();
  auto body = soap_body(*root);
  if (!body) return std::move(body).error();

  enroll_response out;
  if (const auto* fault = (*body)->child(ns_soap, "Fault")) {
    auto f = read_fault(*fault);
    if (!f) return std::move(f).error();
    out.status = disposition::refused;
    out.fault = std::move(*f);
    out.request_id = out.fault.request_id;
    out.disposition_message = out.fault.reason;
    return out;
  }
  const auto* coll = (*body)->child(ns_wst, "RequestSecurityTokenResponseCollection");
  if (!coll) return bad("the answer is neither a RequestSecurityTokenResponseCollection nor a SOAP fault",
                        "RequestSecurityTokenResponseCollection");
  const std::string base = "RequestSecurityTokenResponseCollection/RequestSecurityTokenResponse";
  auto responses = coll->children_named(ns_wst, "RequestSecurityTokenResponse");
  if (responses.size() != 1)
    return bad("the collection has " + std::to_string(responses.size()) + " responses (one was asked for)", base);
  const auto& rstr = *responses.front();

  if (const auto* dm = rstr.child(ns_wstep, "DispositionMessage"); dm && !dm->nil())
    out.disposition_message = std::string(dm->trimmed_text());
  if (const auto* rid = rstr.child(ns_wstep, "RequestID"); rid && !rid->nil()) {
    // The CA's request ids are decimal integers (MS-WSTEP: xs:string holding one); kept as text.
    auto v = read_int(rid->trimmed_text(), 0, INT64_MAX);
    if (!v) return bad("RequestID is not a request number", base + "/RequestID");
    out.request_id = std::to_string(*v);
  }

  // The issued certificate: RequestedSecurityToken/BinarySecurityToken (MS-WSTEP 3.1.4.1.3.2).
  if (const auto* rst = rstr.child(ns_wst, "RequestedSecurityToken")) {
    if (const auto* bst = rst->child(ns_wsse, "BinarySecurityToken"); bst && !bst->nil() && !bst->trimmed_text().empty()) {
      auto der = read_base64(bst->text);
      if (!der) return bad("the issued certificate is not base64", base + "/RequestedSecurityToken/BinarySecurityToken");
      if (!is_certificate(*der))
        return bad("the issued certificate is not a DER X.509 certificate",
                   base + "/RequestedSecurityToken/BinarySecurityToken");
      out.certificate_der = std::move(*der);
    }
  }
  // The PKCS#7 answer (CMC response or certs-only): the chain beside the leaf.
  if (const auto* bst = rstr.child(ns_wsse, "BinarySecurityToken"); bst && !bst->nil() && !bst->trimmed_text().empty()) {
    auto der = read_base64(bst->text);
    if (!der) return bad("the PKCS#7 answer is not base64", base + "/BinarySecurityToken");
    auto certs = signed_data_certificates(*der, base + "/BinarySecurityToken");
    if (!certs) return std::move(certs).error();
    if (!out.certificate_der.empty())
      for (auto& c : *certs)
        if (c != out.certificate_der &&
            std::find(out.chain_der.begin(), out.chain_der.end(), c) == out.chain_der.end())
          out.chain_der.push_back(std::move(c));
  }

  if (!out.certificate_der.empty()) {
    out.status = disposition::issued;
  } else if (!out.request_id.empty()) {
    // MS-WSTEP 3.1.4.2.1.1: pending is a response with a RequestID and no issued certificate.
    out.status = disposition::pending;
  } else {
    return bad("the response has neither an issued certificate nor a RequestID", base);
  }
  return out;
}

}  // namespace certfleet::msca
