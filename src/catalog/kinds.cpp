// The catalog's own kinds (kinds.hpp) and the delete rule of a certificate.
#include "certfleet/catalog/kinds.hpp"

#include <fmt/format.h>

#include <array>

#include "certfleet/catalog/catalog.hpp"

namespace certfleet::catalog {

namespace {

// A certificate goes when no distribution names it and no issue or renewal of it is still to run
// (that job would fail on a certificate that is gone: a dead job and its alert for nothing); its
// earlier versions go with it.
result<void> certificate_may_go(store::catalog_tx& tx, const store::catalog_object& o) {
  const auto& id = o.id;
  auto d = tx.distributions_using(o.project_id, id);
  if (!d) return std::move(d).error();
  if (!d->empty())
    return make_error(errc::conflict, fmt::format("certificate {} is used by distribution {}", id, d->front()), "id");
  auto doc = parse_certificate_doc(o, true);
  const std::string last_job = !doc ? std::string() : doc->acme ? doc->acme->last_job_id
                                                    : doc->msca ? doc->msca->last_job_id
                                                                : std::string();
  if (!last_job.empty()) {
    auto j = tx.get_job(last_job);
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
  // The AD CS requests it waited on (their keys) go too; the CA keeps its own record.
  auto requests = tx.objects_referencing(o.project_id, store::kind_msca_request, id);
  if (!requests) return std::move(requests).error();
  for (const auto& r : *requests)
    if (auto del = tx.delete_object(o.project_id, store::kind_msca_request, r.id); !del) return del;
  return {};
}

constexpr std::array<std::string_view, 2> credential_users{store::kind_target, store::kind_channel};

const std::array<kind, 4> own_kinds{{
    {store::kind_certificate, certificate_view, {}, certificate_may_go, sealed_key},
    {store::kind_certificate_version, nullptr, {}, nullptr, sealed_key},
    {store::kind_credential, credential_view, credential_users, nullptr, sealed_secret},
    // A target may go while distributions name it: their next run skips it.
    {store::kind_target, target_view, {}, nullptr},
}};

}  // namespace

std::span<const kind> kinds() noexcept { return own_kinds; }

const kind* find_sealed(std::span<const kind> kinds, std::string_view name) noexcept {
  for (const auto& k : kinds)
    if (k.name == name && !k.sealed.empty()) return &k;
  return nullptr;
}

}  // namespace certfleet::catalog
