// ACME accounts and DNS providers (acme_catalog.hpp): their bodies, stored documents and sealed
// secrets. The issue request and the ACME jobs' payloads and keys are acme_requests.cpp's.
#include "certfleet/lifecycle/acme_catalog.hpp"

#include "lifecycle/acme_catalog_common.hpp"

#include "certfleet/acme/dns.hpp"
#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/json.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::lifecycle {

namespace json = boost::json;

using detail::bad;
using detail::id_field;
using detail::name_field;
using detail::nested;
using detail::printable;

namespace detail {

error nested(error e, std::string_view prefix) {
  if (!e.field.empty() && e.field.rfind(fmt::format("{}.", prefix), 0) != 0 && e.field != prefix) {
    auto old = e.field;
    e.field = fmt::format("{}.{}", prefix, old);
    // The reader words its message with the bare name; say the full one.
    if (auto at = e.message.find(old); at != std::string::npos) e.message.replace(at, old.size(), e.field);
  }
  return e;
}

result<std::string> name_field(const certfleet::json::object_reader& r) {
  auto n = r.required_string("name");
  if (!n) return n;
  if (n->empty()) return bad("name", "name must not be empty");
  if (n->size() > catalog::max_name_length) return bad("name", fmt::format("name is longer than {} characters", catalog::max_name_length));
  for (unsigned char c : *n)
    if (c < 0x20 || c == 0x7f) return bad("name", "name must not contain control characters");
  return n;
}

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) > 0x20 && c != 0x7f; });
}

result<std::string> id_field(const certfleet::json::object_reader& r, std::string_view key) {
  auto v = r.required_string(key);
  if (!v) return v;
  if (v->size() != 24 || !std::all_of(v->begin(), v->end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
    return bad(std::string(key), fmt::format("{} must be the 24-hex id of an object of this project", key));
  return v;
}

}  // namespace detail

namespace {

// "user@example.com": one @, a dot-containing domain, no spaces or control characters.
bool plausible_email(std::string_view e) {
  auto at = e.find('@');
  if (at == std::string_view::npos || at == 0 || e.find('@', at + 1) != std::string_view::npos) return false;
  auto domain = e.substr(at + 1);
  return e.size() <= 254 && printable(e) && domain.find('.') != std::string_view::npos && domain.front() != '.' &&
         domain.back() != '.' && e.find_first_of("<>,;:\"()[]\\") == std::string_view::npos;
}

bool base64url_text(std::string_view s) {
  while (!s.empty() && s.back() == '=') s.remove_suffix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

json::object parse_doc(const store::catalog_object& o) {
  boost::system::error_code ec;
  auto v = json::parse(o.doc, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string str(const json::object& o, std::string_view k) {
  auto* p = o.if_contains(k);
  return p && p->is_string() ? std::string(p->as_string()) : std::string();
}

}  // namespace

// ---- ACME accounts ------------------------------------------------------------------------

result<new_acme_account> parse_acme_account_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name", "directory_url", "contact_email", "eab", "ca_bundle_pem", "terms_agreed"}); !ok)
    return std::move(ok).error();
  new_acme_account a;
  auto name = name_field(*r);
  if (!name) return std::move(name).error();
  a.name = std::move(*name);

  auto url = r->required_string("directory_url");
  if (!url) return std::move(url).error();
  if (url->rfind("https://", 0) != 0 || url->size() <= 8 || url->size() > 2048 || !printable(*url))
    return bad("directory_url",
               "directory_url must be the CA's ACME directory as an https:// URL (e.g. "
               "https://acme-staging-v02.api.letsencrypt.org/directory)");
  a.spec.directory_url = std::move(*url);

  auto contact = r->optional_raw("contact_email", false);
  if (!contact) return std::move(contact).error();
  if (*contact) {
    auto v = json::parse(**contact);
    std::vector<std::string> emails;
    if (v.is_string()) emails.emplace_back(v.as_string());
    else if (v.is_array()) {
      for (const auto& x : v.as_array()) {
        if (!x.is_string())
          return bad(fmt::format("contact_email[{}]", emails.size()), "each contact_email must be a string");
        emails.emplace_back(x.as_string());
      }
    } else return bad("contact_email", "contact_email must be an e-mail address or a list of them");
    if (emails.size() > max_acme_contacts)
      return bad("contact_email", fmt::format("contact_email may list at most {} addresses", max_acme_contacts));
    for (std::size_t i = 0; i < emails.size(); ++i) {
      std::string field = v.is_array() ? fmt::format("contact_email[{}]", i) : std::string("contact_email");
      if (!plausible_email(emails[i])) return bad(field, fmt::format("{} is not an e-mail address", field));
      a.spec.contact.push_back("mailto:" + emails[i]);
    }
  }

  auto terms = r->optional_bool("terms_agreed");
  if (!terms) return std::move(terms).error();
  if (!terms->value_or(false))
    return bad("terms_agreed",
               "terms_agreed must be true: registering an account agrees to the CA's terms of service (the "
               "directory's meta.termsOfService)");
  a.spec.terms_agreed = true;

  auto eab = r->optional_raw("eab", true);
  if (!eab) return std::move(eab).error();
  if (*eab) {
    auto e = certfleet::json::object_reader::parse(**eab, "eab");
    if (!e) return nested(std::move(e).error(), "eab");
    if (auto ok = e->only({"kid", "hmac_key"}); !ok) return nested(std::move(ok).error(), "eab");
    auto kid = e->required_string("kid");
    if (!kid) return nested(std::move(kid).error(), "eab");
    if (kid->empty() || kid->size() > 1024 || !printable(*kid))
      return bad("eab.kid", "eab.kid must be the key ID the CA gave (printable, no spaces)");
    auto hmac = e->required_string("hmac_key");
    if (!hmac) return nested(std::move(hmac).error(), "eab");
    if (hmac->size() > 1024 || !base64url_text(*hmac))
      return bad("eab.hmac_key", "eab.hmac_key must be the base64url text the CA gave (A-Z a-z 0-9 - _)");
    a.spec.eab_kid = std::move(*kid);
    a.secret.eab_hmac_key = std::move(*hmac);
  }

  auto ca = r->optional_string("ca_bundle_pem");
  if (!ca) return std::move(ca).error();
  if (*ca && !(*ca)->empty()) {
    if ((*ca)->find("-----BEGIN CERTIFICATE-----") == std::string::npos || (*ca)->size() > 256 * 1024)
      return bad("ca_bundle_pem", "ca_bundle_pem must be PEM certificates (the private CA's root), at most 256 KiB");
    a.spec.ca_bundle_pem = std::move(**ca);
  }
  return a;
}

std::string acme_account_doc_json(const acme_account_spec& a) {
  json::array contact;
  for (const auto& c : a.contact) contact.emplace_back(c);
  return json::serialize(json::object{{"directory_url", a.directory_url},
                                      {"contact", std::move(contact)},
                                      {"terms_agreed", a.terms_agreed},
                                      {"eab_kid", a.eab_kid},
                                      {"ca_bundle_pem", a.ca_bundle_pem},
                                      {"account_url", a.account_url},
                                      {"status", a.status}});
}

result<acme_account_spec> parse_acme_account_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  acme_account_spec a;
  a.directory_url = str(d, "directory_url");
  if (a.directory_url.empty())
    return make_error(errc::store_failure, fmt::format("acme_account {} has no directory_url", o.id), "acme_account_id");
  if (auto* c = d.if_contains("contact"); c && c->is_array())
    for (const auto& x : c->as_array())
      if (x.is_string()) a.contact.emplace_back(x.as_string());
  if (auto* t = d.if_contains("terms_agreed"); t && t->is_bool()) a.terms_agreed = t->as_bool();
  a.eab_kid = str(d, "eab_kid");
  a.ca_bundle_pem = str(d, "ca_bundle_pem");
  a.account_url = str(d, "account_url");
  a.status = str(d, "status");
  return a;
}

result<store::catalog_object> make_acme_account_object(const new_acme_account& a, const kek& key, std::string id,
                                                       std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_acme_account);
  o.name = a.name;
  o.doc = acme_account_doc_json(a.spec);
  o.created_at = now;
  auto secret = json::serialize(
      json::object{{"account_key_pem", a.secret.account_key_pem}, {"eab_hmac_key", a.secret.eab_hmac_key}});
  auto sealed = seal(key, secret, catalog::body_fields::aad_for(o, catalog::sealed_secret));
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<acme_account_secret> open_acme_account_secret(const kek& key, const store::catalog_object& o) {
  auto text = open_sealed(key, o.sealed, catalog::body_fields::aad_for(o, catalog::sealed_secret));
  if (!text) return std::move(text).error();
  boost::system::error_code ec;
  auto v = json::parse(*text, ec);
  if (ec || !v.is_object())
    return make_error(errc::store_failure, fmt::format("acme_account {}: its sealed secret is not readable", o.id), "sealed");
  acme_account_secret s;
  s.account_key_pem = str(v.as_object(), "account_key_pem");
  s.eab_hmac_key = str(v.as_object(), "eab_hmac_key");
  return s;
}

// ---- DNS providers ------------------------------------------------------------------------

namespace {

// A provider body has exactly its kind's section.
result<void> only_section(const certfleet::json::object_reader& r, std::string_view kind) {
  for (auto k : dns_provider_kinds)
    if (k != kind && r.has(k)) return bad(std::string(k), fmt::format("{} is only for kind \"{}\"", k, k));
  return {};
}

// timeout_s (min..max) and check_propagation, shared by the kinds that present through a
// program or an HTTP API.
result<void> read_call_limits(const certfleet::json::object_reader& o, std::string_view section, std::int64_t min_s,
                              std::int64_t max_s, std::int64_t default_s, dns_provider_spec& spec) {
  auto timeout = o.optional_int("timeout_s");
  if (!timeout) return nested(std::move(timeout).error(), section);
  spec.timeout_s = timeout->value_or(default_s);
  if (spec.timeout_s < min_s || spec.timeout_s > max_s)
    return bad(fmt::format("{}.timeout_s", section), fmt::format("{}.timeout_s must be {} to {} seconds", section, min_s, max_s));
  auto check = o.optional_bool("check_propagation");
  if (!check) return nested(std::move(check).error(), section);
  spec.check_propagation = check->value_or(true);
  return {};
}

// `zone`, optional: a DNS name, the trailing dot dropped.
result<void> read_zone(const certfleet::json::object_reader& o, std::string_view section, dns_provider_spec& spec) {
  auto zone = o.optional_string("zone");
  if (!zone) return nested(std::move(zone).error(), section);
  if (*zone && !(*zone)->empty()) {
    std::string z = **zone;
    if (z.size() > 1 && z.back() == '.') z.pop_back();
    if (!valid_dns_name(z))
      return bad(fmt::format("{}.zone", section), fmt::format("{}.zone must be a DNS name (example.com)", section));
    spec.zone = std::move(z);
  }
  return {};
}

// An API's base URL: http(s)://host[:port][/path], https unless allow_plain_http; no query.
result<std::string> read_base_url(const certfleet::json::object_reader& o, std::string_view section, std::string_view key,
                                  bool allow_plain_http) {
  const std::string field = fmt::format("{}.{}", section, key);
  auto url = o.required_string(key);
  if (!url) return nested(std::move(url).error(), section);
  std::string u = *url;
  while (u.size() > 1 && u.back() == '/') u.pop_back();
  const bool https = u.rfind("https://", 0) == 0, http = u.rfind("http://", 0) == 0;
  if ((!https && !http) || u.size() > 2048 || !printable(u) || u.find('?') != std::string::npos ||
      u.find('#') != std::string::npos || u.find('@') != std::string::npos)
    return bad(field, fmt::format("{} must be an https:// URL without a query, user or fragment (e.g. "
                                  "https://dns-api.example.com/acme)",
                                  field));
  if (http && !allow_plain_http)
    return bad(field, fmt::format("{} must be https:// (the requests carry a secret); set {}.allow_plain_http for an "
                                  "API on a trusted host",
                                  field, section));
  return u;
}

result<void> read_tls_options(const certfleet::json::object_reader& o, std::string_view section, dns_provider_spec& spec) {
  auto plain = o.optional_bool("allow_plain_http");
  if (!plain) return nested(std::move(plain).error(), section);
  spec.allow_plain_http = plain->value_or(false);
  auto ca = o.optional_string("ca_bundle_pem");
  if (!ca) return nested(std::move(ca).error(), section);
  if (*ca && !(*ca)->empty()) {
    if ((*ca)->find("-----BEGIN CERTIFICATE-----") == std::string::npos || (*ca)->size() > 256 * 1024)
      return bad(fmt::format("{}.ca_bundle_pem", section),
                 fmt::format("{}.ca_bundle_pem must be PEM certificates (the API's private CA), at most 256 KiB", section));
    spec.ca_bundle_pem = std::move(**ca);
  }
  return {};
}

result<certfleet::json::object_reader> section_of(const certfleet::json::object_reader& r, std::string_view kind,
                                                  std::string_view fields) {
  auto raw = r.optional_raw(kind, true);
  if (!raw) return std::move(raw).error();
  if (!*raw) return bad(std::string(kind), fmt::format("{} is required: {{{}}}", kind, fields));
  auto o = certfleet::json::object_reader::parse(**raw, kind);
  if (!o) return nested(std::move(o).error(), kind);
  return o;
}

// {program, timeout_s?, env?, check_propagation?} of kind "exec".
result<new_dns_provider> parse_exec_provider(const certfleet::json::object_reader& r, new_dns_provider p) {
  auto o = section_of(r, "exec", "program, timeout_s?, env?, check_propagation?");
  if (!o) return std::move(o).error();
  if (auto ok = o->only({"program", "timeout_s", "env", "check_propagation"}); !ok) return nested(std::move(ok).error(), "exec");
  auto program = o->required_string("program");
  if (!program) return nested(std::move(program).error(), "exec");
  // An absolute path without "." / ".." segments or odd bytes: the program certfleet runs is the
  // one the system admin named, nothing resolved from a PATH.
  const std::string& prog = *program;
  bool clean = prog.size() > 1 && prog.size() <= 1024 && prog.front() == '/' && printable(prog) &&
               prog.find("/./") == std::string::npos && prog.find("/../") == std::string::npos && prog.back() != '/' &&
               !prog.ends_with("/.") && !prog.ends_with("/..") && prog.find("//") == std::string::npos;
  if (!clean)
    return bad("exec.program", "exec.program must be an absolute path to the program, like /usr/local/bin/dns-hook "
                               "(no spaces, no . or .. segments; it is run directly, never through a shell)");
  p.spec.program = prog;
  if (auto ok = read_call_limits(*o, "exec", exec_timeout_min_s, exec_timeout_max_s, exec_timeout_default_s, p.spec); !ok)
    return std::move(ok).error();
  auto env = o->optional_raw("env", true);
  if (!env) return nested(std::move(env).error(), "exec");
  if (*env) {
    auto v = json::parse(**env);
    for (const auto& [k, val] : v.as_object()) {
      std::string name(k), field = fmt::format("exec.env.{}", std::string_view(k));
      bool ok_name = !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                     });
      if (!ok_name) return bad("exec.env", "exec.env names must be letters, digits and _, not starting with a digit");
      // The program's PATH and locale are certfleet's fixed ones; a loader variable would run
      // other code inside it.
      if (name == "PATH" || name == "LC_ALL" || name.starts_with("LD_") || name.starts_with("CERTFLEET_"))
        return bad(field, fmt::format("{} is set by certfleet or would change which code runs; choose another name", field));
      if (!val.is_string()) return bad(field, fmt::format("{} must be a string", field));
      const auto& str_value = val.as_string();
      if (str_value.size() > exec_env_value_max || str_value.find('\0') != json::string::npos)
        return bad(field, fmt::format("{} must be at most {} bytes, without NUL", field, exec_env_value_max));
      if (p.secrets.size() == exec_env_max)
        return bad("exec.env", fmt::format("exec.env has more than {} variables", exec_env_max));
      p.secrets.emplace_back(name, std::string(str_value));
      p.spec.env_names.push_back(name);
    }
  }
  return p;
}

// {endpoint, username?, password?, allow_plain_http?, ca_bundle_pem?, timeout_s?,
// check_propagation?} of kind "httpreq".
result<new_dns_provider> parse_httpreq_provider(const certfleet::json::object_reader& r, new_dns_provider p) {
  auto o = section_of(r, "httpreq", "endpoint, username?, password?, allow_plain_http?, ca_bundle_pem?, timeout_s?");
  if (!o) return std::move(o).error();
  if (auto ok = o->only({"endpoint", "username", "password", "allow_plain_http", "ca_bundle_pem", "timeout_s",
                         "check_propagation"});
      !ok)
    return nested(std::move(ok).error(), "httpreq");
  if (auto ok = read_tls_options(*o, "httpreq", p.spec); !ok) return std::move(ok).error();
  auto url = read_base_url(*o, "httpreq", "endpoint", p.spec.allow_plain_http);
  if (!url) return std::move(url).error();
  p.spec.endpoint = std::move(*url);
  auto user = o->optional_string("username");
  if (!user) return nested(std::move(user).error(), "httpreq");
  auto password = o->optional_string("password");
  if (!password) return nested(std::move(password).error(), "httpreq");
  if (*user && !(*user)->empty()) {
    if ((*user)->find(':') != std::string::npos || (*user)->size() > 256 || !printable(**user))
      return bad("httpreq.username", "httpreq.username must be at most 256 printable characters without ':'");
    p.spec.username = std::move(**user);
  }
  if (*password && !(*password)->empty()) {
    if (p.spec.username.empty()) return bad("httpreq.password", "httpreq.password needs httpreq.username (HTTP basic auth)");
    if ((*password)->size() > 1024) return bad("httpreq.password", "httpreq.password must be at most 1024 bytes");
    p.secrets.emplace_back("password", std::move(**password));
  } else if (!p.spec.username.empty()) {
    return bad("httpreq.password", "httpreq.password is required with httpreq.username (HTTP basic auth)");
  }
  if (auto ok = read_call_limits(*o, "httpreq", http_provider_timeout_min_s, http_provider_timeout_max_s,
                                 http_provider_timeout_default_s, p.spec);
      !ok)
    return std::move(ok).error();
  return p;
}

// {api_url, api_key, server_id?, zone?, allow_plain_http?, ca_bundle_pem?, timeout_s?,
// check_propagation?} of kind "powerdns".
result<new_dns_provider> parse_powerdns_provider(const certfleet::json::object_reader& r, new_dns_provider p) {
  auto o = section_of(r, "powerdns", "api_url, api_key, server_id?, zone?, allow_plain_http?, ca_bundle_pem?, timeout_s?");
  if (!o) return std::move(o).error();
  if (auto ok = o->only({"api_url", "api_key", "server_id", "zone", "allow_plain_http", "ca_bundle_pem", "timeout_s",
                         "check_propagation"});
      !ok)
    return nested(std::move(ok).error(), "powerdns");
  if (auto ok = read_tls_options(*o, "powerdns", p.spec); !ok) return std::move(ok).error();
  auto url = read_base_url(*o, "powerdns", "api_url", p.spec.allow_plain_http);
  if (!url) return std::move(url).error();
  // The base is the server's own URL ("http://127.0.0.1:8081"): certfleet adds /api/v1/….
  if (url->ends_with("/api/v1")) url->resize(url->size() - 7);
  p.spec.api_url = std::move(*url);
  auto key = o->required_string("api_key");
  if (!key) return nested(std::move(key).error(), "powerdns");
  if (key->empty() || key->size() > 1024 || !printable(*key))
    return bad("powerdns.api_key", "powerdns.api_key must be the server's api-key (1-1024 printable characters)");
  p.secrets.emplace_back("api_key", std::move(*key));
  auto sid = o->optional_string("server_id");
  if (!sid) return nested(std::move(sid).error(), "powerdns");
  if (*sid && !(*sid)->empty()) {
    const auto& v = **sid;
    if (v.size() > 64 || !std::all_of(v.begin(), v.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        }))
      return bad("powerdns.server_id", "powerdns.server_id must be letters, digits, '-', '_' or '.' (PowerDNS's is localhost)");
    p.spec.server_id = v;
  }
  if (auto ok = read_zone(*o, "powerdns", p.spec); !ok) return std::move(ok).error();
  if (auto ok = read_call_limits(*o, "powerdns", http_provider_timeout_min_s, http_provider_timeout_max_s,
                                 http_provider_timeout_default_s, p.spec);
      !ok)
    return std::move(ok).error();
  return p;
}

}  // namespace

result<new_dns_provider> parse_dns_provider_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name", "kind", "rfc2136", "manual", "exec", "httpreq", "powerdns"}); !ok)
    return std::move(ok).error();
  new_dns_provider p;
  auto name = name_field(*r);
  if (!name) return std::move(name).error();
  p.name = std::move(*name);
  auto kind = r->required_string("kind");
  if (!kind) return std::move(kind).error();
  if (std::find(std::begin(dns_provider_kinds), std::end(dns_provider_kinds), *kind) == std::end(dns_provider_kinds))
    return bad("kind", "kind must be one of rfc2136, manual, exec, httpreq, powerdns");
  if (auto ok = only_section(*r, *kind); !ok) return std::move(ok).error();
  p.spec.kind = *kind;
  if (*kind == "exec") return parse_exec_provider(*r, std::move(p));
  if (*kind == "httpreq") return parse_httpreq_provider(*r, std::move(p));
  if (*kind == "powerdns") return parse_powerdns_provider(*r, std::move(p));
  if (*kind == "manual") {
    p.spec.kind = "manual";
    auto raw = r->optional_raw("manual", true);
    if (!raw) return std::move(raw).error();
    if (!*raw) return p;
    auto o = certfleet::json::object_reader::parse(**raw, "manual");
    if (!o) return nested(std::move(o).error(), "manual");
    if (auto ok = o->only({"check_server"}); !ok) return nested(std::move(ok).error(), "manual");
    auto check = o->optional_string("check_server");
    if (!check) return nested(std::move(check).error(), "manual");
    if (*check && !(*check)->empty()) {
      if (auto s = acme::dns::parse_server(**check, "manual.check_server"); !s) return std::move(s).error();
      p.spec.check_server = std::move(**check);
    }
    return p;
  }
  auto raw = r->optional_raw("rfc2136", true);
  if (!raw) return std::move(raw).error();
  if (!*raw) return bad("rfc2136", "rfc2136 is required: {server, zone?, tsig_key_name, tsig_algorithm, tsig_secret}");
  auto o = certfleet::json::object_reader::parse(**raw, "rfc2136");
  if (!o) return nested(std::move(o).error(), "rfc2136");
  if (auto ok = o->only({"server", "zone", "tsig_key_name", "tsig_algorithm", "tsig_secret"}); !ok)
    return nested(std::move(ok).error(), "rfc2136");
  auto server = o->required_string("server");
  if (!server) return nested(std::move(server).error(), "rfc2136");
  if (auto s = acme::dns::parse_server(*server, "rfc2136.server"); !s) return std::move(s).error();
  p.spec.server = std::move(*server);
  if (auto ok = read_zone(*o, "rfc2136", p.spec); !ok) return std::move(ok).error();
  auto key_name = o->required_string("tsig_key_name");
  if (!key_name) return nested(std::move(key_name).error(), "rfc2136");
  auto algorithm = o->optional_string("tsig_algorithm");
  if (!algorithm) return nested(std::move(algorithm).error(), "rfc2136");
  auto secret = o->required_string("tsig_secret");
  if (!secret) return nested(std::move(secret).error(), "rfc2136");
  std::string alg = algorithm->value_or("hmac-sha256");
  // One check of the key's three parts: the codec's, which is what signs the updates.
  if (auto k = acme::dns::make_tsig_key(*key_name, alg, *secret); !k) {
    auto e = std::move(k).error();
    if (!e.field.empty()) return nested(std::move(e), "rfc2136");
    return e;
  }
  p.spec.tsig_key_name = std::move(*key_name);
  p.spec.tsig_algorithm = std::move(alg);
  p.tsig_secret = std::move(*secret);
  return p;
}

std::string dns_provider_spec::where() const {
  if (exec()) return "exec " + program;
  if (httpreq()) return "httpreq " + endpoint;
  if (powerdns()) return "powerdns " + api_url;
  if (manual()) return check_server.empty() ? std::string("no check_server: the zone's servers") : check_server;
  return server;
}

std::string dns_provider_doc_json(const dns_provider_spec& p) {
  if (p.manual())
    return json::serialize(json::object{{"kind", p.kind}, {"manual", json::object{{"check_server", p.check_server}}}});
  if (p.exec()) {
    json::array names;
    for (const auto& n : p.env_names) names.emplace_back(n);
    json::object o{{"kind", p.kind},
                   {"exec", json::object{{"program", p.program},
                                         {"timeout_s", p.timeout_s},
                                         {"env_names", std::move(names)},
                                         {"check_propagation", p.check_propagation}}}};
    if (!p.created_by_system_admin.empty()) o["created_by_system_admin"] = p.created_by_system_admin;
    return json::serialize(o);
  }
  if (p.httpreq())
    return json::serialize(json::object{{"kind", p.kind},
                                        {"httpreq", json::object{{"endpoint", p.endpoint},
                                                                 {"username", p.username},
                                                                 {"allow_plain_http", p.allow_plain_http},
                                                                 {"ca_bundle_pem", p.ca_bundle_pem},
                                                                 {"timeout_s", p.timeout_s},
                                                                 {"check_propagation", p.check_propagation}}}});
  if (p.powerdns())
    return json::serialize(json::object{{"kind", p.kind},
                                        {"powerdns", json::object{{"api_url", p.api_url},
                                                                  {"server_id", p.server_id},
                                                                  {"zone", p.zone},
                                                                  {"allow_plain_http", p.allow_plain_http},
                                                                  {"ca_bundle_pem", p.ca_bundle_pem},
                                                                  {"timeout_s", p.timeout_s},
                                                                  {"check_propagation", p.check_propagation}}}});
  return json::serialize(json::object{{"kind", p.kind},
                                      {"rfc2136", json::object{{"server", p.server},
                                                               {"zone", p.zone},
                                                               {"tsig_key_name", p.tsig_key_name},
                                                               {"tsig_algorithm", p.tsig_algorithm}}}});
}

namespace {
// The members every API-backed kind stores the same way.
void read_call_doc(const json::object& o, dns_provider_spec& p) {
  if (auto* t = o.if_contains("timeout_s"); t && t->is_int64()) p.timeout_s = t->as_int64();
  if (auto* c = o.if_contains("check_propagation"); c && c->is_bool()) p.check_propagation = c->as_bool();
  if (auto* a = o.if_contains("allow_plain_http"); a && a->is_bool()) p.allow_plain_http = a->as_bool();
  p.ca_bundle_pem = str(o, "ca_bundle_pem");
}
}  // namespace

result<dns_provider_spec> parse_dns_provider_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  dns_provider_spec p;
  p.kind = str(d, "kind");
  if (p.kind == "manual") {
    if (auto* m = d.if_contains("manual"); m && m->is_object()) p.check_server = str(m->as_object(), "check_server");
    return p;
  }
  if (p.through_api()) {
    auto* e = d.if_contains(p.kind);
    if (!e || !e->is_object())
      return make_error(errc::store_failure, fmt::format("dns_provider {} is a {} provider without its {} section", o.id,
                                                         p.kind, p.kind),
                        "dns_provider_id");
    const auto& eo = e->as_object();
    read_call_doc(eo, p);
    if (p.exec()) {
      p.program = str(eo, "program");
      if (auto* n = eo.if_contains("env_names"); n && n->is_array())
        for (const auto& v : n->as_array())
          if (v.is_string()) p.env_names.emplace_back(v.as_string());
      p.created_by_system_admin = str(d, "created_by_system_admin");
    } else if (p.httpreq()) {
      p.endpoint = str(eo, "endpoint");
      p.username = str(eo, "username");
    } else {
      p.api_url = str(eo, "api_url");
      p.server_id = str(eo, "server_id");
      if (p.server_id.empty()) p.server_id = "localhost";
      p.zone = str(eo, "zone");
    }
    return p;
  }
  auto* r = d.if_contains("rfc2136");
  if (p.kind != "rfc2136" || !r || !r->is_object())
    return make_error(errc::store_failure, fmt::format("dns_provider {} is not an rfc2136 provider", o.id), "dns_provider_id");
  const auto& ro = r->as_object();
  p.server = str(ro, "server");
  p.zone = str(ro, "zone");
  p.tsig_key_name = str(ro, "tsig_key_name");
  p.tsig_algorithm = str(ro, "tsig_algorithm");
  return p;
}

result<store::catalog_object> make_dns_provider_object(const new_dns_provider& p, const kek& key, std::string id,
                                                       std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_dns_provider);
  o.name = p.name;
  o.doc = dns_provider_doc_json(p.spec);
  o.created_at = now;
  if (p.spec.manual()) return o;  // nothing secret
  std::string secret = p.tsig_secret;
  if (p.spec.through_api()) {
    json::object fields;
    for (const auto& [k, v] : p.secrets) fields[k] = v;
    secret = json::serialize(fields);
  }
  auto sealed = seal(key, secret, catalog::body_fields::aad_for(o, catalog::sealed_secret));
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<std::string> open_dns_provider_secret(const kek& key, const store::catalog_object& o) {
  return open_sealed(key, o.sealed, catalog::body_fields::aad_for(o, catalog::sealed_secret));
}

result<std::vector<std::pair<std::string, std::string>>> parse_provider_secrets(std::string_view sealed_json) {
  std::vector<std::pair<std::string, std::string>> out;
  if (sealed_json.empty()) return out;
  boost::system::error_code ec;
  auto v = json::parse(sealed_json, ec);
  if (ec || !v.is_object()) return make_error(errc::store_failure, "the provider's sealed secret does not parse", "dns_provider_id");
  for (const auto& [k, val] : v.as_object())
    if (val.is_string()) out.emplace_back(std::string(k), std::string(val.as_string()));
  return out;
}

}  // namespace certfleet::lifecycle
