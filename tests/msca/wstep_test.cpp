// MS-WSTEP: our RequestSecurityToken messages have the specification's structure, and every
// kind of answer (issued, pending, fault) is read; malformed answers are errors.
#include "certfleet/core/base64.hpp"
#include "certfleet/msca/protocol.hpp"
#include "core/openssl_ptr.hpp"
#include "msca/xml_reader.hpp"
#include "msca_fixtures.hpp"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/cms.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>

using certfleet::errc;
using certfleet::ossl_ptr;
using namespace certfleet::msca;
using msca_test::fixture;

namespace {

void shape(const detail::xml_element& e, int depth, std::string& out) {
  out += std::string(static_cast<std::size_t>(depth) * 2, ' ') + "{" + e.ns + "}" + e.name + "\n";
  for (const auto& c : e.children) shape(c, depth + 1, out);
}

std::string shape_of(std::string_view xml) {
  auto r = detail::parse_xml(xml);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  std::string out;
  if (r) shape(*r, 0, out);
  return out;
}

const detail::xml_element* find(const detail::xml_element& e, std::string_view ns, std::string_view name) {
  if (e.is(ns, name)) return &e;
  for (const auto& c : e.children)
    if (const auto* f = find(c, ns, name)) return f;
  return nullptr;
}

std::string pem_to_der(const std::string& pem) {
  ossl_ptr<BIO, BIO_free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  ossl_ptr<X509, X509_free> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  unsigned char* buf = nullptr;
  int n = i2d_X509(cert.get(), &buf);
  std::string out(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
  OPENSSL_free(buf);
  return out;
}

void free_stack(STACK_OF(X509)* s) { sk_X509_free(s); }  // the stack only: its certificates are owned elsewhere

std::string replaced(std::string doc, std::string_view from, std::string_view to) {
  auto at = doc.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) doc.replace(at, from.size(), to);
  return doc;
}

constexpr std::string_view wst = "http://docs.oasis-open.org/ws-sx/ws-trust/200512";
constexpr std::string_view wsse = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
constexpr std::string_view auth = "http://schemas.xmlsoap.org/ws/2006/12/authorization";
constexpr std::string_view enrollment = "http://schemas.microsoft.com/windows/pki/2009/01/enrollment";

}  // namespace

TEST(msca_wstep, issue_request_has_the_specifications_shape) {
  enroll_request r;
  r.kind = request_kind::issue;
  r.template_name = "Contoso<Web>&Server";
  r.token_der = std::string("\x30\x82\x01\x00 csr bytes", 14);
  auto req = enrollment_request("https://ces.contoso.com/contoso-CA01-CA_CES_Kerberos/service.svc/CES", "urn:uuid:2", r, {});
  EXPECT_EQ(req.action, "http://schemas.microsoft.com/windows/pki/2009/01/enrollment/RST/wstep");
  EXPECT_EQ(shape_of(req.envelope), shape_of(fixture("wstep_issue_request.xml")));
  auto tree = detail::parse_xml(req.envelope);
  ASSERT_TRUE(tree);
  EXPECT_EQ(find(*tree, wst, "RequestType")->text, "http://docs.oasis-open.org/ws-sx/ws-trust/200512/Issue");
  const auto* bst = find(*tree, wsse, "BinarySecurityToken");
  EXPECT_EQ(*bst->attribute("", "ValueType"), "http://schemas.microsoft.com/windows/pki/2009/01/enrollment#PKCS10");
  EXPECT_EQ(*certfleet::base64_decode(bst->text), r.token_der);
  const auto* item = find(*tree, auth, "ContextItem");
  EXPECT_EQ(*item->attribute("", "Name"), "CertificateTemplate");
  EXPECT_EQ(item->children.at(0).text, "Contoso<Web>&Server");
}

TEST(msca_wstep, renewal_is_an_issue_with_a_pkcs7) {
  enroll_request r;
  r.kind = request_kind::renew;
  r.template_name = "ContosoWebServer";
  r.token_der = "pkcs7";
  auto req = enrollment_request("https://ces/x", "urn:uuid:3", r, {});
  EXPECT_EQ(shape_of(req.envelope), shape_of(fixture("wstep_issue_request.xml")));
  auto tree = detail::parse_xml(req.envelope);
  ASSERT_TRUE(tree);
  EXPECT_EQ(find(*tree, wst, "RequestType")->text, "http://docs.oasis-open.org/ws-sx/ws-trust/200512/Issue");
  EXPECT_EQ(*find(*tree, wsse, "BinarySecurityToken")->attribute("", "ValueType"),
            "http://schemas.microsoft.com/windows/pki/2009/01/enrollment#PKCS7");
}

TEST(msca_wstep, query_request_has_the_specifications_shape) {
  enroll_request r;
  r.kind = request_kind::query;
  r.request_id = "58";
  auto req = enrollment_request("https://ces.contoso.com/contoso-CA01-CA_CES_Kerberos/service.svc/CES", "urn:uuid:4", r,
                                message_security{"svc", "secret"});
  auto tree = detail::parse_xml(req.envelope);
  ASSERT_TRUE(tree);
  EXPECT_EQ(find(*tree, wst, "RequestType")->text, "http://schemas.microsoft.com/windows/pki/2009/01/enrollment/QueryTokenStatus");
  EXPECT_EQ(find(*tree, enrollment, "RequestID")->text, "58");
  EXPECT_EQ(find(*tree, wsse, "BinarySecurityToken"), nullptr);
  // The spec's shape, once our Security header (absent in the fixture) is left out.
  auto plain = enrollment_request("https://ces.contoso.com/contoso-CA01-CA_CES_Kerberos/service.svc/CES", "urn:uuid:4", r, {});
  EXPECT_EQ(shape_of(plain.envelope), shape_of(fixture("wstep_query_request.xml")));
  // A request id that is not a number is still written as text, escaped.
  r.request_id = "5</RequestID><x>";
  auto odd = enrollment_request("https://ces/x", "urn:uuid:5", r, {});
  auto odd_tree = detail::parse_xml(odd.envelope);
  ASSERT_TRUE(odd_tree);
  EXPECT_EQ(find(*odd_tree, enrollment, "RequestID")->text, "5</RequestID><x>");
}

TEST(msca_wstep, reads_an_issued_answer_with_its_chain) {
  auto r = parse_enrollment_response(fixture("wstep_issued_response.xml"));
  ASSERT_TRUE(r) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->status, disposition::issued);
  EXPECT_EQ(r->request_id, "57");
  EXPECT_EQ(r->disposition_message, "Issued");
  EXPECT_EQ(r->certificate_der, pem_to_der(fixture("leaf_certificate.pem")));
  ASSERT_EQ(r->chain_der.size(), 1u);
  EXPECT_EQ(r->chain_der[0], pem_to_der(fixture("ca_certificate.pem")));
}

TEST(msca_wstep, reads_a_chain_from_a_signed_data_with_content) {
  // What a CMC Full PKI Response looks like to the reader: SignedData with content and certs.
  const auto ca_pem = fixture("ca_certificate.pem");
  ossl_ptr<EVP_PKEY, EVP_PKEY_free> key(EVP_EC_gen("P-256"));
  ossl_ptr<X509, X509_free> self(X509_new());
  X509_set_version(self.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(self.get()), 7);
  X509_gmtime_adj(X509_getm_notBefore(self.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(self.get()), 3600);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(self.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("cmc signer"), -1, -1, 0);
  X509_set_issuer_name(self.get(), X509_get_subject_name(self.get()));
  X509_set_pubkey(self.get(), key.get());
  ASSERT_GT(X509_sign(self.get(), key.get(), EVP_sha256()), 0);
  ossl_ptr<BIO, BIO_free> bio(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())));
  ossl_ptr<X509, X509_free> ca(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ossl_ptr<STACK_OF(X509), free_stack> extra(sk_X509_new_null());
  sk_X509_push(extra.get(), ca.get());
  ossl_ptr<BIO, BIO_free> content(BIO_new_mem_buf("cmc response body", -1));
  ossl_ptr<CMS_ContentInfo, CMS_ContentInfo_free> cms(
      CMS_sign(self.get(), key.get(), extra.get(), content.get(), CMS_BINARY));
  ASSERT_TRUE(cms);
  unsigned char* buf = nullptr;
  int n = i2d_CMS_ContentInfo(cms.get(), &buf);
  std::string p7(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
  OPENSSL_free(buf);

  auto doc = fixture("wstep_issued_response.xml");
  auto start = doc.find('>', doc.find("enrollment#PKCS7")) + 1;
  auto end = doc.find("</BinarySecurityToken>", start);
  doc.replace(start, end - start, certfleet::base64_encode(p7));
  auto r = parse_enrollment_response(doc);
  ASSERT_TRUE(r) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->status, disposition::issued);
  EXPECT_EQ(r->chain_der.size(), 2u);  // the signer and the CA; the leaf is not among them
}

TEST(msca_wstep, reads_a_pending_answer) {
  auto r = parse_enrollment_response(fixture("wstep_pending_response.xml"));
  ASSERT_TRUE(r) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->status, disposition::pending);
  EXPECT_EQ(r->request_id, "58");
  EXPECT_EQ(r->disposition_message, "Taken Under Submission");
  EXPECT_TRUE(r->certificate_der.empty());
  EXPECT_TRUE(r->chain_der.empty());
}

TEST(msca_wstep, reads_a_fault) {
  auto r = parse_enrollment_response(fixture("wstep_fault.xml"));
  ASSERT_TRUE(r) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->status, disposition::refused);
  EXPECT_EQ(r->fault.code, "s:Receiver");
  EXPECT_EQ(r->fault.subcode, "a:InternalServiceFault");
  EXPECT_NE(r->fault.reason.find("do not allow the current user to enroll"), std::string::npos);
  ASSERT_TRUE(r->fault.error_code);
  EXPECT_EQ(*r->fault.error_code, -2146877422);
  EXPECT_EQ(r->fault.request_id, "59");
  EXPECT_EQ(r->request_id, "59");
  EXPECT_FALSE(r->fault.invalid_request);
  EXPECT_EQ(classify_fault(r->fault), failure_class::template_not_allowed);
  EXPECT_EQ(hresult_text(*r->fault.error_code), "0x80094012");
}

TEST(msca_wstep, refuses_malformed_answers) {
  const auto issued = fixture("wstep_issued_response.xml");
  const std::string base = "RequestSecurityTokenResponseCollection/RequestSecurityTokenResponse";
  // Bad base64 in the leaf and in the PKCS#7.
  auto r = parse_enrollment_response(replaced(issued, "<BinarySecurityToken ValueType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3\" EncodingType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd#base64binary\" xmlns=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd\">MII",
                                              "<BinarySecurityToken ValueType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-x509-token-profile-1.0#X509v3\" EncodingType=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd#base64binary\" xmlns=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd\">M*II"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base + "/RequestedSecurityToken/BinarySecurityToken");
  auto p7start = issued.find('>', issued.find("enrollment#PKCS7")) + 1;
  std::string bad_p7 = issued;
  bad_p7.insert(p7start + 1, "%");
  r = parse_enrollment_response(bad_p7);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base + "/BinarySecurityToken");
  // Base64 of something that is not a PKCS#7 (the leaf certificate itself).
  std::string not_p7 = issued;
  auto p7end = not_p7.find("</BinarySecurityToken>", p7start);
  not_p7.replace(p7start, p7end - p7start, certfleet::base64_encode(pem_to_der(fixture("leaf_certificate.pem"))));
  r = parse_enrollment_response(not_p7);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base + "/BinarySecurityToken");
  EXPECT_NE(r.error().message.find("PKCS#7"), std::string::npos);
  // A leaf that is not a certificate.
  std::string not_cert = issued;
  auto leaf_start = not_cert.find('>', not_cert.find("token-profile-1.0#X509v3\" Encoding")) + 1;
  auto leaf_end = not_cert.find("</BinarySecurityToken>", leaf_start);
  not_cert.replace(leaf_start, leaf_end - leaf_start, certfleet::base64_encode("not a certificate"));
  r = parse_enrollment_response(not_cert);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base + "/RequestedSecurityToken/BinarySecurityToken");
  // Neither a certificate nor a RequestID.
  r = parse_enrollment_response(replaced(fixture("wstep_pending_response.xml"),
                                         "<RequestID xmlns=\"http://schemas.microsoft.com/windows/pki/2009/01/enrollment\">58</RequestID>", ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base);
  // A RequestID in the wrong namespace is not the RequestID.
  r = parse_enrollment_response(replaced(fixture("wstep_pending_response.xml"),
                                         "<RequestID xmlns=\"http://schemas.microsoft.com/windows/pki/2009/01/enrollment\">",
                                         "<RequestID xmlns=\"urn:other\">"));
  ASSERT_FALSE(r);
  r = parse_enrollment_response(replaced(fixture("wstep_pending_response.xml"), ">58</RequestID>", ">fifty</RequestID>"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, base + "/RequestID");
  // The wrong WS-Trust namespace (2005/02) is not an answer to our request.
  r = parse_enrollment_response(replaced(issued, "<RequestSecurityTokenResponseCollection xmlns=\"http://docs.oasis-open.org/ws-sx/ws-trust/200512\">",
                                         "<RequestSecurityTokenResponseCollection xmlns=\"http://schemas.xmlsoap.org/ws/2005/02/trust\">"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "RequestSecurityTokenResponseCollection");
  // Faults: ErrorCode out of 32 bits, a fault without a code.
  r = parse_enrollment_response(replaced(fixture("wstep_fault.xml"), "<ErrorCode>-2146877422<", "<ErrorCode>99999999999<"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "Fault/Detail/ErrorCode");
  r = parse_enrollment_response(replaced(fixture("wstep_fault.xml"), "<s:Value>s:Receiver</s:Value>", ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "Fault/Code");
  // Hostile XML is refused by the reader before anything else.
  r = parse_enrollment_response("<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><x>&e;</x>");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "xml");
}

TEST(msca_wstep, accepts_an_unsigned_error_code_and_wrapped_base64) {
  auto r = parse_enrollment_response(replaced(fixture("wstep_fault.xml"), "<ErrorCode>-2146877422<", "<ErrorCode>2148089874<"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r->fault.error_code, -2146877422);
  // The issued fixture's PKCS#7 is wrapped at 64 columns; CRLF line breaks are as good.
  auto issued = fixture("wstep_issued_response.xml");
  std::string crlf;
  for (char c : issued) crlf += (c == '\n') ? std::string("\r\n") : std::string(1, c);
  auto c = parse_enrollment_response(crlf);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->chain_der.size(), 1u);
}
