#include "certfleet/lifecycle/acme_workflow.hpp"

#include "lifecycle/workflow_head.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <array>
#include <map>

namespace certfleet::lifecycle {

namespace json = boost::json;

namespace {

constexpr std::array<std::string_view, 9> steps{"initialized", "awaiting_validation", "dns_presenting",
                                                "dns_propagating", "validating", "finalizing",
                                                "downloading", "storing", "completed"};

// Fences read for presented records: attempts beyond this are not listed (a job has 3).
constexpr std::int64_t max_fences_listed = 20;

// The manual order a job is about: its own (issue/renew) or the one it validates.
std::string order_job_of(const store::job_record& j) {
  if (j.type != queue::job_names::validate_manual_dns) return j.id;
  auto p = parse_validate_dns_payload(j.payload);
  return p ? p->order_job_id : std::string();
}

// The operator asks "now": a validation that runs, or is due, answers it; one that is not due yet
// (the job's own first check, or a failed one waiting for its retry) does not, and a new one is
// made (the other, when its time comes, finds the order validated or checks again).
bool running_or_due(const store::job_record& j, time_ms now) {
  return j.status == store::job_status::active || (j.status == store::job_status::pending && j.ready_at <= now);
}

}  // namespace

std::span<const std::string_view> acme_workflow_steps() noexcept { return steps; }

bool has_acme_workflow(std::string_view job_type) noexcept {
  return job_type == queue::job_names::issue_certificate || job_type == queue::job_names::renew_certificate ||
         job_type == queue::job_names::validate_manual_dns;
}

result<json::object> acme_workflow_view(store::catalog_read& rd, const store::job_record& j) {
  std::size_t at = 0;
  json::object w = detail::workflow_head("acme", steps, j, at);

  json::array manual;
  bool manual_provider = j.type == queue::job_names::validate_manual_dns;
  if (!j.certificate_id.empty()) {
    auto cert = rd.get_object(j.project_id, store::kind_certificate, j.certificate_id);
    if (cert) {
      auto doc = catalog::parse_certificate_doc(*cert, true);
      if (doc && doc->acme)
        if (auto p = rd.get_object(j.project_id, store::kind_dns_provider, doc->acme->dns_provider_id))
          if (auto spec = parse_dns_provider_doc(*p)) manual_provider = spec->manual();
      const auto order_job = order_job_of(j);
      if (doc && doc->acme && doc->acme->manual && !order_job.empty() && doc->acme->manual->job_id == order_job)
        for (const auto& c : doc->acme->manual->challenges)
          manual.emplace_back(json::object{{"fqdn", c.fqdn}, {"value", c.value}, {"status", c.status}});
    } else if (!cert.error().is(errc::not_found)) {
      return std::move(cert).error();
    }
  }
  w["manual_challenges"] = std::move(manual);
  // Each provider's path leaves one step out: a manual provider presents nothing itself, an
  // rfc2136 one never waits for the operator.
  w["skipped_steps"] = json::array{json::value(manual_provider ? "dns_presenting" : "awaiting_validation")};

  json::array presented;
  std::map<std::string, std::pair<std::string, std::string>> providers;  // id → (name, kind)
  for (std::int64_t fence = 1; fence <= std::min(j.fence, max_fences_listed); ++fence) {
    auto recs = rd.dns_records_of(j.id, fence);
    if (!recs) return std::move(recs).error();
    for (const auto& r : *recs) {
      auto [it, fresh] = providers.try_emplace(r.provider_id, r.provider_id, "");
      if (fresh)
        if (auto p = rd.get_object(r.project_id, store::kind_dns_provider, r.provider_id)) {
          it->second.first = p->name;
          if (auto spec = parse_dns_provider_doc(*p)) it->second.second = spec->kind;
        }
      presented.emplace_back(json::object{{"fqdn", r.fqdn},
                                          {"provider", it->second.first},
                                          {"provider_kind", it->second.second},
                                          {"at", certfleet::json::time_value(r.presented_at)},
                                          {"removed_at", certfleet::json::time_value(r.removed_at)}});
    }
  }
  w["presented_records"] = std::move(presented);
  return w;
}

result<store::enqueue_outcome> enqueue_manual_validation(store::catalog_tx& tx, const std::string& project_id,
                                                         const std::string& job_id, const std::string& actor,
                                                         time_ms now) {
  auto job = tx.get_job(job_id);
  if (!job || job->project_id != project_id) {
    if (!job && !job.error().is(errc::not_found)) return std::move(job).error();
    return make_error(errc::not_found, fmt::format("job {} not found", job_id), "id");
  }
  if (!has_acme_workflow(job->type) || job->certificate_id.empty())
    return make_error(errc::conflict,
                      fmt::format("job {} is a {} job: validate-dns is for the issue, renew and validate_manual_dns jobs "
                                  "of a certificate with a manual DNS provider",
                                  job_id, job->type),
                      "id");
  auto got = catalog::read_certificate(tx, project_id, job->certificate_id);
  if (!got) return std::move(got).error();
  auto* cert = &got->object;
  auto* doc = &got->doc;
  const auto order_job = order_job_of(*job);
  if (!doc->acme || !doc->acme->manual || doc->acme->manual->job_id != order_job)
    return make_error(errc::conflict,
                      fmt::format("job {} has no manual DNS challenges waiting (its certificate's DNS provider is not "
                                  "manual, or a later issue or renewal job replaced its order)",
                                  job_id),
                      "id");
  auto& m = *doc->acme->manual;
  if (doc->version != m.from_version)
    return make_error(errc::conflict,
                      fmt::format("the manual order of job {} was validated: certificate {} is at version {}", order_job,
                                  cert->id, doc->version),
                      "id");
  if (!m.last_validation_job_id.empty()) {
    auto last = tx.get_job(m.last_validation_job_id);
    if (last && running_or_due(*last, now)) return store::enqueue_outcome{*last, false};
  }
  queue::enqueue_request j;
  j.project_id = project_id;
  j.type = queue::job_names::validate_manual_dns;
  j.payload = validate_dns_payload(cert->id, order_job);
  j.idempotency_key = validate_dns_key(order_job, m.validations + 1);
  j.parent_job_id = order_job;
  j.certificate_id = cert->id;
  j.triggered_by = actor;
  auto e = queue::enqueue_in(tx.jobs(), j, now);
  if (!e) return std::move(e).error();
  m.validations += 1;
  m.last_validation_job_id = e->job.id;
  if (auto u = tx.update_object_doc(cert->id, catalog::certificate_doc_json(*doc)); !u) return std::move(u).error();
  return e;
}

}  // namespace certfleet::lifecycle
