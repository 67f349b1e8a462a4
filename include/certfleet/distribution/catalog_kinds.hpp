#pragma once
// The one table of catalog object kinds: for each kind its API view and what deleting an object
// of it must respect. The service's get/list/remove and object_view read it, so a kind's view
// and delete rules are one row (catalog_kinds.cpp) plus its file (catalog_<kind>.cpp), not
// branches in several functions.
#include <boost/json/object.hpp>

#include <span>
#include <string_view>

#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

namespace certfleet::distribution {

struct catalog_kind {
  std::string_view name;  // store::kind_*
  // The object as the API shows it (never a secret); nullptr: its stored document with id, name
  // and created_at.
  boost::json::object (*view)(const store::catalog_object& o) = nullptr;
  // The kinds whose objects name an object of this kind in their ref_id: a delete is refused
  // (409, field "id") while one does.
  std::span<const std::string_view> used_by = {};
  // What else a delete of this kind checks, or removes with it, in the same transaction, before
  // the object goes; nullptr: nothing.
  result<void> (*before_delete)(store::catalog_tx& tx, const store::catalog_object& o) = nullptr;
};

// Every kind the catalog routes serve, one row each.
std::span<const catalog_kind> catalog_kinds() noexcept;
// The row of `name`, or nullptr.
const catalog_kind* find_catalog_kind(std::string_view name) noexcept;

}  // namespace certfleet::distribution
