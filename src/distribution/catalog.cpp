#include "certfleet/distribution/catalog.hpp"
#include "certfleet/distribution/checks.hpp"
#include "certfleet/distribution/discovery.hpp"

#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/delivery/webhook.hpp"
#include "certfleet/net/smtp_protocol.hpp"
#include "certfleet/distribution/events.hpp"
#include "certfleet/distribution/notify_template.hpp"

#include <boost/asio/ip/address.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace certfleet::distribution {

namespace json = boost::json;

namespace {

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}

// A request body: one JSON object whose members are all known.
result<json::object> body_object(std::string_view body, std::initializer_list<std::string_view> allowed) {
  auto parsed = certfleet::json::parse_value(body, "body", 16);
  if (!parsed) return std::move(parsed).error();
  auto& v = *parsed;
  if (!v.is_object()) return bad("body", "body must be a JSON object");
  for (const auto& [k, _] : v.as_object())
    if (std::find(allowed.begin(), allowed.end(), std::string_view(k)) == allowed.end())
      // A member named "" still gets a field to point at: the body.
      return bad(k.empty() ? std::string("body") : std::string(k), fmt::format("unknown field \"{}\"", std::string_view(k)));
  return std::move(v.as_object());
}

result<std::string> text(const json::object& o, std::string_view key, bool required, std::size_t max = 64 * 1024,
                         std::string_view prefix = {}) {
  std::string field = std::string(prefix) + std::string(key);
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) {
    if (required) return bad(field, fmt::format("{} is required", field));
    return std::string();
  }
  if (!p->is_string()) return bad(field, fmt::format("{} must be a string", field));
  if (required && p->as_string().empty()) return bad(field, fmt::format("{} must not be empty", field));
  if (p->as_string().size() > max) return bad(field, fmt::format("{} is longer than {} bytes", field, max));
  if (std::find(p->as_string().begin(), p->as_string().end(), '\0') != p->as_string().end())
    return bad(field, fmt::format("{} must not contain NUL", field));
  return std::string(p->as_string());
}

result<bool> boolean(const json::object& o, std::string_view key, bool fallback) {
  auto* p = o.if_contains(key);
  if (!p || p->is_null()) return fallback;
  if (!p->is_bool()) return bad(std::string(key), fmt::format("{} must be true or false", key));
  return p->as_bool();
}

result<std::string> name_of(const json::object& o) {
  auto n = text(o, "name", true, max_name_length);
  if (!n) return n;
  for (unsigned char c : *n)
    if (c < 0x20 || c == 0x7f) return bad("name", "name must not contain control characters");
  return n;
}

bool valid_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

result<std::string> id_field(const json::object& o, std::string_view key, bool required, std::string_view prefix = {}) {
  auto t = text(o, key, required, 64, prefix);
  if (!t) return t;
  if (!t->empty() && !valid_id(*t)) return bad(std::string(prefix) + std::string(key), "not a valid id");
  return t;
}

json::object parse_doc(const store::catalog_object& o) {
  boost::system::error_code ec;
  auto v = json::parse(o.doc, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string aad_for(const store::catalog_object& o, std::string_view what) {
  return fmt::format("{}:{}:{}", o.kind, o.id, what);
}

json::object base_view(const store::catalog_object& o) {
  return json::object{{"id", o.id}, {"name", o.name}, {"created_at", certfleet::json::time_value(o.created_at)}};
}

}  // namespace

// ---- certificates -------------------------------------------------------------------------

namespace {

// A certificate bundle body: {name, cert_pem, chain_pem?, key_pem}, or without the name for a
// new version of a certificate.
result<new_certificate> parse_bundle_body(std::string_view body, time_ms now, bool with_name) {
  auto o = with_name ? body_object(body, {"name", "cert_pem", "chain_pem", "key_pem"})
                     : body_object(body, {"cert_pem", "chain_pem", "key_pem"});
  if (!o) return std::move(o).error();
  new_certificate c;
  if (with_name) {
    auto name = name_of(*o);
    if (!name) return std::move(name).error();
    c.name = std::move(*name);
  }
  auto cert = text(*o, "cert_pem", true);
  if (!cert) return std::move(cert).error();
  auto chain = text(*o, "chain_pem", false);
  if (!chain) return std::move(chain).error();
  auto key = text(*o, "key_pem", true);
  if (!key) return std::move(key).error();
  auto info = delivery::parse_certificate_bundle(*cert, *chain, *key, now);
  if (!info) return std::move(info).error();
  c.key_pem = std::move(*key);
  c.doc.subject = info->subject;
  c.doc.issuer = info->issuer;
  c.doc.sans = info->sans;
  c.doc.not_before = info->not_before_ms;
  c.doc.not_after = info->not_after_ms;
  c.doc.fingerprint_sha256 = info->fingerprint_sha256;
  c.doc.serial = info->serial;
  c.doc.version_created_at = now;
  c.doc.versions.push_back({1, info->serial, info->fingerprint_sha256, info->not_before_ms, info->not_after_ms, now});
  c.doc.cert_pem = std::move(*cert);
  c.doc.chain_pem = std::move(*chain);
  return c;
}

}  // namespace

result<new_certificate> parse_certificate_request(std::string_view body, time_ms now) {
  return parse_bundle_body(body, now, true);
}

result<new_certificate> parse_certificate_version_request(std::string_view body, time_ms now) {
  return parse_bundle_body(body, now, false);
}

std::string certificate_doc_json(const certificate_doc& d) {
  json::array sans;
  for (const auto& s : d.sans) sans.emplace_back(s);
  json::array notified;
  for (auto n : d.notified_days) notified.emplace_back(n);
  json::array versions;
  for (const auto& v : d.versions)
    versions.emplace_back(json::object{{"version", v.version},
                                       {"serial", v.serial},
                                       {"fingerprint_sha256", v.fingerprint_sha256},
                                       {"not_before", v.not_before},
                                       {"not_after", v.not_after},
                                       {"created_at", v.created_at}});
  json::object doc{{"subject", d.subject},
                                      {"issuer", d.issuer},
                                      {"sans", std::move(sans)},
                                      {"not_before", d.not_before},
                                      {"not_after", d.not_after},
                                      {"fingerprint_sha256", d.fingerprint_sha256},
                                      {"serial", d.serial},
                                      {"cert_pem", d.cert_pem},
                                      {"chain_pem", d.chain_pem},
                                      {"expired", d.expired},
                                      {"notified_days", std::move(notified)},
                                      {"version", d.version},
                                      {"version_created_at", d.version_created_at},
                                      {"versions", std::move(versions)},
                                      {"source", d.source},
                                      {"status", d.status}};
  if (d.acme) {
    json::array domains;
    for (const auto& n : d.acme->domains) domains.emplace_back(n);
    doc["acme"] = json::object{{"domains", std::move(domains)},
                               {"key_type", d.acme->key_type},
                               {"acme_account_id", d.acme->acme_account_id},
                               {"dns_provider_id", d.acme->dns_provider_id},
                               {"profile", d.acme->profile},
                               {"auto_renew", d.acme->auto_renew},
                               {"last_error", d.acme->last_error}};
    auto& ao = doc["acme"].as_object();
    if (!d.acme->last_job_id.empty()) ao["last_job_id"] = d.acme->last_job_id;
    if (const auto& a = d.acme->approval)
      ao["approval"] = json::object{{"requested_by", a->requested_by}, {"requested_at", a->requested_at},
                                    {"decision", a->decision},         {"decided_by", a->decided_by},
                                    {"decided_at", a->decided_at},     {"reason", a->reason}};
    if (d.acme->ari.checked_at > 0)
      ao["ari"] = json::object{{"serial", d.acme->ari.serial},
                               {"start", d.acme->ari.start},
                               {"end", d.acme->ari.end},
                               {"checked_at", d.acme->ari.checked_at}};
    if (const auto& m = d.acme->manual) {
      json::array cs;
      for (const auto& c : m->challenges)
        cs.emplace_back(json::object{{"fqdn", c.fqdn},
                                     {"value", c.value},
                                     {"authorization_url", c.authorization_url},
                                     {"challenge_url", c.challenge_url},
                                     {"status", c.status}});
      doc["acme"].as_object()["manual"] = json::object{{"job_id", m->job_id},
                                                       {"order_url", m->order_url},
                                                       {"from_version", m->from_version},
                                                       {"challenges", std::move(cs)},
                                                       {"validations", m->validations},
                                                       {"last_validation_job_id", m->last_validation_job_id}};
    }
  }
  if (d.revocation)
    doc["revocation"] = json::object{{"serial", d.revocation->serial},
                                     {"reason", d.revocation->reason},
                                     {"revoked_at", d.revocation->revoked_at},
                                     {"job_id", d.revocation->job_id},
                                     {"source", d.revocation->source}};
  if (d.revocation_check)
    doc["revocation_check"] = json::object{{"serial", d.revocation_check->serial},
                                           {"status", d.revocation_check->status},
                                           {"source", d.revocation_check->source},
                                           {"detail", d.revocation_check->detail},
                                           {"checked_at", d.revocation_check->checked_at},
                                           {"next_update", d.revocation_check->next_update}};
  return json::serialize(doc);
}

result<store::catalog_object> make_certificate_object(const new_certificate& c, const kek& key, std::string id,
                                                      std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_certificate);
  o.name = c.name;
  o.doc = certificate_doc_json(c.doc);
  o.not_after = c.doc.not_after;
  o.created_at = now;
  auto sealed = seal(key, c.key_pem, aad_for(o, "key"));
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<certificate_doc> parse_certificate_doc(const store::catalog_object& o, bool allow_unissued) {
  auto d = parse_doc(o);
  certificate_doc c;
  auto str = [](const json::object& obj, const char* k) {
    auto* p = obj.if_contains(k);
    return p && p->is_string() ? std::string(p->as_string()) : std::string();
  };
  auto num = [](const json::object& obj, const char* k, std::int64_t fallback = 0) {
    auto* p = obj.if_contains(k);
    return p && p->is_int64() ? p->as_int64() : fallback;
  };
  c.subject = str(d, "subject");
  c.issuer = str(d, "issuer");
  c.not_before = num(d, "not_before");
  c.not_after = num(d, "not_after");
  c.fingerprint_sha256 = str(d, "fingerprint_sha256");
  c.serial = str(d, "serial");
  c.cert_pem = str(d, "cert_pem");
  c.chain_pem = str(d, "chain_pem");
  if (auto* e = d.if_contains("expired"); e && e->is_bool()) c.expired = e->as_bool();
  if (auto* s = d.if_contains("sans"); s && s->is_array())
    for (const auto& x : s->as_array())
      if (x.is_string()) c.sans.emplace_back(x.as_string());
  if (auto* n = d.if_contains("notified_days"); n && n->is_array())
    for (const auto& x : n->as_array())
      if (x.is_int64()) c.notified_days.push_back(x.as_int64());
  // Documents stored before versions existed hold version 1, created with the object.
  c.version = num(d, "version", 1);
  c.version_created_at = num(d, "version_created_at", o.created_at);
  if (auto* vs = d.if_contains("versions"); vs && vs->is_array()) {
    for (const auto& x : vs->as_array()) {
      if (!x.is_object()) continue;
      const auto& v = x.as_object();
      c.versions.push_back({num(v, "version"), str(v, "serial"), str(v, "fingerprint_sha256"), num(v, "not_before"),
                            num(v, "not_after"), num(v, "created_at")});
    }
  } else if (c.version > 0) {
    c.versions.push_back({c.version, c.serial, c.fingerprint_sha256, c.not_before, c.not_after, c.version_created_at});
  }
  if (auto src = str(d, "source"); !src.empty()) c.source = std::move(src);
  if (auto st = str(d, "status"); !st.empty()) c.status = std::move(st);
  if (auto* a = d.if_contains("acme"); a && a->is_object()) {
    const auto& ao = a->as_object();
    certificate_acme acme;
    if (auto* ds = ao.if_contains("domains"); ds && ds->is_array())
      for (const auto& x : ds->as_array())
        if (x.is_string()) acme.domains.emplace_back(x.as_string());
    acme.key_type = str(ao, "key_type");
    acme.acme_account_id = str(ao, "acme_account_id");
    acme.dns_provider_id = str(ao, "dns_provider_id");
    acme.profile = str(ao, "profile");
    if (auto* r = ao.if_contains("auto_renew"); r && r->is_bool()) acme.auto_renew = r->as_bool();
    acme.last_error = str(ao, "last_error");
    acme.last_job_id = str(ao, "last_job_id");
    if (auto* ap = ao.if_contains("approval"); ap && ap->is_object()) {
      const auto& po = ap->as_object();
      acme.approval = certificate_approval{str(po, "requested_by"), num(po, "requested_at"), str(po, "decision"),
                                           str(po, "decided_by"),   num(po, "decided_at"),   str(po, "reason")};
    }
    if (auto* w = ao.if_contains("ari"); w && w->is_object()) {
      const auto& wo = w->as_object();
      acme.ari = {str(wo, "serial"), num(wo, "start"), num(wo, "end"), num(wo, "checked_at")};
    }
    if (auto* m = ao.if_contains("manual"); m && m->is_object()) {
      const auto& mo = m->as_object();
      manual_order mord;
      mord.job_id = str(mo, "job_id");
      mord.order_url = str(mo, "order_url");
      mord.from_version = num(mo, "from_version");
      mord.validations = num(mo, "validations");
      mord.last_validation_job_id = str(mo, "last_validation_job_id");
      if (auto* cs = mo.if_contains("challenges"); cs && cs->is_array())
        for (const auto& x : cs->as_array()) {
          if (!x.is_object()) continue;
          const auto& co = x.as_object();
          mord.challenges.push_back(
              {str(co, "fqdn"), str(co, "value"), str(co, "authorization_url"), str(co, "challenge_url"), str(co, "status")});
        }
      acme.manual = std::move(mord);
    }
    c.acme = std::move(acme);
  }
  if (auto* rv = d.if_contains("revocation"); rv && rv->is_object()) {
    const auto& ro = rv->as_object();
    c.revocation = certificate_revocation{str(ro, "serial"), str(ro, "reason"), num(ro, "revoked_at"), str(ro, "job_id")};
    if (auto src = str(ro, "source"); !src.empty()) c.revocation->source = std::move(src);
  }
  if (auto* rc = d.if_contains("revocation_check"); rc && rc->is_object()) {
    const auto& ro = rc->as_object();
    c.revocation_check = revocation_check_info{str(ro, "serial"), str(ro, "status"), str(ro, "source"),
                                               str(ro, "detail"), num(ro, "checked_at"), num(ro, "next_update")};
  }
  if (c.cert_pem.empty() && !allow_unissued)
    return make_error(errc::conflict, fmt::format("certificate {} has no issued version yet", o.id), "certificate_id");
  return c;
}

result<std::string> open_certificate_key(const kek& key, const store::catalog_object& o) {
  return open_sealed(key, o.sealed, aad_for(o, "key"));
}

result<certificate_with_doc> read_certificate(store::catalog_read& rd, std::string_view project_id, std::string_view id) {
  auto o = rd.get_object(project_id, store::kind_certificate, id);
  if (!o) return std::move(o).error();
  auto d = parse_certificate_doc(*o, true);
  if (!d) return std::move(d).error();
  return certificate_with_doc{std::move(*o), std::move(*d)};
}

boost::json::object certificate_view(const store::catalog_object& o) {
  auto v = base_view(o);
  auto d = parse_certificate_doc(o, true);
  if (!d) return v;
  json::array sans;
  for (const auto& s : d->sans) sans.emplace_back(s);
  json::array versions;
  for (const auto& x : d->versions)
    versions.emplace_back(json::object{{"version", x.version},
                                       {"serial", x.serial},
                                       {"fingerprint_sha256", x.fingerprint_sha256},
                                       {"not_before", certfleet::json::time_value(x.not_before)},
                                       {"not_after", certfleet::json::time_value(x.not_after)},
                                       {"created_at", certfleet::json::time_value(x.created_at)}});
  v["source"] = d->source;
  v["status"] = d->expired && d->status == "active" ? std::string("expired") : d->status;
  v["version"] = d->version;
  v["serial"] = d->serial;
  v["subject"] = d->subject;
  v["issuer"] = d->issuer;
  v["sans"] = std::move(sans);
  if (d->version > 0) {
    v["not_before"] = certfleet::json::time_value(d->not_before);
    v["not_after"] = certfleet::json::time_value(d->not_after);
  } else {
    v["not_before"] = nullptr;
    v["not_after"] = nullptr;
  }
  v["fingerprint_sha256"] = d->fingerprint_sha256;
  v["expired"] = d->expired;
  v["cert_pem"] = d->cert_pem;
  v["chain_pem"] = d->chain_pem;
  v["versions"] = std::move(versions);
  if (d->acme) {
    json::array domains;
    for (const auto& n : d->acme->domains) domains.emplace_back(n);
    v["domains"] = std::move(domains);
    v["key_type"] = d->acme->key_type;
    v["acme_account_id"] = d->acme->acme_account_id;
    v["dns_provider_id"] = d->acme->dns_provider_id;
    if (!d->acme->profile.empty()) v["profile"] = d->acme->profile;
    v["auto_renew"] = d->acme->auto_renew;
    if (!d->acme->last_error.empty()) v["last_error"] = d->acme->last_error;
    v["last_job_id"] = certfleet::json::text_value(d->acme->last_job_id);
    if (const auto& a = d->acme->approval) {
      v["approval"] = json::object{{"requested_by", a->requested_by},
                                   {"requested_at", certfleet::json::time_value(a->requested_at)},
                                   {"decision", a->decision},
                                   {"decided_by", certfleet::json::text_value(a->decided_by)},
                                   {"decided_at", certfleet::json::time_value(a->decided_at)},
                                   {"reason", certfleet::json::text_value(a->reason)}};
    } else {
      v["approval"] = nullptr;
    }
    // The renewal window (DESIGN §9): the CA's (ARI) when the sweep read one for this version,
    // else the last third of the lifetime. Only for an issued version.
    if (d->version > 0) {
      const auto& ari = d->acme->ari;
      const bool from_ari = ari.checked_at > 0 && ari.serial == d->serial;
      acme::renewal_inputs in;
      in.not_before = d->not_before;
      in.not_after = d->not_after;
      if (from_ari) in.ari = acme::renewal_window{ari.start, ari.end};
      const auto decided = acme::decide_renewal(in);
      v["renewal"] = json::object{{"window_start", certfleet::json::time_value(decided.window.start)},
                                  {"window_end", certfleet::json::time_value(decided.window.end)},
                                  {"source", acme::renewal_source_name(decided.source)},
                                  {"checked_at", certfleet::json::time_value(from_ari ? ari.checked_at : 0)}};
    } else {
      v["renewal"] = nullptr;
    }
  }
  if (d->revocation)
    v["revocation"] = json::object{{"serial", d->revocation->serial},
                                   {"reason", certfleet::json::text_value(d->revocation->reason)},
                                   {"revoked_at", certfleet::json::time_value(d->revocation->revoked_at)},
                                   {"job_id", certfleet::json::text_value(d->revocation->job_id)},
                                   {"source", d->revocation->source}};
  // Only an answer about the version now current: an older version's check says nothing of it.
  if (d->revocation_check && d->revocation_check->serial == d->serial)
    v["revocation_check"] = json::object{{"status", d->revocation_check->status},
                                         {"source", d->revocation_check->source},
                                         {"detail", d->revocation_check->detail},
                                         {"checked_at", certfleet::json::time_value(d->revocation_check->checked_at)},
                                         {"next_update", certfleet::json::time_value(d->revocation_check->next_update)}};
  else
    v["revocation_check"] = nullptr;
  return v;
}

expiry_step plan_expiry(const certificate_doc& d, time_ms now, const std::vector<std::int64_t>& thresholds) {
  expiry_step s;
  auto notified = [&](std::int64_t t) {
    return std::find(d.notified_days.begin(), d.notified_days.end(), t) != d.notified_days.end();
  };
  if (d.not_after <= now) {
    s.mark_expired = !d.expired;
    if (!notified(0)) {
      s.newly_crossed.push_back(0);
      s.notify_days = 0;
    }
    return s;
  }
  constexpr time_ms day = 86'400'000;
  for (auto t : thresholds) {  // largest first: the last one crossed is the tightest
    if (d.not_after - now > t * day) continue;
    s.expiring_soon = true;
    if (!notified(t)) {
      s.newly_crossed.push_back(t);
      s.notify_days = t;
    }
  }
  return s;
}

// ---- credentials --------------------------------------------------------------------------

result<new_credential> parse_credential_request(std::string_view body) {
  auto o = body_object(body, {"name", "kind", "private_key_pem", "passphrase", "password"});
  if (!o) return std::move(o).error();
  new_credential c;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  c.name = std::move(*name);
  auto kind = text(*o, "kind", true, 16);
  if (!kind) return std::move(kind).error();
  c.kind = *kind;
  auto pem = text(*o, "private_key_pem", false);
  if (!pem) return std::move(pem).error();
  auto pass = text(*o, "passphrase", false, 1024);
  if (!pass) return std::move(pass).error();
  auto pw = text(*o, "password", false, 1024);
  if (!pw) return std::move(pw).error();
  if (c.kind == "ssh_key") {
    if (pem->empty()) return bad("private_key_pem", "private_key_pem is required for kind ssh_key");
    if (!pw->empty()) return bad("password", "password is for kind password, not ssh_key");
    auto info = delivery::parse_ssh_private_key(*pem, *pass);
    if (!info) return std::move(info).error();
    c.public_key_fingerprint = info->fingerprint;
    c.public_key = info->public_line;
    c.key_type = info->type;
    c.secret.private_key_pem = std::move(*pem);
    c.secret.passphrase = std::move(*pass);
  } else if (c.kind == "password") {
    if (pw->empty()) return bad("password", "password is required for kind password");
    if (!pem->empty()) return bad("private_key_pem", "private_key_pem is for kind ssh_key, not password");
    c.secret.password = std::move(*pw);
  } else {
    return bad("kind", "kind must be \"ssh_key\" or \"password\"");
  }
  return c;
}

result<store::catalog_object> make_credential_object(const new_credential& c, const kek& key, std::string id,
                                                     std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_credential);
  o.name = c.name;
  json::object doc{{"kind", c.kind}};
  if (!c.public_key_fingerprint.empty()) {
    doc["public_key_fingerprint"] = c.public_key_fingerprint;
    doc["public_key"] = c.public_key;
    doc["key_type"] = c.key_type;
  }
  o.doc = json::serialize(doc);
  o.created_at = now;
  auto secret = json::serialize(json::object{{"private_key_pem", c.secret.private_key_pem},
                                             {"passphrase", c.secret.passphrase},
                                             {"password", c.secret.password}});
  auto sealed = seal(key, secret, aad_for(o, "secret"));
  std::fill(secret.begin(), secret.end(), '\0');
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<credential_secret> open_credential(const kek& key, const store::catalog_object& o) {
  auto plain = open_sealed(key, o.sealed, aad_for(o, "secret"));
  if (!plain) return std::move(plain).error();
  boost::system::error_code ec;
  auto v = json::parse(*plain, ec);
  std::fill(plain->begin(), plain->end(), '\0');
  if (ec || !v.is_object()) return make_error(errc::store_failure, fmt::format("credential {} is damaged", o.id), "credential_id");
  credential_secret s;
  const auto& so = v.as_object();
  auto get = [&](const char* k) { auto* p = so.if_contains(k); return p && p->is_string() ? std::string(p->as_string()) : std::string(); };
  s.private_key_pem = get("private_key_pem");
  s.passphrase = get("passphrase");
  s.password = get("password");
  return s;
}

boost::json::object credential_view(const store::catalog_object& o) {
  auto v = base_view(o);
  auto d = parse_doc(o);
  for (const char* k : {"kind", "public_key_fingerprint", "public_key", "key_type"})
    if (auto* p = d.if_contains(k)) v[k] = *p;
  return v;
}

// ---- targets ------------------------------------------------------------------------------

std::string target_spec::lock_key() const {
  switch (module) {
    case delivery::module_kind::ssh: return fmt::format("{}:{}:{}", ssh.host, ssh.port, ssh.cert_path);
    case delivery::module_kind::file: return "file:" + file.cert_path;
    case delivery::module_kind::webhook: break;
  }
  return "webhook:" + webhook_url;
}

namespace {
// Stored documents only: parse_target_request's allowed members do not include it.
constexpr std::string_view file_grant_member = "created_by_system_admin";

result<target_spec> parse_target_fields(const json::object& o) {
  target_spec t;
  auto module_text = text(o, "module", true, 16);
  if (!module_text) return std::move(module_text).error();
  auto module = delivery::parse_module(*module_text);
  if (!module) return bad("module", "module must be " + delivery::module_choices());
  t.module = *module;
  const json::value* validate = o.if_contains("validate");
  auto only_one = [&](const char* which) -> result<void> {
    for (const auto& m : delivery::all_modules())
      if (m.name != which && o.if_contains(m.name))
        return bad(std::string(m.name), fmt::format("a {} target has no {} section", which, m.name));
    auto* s = o.if_contains(which);
    if (!s || !s->is_object()) return bad(which, fmt::format("{} must be an object", which));
    return {};
  };
  if (t.module == delivery::module_kind::ssh) {
    if (auto r = only_one("ssh"); !r) return std::move(r).error();
    json::object ssh = o.at("ssh").as_object();
    auto cred = id_field(ssh, "credential_id", true, "ssh.");
    if (!cred) return std::move(cred).error();
    t.credential_id = *cred;
    ssh.erase("credential_id");
    static constexpr std::string_view known[] = {"host", "port", "user", "auth", "host_key", "cert_path", "key_path",
                                                 "chain_path", "cert_mode", "key_mode", "owner", "sudo", "post_command"};
    for (const auto& [k, _] : ssh)
      if (std::find(std::begin(known), std::end(known), std::string_view(k)) == std::end(known))
        return bad("ssh." + std::string(k), fmt::format("unknown field \"ssh.{}\"", std::string_view(k)));
    json::value sv(std::move(ssh));
    auto parsed = delivery::parse_ssh_target(sv, validate);
    if (!parsed) return std::move(parsed).error();
    t.ssh = std::move(*parsed);
  } else if (t.module == delivery::module_kind::file) {
    if (auto r = only_one("file"); !r) return std::move(r).error();
    if (validate && !validate->is_null()) return bad("validate", "file targets validate by hash on their own");
    static constexpr std::string_view known[] = {"cert_path", "key_path", "chain_path", "cert_mode", "key_mode",
                                                 "post_command"};
    for (const auto& [k, _] : o.at("file").as_object())
      if (std::find(std::begin(known), std::end(known), std::string_view(k)) == std::end(known))
        return bad("file." + std::string(k), fmt::format("unknown field \"file.{}\"", std::string_view(k)));
    auto parsed = delivery::parse_file_target(o.at("file"));
    if (!parsed) return std::move(parsed).error();
    t.file = std::move(*parsed);
    if (auto* g = o.if_contains(file_grant_member); g && g->is_string()) t.created_by_system_admin = std::string(g->as_string());
  } else if (t.module == delivery::module_kind::webhook) {
    if (auto r = only_one("webhook"); !r) return std::move(r).error();
    if (validate && !validate->is_null()) return bad("validate", "webhook targets have no validation step");
    const auto& w = o.at("webhook").as_object();
    for (const auto& [k, _] : w)
      if (k != "url" && k != "secret_credential_id" && k != "allow_plain_http")
        return bad("webhook." + std::string(k), fmt::format("unknown field \"webhook.{}\"", std::string_view(k)));
    auto url = text(w, "url", true, 2048, "webhook.");
    if (!url) return std::move(url).error();
    auto u = net::parse_url(*url, "webhook.url");
    if (!u) return std::move(u).error();
    t.webhook_url = *url;
    auto cred = id_field(w, "secret_credential_id", true, "webhook.");
    if (!cred) return std::move(cred).error();
    t.credential_id = *cred;
    auto plain = boolean(w, "allow_plain_http", false);
    if (!plain) return std::move(plain).error();
    t.webhook_allow_http = *plain;
    if (!u->tls() && !t.webhook_allow_http)
      return bad("webhook.url", "webhook.url must be https:// (the body carries the private key); "
                                "set webhook.allow_plain_http for a receiver on a trusted host");
  } else {
    return bad("module", "module must be " + delivery::module_choices());
  }
  return t;
}
}  // namespace

result<new_target> parse_target_request(std::string_view body) {
  auto o = body_object(body, {"name", "module", "ssh", "file", "webhook", "validate"});
  if (!o) return std::move(o).error();
  new_target t;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  t.name = std::move(*name);
  auto spec = parse_target_fields(*o);
  if (!spec) return std::move(spec).error();
  t.spec = std::move(*spec);
  o->erase("name");
  t.doc = json::serialize(*o);
  return t;
}

std::string stamp_ssh_auth(std::string_view doc, std::string_view auth) {
  boost::system::error_code ec;
  auto v = json::parse(doc, ec);
  if (ec || !v.is_object()) return std::string(doc);
  if (auto* ssh = v.as_object().if_contains("ssh"); ssh && ssh->is_object()) ssh->as_object()["auth"] = auth;
  return json::serialize(v);
}

std::string stamp_file_grant(std::string_view doc, std::string_view actor) {
  boost::system::error_code ec;
  auto v = json::parse(doc, ec);
  if (ec || !v.is_object()) return std::string(doc);
  v.as_object()[file_grant_member] = actor;
  return json::serialize(v);
}

result<target_spec> parse_target_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  auto spec = parse_target_fields(d);
  if (!spec)
    return make_error(errc::store_failure, fmt::format("target {} ({}) is not valid any more: {}", o.name, o.id,
                                                       spec.error().message), "target_ids");
  return spec;
}

boost::json::object target_view(const store::catalog_object& o) {
  auto v = base_view(o);
  for (auto& [k, val] : parse_doc(o)) v[k] = val;
  return v;
}

// ---- distributions ------------------------------------------------------------------------

result<store::distribution_record> parse_distribution_request(std::string_view body, bool* auto_execute_given) {
  auto o = body_object(body,
                       {"name", "certificate_id", "target_ids", "canary", "failure_tolerance", "fail_fast", "auto_execute"});
  if (!o) return std::move(o).error();
  store::distribution_record d;
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  d.name = std::move(*name);
  auto cert = id_field(*o, "certificate_id", true);
  if (!cert) return std::move(cert).error();
  d.certificate_id = *cert;
  auto* ids = o->if_contains("target_ids");
  if (!ids || !ids->is_array() || ids->as_array().empty())
    return bad("target_ids", "target_ids must be a non-empty array of target ids");
  if (ids->as_array().size() > max_distribution_targets)
    return bad("target_ids", fmt::format("target_ids has more than {} entries", max_distribution_targets));
  for (const auto& e : ids->as_array()) {
    if (!e.is_string() || !valid_id(e.as_string())) return bad("target_ids", "target_ids must hold target ids (strings)");
    d.target_ids.emplace_back(e.as_string());
  }
  std::sort(d.target_ids.begin(), d.target_ids.end());
  d.target_ids.erase(std::unique(d.target_ids.begin(), d.target_ids.end()), d.target_ids.end());
  auto canary = boolean(*o, "canary", false);
  if (!canary) return std::move(canary).error();
  d.canary = *canary;
  auto ff = boolean(*o, "fail_fast", false);
  if (!ff) return std::move(ff).error();
  d.fail_fast = *ff;
  if (auto* t = o->if_contains("failure_tolerance"); t && !t->is_null()) {
    if (!t->is_number()) return bad("failure_tolerance", "failure_tolerance must be a number from 0 to 1");
    double v = t->is_double() ? t->as_double() : t->is_int64() ? static_cast<double>(t->as_int64()) : static_cast<double>(t->as_uint64());
    if (!(v >= 0 && v <= 1)) return bad("failure_tolerance", "failure_tolerance must be a number from 0 to 1");
    d.failure_tolerance = v;
  }
  auto* ae = o->if_contains("auto_execute");
  if (auto_execute_given) *auto_execute_given = ae && !ae->is_null();
  auto auto_execute = boolean(*o, "auto_execute", false);
  if (!auto_execute) return std::move(auto_execute).error();
  d.auto_execute = *auto_execute;
  return d;
}

// ---- notifications ------------------------------------------------------------------------

std::string_view channel_kind_name(channel_kind k) noexcept {
  switch (k) {
    case channel_kind::webhook: return "webhook";
    case channel_kind::email: return "email";
    case channel_kind::slack: return "slack";
    case channel_kind::teams: return "teams";
  }
  return "webhook";
}

std::optional<channel_kind> parse_channel_kind(std::string_view name) noexcept {
  for (auto k : {channel_kind::webhook, channel_kind::email, channel_kind::slack, channel_kind::teams})
    if (channel_kind_name(k) == name) return k;
  return std::nullopt;
}

namespace {

bool loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(std::string(host), ec);
  if (ec) return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  return a.is_loopback();
}

bool valid_host(std::string_view host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(host), ec);
  return !ec || net::valid_dns_name(host);
}

// The members of a kind's section: refused when unknown, named "<section>.<member>".
result<const json::object*> section(const json::object& o, std::string_view kind,
                                    std::initializer_list<std::string_view> allowed) {
  for (auto other : {"email", "slack", "teams"})
    if (other != kind && o.if_contains(other))
      return bad(other, fmt::format("a {} channel has no {} section", kind, other));
  auto* s = o.if_contains(kind);
  if (!s || !s->is_object()) return bad(std::string(kind), fmt::format("{} must be an object", kind));
  for (const auto& [k, _] : s->as_object())
    if (std::find(allowed.begin(), allowed.end(), std::string_view(k)) == allowed.end())
      return bad(fmt::format("{}.{}", kind, std::string_view(k)),
                 fmt::format("unknown field \"{}.{}\"", kind, std::string_view(k)));
  return &s->as_object();
}

result<void> parse_email(const json::object& e, new_channel& c) {
  auto& m = c.spec.email;
  auto host = text(e, "host", true, 253, "email.");
  if (!host) return std::move(host).error();
  std::string h = *host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (!valid_host(h)) return bad("email.host", "email.host must be a host name or an IP address (no port: give email.port)");
  for (auto& ch : h) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  m.host = h;
  if (auto* p = e.if_contains("port"); p && !p->is_null()) {
    if (!p->is_int64() || p->as_int64() < 1 || p->as_int64() > 65535)
      return bad("email.port", "email.port must be a number from 1 to 65535 (587 is submission with STARTTLS)");
    m.port = static_cast<std::uint16_t>(p->as_int64());
  }
  auto tls = boolean(e, "starttls", true);
  if (!tls) return bad("email.starttls", "email.starttls must be true or false");
  m.starttls = *tls;
  if (!m.starttls && !loopback_host(m.host))
    return bad("email.starttls",
               "email.starttls may be false only for a relay on this host (email.host localhost, 127.0.0.1 or ::1): "
               "certfleet does not send mail or passwords to another host in the clear");
  auto user = text(e, "username", false, 256, "email.");
  if (!user) return std::move(user).error();
  for (unsigned char ch : *user)
    if (ch < 0x20 || ch == 0x7f) return bad("email.username", "email.username must not contain control characters");
  m.username = *user;
  auto pw = text(e, "password", false, 1024, "email.");
  if (!pw) return std::move(pw).error();
  if (!m.username.empty() && pw->empty()) return bad("email.password", "email.password is required with email.username");
  if (m.username.empty() && !pw->empty()) return bad("email.username", "email.username is required with email.password");
  c.secret.password = std::move(*pw);
  auto from = text(e, "from", true, 254, "email.");
  if (!from) return std::move(from).error();
  if (!net::valid_mailbox(*from))
    return bad("email.from", "email.from must be a plain address like alerts@example.com (no display name)");
  m.from = *from;
  auto* to = e.if_contains("to");
  if (!to || !to->is_array() || to->as_array().empty())
    return bad("email.to", "email.to must be a non-empty array of addresses");
  if (to->as_array().size() > max_email_recipients)
    return bad("email.to", fmt::format("email.to has more than {} addresses", max_email_recipients));
  for (const auto& a : to->as_array()) {
    if (!a.is_string() || !net::valid_mailbox(a.as_string()))
      return bad("email.to", "email.to must hold plain addresses like ops@example.com");
    std::string addr(a.as_string());
    if (std::find(m.to.begin(), m.to.end(), addr) == m.to.end()) m.to.push_back(std::move(addr));
  }
  return {};
}

// A Slack or Teams incoming-webhook URL: https only (it carries its own bearer token).
result<void> parse_hook(const json::object& s, std::string_view kind, new_channel& c) {
  const std::string field = fmt::format("{}.webhook_url", kind);
  auto url = text(s, "webhook_url", true, 2048, std::string(kind) + ".");
  if (!url) return std::move(url).error();
  auto u = net::parse_url(*url, field);
  if (!u) return std::move(u).error();
  if (!u->tls()) return bad(field, fmt::format("{} must be https:// (the URL is the channel's secret)", field));
  c.spec.webhook_host = u->authority();
  c.secret.webhook_url = std::move(*url);
  return {};
}

}  // namespace

std::string channel_doc_json(const channel_spec& c) {
  json::object o{{"kind", channel_kind_name(c.kind)}};
  switch (c.kind) {
    case channel_kind::webhook:
      o["url"] = c.url;
      if (!c.secret_credential_id.empty()) o["secret_credential_id"] = c.secret_credential_id;
      break;
    case channel_kind::email: {
      json::array to;
      for (const auto& a : c.email.to) to.emplace_back(a);
      json::object e{{"host", c.email.host}, {"port", c.email.port}, {"starttls", c.email.starttls},
                     {"from", c.email.from}, {"to", std::move(to)}};
      if (!c.email.username.empty()) e["username"] = c.email.username;
      o["email"] = std::move(e);
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams:
      o[channel_kind_name(c.kind)] = json::object{{"webhook_host", c.webhook_host}};
      break;
  }
  return json::serialize(o);
}

result<new_channel> parse_channel_request(std::string_view body) {
  auto o = body_object(body, {"name", "kind", "url", "secret_credential_id", "email", "slack", "teams"});
  if (!o) return std::move(o).error();
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  new_channel c;
  c.name = std::move(*name);
  auto kind_text = text(*o, "kind", true, 16);
  if (!kind_text) return std::move(kind_text).error();
  auto kind = parse_channel_kind(*kind_text);
  if (!kind) return bad("kind", "kind must be \"webhook\", \"email\", \"slack\" or \"teams\"");
  c.spec.kind = *kind;
  if (c.spec.kind != channel_kind::webhook)
    for (auto k : {"url", "secret_credential_id"})
      if (o->if_contains(k))
        return bad(k, fmt::format("{} is for webhook channels; a {} channel has its {} section", k, *kind_text, *kind_text));
  switch (c.spec.kind) {
    case channel_kind::webhook: {
      for (auto k : {"email", "slack", "teams"})
        if (o->if_contains(k)) return bad(k, fmt::format("a webhook channel has no {} section", k));
      auto url = text(*o, "url", true, 2048);
      if (!url) return std::move(url).error();
      if (auto u = net::parse_url(*url, "url"); !u) return std::move(u).error();
      c.spec.url = *url;
      auto cred = id_field(*o, "secret_credential_id", false);
      if (!cred) return std::move(cred).error();
      c.spec.secret_credential_id = *cred;
      break;
    }
    case channel_kind::email: {
      auto e = section(*o, "email", {"host", "port", "starttls", "username", "password", "from", "to"});
      if (!e) return std::move(e).error();
      if (auto r = parse_email(**e, c); !r) return std::move(r).error();
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams: {
      auto k = channel_kind_name(c.spec.kind);
      auto s = section(*o, k, {"webhook_url"});
      if (!s) return std::move(s).error();
      if (auto r = parse_hook(**s, k, c); !r) return std::move(r).error();
      break;
    }
  }
  return c;
}

result<store::catalog_object> make_channel_object(const new_channel& c, const kek* key, std::string id,
                                                  std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_channel);
  o.name = c.name;
  o.doc = channel_doc_json(c.spec);
  o.ref_id = c.spec.secret_credential_id;
  o.created_at = now;
  if (!c.secret.empty()) {
    if (!key)
      return make_error(errc::shutting_down, "no key-encryption key is loaded in this process: secrets cannot be sealed",
                        "key_file");
    auto secret = json::serialize(json::object{{"password", c.secret.password}, {"webhook_url", c.secret.webhook_url}});
    auto sealed = seal(*key, secret, aad_for(o, "secret"));
    std::fill(secret.begin(), secret.end(), '\0');
    if (!sealed) return std::move(sealed).error();
    o.sealed = std::move(*sealed);
  }
  return o;
}

result<channel_spec> parse_channel_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  auto damaged = [&](std::string_view why) {
    return make_error(errc::store_failure, fmt::format("channel {} is damaged: {}", o.id, why), "channel_id");
  };
  channel_spec c;
  // A channel stored before kinds other than webhook existed has no "kind": a webhook.
  auto kind_text = text(d, "kind", false, 16);
  auto kind = parse_channel_kind(kind_text && !kind_text->empty() ? *kind_text : std::string("webhook"));
  if (!kind) return damaged("unknown kind");
  c.kind = *kind;
  switch (c.kind) {
    case channel_kind::webhook: {
      auto url = text(d, "url", true, 2048);
      if (!url) return damaged("no url");
      c.url = *url;
      auto cred = text(d, "secret_credential_id", false, 64);
      if (cred) c.secret_credential_id = *cred;
      break;
    }
    case channel_kind::email: {
      auto* e = d.if_contains("email");
      if (!e || !e->is_object()) return damaged("no email section");
      const auto& eo = e->as_object();
      auto str = [&](const char* k) { auto* p = eo.if_contains(k); return p && p->is_string() ? std::string(p->as_string()) : std::string(); };
      c.email.host = str("host");
      c.email.from = str("from");
      c.email.username = str("username");
      if (auto* p = eo.if_contains("port"); p && p->is_int64() && p->as_int64() > 0 && p->as_int64() <= 65535)
        c.email.port = static_cast<std::uint16_t>(p->as_int64());
      if (auto* p = eo.if_contains("starttls"); p && p->is_bool()) c.email.starttls = p->as_bool();
      if (auto* p = eo.if_contains("to"); p && p->is_array())
        for (const auto& a : p->as_array())
          if (a.is_string()) c.email.to.emplace_back(a.as_string());
      if (c.email.host.empty() || c.email.from.empty() || c.email.to.empty()) return damaged("incomplete email section");
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams: {
      auto* s = d.if_contains(channel_kind_name(c.kind));
      if (s && s->is_object())
        if (auto* h = s->as_object().if_contains("webhook_host"); h && h->is_string()) c.webhook_host = std::string(h->as_string());
      if (o.sealed.empty()) return damaged("no sealed webhook_url");
      break;
    }
  }
  return c;
}

result<channel_secret> open_channel_secret(const kek& key, const store::catalog_object& o) {
  channel_secret s;
  if (o.sealed.empty()) return s;
  auto plain = open_sealed(key, o.sealed, aad_for(o, "secret"));
  if (!plain) return std::move(plain).error();
  boost::system::error_code ec;
  auto v = json::parse(*plain, ec);
  std::fill(plain->begin(), plain->end(), '\0');
  if (ec || !v.is_object()) return make_error(errc::store_failure, fmt::format("channel {}'s secret is damaged", o.id), "channel_id");
  auto get = [&](const char* k) {
    auto* p = v.as_object().if_contains(k);
    return p && p->is_string() ? std::string(p->as_string()) : std::string();
  };
  s.password = get("password");
  s.webhook_url = get("webhook_url");
  return s;
}

result<rule_spec> parse_rule_request(std::string_view body) {
  auto o = body_object(body, {"event", "channel_id", "template"});
  if (!o) return std::move(o).error();
  rule_spec r;
  auto ev = text(*o, "event", true, 64);
  if (!ev) return std::move(ev).error();
  const auto* def = find_event(*ev);
  if (!def) return bad("event", "event must be one of " + event_choices());
  r.event = *ev;
  auto ch = id_field(*o, "channel_id", true);
  if (!ch) return std::move(ch).error();
  r.channel_id = *ch;
  if (auto* t = o->if_contains("template"); t && !t->is_null()) {
    auto tpl = parse_template_override(*t, *def);
    if (!tpl) return std::move(tpl).error();
    json::object stored;
    if (!tpl->subject.empty()) stored["subject"] = tpl->subject;
    if (!tpl->body.empty()) stored["body"] = tpl->body;
    r.template_override = std::move(stored);
  }
  return r;
}

std::string rule_object_name(std::string_view event, std::string_view channel_id) {
  return fmt::format("{}{}", rule_name_prefix(event), channel_id);
}

std::string rule_name_prefix(std::string_view event) { return fmt::format("{}->", event); }

std::string rule_doc_json(const rule_spec& r) {
  json::object o{{"event", r.event}, {"channel_id", r.channel_id}};
  if (!r.template_override.is_null()) o["template"] = r.template_override;
  return json::serialize(o);
}

boost::json::object object_view(const store::catalog_object& o) {
  if (o.kind == store::kind_certificate) return certificate_view(o);
  if (o.kind == store::kind_credential) return credential_view(o);
  if (o.kind == store::kind_target) return target_view(o);
  if (o.kind == store::kind_domain) return domain_view(o);
  if (o.kind == store::kind_discovery_source) return discovery_source_view(o);
  if (o.kind == store::kind_discovered_certificate) return discovered_certificate_view(o);
  auto v = base_view(o);
  for (auto& [k, val] : parse_doc(o)) v[k] = val;
  // Whether a secret is stored (an email password, a Slack/Teams URL), never the secret.
  if (o.kind == store::kind_channel) v["secret_set"] = !o.sealed.empty();
  return v;
}

}  // namespace certfleet::distribution
