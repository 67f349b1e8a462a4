// MS-XCEP: the GetPolicies request and the GetPoliciesResponse, read into the templates a job
// enrolls for, with each template's OID, key algorithm and CES endpoints resolved through the
// response's oIDs and cAs collections (MS-XCEP 3.1.4.1.3).
#include "certfleet/msca/protocol.hpp"
#include "core/openssl_ptr.hpp"
#include "msca/soap.hpp"

#include <openssl/x509.h>

#include <algorithm>
#include <map>

namespace certfleet::msca {

using namespace detail;

namespace {

constexpr std::string_view get_policies_action =
    "http://schemas.microsoft.com/windows/pki/2009/01/enrollmentpolicy/IPolicy/GetPolicies";

// MS-XCEP 3.1.4.1.3.16 OID group values this reader uses.
constexpr std::int64_t oid_group_public_key = 3;  // CRYPT_PUBKEY_ALG_OID_GROUP_ID
constexpr std::int64_t oid_group_template = 9;    // CRYPT_TEMPLATE_OID_GROUP_ID

// subjectNameFlags (MS-XCEP 3.1.4.1.3.1, values of MS-CRTD 2.28 msPKI-Certificate-Name-Flag).
constexpr std::int64_t ct_flag_enrollee_supplies_subject = 0x00000001;

struct oid_entry {
  std::string value;
  std::int64_t group = 0;
  std::string default_name;
};

error bad(std::string message, std::string field) { return make_error(errc::invalid_argument, std::move(message), std::move(field)); }

// A child that is present and not nil, or nullptr.
const xml_element* value_of(const xml_element& parent, std::string_view local) {
  const auto* c = parent.child(ns_xcep, local);
  return (c && !c->nil()) ? c : nullptr;
}

result<std::int64_t> required_int(const xml_element& parent, std::string_view local, std::int64_t min, std::int64_t max,
                                  const std::string& path) {
  const auto* c = value_of(parent, local);
  if (!c) return bad(std::string(local) + " is missing", path + "/" + std::string(local));
  auto v = read_int(c->trimmed_text(), min, max);
  if (!v) return bad(std::string(local) + " is not an integer in range", path + "/" + std::string(local));
  return *v;
}

// An optional integer: absent or nil gives `fallback`; present and malformed is an error.
result<std::int64_t> optional_int(const xml_element& parent, std::string_view local, std::int64_t min, std::int64_t max,
                                  std::int64_t fallback, const std::string& path) {
  if (!value_of(parent, local)) return fallback;
  return required_int(parent, local, min, max, path);
}

// The CA's common name from its signing certificate (the policy has no name element for a CA).
std::string ca_common_name(std::string_view der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ossl_ptr<X509, X509_free> cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
  if (!cert) return {};
  X509_NAME* subject = X509_get_subject_name(cert.get());
  int idx = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (idx < 0) return {};
  ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, idx));
  unsigned char* utf8 = nullptr;
  int n = ASN1_STRING_to_UTF8(&utf8, data);
  if (n < 0) return {};
  std::string out(reinterpret_cast<char*>(utf8), static_cast<std::size_t>(n));
  OPENSSL_free(utf8);
  return out;
}

// The key algorithm a template asks for, by the public key OID it references; the names are
// CNG's (what the Certificate Templates console shows).
std::string key_algorithm_name(const oid_entry& e) {
  if (e.value == "1.2.840.113549.1.1.1") return "RSA";
  if (e.value == "1.2.840.10045.3.1.7") return "ECDSA_P256";
  if (e.value == "1.3.132.0.34") return "ECDSA_P384";
  if (e.value == "1.3.132.0.35") return "ECDSA_P521";
  if (!e.default_name.empty()) return e.default_name;
  return e.value;
}

result<policy_ces_endpoint> read_endpoint(const xml_element& uri, const std::string& path) {
  policy_ces_endpoint ep;
  auto auth = required_int(uri, "clientAuthentication", 0, UINT32_MAX, path);
  if (!auth) return std::move(auth).error();
  switch (*auth) {
    case 1: ep.authentication = ces_auth::anonymous; break;
    case 2: ep.authentication = ces_auth::kerberos; break;
    case 4: ep.authentication = ces_auth::username_password; break;
    case 8: ep.authentication = ces_auth::client_certificate; break;
    default:
      return bad("clientAuthentication " + std::to_string(*auth) + " is not 1, 2, 4 or 8", path + "/clientAuthentication");
  }
  const auto* u = value_of(uri, "uri");
  if (!u || u->trimmed_text().empty()) return bad("uri is missing", path + "/uri");
  ep.url = std::string(u->trimmed_text());
  auto priority = optional_int(uri, "priority", 0, INT32_MAX, 0, path);
  if (!priority) return std::move(priority).error();
  ep.priority = static_cast<std::int32_t>(*priority);
  if (const auto* r = value_of(uri, "renewalOnly")) {
    auto b = read_bool(r->trimmed_text());
    if (!b) return bad("renewalOnly is not a boolean", path + "/renewalOnly");
    ep.renewal_only = *b;
  }
  return ep;
}

}  // namespace

std::string soap_content_type(std::string_view action) {
  // SOAP 1.2 over HTTP (SOAP 1.2 part 2 §7.1.4): the action travels as a media type parameter.
  std::string out = "application/soap+xml; charset=utf-8; action=\"";
  for (char c : action)
    if (c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20) out += c;
  out += "\"";
  return out;
}

std::string_view ces_auth_name(ces_auth a) noexcept {
  switch (a) {
    case ces_auth::anonymous: return "anonymous";
    case ces_auth::kerberos: return "kerberos";
    case ces_auth::username_password: return "username_password";
    case ces_auth::client_certificate: return "client_certificate";
  }
  return "?";
}

soap_request get_policies_request(std::string_view cep_url, std::string_view message_id,
                                  const message_security& security) {
  // MS-XCEP 3.1.4.1.1.1: client (lastUpdate and preferredLanguage nil: we cache nothing on the
  // server's side and take its language) and requestFilter nil (every policy).
  std::string body;
  body += "<GetPolicies xmlns=\"";
  body += ns_xcep;
  body +=
      "\"><client><lastUpdate xsi:nil=\"true\"/><preferredLanguage xsi:nil=\"true\"/></client>"
      "<requestFilter xsi:nil=\"true\"/></GetPolicies>";
  return soap_request{std::string(get_policies_action), soap_envelope(get_policies_action, cep_url, message_id, security, body)};
}

result<enrollment_policy> parse_get_policies_response(std::string_view xml) {
  auto root = parse_xml(xml);
  if (!root) return std::move(root).error();
  auto body = soap_body(*root);
  if (!body) return std::move(body).error();
  if (const auto* fault = (*body)->child(ns_soap, "Fault")) {
    auto f = read_fault(*fault);
    if (!f) return std::move(f).error();
    std::string text = "the policy service answered with a SOAP fault (" + f->code +
                       (f->subcode.empty() ? "" : ", " + f->subcode) + "): " + f->reason;
    // A WS-Security fault (wsse:FailedAuthentication, InvalidSecurity, …) is the credentials.
    const bool security = f->subcode.find("FailedAuthentication") != std::string::npos ||
                          f->subcode.find("InvalidSecurity") != std::string::npos ||
                          f->subcode.find("FailedCheck") != std::string::npos;
    return make_error(security ? errc::unauthorized : errc::invalid_argument, std::move(text), "Fault");
  }
  const auto* gpr = (*body)->child(ns_xcep, "GetPoliciesResponse");
  if (!gpr) return bad("the answer is not a GetPoliciesResponse", "GetPoliciesResponse");
  const std::string base = "GetPoliciesResponse";
  const auto* response = value_of(*gpr, "response");
  if (!response) return bad("response is missing", base + "/response");

  enrollment_policy policy;
  const auto* pid = response->child(ns_xcep, "policyID");
  if (!pid) return bad("policyID is missing", base + "/response/policyID");
  policy.policy_id = std::string(pid->trimmed_text());
  if (const auto* fn = value_of(*response, "policyFriendlyName")) policy.friendly_name = std::string(fn->trimmed_text());
  auto next = optional_int(*response, "nextUpdateHours", 0, INT32_MAX, 0, base + "/response");
  if (!next) return std::move(next).error();
  policy.next_update_hours = static_cast<std::int32_t>(*next);

  // oIDs: referenced by templates (policyOIDReference) and key attributes (algorithmOIDReference).
  std::map<std::int64_t, oid_entry> oids;
  if (const auto* list = value_of(*gpr, "oIDs")) {
    std::size_t i = 0;
    for (const auto* o : list->children_named(ns_xcep, "oID")) {
      const std::string path = base + "/oIDs/oID[" + std::to_string(i++) + "]";
      const auto* v = value_of(*o, "value");
      if (!v || v->trimmed_text().empty()) return bad("value is missing", path + "/value");
      auto ref = required_int(*o, "oIDReferenceID", INT32_MIN, INT32_MAX, path);
      if (!ref) return std::move(ref).error();
      auto group = optional_int(*o, "group", 0, UINT32_MAX, 0, path);
      if (!group) return std::move(group).error();
      oid_entry e;
      e.value = std::string(v->trimmed_text());
      e.group = *group;
      if (const auto* dn = value_of(*o, "defaultName")) e.default_name = std::string(dn->trimmed_text());
      oids[*ref] = std::move(e);
    }
  }

  // cAs: each CA's CES endpoints, by cAReferenceID.
  if (const auto* list = value_of(*gpr, "cAs")) {
    std::size_t i = 0;
    for (const auto* c : list->children_named(ns_xcep, "cA")) {
      const std::string path = base + "/cAs/cA[" + std::to_string(i++) + "]";
      policy_ca ca;
      auto ref = required_int(*c, "cAReferenceID", INT32_MIN, INT32_MAX, path);
      if (!ref) return std::move(ref).error();
      ca.reference = *ref;
      if (const auto* cert = value_of(*c, "certificate")) {
        auto der = read_base64(cert->text);
        if (!der) return bad("certificate is not base64", path + "/certificate");
        ca.name = ca_common_name(*der);
      }
      const auto* uris = value_of(*c, "uris");
      if (uris) {
        std::size_t j = 0;
        for (const auto* u : uris->children_named(ns_xcep, "cAURI")) {
          auto ep = read_endpoint(*u, path + "/uris/cAURI[" + std::to_string(j++) + "]");
          if (!ep) return std::move(ep).error();
          ca.endpoints.push_back(std::move(*ep));
        }
      }
      std::stable_sort(ca.endpoints.begin(), ca.endpoints.end(),
                       [](const auto& a, const auto& b) { return a.priority < b.priority; });
      policy.cas.push_back(std::move(ca));
    }
  }

  const auto* policies = value_of(*response, "policies");
  if (!policies) return policy;  // nil: no template for this caller
  std::size_t i = 0;
  for (const auto* p : policies->children_named(ns_xcep, "policy")) {
    const std::string path = base + "/response/policies/policy[" + std::to_string(i++) + "]";
    const auto* attrs = value_of(*p, "attributes");
    if (!attrs) return bad("attributes is missing", path + "/attributes");
    policy_template t;
    const auto* cn = value_of(*attrs, "commonName");
    if (!cn || cn->trimmed_text().empty()) return bad("commonName is missing", path + "/attributes/commonName");
    t.name = std::string(cn->trimmed_text());

    // The template's OID and display name: the oID its policyOIDReference names.
    auto oid_ref = optional_int(*p, "policyOIDReference", INT32_MIN, INT32_MAX, INT64_MIN, path);
    if (!oid_ref) return std::move(oid_ref).error();
    if (*oid_ref != INT64_MIN) {
      auto it = oids.find(*oid_ref);
      if (it == oids.end())
        return bad("policyOIDReference " + std::to_string(*oid_ref) + " names no oID", path + "/policyOIDReference");
      if (it->second.group != 0 && it->second.group != oid_group_template)
        return bad("policyOIDReference names an oID that is not a template OID", path + "/policyOIDReference");
      t.oid = it->second.value;
      t.display_name = it->second.default_name;
    }
    if (t.display_name.empty()) t.display_name = t.name;

    auto schema = optional_int(*attrs, "policySchema", 0, INT32_MAX, 0, path + "/attributes");
    if (!schema) return std::move(schema).error();
    t.schema_version = static_cast<std::int32_t>(*schema);
    if (const auto* rev = value_of(*attrs, "revision")) {
      auto major = required_int(*rev, "majorRevision", 0, INT32_MAX, path + "/attributes/revision");
      if (!major) return std::move(major).error();
      auto minor = optional_int(*rev, "minorRevision", 0, INT32_MAX, 0, path + "/attributes/revision");
      if (!minor) return std::move(minor).error();
      t.major_version = static_cast<std::int32_t>(*major);
      t.minor_version = static_cast<std::int32_t>(*minor);
    }
    if (const auto* pk = value_of(*attrs, "privateKeyAttributes")) {
      const std::string kpath = path + "/attributes/privateKeyAttributes";
      auto min_len = optional_int(*pk, "minimalKeyLength", 0, INT32_MAX, 0, kpath);
      if (!min_len) return std::move(min_len).error();
      t.min_key_size = static_cast<std::int32_t>(*min_len);
      auto spec = optional_int(*pk, "keySpec", 0, INT32_MAX, 0, kpath);
      if (!spec) return std::move(spec).error();
      t.key_spec = static_cast<std::int32_t>(*spec);
      auto alg = optional_int(*pk, "algorithmOIDReference", INT32_MIN, INT32_MAX, INT64_MIN, kpath);
      if (!alg) return std::move(alg).error();
      if (*alg != INT64_MIN) {
        auto it = oids.find(*alg);
        if (it == oids.end())
          return bad("algorithmOIDReference " + std::to_string(*alg) + " names no oID", kpath + "/algorithmOIDReference");
        if (it->second.group != 0 && it->second.group != oid_group_public_key)
          return bad("algorithmOIDReference names an oID that is not a public key algorithm",
                     kpath + "/algorithmOIDReference");
        t.key_algorithm = key_algorithm_name(it->second);
      }
    }
    auto name_flags = optional_int(*attrs, "subjectNameFlags", 0, UINT32_MAX, 0, path + "/attributes");
    if (!name_flags) return std::move(name_flags).error();
    t.subject_from_request = (*name_flags & ct_flag_enrollee_supplies_subject) != 0;

    // The CAs that issue it, and their endpoints in priority order (a reference to a CA the
    // answer does not list is refused: the policy would be inconsistent).
    if (const auto* refs = value_of(*p, "cAs")) {
      std::size_t j = 0;
      for (const auto* r : refs->children_named(ns_xcep, "cAReference")) {
        const std::string rpath = path + "/cAs/cAReference[" + std::to_string(j++) + "]";
        auto v = read_int(r->trimmed_text(), INT32_MIN, INT32_MAX);
        if (!v) return bad("cAReference is not an integer", rpath);
        auto ca = std::find_if(policy.cas.begin(), policy.cas.end(), [&](const auto& c) { return c.reference == *v; });
        if (ca == policy.cas.end()) return bad("cAReference " + std::to_string(*v) + " names no cA", rpath);
        t.ca_references.push_back(*v);
        for (const auto& ep : ca->endpoints) {
          const bool dup = std::any_of(t.endpoints.begin(), t.endpoints.end(), [&](const auto& e) {
            return e.url == ep.url && e.authentication == ep.authentication;
          });
          if (!dup) t.endpoints.push_back(ep);
        }
      }
      std::stable_sort(t.endpoints.begin(), t.endpoints.end(),
                       [](const auto& a, const auto& b) { return a.priority < b.priority; });
    }
    policy.templates.push_back(std::move(t));
  }
  return policy;
}

}  // namespace certfleet::msca
