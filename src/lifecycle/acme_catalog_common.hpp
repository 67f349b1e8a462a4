#pragma once
// The readers the ACME kinds' bodies share (private to src/lifecycle): acme_catalog.cpp and
// acme_requests.cpp. `bad` is the catalog's (body_fields.hpp).
#include <string>
#include <string_view>

#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/catalog/body_fields.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/store/catalog.hpp"

namespace certfleet::lifecycle::detail {

using catalog::body_fields::bad;

// A nested reader's error names its member inside the outer one ("eab.kid"). (object_reader
// already names its fields after the document it was given: those stay.)
error nested(error e, std::string_view prefix);
// `name`: required, not empty, at most max_name_length, no control characters.
result<std::string> name_field(const certfleet::json::object_reader& r);
// No spaces or control characters.
bool printable(std::string_view s);
// A 24-hex catalog id, as the routes use.
result<std::string> id_field(const certfleet::json::object_reader& r, std::string_view key);

// The certificate of an issuance or enrollment not done yet (ACME and AD CS): `d` with version 0
// and status "pending", no key; ref_id the account or CA it will come from, which therefore
// cannot be deleted while it is used.
store::catalog_object unissued_certificate(catalog::certificate_doc d, std::string name, std::string ref_id,
                                           std::string id, std::string project_id, time_ms now);
// Notes `job_id` as the certificate's last lifecycle job (its ACME or AD CS `last_job_id`) in the
// transaction that enqueued it; a certificate deleted meanwhile is no error.
result<void> record_last_job(store::catalog_tx& tx, const std::string& project_id, const std::string& certificate_id,
                             const std::string& job_id);

}  // namespace certfleet::lifecycle::detail
