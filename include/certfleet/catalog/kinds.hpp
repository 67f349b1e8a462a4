#pragma once
// A catalog object kind as the service serves it: its API view and what deleting an object of it
// must respect. Each module lists the kinds it owns (catalog: certificates, versions, credentials,
// targets; notify: channels, rules; lifecycle: ACME accounts, DNS providers; checks: domains,
// discovery sources, discovered certificates) and the service joins the lists into the one table
// its get/list/remove read (service/kinds.hpp). A new kind is one row in its owner's list plus
// its file, not branches in several functions.
#include <boost/json/object.hpp>

#include <span>
#include <string_view>

#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

namespace certfleet::catalog {

struct kind {
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

// The kinds this module owns: certificate, certificate_version, credential, target.
std::span<const kind> kinds() noexcept;

}  // namespace certfleet::catalog
