// The ACME catalog bodies (acme-accounts, dns-providers, certificates/issue, certificates/{id}/
// revoke, certificates/renew) and the revoke_certificate / cleanup_dns / validate_manual_dns payloads: any input gets a value or an error
// naming a field, never a crash; an accepted body reads back through the stored-document (or
// payload) parser unchanged.
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

using namespace certfleet;
using namespace certfleet::lifecycle;

namespace {
// How many string values (not keys), at any depth, are exactly `text`.
std::size_t values_equal_to(const boost::json::value& v, std::string_view text) {
  if (v.is_string()) return v.get_string() == text ? 1 : 0;
  std::size_t n = 0;
  if (v.is_array())
    for (const auto& e : v.get_array()) n += values_equal_to(e, text);
  if (v.is_object())
    for (const auto& [k, e] : v.get_object()) n += values_equal_to(e, text);
  return n;
}

void replace_values(boost::json::value& v, std::string_view from, std::string_view to) {
  if (v.is_string() && v.get_string() == from) v = boost::json::string(to);
  if (v.is_array())
    for (auto& e : v.get_array()) replace_values(e, from, to);
  if (v.is_object())
    for (auto& [k, e] : v.get_object()) replace_values(e, from, to);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto must_name_field = [](const error& e) {
    if (e.field.empty()) std::abort();
  };
  switch (data[0] % 6) {
    case 0: {
      auto a = lifecycle::parse_acme_account_request(in);
      if (!a) {
        must_name_field(a.error());
        break;
      }
      store::catalog_object o;
      o.kind = "acme_account";
      o.doc = lifecycle::acme_account_doc_json(a->spec);
      auto back = lifecycle::parse_acme_account_doc(o);
      if (!back || back->directory_url != a->spec.directory_url || back->contact != a->spec.contact ||
          back->eab_kid != a->spec.eab_kid || !back->terms_agreed)
        std::abort();
      break;
    }
    case 1: {
      auto p = lifecycle::parse_dns_provider_request(in);
      if (!p) {
        must_name_field(p.error());
        break;
      }
      store::catalog_object o;
      o.kind = "dns_provider";
      o.doc = lifecycle::dns_provider_doc_json(p->spec);
      auto back = lifecycle::parse_dns_provider_doc(o);
      if (!back || back->kind != p->spec.kind || back->server != p->spec.server || back->zone != p->spec.zone ||
          back->tsig_key_name != p->spec.tsig_key_name || back->check_server != p->spec.check_server ||
          back->program != p->spec.program || back->env_names != p->spec.env_names ||
          back->endpoint != p->spec.endpoint || back->username != p->spec.username || back->api_url != p->spec.api_url ||
          (back->through_api() && (back->timeout_s != p->spec.timeout_s ||
                                   back->check_propagation != p->spec.check_propagation)))
        std::abort();
      // A secret never reaches the stored document: the same body with the secret's value
      // replaced (same length) stores the same document. Differential, because a secret may
      // legitimately be a substring of what the client wrote elsewhere or of our own defaults
      // ("localhost", "check_propagation"). Skipped where the secret is not exactly one string
      // value of the body (also in a public member) or the replacement is refused.
      auto input = json::parse_value(in, "body", 64);
      auto stores_the_same_without = [&](std::string_view secret) {
        if (!input || secret.empty() || values_equal_to(*input, secret) != 1) return true;
        std::string other(secret.size(), secret.front() == 'x' ? 'y' : 'x');
        boost::json::value changed = *input;
        replace_values(changed, secret, other);
        auto again = lifecycle::parse_dns_provider_request(boost::json::serialize(changed));
        return !again || lifecycle::dns_provider_doc_json(again->spec) == o.doc;
      };
      for (const auto& [k, v] : p->secrets)
        if (!stores_the_same_without(v)) std::abort();
      if (!stores_the_same_without(p->tsig_secret)) std::abort();
      break;
    }
    case 2: {
      auto r = lifecycle::parse_acme_issue_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      auto o = lifecycle::make_unissued_acme_certificate(*r, "0123456789abcdef01234567", "p", 1);
      auto back = catalog::parse_certificate_doc(o, true);
      if (!back || !back->acme || back->acme->domains != r->acme.domains || back->version != 0 ||
          back->acme->acme_account_id != r->acme.acme_account_id)
        std::abort();
      break;
    }
    case 3: {
      auto r = lifecycle::parse_revoke_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      if (r->reason && (*r->reason < 0 || *r->reason > 10 || *r->reason == 7)) std::abort();
      auto back = lifecycle::parse_revoke_job_payload(lifecycle::revoke_job_payload(lifecycle::revoke_job{"0123456789abcdef01234567", "0a", r->reason}));
      if (!back || back->reason != r->reason || back->serial != "0a") std::abort();
      break;
    }
    case 4: {
      auto p = lifecycle::parse_revoke_job_payload(in);
      if (p) {
        auto back = lifecycle::parse_revoke_job_payload(lifecycle::revoke_job_payload(*p));
        if (!back || back->certificate_id != p->certificate_id || back->serial != p->serial || back->reason != p->reason)
          std::abort();
      } else {
        must_name_field(p.error());
      }
      auto c = lifecycle::parse_cleanup_dns_payload(in);
      if (c) {
        auto back = lifecycle::parse_cleanup_dns_payload(lifecycle::cleanup_dns_payload(c->job_id, c->fence));
        if (!back || back->job_id != c->job_id || back->fence != c->fence) std::abort();
      } else {
        must_name_field(c.error());
      }
      auto v = lifecycle::parse_validate_dns_payload(in);
      if (v) {
        auto back = lifecycle::parse_validate_dns_payload(lifecycle::validate_dns_payload(v->certificate_id, v->order_job_id));
        if (!back || back->certificate_id != v->certificate_id || back->order_job_id != v->order_job_id) std::abort();
      } else {
        must_name_field(v.error());
      }
      break;
    }
    case 5: {
      // POST …/certificates/renew: exactly one selector, within its bounds.
      auto r = lifecycle::parse_bulk_renew_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      if (r->expiring_within_days != 0) {
        if (r->expiring_within_days < 1 || r->expiring_within_days > 365 || !r->certificate_ids.empty()) std::abort();
        break;
      }
      const auto& ids = r->certificate_ids;
      if (ids.empty() || ids.size() > lifecycle::bulk_renew_max) std::abort();
      for (std::size_t i = 0; i < ids.size(); ++i) {
        if (!is_object_id(ids[i])) std::abort();
        for (std::size_t k = 0; k < i; ++k)
          if (ids[k] == ids[i]) std::abort();
      }
      break;
    }
  }
  return 0;
}
