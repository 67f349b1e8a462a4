// The table of catalog object kinds (catalog_kinds.hpp) and the delete rules that are more than
// "refuse while referenced".
#include "certfleet/distribution/catalog_kinds.hpp"

#include <fmt/format.h>

#include <array>

#include "certfleet/distribution/catalog.hpp"
#include "certfleet/distribution/checks.hpp"     // domain_view
#include "certfleet/distribution/discovery.hpp"  // discovery_source_view, discovered_certificate_view

namespace certfleet::distribution {

namespace {

// Certificates name their DNS provider in their document, not in ref_id: read them (a project
// has few).
result<void> provider_not_in_use(store::catalog_tx& tx, const store::catalog_object& o) {
  for (int page = 1;; ++page) {
    auto certs = tx.list_objects(o.project_id, store::kind_certificate, page, 200);
    if (!certs) return std::move(certs).error();
    for (const auto& c : certs->items) {
      auto d = parse_certificate_doc(c, true);
      if (d && d->acme && d->acme->dns_provider_id == o.id)
        return make_error(errc::conflict,
                          fmt::format("dns_provider {} is used by certificate {}; delete or change it first", o.id, c.id),
                          "id");
    }
    if (certs->items.size() < 200) break;
  }
  return {};
}

// A certificate goes when no distribution names it and no issue or renewal of it is still to run
// (that job would fail on a certificate that is gone: a dead job and its alert for nothing); its
// earlier versions go with it.
result<void> certificate_may_go(store::catalog_tx& tx, const store::catalog_object& o) {
  const auto& id = o.id;
  auto d = tx.distributions_using(o.project_id, id);
  if (!d) return std::move(d).error();
  if (!d->empty())
    return make_error(errc::conflict, fmt::format("certificate {} is used by distribution {}", id, d->front()), "id");
  if (auto doc = parse_certificate_doc(o, true); doc && doc->acme && !doc->acme->last_job_id.empty()) {
    auto j = tx.get_job(doc->acme->last_job_id);
    if (!j && !j.error().is(errc::not_found)) return std::move(j).error();
    using store::job_status;
    if (j && (j->status == job_status::pending || j->status == job_status::active || j->status == job_status::failed))
      return make_error(errc::conflict,
                        fmt::format("certificate {} has its {} job {} {}: cancel it (POST …/jobs/{}/cancel) or let "
                                    "it end, then delete",
                                    id, j->type, j->id,
                                    j->status == job_status::failed ? std::string_view("waiting to retry")
                                                                     : store::to_string(j->status),
                                    j->id),
                        "id");
  }
  auto versions = tx.objects_referencing(o.project_id, store::kind_certificate_version, id);
  if (!versions) return std::move(versions).error();
  for (const auto& v : *versions)
    if (auto del = tx.delete_object(o.project_id, store::kind_certificate_version, v.id); !del) return del;
  return {};
}

constexpr std::array<std::string_view, 2> credential_users{store::kind_target, store::kind_channel};
constexpr std::array<std::string_view, 1> channel_users{store::kind_rule};
constexpr std::array<std::string_view, 1> account_users{store::kind_certificate};

const std::array<catalog_kind, 11> kinds{{
    {store::kind_certificate, certificate_view, {}, certificate_may_go},
    {store::kind_certificate_version, nullptr, {}, nullptr},
    {store::kind_credential, credential_view, credential_users, nullptr},
    // A target may go while distributions name it: their next run skips it.
    {store::kind_target, target_view, {}, nullptr},
    {store::kind_channel, channel_view, channel_users, nullptr},
    {store::kind_rule, nullptr, {}, nullptr},
    {store::kind_acme_account, nullptr, account_users, nullptr},
    {store::kind_dns_provider, nullptr, {}, provider_not_in_use},
    {store::kind_domain, domain_view, {}, nullptr},
    {store::kind_discovery_source, discovery_source_view, {}, nullptr},
    {store::kind_discovered_certificate, discovered_certificate_view, {}, nullptr},
}};

}  // namespace

std::span<const catalog_kind> catalog_kinds() noexcept { return kinds; }

const catalog_kind* find_catalog_kind(std::string_view name) noexcept {
  for (const auto& k : kinds)
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace certfleet::distribution
