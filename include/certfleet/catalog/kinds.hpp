#pragma once
// A catalog object kind as the service serves it: its API view, what deleting an object of it
// must respect, and what it seals. Each module lists the kinds it owns (catalog: certificates, versions, credentials,
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

// What a kind seals: the word its envelopes' additional data ends in ("<kind>:<id>:<what>",
// body_fields::aad_for), so an envelope opens only on the object it was sealed for.
inline constexpr std::string_view sealed_key = "key";        // a private key
inline constexpr std::string_view sealed_secret = "secret";  // a password, token or secret document

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
  // What its objects' `sealed` column holds (sealed_key or sealed_secret); empty: nothing. KEK
  // rotation re-seals exactly the kinds whose rows say so (DESIGN §11).
  std::string_view sealed = {};
};

// The row of `name` among `kinds` when that kind seals something; nullptr otherwise.
const kind* find_sealed(std::span<const kind> kinds, std::string_view name) noexcept;

// The kinds this module owns: certificate, certificate_version, credential, target.
std::span<const kind> kinds() noexcept;

}  // namespace certfleet::catalog
