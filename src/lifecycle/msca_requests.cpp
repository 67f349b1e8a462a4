// AD CS requests (msca_catalog.hpp): the enroll body and the certificate it makes, the record of
// a request the CA holds (its key sealed), the msca jobs' payloads and keys.
#include "certfleet/lifecycle/msca_catalog.hpp"

#include "lifecycle/acme_catalog_common.hpp"
#include "lifecycle/msca_catalog_common.hpp"

#include "certfleet/acme/key_type.hpp"
#include "certfleet/catalog/body_fields.hpp"
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
using namespace detail::msca_doc;

namespace {
constexpr std::size_t max_sans = 100;
}  // namespace

// ---- enrollment ---------------------------------------------------------------------------

result<msca_enroll_request> parse_msca_enroll_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name", "msca_ca_id", "template", "subject", "sans", "key_type", "auto_renew"}); !ok)
    return std::move(ok).error();
  msca_enroll_request out;
  auto name = name_field(*r);
  if (!name) return std::move(name).error();
  out.name = std::move(*name);
  auto ca = id_field(*r, "msca_ca_id");
  if (!ca) return std::move(ca).error();
  out.msca.msca_ca_id = std::move(*ca);
  auto tmpl = template_name_field(*r, "template");
  if (!tmpl) return std::move(tmpl).error();
  out.msca.template_name = std::move(*tmpl);
  auto subject = r->optional_string("subject");
  if (!subject) return std::move(subject).error();
  if (*subject) {
    if ((*subject)->size() > 1024) return bad("subject", "subject must be at most 1024 characters");
    out.msca.subject = std::move(**subject);
  }
  auto raw = r->optional_raw("sans", false);
  if (!raw) return std::move(raw).error();
  if (*raw) {
    auto v = json::parse(**raw);
    if (!v.is_array()) return bad("sans", "sans must be a list of DNS names");
    if (v.as_array().size() > max_sans) return bad("sans", fmt::format("sans may list at most {} names", max_sans));
    for (std::size_t i = 0; i < v.as_array().size(); ++i) {
      const auto& x = v.as_array()[i];
      if (!x.is_string()) return bad(fmt::format("sans[{}]", i), fmt::format("sans[{}] must be a string", i));
      std::string d(x.as_string());
      std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      out.msca.sans.push_back(std::move(d));
    }
  }
  if (out.msca.subject.empty() && out.msca.sans.empty())
    return bad("subject", "subject or sans is required: what the certificate names (e.g. subject "
                          "\"CN=web01.corp.example\", sans [\"web01.corp.example\"])");
  // The subject's and names' syntax: the CSR builder's own checks, with a throwaway template.
  auto kt = r->optional_string("key_type");
  if (!kt) return std::move(kt).error();
  if (*kt) {
    if (!acme::parse_key_type(**kt)) return bad("key_type", fmt::format("key_type must be one of {}", acme::key_type_choices()));
    out.msca.key_type = std::move(**kt);
  }
  auto ar = r->optional_bool("auto_renew");
  if (!ar) return std::move(ar).error();
  out.msca.auto_renew = ar->value_or(true);
  return out;
}

store::catalog_object make_unissued_msca_certificate(const msca_enroll_request& r, std::string id,
                                                     std::string project_id, time_ms now) {
  catalog::certificate_doc d;
  d.source = "msca";
  d.subject = r.msca.subject;
  d.sans = r.msca.sans;
  d.msca = r.msca;
  return detail::unissued_certificate(std::move(d), r.name, r.msca.msca_ca_id, std::move(id), std::move(project_id), now);
}

result<void> record_msca_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id) {
  return detail::record_last_job(tx, project_id, certificate_id, job_id);
}

// ---- a request held by the CA -------------------------------------------------------------

std::string msca_request_doc_json(const msca_request_doc& d) {
  return json::serialize(json::object{{"certificate_id", d.certificate_id},
                                      {"request_id", d.request_id},
                                      {"template", d.template_name},
                                      {"key_type", d.key_type},
                                      {"renewal", d.renewal},
                                      {"from_version", d.from_version},
                                      {"submitted_by", d.submitted_by},
                                      {"submitted_at", d.submitted_at},
                                      {"polls", d.polls},
                                      {"status", d.status},
                                      {"reason", d.reason},
                                      {"disposition_message", d.disposition_message},
                                      {"leaf_pem", d.leaf_pem},
                                      {"chain_pem", d.chain_pem}});
}

result<msca_request_doc> parse_msca_request_doc(const store::catalog_object& o) {
  auto d = parse_object(o.doc);
  msca_request_doc r;
  r.certificate_id = str(d, "certificate_id");
  r.request_id = str(d, "request_id");
  if (r.certificate_id.empty() || r.request_id.empty())
    return make_error(errc::store_failure, fmt::format("msca_request {} names no certificate or request id", o.id), "id");
  r.template_name = str(d, "template");
  r.key_type = str(d, "key_type");
  r.renewal = boolean(d, "renewal");
  r.from_version = num(d, "from_version");
  r.submitted_by = str(d, "submitted_by");
  r.submitted_at = num(d, "submitted_at");
  r.polls = num(d, "polls");
  if (auto s = str(d, "status"); !s.empty()) r.status = std::move(s);
  r.reason = str(d, "reason");
  r.disposition_message = str(d, "disposition_message");
  r.leaf_pem = str(d, "leaf_pem");
  r.chain_pem = str(d, "chain_pem");
  return r;
}

result<store::catalog_object> make_msca_request_object(const msca_request_doc& d, std::string_view key_pem,
                                                       const kek& key, std::string id, std::string project_id,
                                                       time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_msca_request);
  o.name = fmt::format("{}:{}", d.certificate_id, d.request_id);
  o.doc = msca_request_doc_json(d);
  o.ref_id = d.certificate_id;
  o.created_at = now;
  auto sealed = seal(key, key_pem, catalog::body_fields::aad_for(o, catalog::sealed_key));
  if (!sealed) return std::move(sealed).error();
  o.sealed = std::move(*sealed);
  return o;
}

result<std::string> open_msca_request_key(const kek& key, const store::catalog_object& o) {
  return open_sealed(key, o.sealed, catalog::body_fields::aad_for(o, catalog::sealed_key));
}

// ---- payloads and keys ----------------------------------------------------------------------

std::string msca_poll_payload(const msca_poll_target& t) {
  return json::serialize(json::object{{"certificate_id", t.certificate_id}, {"request_id", t.request_id}, {"n", t.n}});
}

result<msca_poll_target> parse_msca_poll_payload(std::string_view payload) {
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"certificate_id", "request_id", "n"}); !ok) return std::move(ok).error();
  msca_poll_target t;
  auto id = r->required_string("certificate_id");
  if (!id) return std::move(id).error();
  auto req = r->required_string("request_id");
  if (!req) return std::move(req).error();
  if (req->empty() || req->size() > 64 || !std::all_of(req->begin(), req->end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad("payload.request_id", "payload.request_id must be the CA's decimal request id");
  auto n = r->optional_int("n");
  if (!n) return std::move(n).error();
  t.certificate_id = std::move(*id);
  t.request_id = std::move(*req);
  t.n = n->value_or(1);
  if (t.n < 1 || t.n > 1'000'000) return bad("payload.n", "payload.n must be 1 to 1000000");
  return t;
}

std::string msca_poll_key(const msca_poll_target& t) {
  return fmt::format("msca_poll:{}:{}:{}", t.certificate_id, t.request_id, t.n);
}

std::int64_t msca_poll_delay_s(std::int64_t n, std::int64_t first_s, std::int64_t cap_s) noexcept {
  if (first_s < 1) first_s = 1;
  if (cap_s < first_s) cap_s = first_s;
  std::int64_t d = first_s;
  for (std::int64_t i = 1; i < n && d < cap_s; ++i) d *= 2;
  return std::min(d, cap_s);
}

}  // namespace certfleet::lifecycle
