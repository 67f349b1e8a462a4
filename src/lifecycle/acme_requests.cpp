// The ACME certificate requests (acme_catalog.hpp): issue, bulk renew and revoke bodies, the
// unissued certificate an issue request stores, and the ACME jobs' payloads and idempotency keys.
#include "certfleet/lifecycle/acme_catalog.hpp"

#include "lifecycle/acme_catalog_common.hpp"
#include "certfleet/catalog/id_list.hpp"

#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/key_type.hpp"
#include "certfleet/acme/keys.hpp"
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

result<acme_issue_request> parse_acme_issue_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name", "domains", "acme_account_id", "dns_provider_id", "key_type", "profile", "auto_renew"}); !ok)
    return std::move(ok).error();
  acme_issue_request out;
  auto name = name_field(*r);
  if (!name) return std::move(name).error();
  out.name = std::move(*name);
  auto raw = r->optional_raw("domains", false);
  if (!raw) return std::move(raw).error();
  if (!*raw) return bad("domains", "domains is required: the DNS names of the certificate, e.g. [\"www.example.com\"]");
  auto v = json::parse(**raw);
  if (!v.is_array()) return bad("domains", "domains must be a list of DNS names");
  for (std::size_t i = 0; i < v.as_array().size(); ++i) {
    const auto& x = v.as_array()[i];
    if (!x.is_string()) return bad(fmt::format("domains[{}]", i), fmt::format("domains[{}] must be a string", i));
    std::string d(x.as_string());
    std::transform(d.begin(), d.end(), d.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.acme.domains.push_back(std::move(d));
  }
  if (auto ok = acme::check_domains(out.acme.domains); !ok) return std::move(ok).error();
  auto account = id_field(*r, "acme_account_id");
  if (!account) return std::move(account).error();
  out.acme.acme_account_id = std::move(*account);
  auto provider = id_field(*r, "dns_provider_id");
  if (!provider) return std::move(provider).error();
  out.acme.dns_provider_id = std::move(*provider);
  auto kt = r->optional_string("key_type");
  if (!kt) return std::move(kt).error();
  auto type = acme::default_key_type;
  if (*kt) {
    auto parsed = acme::parse_key_type(**kt);
    if (!parsed) return bad("key_type", fmt::format("key_type must be one of {}", acme::key_type_choices()));
    type = *parsed;
  }
  out.acme.key_type = std::string(acme::key_type_name(type));
  auto profile = r->optional_string("profile");
  if (!profile) return std::move(profile).error();
  if (*profile) {
    if ((*profile)->size() > 64 || !printable(**profile))
      return bad("profile", "profile must be a profile name from the CA's directory (meta.profiles)");
    out.acme.profile = std::move(**profile);
  }
  auto renew = r->optional_bool("auto_renew");
  if (!renew) return std::move(renew).error();
  out.acme.auto_renew = renew->value_or(true);
  return out;
}

result<bulk_renew_request> parse_bulk_renew_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"certificate_ids", "expiring_within_days"}); !ok) return std::move(ok).error();
  bulk_renew_request out;
  auto days = r->optional_int("expiring_within_days");
  if (!days) return std::move(days).error();
  auto raw = r->optional_raw("certificate_ids", false);
  if (!raw) return std::move(raw).error();
  if (*days && *raw)
    return bad("body", "give either certificate_ids or expiring_within_days, not both");
  if (*days) {
    if (**days < 1 || **days > 365)
      return bad("expiring_within_days", "expiring_within_days must be a whole number of days from 1 to 365");
    out.expiring_within_days = static_cast<int>(**days);
    return out;
  }
  if (!*raw)
    return bad("body", "give certificate_ids (a list of certificate ids) or expiring_within_days (1 to 365)");
  auto ids = catalog::parse_id_list(**raw, "certificate_ids", bulk_renew_max, "certificate");
  if (!ids) return std::move(ids).error();
  out.certificate_ids = std::move(*ids);
  return out;
}

result<void> record_acme_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id) {
  return detail::record_last_job(tx, project_id, certificate_id, job_id);
}

namespace detail {

result<void> record_last_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id) {
  auto cert = tx.get_object(project_id, store::kind_certificate, certificate_id);
  if (!cert) {
    if (cert.error().is(errc::not_found)) return {};
    return std::move(cert).error();
  }
  auto doc = catalog::parse_certificate_doc(*cert, true);
  if (!doc) return {};
  std::string* last = doc->acme ? &doc->acme->last_job_id : doc->msca ? &doc->msca->last_job_id : nullptr;
  if (!last || *last == job_id) return {};
  *last = job_id;
  return tx.update_object_doc(certificate_id, catalog::certificate_doc_json(*doc));
}

store::catalog_object unissued_certificate(catalog::certificate_doc d, std::string name, std::string ref_id,
                                           std::string id, std::string project_id, time_ms now) {
  d.version = 0;
  d.version_created_at = 0;
  d.status = "pending";
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_certificate);
  o.name = std::move(name);
  o.doc = catalog::certificate_doc_json(d);
  o.ref_id = std::move(ref_id);
  o.created_at = now;
  return o;
}

}  // namespace detail

store::catalog_object make_unissued_acme_certificate(const acme_issue_request& r, std::string id,
                                                     std::string project_id, time_ms now) {
  catalog::certificate_doc d;
  d.source = "acme";
  d.sans = r.acme.domains;
  d.acme = r.acme;
  return detail::unissued_certificate(std::move(d), r.name, r.acme.acme_account_id, std::move(id), std::move(project_id), now);
}

namespace {

// `reason` of a revoke body or payload: a reason name or code; absent or null: none.
result<std::optional<int>> reason_field(const certfleet::json::object_reader& r, std::string field) {
  auto raw = r.optional_raw("reason", false);
  if (!raw) return bad(field, std::move(raw).error().message);
  if (!*raw) return std::optional<int>{};
  auto refuse = [&] {
    return bad(field, fmt::format("{} must be an RFC 5280 reason name ({}) or its code (0-10, 7 is unused)", field,
                                  acme::revocation_reason_choices()));
  };
  boost::system::error_code ec;
  auto v = json::parse(**raw, ec);
  if (ec) return refuse();
  if (v.is_int64()) {
    auto code = v.as_int64();
    if (code < 0 || code > 10 || acme::revocation_reason_name(static_cast<int>(code)).empty()) return refuse();
    return std::optional<int>(static_cast<int>(code));
  }
  if (v.is_string()) {
    auto code = acme::revocation_reason_code(std::string_view(v.as_string()));
    if (!code) return refuse();
    return std::optional<int>(*code);
  }
  return refuse();
}

}  // namespace

result<revoke_request> parse_revoke_request(std::string_view body) {
  revoke_request out;
  // No body at all: a revocation without a reason.
  if (std::all_of(body.begin(), body.end(), [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }))
    return out;
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"reason"}); !ok) return std::move(ok).error();
  auto reason = reason_field(*r, "reason");
  if (!reason) return std::move(reason).error();
  out.reason = *reason;
  return out;
}

std::string revoke_job_payload(const revoke_job& j) {
  json::object p{{"certificate_id", j.certificate_id}};
  if (!j.serial.empty()) p["serial"] = j.serial;
  if (j.reason) p["reason"] = *j.reason;
  return json::serialize(p);
}

result<revoke_job> parse_revoke_job_payload(std::string_view payload) {
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"certificate_id", "serial", "reason"}); !ok) return std::move(ok).error();
  revoke_job out;
  auto id = id_field(*r, "certificate_id");
  if (!id) return nested(std::move(id).error(), "payload");
  out.certificate_id = std::move(*id);
  auto serial = r->optional_string("serial");
  if (!serial) return nested(std::move(serial).error(), "payload");
  if (*serial) {
    if ((*serial)->empty() || (*serial)->size() > 128 ||
        !std::all_of((*serial)->begin(), (*serial)->end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
      return bad("payload.serial", "payload.serial must be the certificate's serial number in hex");
    out.serial = std::move(**serial);
  }
  auto reason = reason_field(*r, "payload.reason");
  if (!reason) return std::move(reason).error();
  out.reason = *reason;
  return out;
}

std::string issue_job_key(std::string_view certificate_id) { return fmt::format("issue:{}", certificate_id); }

std::string revoke_job_key(std::string_view certificate_id, std::int64_t version) {
  return fmt::format("revoke:{}:{}", certificate_id, version);
}

std::string cleanup_dns_payload(std::string_view job_id, std::int64_t fence) {
  return json::serialize(json::object{{"job_id", job_id}, {"fence", fence}});
}

result<cleanup_dns_target> parse_cleanup_dns_payload(std::string_view payload) {
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"job_id", "fence"}); !ok) return std::move(ok).error();
  cleanup_dns_target out;
  auto id = id_field(*r, "job_id");
  if (!id) return nested(std::move(id).error(), "payload");
  out.job_id = std::move(*id);
  auto fence = r->optional_int("fence");
  if (!fence) return nested(std::move(fence).error(), "payload");
  if (!*fence || **fence < 0) return bad("payload.fence", "payload.fence must be the attempt's fence, an integer >= 0");
  out.fence = **fence;
  return out;
}

std::string cleanup_dns_key(std::string_view job_id, std::int64_t fence) {
  return fmt::format("cleanup_dns:{}:{}", job_id, fence);
}

std::string validate_dns_payload(std::string_view certificate_id, std::string_view order_job_id) {
  return json::serialize(json::object{{"certificate_id", certificate_id}, {"order_job_id", order_job_id}});
}

result<validate_dns_target> parse_validate_dns_payload(std::string_view payload) {
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"certificate_id", "order_job_id"}); !ok) return std::move(ok).error();
  validate_dns_target out;
  auto cert = id_field(*r, "certificate_id");
  if (!cert) return nested(std::move(cert).error(), "payload");
  auto job = id_field(*r, "order_job_id");
  if (!job) return nested(std::move(job).error(), "payload");
  out.certificate_id = std::move(*cert);
  out.order_job_id = std::move(*job);
  return out;
}

std::string validate_dns_key(std::string_view order_job_id, std::int64_t n) {
  return fmt::format("validate-dns:{}:{}", order_job_id, n);
}

std::string renew_job_key(std::string_view certificate_id, time_ms not_after) {
  return fmt::format("renew:{}:{}", certificate_id, not_after / 1000);
}

}  // namespace certfleet::lifecycle
