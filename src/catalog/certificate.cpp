// Certificates (catalog.hpp): the upload and version bodies, the stored document and its
// sealed key, the view, and the expiry plan.
#include "certfleet/catalog/catalog.hpp"

#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/catalog/kinds.hpp"

#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/delivery/pem.hpp"

#include <boost/asio/ip/address.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

namespace certfleet::catalog {

namespace json = boost::json;
using namespace body_fields;

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
  if (d.msca) {
    const auto& m = *d.msca;
    json::array sans;
    for (const auto& n : m.sans) sans.emplace_back(n);
    doc["msca"] = json::object{{"msca_ca_id", m.msca_ca_id},     {"template", m.template_name},
                               {"subject", m.subject},           {"sans", std::move(sans)},
                               {"key_type", m.key_type},         {"auto_renew", m.auto_renew},
                               {"request_id", m.request_id},     {"disposition", m.disposition},
                               {"disposition_message", m.disposition_message},
                               {"error_code", m.error_code},     {"last_error", m.last_error},
                               {"last_job_id", m.last_job_id},   {"polls", m.polls}};
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
  auto sealed = seal(key, c.key_pem, aad_for(o, sealed_key));
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
  if (auto* ms = d.if_contains("msca"); ms && ms->is_object()) {
    const auto& mo = ms->as_object();
    certificate_msca m;
    m.msca_ca_id = str(mo, "msca_ca_id");
    m.template_name = str(mo, "template");
    m.subject = str(mo, "subject");
    if (auto* ss = mo.if_contains("sans"); ss && ss->is_array())
      for (const auto& x : ss->as_array())
        if (x.is_string()) m.sans.emplace_back(x.as_string());
    m.key_type = str(mo, "key_type");
    if (auto* r = mo.if_contains("auto_renew"); r && r->is_bool()) m.auto_renew = r->as_bool();
    m.request_id = str(mo, "request_id");
    m.disposition = str(mo, "disposition");
    m.disposition_message = str(mo, "disposition_message");
    m.error_code = str(mo, "error_code");
    m.last_error = str(mo, "last_error");
    m.last_job_id = str(mo, "last_job_id");
    if (auto* n = mo.if_contains("polls"); n && n->is_int64()) m.polls = n->as_int64();
    c.msca = std::move(m);
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
  return open_sealed(key, o.sealed, aad_for(o, sealed_key));
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
  if (d->msca) {
    const auto& m = *d->msca;
    json::array sans;
    for (const auto& n : m.sans) sans.emplace_back(n);
    v["msca_ca_id"] = m.msca_ca_id;
    v["template"] = m.template_name;
    v["requested_subject"] = m.subject;
    v["requested_sans"] = std::move(sans);
    v["key_type"] = m.key_type;
    v["auto_renew"] = m.auto_renew;
    if (!m.last_error.empty()) v["last_error"] = m.last_error;
    v["last_job_id"] = certfleet::json::text_value(m.last_job_id);
    v["msca"] = json::object{{"request_id", certfleet::json::text_value(m.request_id)},
                             {"disposition", certfleet::json::text_value(m.disposition)},
                             {"disposition_message", certfleet::json::text_value(m.disposition_message)},
                             {"error_code", certfleet::json::text_value(m.error_code)},
                             {"polls", m.polls}};
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

}  // namespace certfleet::catalog
