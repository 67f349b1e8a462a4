// The table of kinds (kinds.hpp), joined once from the owners' lists.
#include "certfleet/service/kinds.hpp"

#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/notify/channel.hpp"

#include <vector>

namespace certfleet::service {

std::span<const catalog::kind> catalog_kinds() {
  static const std::vector<catalog::kind> all = [] {
    std::vector<catalog::kind> v;
    for (auto list : {catalog::kinds(), notify::kinds(), lifecycle::kinds(), lifecycle::msca_kinds(), checks::kinds()})
      v.insert(v.end(), list.begin(), list.end());
    return v;
  }();
  return all;
}

const catalog::kind* find_catalog_kind(std::string_view name) {
  for (const auto& k : catalog_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

boost::json::object object_view(const store::catalog_object& o) {
  if (const auto* k = find_catalog_kind(o.kind); k && k->view) return k->view(o);
  return catalog::body_fields::document_view(o);
}

}  // namespace certfleet::service
