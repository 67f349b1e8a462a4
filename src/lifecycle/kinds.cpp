// The catalog kinds the certificate lifecycle owns (acme_catalog.hpp): ACME accounts and DNS
// providers, with a provider's delete rule.
#include "certfleet/lifecycle/acme_catalog.hpp"

#include <fmt/format.h>

#include <array>

#include "certfleet/catalog/catalog.hpp"

namespace certfleet::lifecycle {

namespace {

// Certificates name their DNS provider in their document, not in ref_id: read them (a project
// has few).
result<void> provider_not_in_use(store::catalog_tx& tx, const store::catalog_object& o) {
  for (int page = 1;; ++page) {
    auto certs = tx.list_objects(o.project_id, store::kind_certificate, page, 200);
    if (!certs) return std::move(certs).error();
    for (const auto& c : certs->items) {
      auto d = catalog::parse_certificate_doc(c, true);
      if (d && d->acme && d->acme->dns_provider_id == o.id)
        return make_error(errc::conflict,
                          fmt::format("dns_provider {} is used by certificate {}; delete or change it first", o.id, c.id),
                          "id");
    }
    if (certs->items.size() < 200) break;
  }
  return {};
}

constexpr std::array<std::string_view, 1> account_users{store::kind_certificate};
const std::array<catalog::kind, 2> lifecycle_kinds{{
    {store::kind_acme_account, nullptr, account_users, nullptr, catalog::sealed_secret},
    {store::kind_dns_provider, nullptr, {}, provider_not_in_use, catalog::sealed_secret},
}};

}  // namespace

std::span<const catalog::kind> kinds() noexcept { return lifecycle_kinds; }

}  // namespace certfleet::lifecycle
