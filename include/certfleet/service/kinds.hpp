#pragma once
// The one table of catalog object kinds the service serves: each module's own list (catalog,
// notify, lifecycle, checks) joined, in that order. get/list/remove and object_view read it.
#include "certfleet/catalog/kinds.hpp"

#include <boost/json/object.hpp>

#include <span>
#include <string_view>

namespace certfleet::service {

// Every kind the catalog routes serve, one row each.
std::span<const catalog::kind> catalog_kinds();
// The row of `name`, or nullptr.
const catalog::kind* find_catalog_kind(std::string_view name);

// The API view of any object kind (never a secret): its row's view, or its stored document with
// id, name and created_at.
boost::json::object object_view(const store::catalog_object& o);

}  // namespace certfleet::service
