// MS-XCEP: our GetPolicies has the element structure of the specification's request, and the
// GetPoliciesResponse is read into templates with their OIDs, key algorithms and endpoints.
#include "certfleet/msca/protocol.hpp"
#include "msca/xml_reader.hpp"
#include "msca_fixtures.hpp"

#include <gtest/gtest.h>

#include <string>

using certfleet::errc;
using namespace certfleet::msca;
using msca_test::fixture;

namespace {

// The element tree as "{ns}name" lines, indented by depth, in document order: what two messages
// must share to be the same message (prefixes, whitespace and values aside).
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

constexpr std::string_view xcep = "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy";
constexpr std::string_view wsa = "http://www.w3.org/2005/08/addressing";

}  // namespace

TEST(msca_xcep, get_policies_has_the_specifications_shape) {
  auto req = get_policies_request("https://cep.contoso.com/ADPolicyProvider_CEP_Kerberos/service.svc/CEP",
                                  "urn:uuid:5d7f2e1c-3b8a-4c4e-9a51-6f0e2d7c9b10", {});
  EXPECT_EQ(req.action, "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy/IPolicy/GetPolicies");
  EXPECT_EQ(shape_of(req.envelope), shape_of(fixture("xcep_get_policies_request.xml")));
  auto tree = detail::parse_xml(req.envelope);
  ASSERT_TRUE(tree);
  EXPECT_EQ(find(*tree, wsa, "Action")->text, req.action);
  EXPECT_EQ(find(*tree, wsa, "To")->text, "https://cep.contoso.com/ADPolicyProvider_CEP_Kerberos/service.svc/CEP");
  EXPECT_EQ(find(*tree, wsa, "MessageID")->text, "urn:uuid:5d7f2e1c-3b8a-4c4e-9a51-6f0e2d7c9b10");
  EXPECT_TRUE(find(*tree, xcep, "lastUpdate")->nil());
  EXPECT_TRUE(find(*tree, xcep, "requestFilter")->nil());
  EXPECT_EQ(soap_content_type(req.action),
            "application/soap+xml; charset=utf-8; action=\"" + req.action + "\"");
}

TEST(msca_xcep, username_token_is_escaped_and_only_when_asked) {
  message_security sec{"CONTOSO\\svc<cert>&", "p\"w'<&>d"};
  auto req = get_policies_request("https://cep/x?a=1&b=<2>", "urn:uuid:1", sec);
  auto tree = detail::parse_xml(req.envelope);
  ASSERT_TRUE(tree) << tree.error().message;
  constexpr std::string_view wsse = "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd";
  ASSERT_NE(find(*tree, wsse, "Username"), nullptr);
  EXPECT_EQ(find(*tree, wsse, "Username")->text, "CONTOSO\\svc<cert>&");
  EXPECT_EQ(find(*tree, wsse, "Password")->text, "p\"w'<&>d");
  EXPECT_EQ(*find(*tree, wsse, "Password")->attribute("", "Type"),
            "http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText");
  EXPECT_EQ(find(*tree, wsa, "To")->text, "https://cep/x?a=1&b=<2>");
  // Without a username there is no Security header at all.
  auto anon = get_policies_request("https://cep/x", "urn:uuid:1", {});
  EXPECT_EQ(anon.envelope.find("Security"), std::string::npos);
  EXPECT_EQ(anon.envelope.find("Password"), std::string::npos);
}

TEST(msca_xcep, reads_the_response) {
  auto p = parse_get_policies_response(fixture("xcep_get_policies_response.xml"));
  ASSERT_TRUE(p) << p.error().field << ": " << p.error().message;
  EXPECT_EQ(p->policy_id, "{3C1F6C4B-2E1A-4F0B-9D7E-5A2B8C9D0E1F}");
  EXPECT_EQ(p->friendly_name, "Active Directory Enrollment Policy");
  EXPECT_EQ(p->next_update_hours, 8);
  ASSERT_EQ(p->cas.size(), 2u);
  EXPECT_EQ(p->cas[0].reference, 0);
  EXPECT_EQ(p->cas[0].name, "contoso-CA01-CA");  // from its certificate
  EXPECT_EQ(p->cas[1].name, "");                 // nil certificate
  ASSERT_EQ(p->cas[0].endpoints.size(), 2u);
  EXPECT_EQ(p->cas[0].endpoints[0].authentication, ces_auth::kerberos);  // priority 1 first
  EXPECT_EQ(p->cas[0].endpoints[1].authentication, ces_auth::username_password);
  EXPECT_TRUE(p->cas[1].endpoints[0].renewal_only);

  ASSERT_EQ(p->templates.size(), 2u);
  const auto& web = p->templates[0];
  EXPECT_EQ(web.name, "ContosoWebServer");
  EXPECT_EQ(web.display_name, "Contoso Web Server");
  EXPECT_EQ(web.oid, "1.3.6.1.4.1.311.21.8.1234567.7654321.1.2.3.4.100.200");
  EXPECT_EQ(web.major_version, 100);
  EXPECT_EQ(web.minor_version, 5);
  EXPECT_EQ(web.schema_version, 2);
  EXPECT_EQ(web.key_algorithm, "RSA");
  EXPECT_EQ(web.min_key_size, 2048);
  EXPECT_EQ(web.key_spec, 1);
  EXPECT_TRUE(web.subject_from_request);
  ASSERT_EQ(web.ca_references, std::vector<std::int64_t>{0});
  ASSERT_EQ(web.endpoints.size(), 2u);
  EXPECT_EQ(web.endpoints[0].url, "https://ces.contoso.com/contoso-CA01-CA_CES_Kerberos/service.svc/CES");

  const auto& ec = p->templates[1];
  EXPECT_EQ(ec.key_algorithm, "ECDSA_P256");
  EXPECT_EQ(ec.min_key_size, 256);
  EXPECT_EQ(ec.schema_version, 4);
  EXPECT_FALSE(ec.subject_from_request);  // 0x08000000 is not ENROLLEE_SUPPLIES_SUBJECT
  // CA 0's two endpoints and CA 1's two, the Kerberos URL both CAs list only once, by priority.
  ASSERT_EQ(ec.endpoints.size(), 3u);
  EXPECT_EQ(ec.endpoints[0].priority, 1);
  EXPECT_EQ(ec.endpoints[2].authentication, ces_auth::username_password);
  for (std::size_t i = 1; i < ec.endpoints.size(); ++i) EXPECT_LE(ec.endpoints[i - 1].priority, ec.endpoints[i].priority);
  EXPECT_EQ(ces_auth_name(ces_auth::client_certificate), "client_certificate");
}

TEST(msca_xcep, refuses_wrong_namespace_and_missing_elements) {
  const auto doc = fixture("xcep_get_policies_response.xml");
  auto replaced = [&](std::string_view from, std::string_view to) {
    std::string d = doc;
    auto at = d.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) d.replace(at, from.size(), to);
    return d;
  };
  // The policy namespace of another year is another document.
  auto r = parse_get_policies_response(replaced("<GetPoliciesResponse xmlns=\"http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy\">",
                                                "<GetPoliciesResponse xmlns=\"http://schemas.microsoft.com/windows/pki/2010/01/enrollmentpolicy\">"));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "GetPoliciesResponse");
  // SOAP 1.1's envelope is not SOAP 1.2's.
  r = parse_get_policies_response(replaced("xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\"",
                                           "xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "Envelope");
  r = parse_get_policies_response(replaced("<commonName>ContosoWebServer</commonName>", ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/response/policies/policy[0]/attributes/commonName");
  r = parse_get_policies_response(replaced("<policyID>{3C1F6C4B-2E1A-4F0B-9D7E-5A2B8C9D0E1F}</policyID>", ""));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/response/policyID");
  r = parse_get_policies_response(replaced("<minimalKeyLength>2048</minimalKeyLength>", "<minimalKeyLength>2k</minimalKeyLength>"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/response/policies/policy[0]/attributes/privateKeyAttributes/minimalKeyLength");
  r = parse_get_policies_response(replaced("<clientAuthentication>4</clientAuthentication>", "<clientAuthentication>3</clientAuthentication>"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/cAs/cA[0]/uris/cAURI[0]/clientAuthentication");
  r = parse_get_policies_response(replaced("<cAReference>1</cAReference>", "<cAReference>7</cAReference>"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/response/policies/policy[1]/cAs/cAReference[1]");
  r = parse_get_policies_response(replaced("<policyOIDReference>0</policyOIDReference>", "<policyOIDReference>9</policyOIDReference>"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/response/policies/policy[0]/policyOIDReference");
  r = parse_get_policies_response(replaced("<certificate>MII", "<certificate>!MII"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "GetPoliciesResponse/cAs/cA[0]/certificate");
  // No policies (nil) is an answer: this caller may enroll for nothing.
  auto start = doc.find("<policies>"), end = doc.find("</policies>");
  std::string none = doc.substr(0, start) + "<policies xsi:nil=\"true\"/>" + doc.substr(end + 11);
  auto empty = parse_get_policies_response(none);
  ASSERT_TRUE(empty) << empty.error().message;
  EXPECT_TRUE(empty->templates.empty());
}

TEST(msca_xcep, fault_is_an_error_with_its_reason) {
  auto r = parse_get_policies_response(
      "<s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\"><s:Body><s:Fault><s:Code><s:Value>s:Sender</s:Value>"
      "<s:Subcode><s:Value xmlns:a=\"http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd\">"
      "a:FailedAuthentication</s:Value></s:Subcode></s:Code><s:Reason><s:Text xml:lang=\"en-US\">At least one security "
      "token in the message could not be validated.</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::unauthorized));
  EXPECT_EQ(r.error().field, "Fault");
  EXPECT_NE(r.error().message.find("could not be validated"), std::string::npos);
  r = parse_get_policies_response(
      "<s:Envelope xmlns:s=\"http://www.w3.org/2003/05/soap-envelope\"><s:Body><s:Fault><s:Code><s:Value>s:Receiver</s:Value>"
      "</s:Code><s:Reason><s:Text>The policy server is unavailable</s:Text></s:Reason></s:Fault></s:Body></s:Envelope>");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_NE(r.error().message.find("unavailable"), std::string::npos);
}
