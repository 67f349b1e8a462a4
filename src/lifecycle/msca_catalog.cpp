// AD CS catalog objects (msca_catalog.hpp): the CA — its body with each authentication, its
// document, secret and view, the cached policy and what is read from it. The enroll body, the
// held request and the payloads are msca_requests.cpp's.
#include "certfleet/lifecycle/msca_catalog.hpp"

#include "lifecycle/acme_catalog_common.hpp"
#include "lifecycle/msca_catalog_common.hpp"

#include "certfleet/acme/key_type.hpp"
#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/net/http.hpp"
#include "certfleet/net/kerberos.hpp"
#include "certfleet/core/base64.hpp"
#include "certfleet/core/allow_list.hpp"

#include <openssl/crypto.h>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace certfleet::lifecycle {

namespace json = boost::json;

using detail::bad;
using detail::id_field;
using detail::name_field;
using detail::nested;
using namespace detail::msca_doc;

namespace {

constexpr std::size_t max_pem_bytes = 256 * 1024;

// An https:// URL certfleet can send to (net::parse_url's rules: no userinfo, ASCII).
result<std::string> https_url(const certfleet::json::object_reader& r, std::string_view key, bool required) {
  auto v = r.optional_string(key);
  if (!v) return std::move(v).error();
  if (!*v || (*v)->empty()) {
    if (required) return bad(std::string(key), fmt::format("{} is required: the service's https:// URL", key));
    return std::string();
  }
  auto u = net::parse_url(**v, key);
  if (!u || !u->tls() || (*v)->size() > 2048)
    return bad(std::string(key),
               fmt::format("{} must be the service's https:// URL (e.g. "
                           "https://ca01.corp.example/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP)",
                           key));
  return std::move(**v);
}

// "host:port" for a KDC: a DNS name, an IPv4 literal or a bracketed IPv6 one, and a port; nothing a
// krb5 profile could read as syntax.
bool valid_kdc(std::string_view s) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || s.size() > 300) return false;
  auto host = s.substr(0, colon);
  const auto port = s.substr(colon + 1);
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  if (std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    host = host.substr(1, host.size() - 2);
    return std::all_of(host.begin(), host.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; });
  }
  return valid_dns_name(host) || std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

json::value endpoint_json(const msca::policy_ces_endpoint& e) {
  return json::object{{"url", e.url},
                      {"authentication", static_cast<std::uint32_t>(e.authentication)},
                      {"priority", e.priority},
                      {"renewal_only", e.renewal_only}};
}

json::object policy_json(const msca_cached_policy& p) {
  json::array ts;
  for (const auto& t : p.templates) {
    json::array eps;
    for (const auto& e : t.endpoints) eps.push_back(endpoint_json(e));
    ts.emplace_back(json::object{{"name", t.name},
                                 {"display_name", t.display_name},
                                 {"oid", t.oid},
                                 {"major_version", t.major_version},
                                 {"minor_version", t.minor_version},
                                 {"schema_version", t.schema_version},
                                 {"key_algorithm", t.key_algorithm},
                                 {"min_key_size", t.min_key_size},
                                 {"key_spec", t.key_spec},
                                 {"subject_from_request", t.subject_from_request},
                                 {"endpoints", std::move(eps)}});
  }
  return json::object{{"fetched_at", p.fetched_at},
                      {"policy_id", p.policy_id},
                      {"next_update_hours", p.next_update_hours},
                      {"templates", std::move(ts)}};
}

msca_cached_policy policy_from(const json::object& o) {
  msca_cached_policy p;
  p.fetched_at = num(o, "fetched_at");
  p.policy_id = str(o, "policy_id");
  p.next_update_hours = static_cast<std::int32_t>(num(o, "next_update_hours"));
  if (auto* ts = o.if_contains("templates"); ts && ts->is_array())
    for (const auto& x : ts->as_array()) {
      if (!x.is_object()) continue;
      const auto& to = x.as_object();
      msca::policy_template t;
      t.name = str(to, "name");
      t.display_name = str(to, "display_name");
      t.oid = str(to, "oid");
      t.major_version = static_cast<std::int32_t>(num(to, "major_version"));
      t.minor_version = static_cast<std::int32_t>(num(to, "minor_version"));
      t.schema_version = static_cast<std::int32_t>(num(to, "schema_version"));
      t.key_algorithm = str(to, "key_algorithm");
      t.min_key_size = static_cast<std::int32_t>(num(to, "min_key_size"));
      t.key_spec = static_cast<std::int32_t>(num(to, "key_spec"));
      t.subject_from_request = boolean(to, "subject_from_request");
      if (auto* es = to.if_contains("endpoints"); es && es->is_array())
        for (const auto& e : es->as_array()) {
          if (!e.is_object()) continue;
          const auto& eo = e.as_object();
          msca::policy_ces_endpoint ep;
          ep.url = str(eo, "url");
          ep.authentication = static_cast<msca::ces_auth>(num(eo, "authentication"));
          ep.priority = static_cast<std::int32_t>(num(eo, "priority"));
          ep.renewal_only = boolean(eo, "renewal_only");
          t.endpoints.push_back(std::move(ep));
        }
      p.templates.push_back(std::move(t));
    }
  return p;
}

// The key types a template allows, smallest first: RSA by size, or the named curve.
std::vector<acme::key_type> allowed_key_types(const msca::policy_template& t) {
  std::vector<acme::key_type> out;
  const std::string alg = t.key_algorithm;
  if (alg.empty() || alg == "RSA") {
    if (t.min_key_size <= 2048) out.push_back(acme::key_type::rsa_2048);
    if (t.min_key_size <= 3072) out.push_back(acme::key_type::rsa_3072);
  } else if (alg == "ECDSA_P256" || alg == "ECDH_P256") {
    out.push_back(acme::key_type::ecdsa_p256);
  } else if (alg == "ECDSA_P384" || alg == "ECDH_P384") {
    out.push_back(acme::key_type::ecdsa_p384);
  }
  return out;
}

}  // namespace

msca::ces_auth msca_ca_spec::ces_authentication() const noexcept {
  if (auth_kind == "client_certificate") return msca::ces_auth::client_certificate;
  if (auth_kind == "kerberos") return msca::ces_auth::kerberos;
  return msca::ces_auth::username_password;
}

result<new_msca_ca> parse_msca_ca_request(std::string_view body, time_ms now) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name", "cep_url", "ces_url", "auth", "ca_bundle_pem", "default_template", "renewal_mode"}); !ok)
    return std::move(ok).error();
  new_msca_ca c;
  auto name = name_field(*r);
  if (!name) return std::move(name).error();
  c.name = std::move(*name);
  auto cep = https_url(*r, "cep_url", true);
  if (!cep) return std::move(cep).error();
  c.spec.cep_url = std::move(*cep);
  auto ces = https_url(*r, "ces_url", false);
  if (!ces) return std::move(ces).error();
  c.spec.ces_url = std::move(*ces);

  auto auth_raw = r->optional_raw("auth", true);
  if (!auth_raw) return std::move(auth_raw).error();
  if (!*auth_raw)
    return bad("auth", "auth is required: {kind: \"username_password\", username, password}, {kind: "
                       "\"client_certificate\", cert_pem, key_pem} or {kind: \"kerberos\", principal, realm, "
                       "password | keytab_b64, kdc?}");
  auto a = certfleet::json::object_reader::parse(**auth_raw, "auth");
  if (!a) return nested(std::move(a).error(), "auth");
  auto kind = a->required_string("kind");
  if (!kind) return nested(std::move(kind).error(), "auth");
  if (*kind == "username_password") {
    if (auto ok = a->only({"kind", "username", "password"}); !ok) return nested(std::move(ok).error(), "auth");
    auto user = a->required_string("username");
    if (!user) return nested(std::move(user).error(), "auth");
    if (!plain_text(*user, 256))
      return bad("auth.username", "auth.username must be the account's name, e.g. CORP\\svc-certfleet or "
                                  "svc-certfleet@corp.example (at most 256 characters, no control characters)");
    auto pass = a->required_string("password");
    if (!pass) return nested(std::move(pass).error(), "auth");
    if (pass->empty() || pass->size() > 1024)
      return bad("auth.password", "auth.password must be 1 to 1024 characters");
    c.spec.username = std::move(*user);
    c.secret.password = std::move(*pass);
  } else if (*kind == "client_certificate") {
    if (auto ok = a->only({"kind", "cert_pem", "key_pem"}); !ok) return nested(std::move(ok).error(), "auth");
    auto cert = a->required_string("cert_pem");
    if (!cert) return nested(std::move(cert).error(), "auth");
    auto key = a->required_string("key_pem");
    if (!key) return nested(std::move(key).error(), "auth");
    if (cert->size() > max_pem_bytes || key->size() > max_pem_bytes)
      return bad("auth.cert_pem", "auth.cert_pem and auth.key_pem must be at most 256 KiB each");
    // The same checks as an uploaded certificate: one leaf, its key, valid now.
    auto info = delivery::parse_certificate_bundle(*cert, "", *key, now);
    if (!info) {
      auto e = std::move(info).error();
      const bool about_key = e.field == "key_pem";
      return bad(about_key ? "auth.key_pem" : "auth.cert_pem",
                 fmt::format("{}: {}", about_key ? "auth.key_pem" : "auth.cert_pem", e.message));
    }
    c.spec.client_cert_pem = std::move(*cert);
    c.spec.client_cert_subject = info->subject;
    c.spec.client_cert_not_after = info->not_after_ms;
    c.secret.client_key_pem = std::move(*key);
  } else if (*kind == "kerberos") {
    if (auto ok = a->only({"kind", "principal", "realm", "password", "keytab_b64", "kdc"}); !ok)
      return nested(std::move(ok).error(), "auth");
    auto principal = a->required_string("principal");
    if (!principal) return nested(std::move(principal).error(), "auth");
    auto realm = a->required_string("realm");
    if (!realm) return nested(std::move(realm).error(), "auth");
    if (!net::valid_realm(*realm))
      return bad("auth.realm", "auth.realm must be the Kerberos realm, e.g. CORP.EXAMPLE (the AD domain's DNS name in "
                               "upper case; letters, digits, '.', '-', '_')");
    // The principal's own realm, when it names one, is the CA's realm: one KDC answers both.
    const auto at = principal->rfind('@');
    const bool principal_ok = plain_text(*principal, 256) && principal->find_first_of(" \"\\") == std::string::npos &&
                              at != 0 && (at == std::string::npos || principal->substr(at + 1) == *realm);
    if (!principal_ok)
      return bad("auth.principal", "auth.principal must be the account's principal, e.g. svc-certfleet or "
                                   "svc-certfleet@" + *realm + " (its realm, when given, the same as auth.realm)");
    auto pass = a->optional_string("password");
    if (!pass) return nested(std::move(pass).error(), "auth");
    auto tab = a->optional_string("keytab_b64");
    if (!tab) return nested(std::move(tab).error(), "auth");
    if (bool(*pass) == bool(*tab))
      return bad("auth.password", "auth takes exactly one of password and keytab_b64 for kerberos");
    if (*pass) {
      if ((*pass)->empty() || (*pass)->size() > 1024)
        return bad("auth.password", "auth.password must be 1 to 1024 characters");
      c.secret.password = std::move(**pass);
      c.spec.krb_credential = "password";
    } else {
      auto bytes = (*tab)->size() <= 256 * 1024 ? base64_decode(**tab) : std::nullopt;
      if (!bytes || !net::looks_like_keytab(*bytes))
        return bad("auth.keytab_b64", "auth.keytab_b64 must be a keytab file (kadmin ktadd, ktpass or msktutil "
                                      "output, version 0x0502) in base64, at most 192 KiB");
      c.secret.keytab = std::move(*bytes);
      c.spec.krb_credential = "keytab";
    }
    auto kdc = a->optional_string("kdc");
    if (!kdc) return nested(std::move(kdc).error(), "auth");
    if (*kdc && !(*kdc)->empty()) {
      if (!valid_kdc(**kdc))
        return bad("auth.kdc", "auth.kdc must be the KDC as host:port, e.g. dc01.corp.example:88 or 192.0.2.10:88 "
                               "(leave it out to use the realm's KDCs from krb5.conf)");
      c.spec.kdc = std::move(**kdc);
    }
    c.spec.principal = std::move(*principal);
    c.spec.realm = std::move(*realm);
  } else {
    return bad("auth.kind", "auth.kind must be one of username_password, client_certificate, kerberos");
  }
  c.spec.auth_kind = std::move(*kind);

  auto bundle = r->optional_string("ca_bundle_pem");
  if (!bundle) return std::move(bundle).error();
  if (*bundle && !(*bundle)->empty()) {
    if ((*bundle)->find("-----BEGIN CERTIFICATE-----") == std::string::npos || (*bundle)->size() > max_pem_bytes)
      return bad("ca_bundle_pem", "ca_bundle_pem must be PEM certificates (the root of the services' TLS "
                                  "certificates), at most 256 KiB");
    c.spec.ca_bundle_pem = std::move(**bundle);
  }
  auto tmpl = template_name_field(*r, "default_template");
  if (!tmpl) return std::move(tmpl).error();
  c.spec.default_template = std::move(*tmpl);
  auto mode = r->optional_string("renewal_mode");
  if (!mode) return std::move(mode).error();
  if (*mode) {
    if (std::find(std::begin(msca_renewal_modes), std::end(msca_renewal_modes), **mode) == std::end(msca_renewal_modes))
      return bad("renewal_mode", "renewal_mode must be new_key or renew_with_current");
    c.spec.renewal_mode = std::move(**mode);
  }
  return c;
}

std::string msca_ca_doc_json(const msca_ca_spec& s) {
  json::object auth{{"kind", s.auth_kind}};
  if (!s.username.empty()) auth["username"] = s.username;
  if (!s.client_cert_pem.empty()) {
    auth["cert_pem"] = s.client_cert_pem;
    auth["cert_subject"] = s.client_cert_subject;
    auth["cert_not_after"] = s.client_cert_not_after;
  }
  if (s.auth_kind == "kerberos") {
    auth["principal"] = s.principal;
    auth["realm"] = s.realm;
    auth["kdc"] = s.kdc;
    auth["credential"] = s.krb_credential;
  }
  return json::serialize(json::object{{"cep_url", s.cep_url},
                                      {"ces_url", s.ces_url},
                                      {"auth", std::move(auth)},
                                      {"ca_bundle_pem", s.ca_bundle_pem},
                                      {"default_template", s.default_template},
                                      {"renewal_mode", s.renewal_mode},
                                      {"policy", policy_json(s.policy)}});
}

result<msca_ca_spec> parse_msca_ca_doc(const store::catalog_object& o) {
  auto d = parse_object(o.doc);
  msca_ca_spec s;
  s.cep_url = str(d, "cep_url");
  if (s.cep_url.empty())
    return make_error(errc::store_failure, fmt::format("msca_ca {} has no cep_url", o.id), "msca_ca_id");
  s.ces_url = str(d, "ces_url");
  if (auto* a = d.if_contains("auth"); a && a->is_object()) {
    s.auth_kind = str(a->as_object(), "kind");
    s.username = str(a->as_object(), "username");
    s.client_cert_pem = str(a->as_object(), "cert_pem");
    s.client_cert_subject = str(a->as_object(), "cert_subject");
    s.client_cert_not_after = num(a->as_object(), "cert_not_after");
    s.principal = str(a->as_object(), "principal");
    s.realm = str(a->as_object(), "realm");
    s.kdc = str(a->as_object(), "kdc");
    s.krb_credential = str(a->as_object(), "credential");
  }
  s.ca_bundle_pem = str(d, "ca_bundle_pem");
  s.default_template = str(d, "default_template");
  if (auto m = str(d, "renewal_mode"); !m.empty()) s.renewal_mode = std::move(m);
  if (auto* p = d.if_contains("policy"); p && p->is_object()) s.policy = policy_from(p->as_object());
  return s;
}

result<store::catalog_object> make_msca_ca_object(const new_msca_ca& c, const kek& key, std::string id,
                                                  std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_msca_ca);
  o.name = c.name;
  o.doc = msca_ca_doc_json(c.spec);
  o.created_at = now;
  json::object secret;
  if (!c.secret.password.empty()) secret["password"] = c.secret.password;
  if (!c.secret.client_key_pem.empty()) secret["client_key_pem"] = c.secret.client_key_pem;
  if (!c.secret.keytab.empty()) secret["keytab_b64"] = base64_encode(c.secret.keytab);
  auto sealed = seal(key, json::serialize(secret), catalog::body_fields::aad_for(o, catalog::sealed_secret));
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<msca_ca_secret> open_msca_ca_secret(const kek& key, const store::catalog_object& o) {
  auto text = open_sealed(key, o.sealed, catalog::body_fields::aad_for(o, catalog::sealed_secret));
  if (!text) return std::move(text).error();
  auto d = parse_object(*text);
  OPENSSL_cleanse(text->data(), text->size());
  msca_ca_secret out;
  out.password = str(d, "password");
  out.client_key_pem = str(d, "client_key_pem");
  if (auto tab = str(d, "keytab_b64"); !tab.empty()) {
    if (auto bytes = base64_decode(tab)) out.keytab = std::move(*bytes);
    OPENSSL_cleanse(tab.data(), tab.size());
  }
  return out;
}

msca_ca_secret::~msca_ca_secret() {
  for (auto* s : {&password, &client_key_pem, &keytab}) OPENSSL_cleanse(s->data(), s->size());
}

boost::json::object msca_templates_view(const msca_ca_spec& s) {
  json::array ts;
  for (const auto& t : s.policy.templates) {
    json::array urls;
    for (const auto& e : t.endpoints)
      urls.emplace_back(json::object{{"url", e.url},
                                     {"authentication", msca::ces_auth_name(e.authentication)},
                                     {"renewal_only", e.renewal_only}});
    ts.emplace_back(json::object{{"name", t.name},
                                 {"display_name", t.display_name},
                                 {"oid", t.oid},
                                 {"key_algorithm", t.key_algorithm.empty() ? std::string("RSA") : t.key_algorithm},
                                 {"min_key_size", t.min_key_size},
                                 {"key_spec", t.key_spec},
                                 {"ces_urls", std::move(urls)}});
  }
  return json::object{{"fetched_at", certfleet::json::time_value(s.policy.fetched_at)},
                      {"policy_id", s.policy.policy_id},
                      {"templates", std::move(ts)}};
}

boost::json::object msca_ca_view(const store::catalog_object& o) {
  auto v = catalog::body_fields::base_view(o);
  auto s = parse_msca_ca_doc(o);
  if (!s) return v;
  v["cep_url"] = s->cep_url;
  v["ces_url"] = certfleet::json::text_value(s->ces_url);
  json::object auth{{"kind", s->auth_kind}};
  if (!s->username.empty()) auth["username"] = s->username;
  if (!s->client_cert_pem.empty()) {
    // Summarised: the operator recognises it; its expiry is what goes wrong at 3 am.
    auth["cert_subject"] = s->client_cert_subject;
    auth["cert_not_after"] = certfleet::json::time_value(s->client_cert_not_after);
  }
  if (s->auth_kind == "kerberos") {
    auth["principal"] = s->principal;
    auth["realm"] = s->realm;
    auth["kdc"] = certfleet::json::text_value(s->kdc);
    auth["credential"] = s->krb_credential;  // which secret is sealed, never the secret
  }
  v["auth"] = std::move(auth);
  v["ca_bundle_pem"] = certfleet::json::text_value(s->ca_bundle_pem);
  v["default_template"] = certfleet::json::text_value(s->default_template);
  v["renewal_mode"] = s->renewal_mode;
  v["policy"] = msca_templates_view(*s);
  return v;
}

msca_cached_policy cache_policy(const msca::enrollment_policy& p, time_ms now) {
  msca_cached_policy c;
  c.fetched_at = now;
  c.policy_id = p.policy_id;
  c.next_update_hours = p.next_update_hours;
  c.templates = p.templates;
  return c;
}

const msca::policy_template* find_template(const msca_cached_policy& p, std::string_view name) noexcept {
  for (const auto& t : p.templates)
    if (t.name == name) return &t;
  return nullptr;
}

result<std::string> ces_url_for(const msca_ca_spec& ca, const msca::policy_template& tmpl, bool renewal) {
  if (!ca.ces_url.empty()) return ca.ces_url;
  const auto want = ca.ces_authentication();
  const msca::policy_ces_endpoint* best = nullptr;
  for (const auto& e : tmpl.endpoints) {
    if (e.authentication != want || (e.renewal_only && !renewal)) continue;
    if (!best || e.priority < best->priority) best = &e;
  }
  if (!best)
    return make_error(errc::not_found,
                      fmt::format("the CA's policy lists no enrollment service (CES) for template {} that takes {} "
                                  "authentication: set ces_url on the CA, or ask the AD CS administrator to publish one",
                                  tmpl.name, ca.auth_kind),
                      "ces_url");
  return best->url;
}

result<std::string> msca_key_type_for(const msca::policy_template& tmpl, std::string_view requested) {
  const auto allowed = allowed_key_types(tmpl);
  if (allowed.empty())
    return bad("key_type", fmt::format("template {} asks for a {} key of at least {} bits, which certfleet cannot make "
                                       "(it makes {})",
                                       tmpl.name, tmpl.key_algorithm.empty() ? "RSA" : tmpl.key_algorithm,
                                       tmpl.min_key_size, acme::key_type_choices()));
  if (requested.empty()) return std::string(acme::key_type_name(allowed.front()));
  auto t = acme::parse_key_type(requested);
  if (!t) return bad("key_type", fmt::format("key_type must be one of {}", acme::key_type_choices()));
  if (std::find(allowed.begin(), allowed.end(), *t) == allowed.end()) {
    std::string names;
    for (auto a : allowed) names += (names.empty() ? "" : ", ") + std::string(acme::key_type_name(a));
    return bad("key_type", fmt::format("template {} does not accept a {} key: it takes {}", tmpl.name, requested, names));
  }
  return std::string(requested);
}

namespace {

constexpr std::array<std::string_view, 1> ca_users{store::kind_certificate};
const std::array<catalog::kind, 2> own_kinds{{
    {store::kind_msca_ca, msca_ca_view, ca_users, nullptr, catalog::sealed_secret},
    {store::kind_msca_request, nullptr, {}, nullptr, catalog::sealed_key},
}};

}  // namespace

std::span<const catalog::kind> msca_kinds() noexcept { return own_kinds; }

}  // namespace certfleet::lifecycle
