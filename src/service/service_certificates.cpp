// The service's certificates (service.hpp): uploaded versions, ACME issue with its approval and the
// project settings it reads, renewals, manual DNS validation, the job workflow, revocation.
#include "certfleet/service/service.hpp"

#include "service/service_common.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/lifecycle/acme_workflow.hpp"
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/lifecycle/msca_jobs.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/lifecycle/approval.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace certfleet::service {

namespace json = boost::json;
using store::catalog_object;
using namespace detail;

op<json::value> service::add_certificate_version(std::string project_id, std::string id, std::string body,
                                                 std::string actor) {
  if (!key_) co_return no_key();
  auto now = clock_.now_ms();
  auto next = catalog::parse_certificate_version_request(body, now);
  if (!next) co_return std::move(next).error();
  auto rs = distribution::run_settings_from(co_await store::read_settings(st_));
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  const kek* key = key_;
  auto material = std::make_shared<catalog::new_certificate>(std::move(*next));
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* cert = &got->object;
    auto* doc = &got->doc;
    if (doc->source != "uploaded")
      return make_error(errc::conflict,
                        fmt::format("certificate {} is renewed by ACME: its versions come from the CA (renew it instead)", id),
                        "id");
    auto stored = distribution::store_new_version(tx, *key, *cert, *material, rs, now, actor);
    if (!stored) return std::move(stored).error();
    auto fresh = tx.get_object(project_id, store::kind_certificate, id);
    if (!fresh) return std::move(fresh).error();
    *out = catalog::certificate_view(*fresh);
    json::array opened, deferred;
    for (const auto& d : stored->runs_opened) opened.emplace_back(d);
    for (const auto& d : stored->runs_deferred) deferred.emplace_back(d);
    (*out)["auto_execute"] = json::object{{"runs_opened", std::move(opened)}, {"runs_deferred", std::move(deferred)}};
    *created = std::move(stored->jobs);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

namespace {
// The project's settings object (approval.hpp), or none while nothing was ever set.
result<std::optional<catalog_object>> project_settings_object(store::catalog_read& rd, const std::string& project_id) {
  auto found = rd.objects_named(project_id, store::kind_project_settings, lifecycle::project_settings_name, 1);
  if (!found) return std::move(found).error();
  if (found->empty()) return std::optional<catalog_object>{};
  return std::optional<catalog_object>(std::move(found->front()));
}

// The project's settings, read in the caller's transaction.
result<std::map<std::string, std::string, std::less<>>> read_project_settings(store::catalog_read& rd,
                                                                              const std::string& project_id) {
  auto o = project_settings_object(rd, project_id);
  if (!o) return std::move(o).error();
  return lifecycle::project_settings_from_doc(*o ? std::string_view((*o)->doc) : std::string_view());
}

// The issue_certificate job of a certificate (key issue:<id>), recorded as its last ACME job: an
// issue request's, or an approval's.
result<store::enqueue_outcome> enqueue_issue(store::catalog_tx& tx, const std::string& project_id,
                                             const std::string& certificate_id, const std::string& actor, time_ms now) {
  auto e = enqueue_certificate_job(tx, project_id, certificate_id, queue::job_names::issue_certificate,
                                   lifecycle::acme_job_payload(certificate_id), lifecycle::issue_job_key(certificate_id), actor, now);
  if (!e) return e;
  if (auto r = lifecycle::record_acme_job(tx, project_id, certificate_id, e->job.id); !r) return std::move(r).error();
  return e;
}

result<int> fire_approval_event(store::catalog_tx& tx, const catalog_object& cert, const catalog::certificate_doc& doc,
                                std::string_view event, const std::string& job_id, const std::string& actor,
                                time_ms now) {
  notify::fired_event e;
  e.project_id = cert.project_id;
  e.event = event;
  e.event_id = fmt::format("{}:{}", event, cert.id);  // each happens once per certificate
  e.data = lifecycle::approval_event_data(cert.id, cert.name, doc, job_id);
  e.key_base = e.event_id;
  e.source.certificate_id = cert.id;
  e.source.triggered_by = actor;
  return notify::fire_event(tx, e, now);
}
}  // namespace

op<json::value> service::issue_certificate(std::string project_id, std::string body, std::string actor) {
  auto req = lifecycle::parse_acme_issue_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto cert = std::make_shared<catalog_object>(lifecycle::make_unissued_acme_certificate(*req, new_object_id(), project_id, now));
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  auto waits = std::make_shared<bool>(false);
  store::tx_fn op = [cert, actor, now, created, waits](store::catalog_tx& tx) -> result<void> {
    auto doc = catalog::parse_certificate_doc(*cert, true);
    if (!doc) return std::move(doc).error();
    if (auto r = check_ref(tx, cert->project_id, store::kind_acme_account, doc->acme->acme_account_id, "acme_account_id"); !r)
      return r;
    if (auto r = check_ref(tx, cert->project_id, store::kind_dns_provider, doc->acme->dns_provider_id, "dns_provider_id"); !r)
      return r;
    // Read in this transaction: a request made after the setting is turned on waits.
    auto settings = read_project_settings(tx, cert->project_id);
    if (!settings) return std::move(settings).error();
    *waits = lifecycle::issuance_requires_approval(*settings);
    if (*waits) {
      doc->status = "awaiting_approval";
      doc->acme->approval = lifecycle::approval_request(actor, now);
      cert->doc = catalog::certificate_doc_json(*doc);
    }
    auto ins = tx.insert_object(*cert);
    if (!ins) return std::move(ins).error();
    if (*waits) {
      auto fired = fire_approval_event(tx, *cert, *doc, notify::event_names::certificate_approval_requested, "", actor, now);
      if (!fired) return std::move(fired).error();
      return {};
    }
    auto e = enqueue_issue(tx, cert->project_id, cert->id, actor, now);
    if (!e) return std::move(e).error();
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  if (*waits)
    co_return json::value(json::object{{"certificate_id", cert->id}, {"job_id", nullptr}, {"status", "awaiting_approval"}});
  queue_.jobs_created(*created);
  co_return json::value(
      json::object{{"certificate_id", cert->id}, {"job_id", created->front().job.id}, {"status", "pending"}});
}

op<json::value> service::approve_certificate(std::string project_id, std::string id, std::string actor) {
  auto now = clock_.now_ms();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto& doc = got->doc;
    if (auto ok = lifecycle::check_approval_decision(doc, id, actor); !ok) return ok;
    lifecycle::approve_issuance(doc, actor, now);
    if (auto u = tx.update_object_doc(id, catalog::certificate_doc_json(doc)); !u) return u;
    auto e = enqueue_issue(tx, project_id, id, actor, now);
    if (!e) return std::move(e).error();
    auto fired = fire_approval_event(tx, got->object, doc, notify::event_names::certificate_approved, e->job.id, actor, now);
    if (!fired) return std::move(fired).error();
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(json::object{{"certificate_id", id}, {"job_id", created->front().job.id}, {"status", "pending"}});
}

op<json::value> service::reject_certificate(std::string project_id, std::string id, std::string body,
                                            std::string actor) {
  auto reason = lifecycle::parse_reject_request(body);
  if (!reason) co_return std::move(reason).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  store::tx_fn op = [=, reason = std::move(*reason)](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto& doc = got->doc;
    if (auto ok = lifecycle::check_approval_decision(doc, id, actor); !ok) return ok;
    lifecycle::reject_issuance(doc, actor, reason, now);
    if (auto u = tx.update_object_doc(id, catalog::certificate_doc_json(doc)); !u) return u;
    auto fired = fire_approval_event(tx, got->object, doc, notify::event_names::certificate_rejected, "", actor, now);
    if (!fired) return std::move(fired).error();
    auto fresh = tx.get_object(project_id, store::kind_certificate, id);
    if (!fresh) return std::move(fresh).error();
    *out = catalog::certificate_view(*fresh);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*out));
}

op<json::value> service::project_settings(std::string project_id) {
  store::read_value_fn<std::map<std::string, std::string, std::less<>>> read = [project_id](store::catalog_read& rd) {
    return read_project_settings(rd, project_id);
  };
  auto values = co_await store::read_value(st_.catalog(), std::move(read));
  if (!values) co_return std::move(values).error();
  json::object o;
  for (const auto& [k, v] : *values) o[k] = v;
  co_return json::value(std::move(o));
}

op<json::value> service::put_project_settings(std::string project_id, std::map<std::string, std::string> values) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto found = project_settings_object(tx, project_id);
    if (!found) return std::move(found).error();
    auto merged = lifecycle::project_settings_from_doc(*found ? std::string_view((*found)->doc) : std::string_view());
    for (const auto& [k, v] : values) merged[k] = v;
    const auto doc = lifecycle::project_settings_doc(merged);
    if (!*found) {
      catalog_object o;
      o.id = new_object_id();
      o.project_id = project_id;
      o.kind = std::string(store::kind_project_settings);
      o.name = std::string(lifecycle::project_settings_name);
      o.doc = doc;
      o.created_at = now;
      auto ins = tx.insert_object(std::move(o));
      if (!ins) return std::move(ins).error();
    } else if (auto u = tx.update_object_doc((*found)->id, doc); !u) {
      return u;
    }
    for (const auto& [k, v] : merged) (*out)[k] = v;
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*out));
}

namespace {
// Why a certificate cannot be renewed over ACME, or nullopt when it can.
std::optional<std::string> not_renewable(const catalog::certificate_doc& doc, std::string_view id) {
  const bool acme = doc.source == "acme" && doc.acme, msca = doc.source == "msca" && doc.msca;
  if (!acme && !msca)
    return fmt::format("certificate {} was uploaded: only ACME and AD CS certificates are renewed (upload a new "
                       "version with POST …/certificates/{}/versions)", id, id);
  if (doc.version == 0)
    return fmt::format("certificate {} has no issued version yet: its {} job issues it", id,
                       acme ? queue::job_names::issue_certificate : queue::job_names::msca_issue_certificate);
  return std::nullopt;
}

// An ACME certificate gets renew_certificate, an AD CS one msca_renew_certificate: the same
// payload and key (one renewal per version).
result<store::enqueue_outcome> enqueue_renewal(store::catalog_tx& tx, const std::string& project_id, const std::string& id,
                                               const catalog::certificate_doc& doc, const std::string& actor, time_ms now) {
  const bool msca = doc.source == "msca";
  auto e = enqueue_certificate_job(tx, project_id, id,
                                   msca ? queue::job_names::msca_renew_certificate : queue::job_names::renew_certificate,
                                   lifecycle::acme_job_payload(id, doc.version), lifecycle::renew_job_key(id, doc.not_after),
                                   actor, now);
  if (!e) return e;
  auto r = msca ? lifecycle::record_msca_job(tx, project_id, id, e->job.id)
                : lifecycle::record_acme_job(tx, project_id, id, e->job.id);
  if (!r) return std::move(r).error();
  return e;
}
}  // namespace

op<json::value> service::renew_certificates(std::string project_id, std::string body, std::string actor) {
  auto req = lifecycle::parse_bulk_renew_request(body);
  if (!req) co_return std::move(req).error();
  const auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=, request = std::move(*req)](store::catalog_tx& tx) -> result<void> {
    std::vector<catalog::certificate_with_doc> renew;
    json::array skipped;
    if (request.expiring_within_days == 0) {
      for (std::size_t i = 0; i < request.certificate_ids.size(); ++i) {
        const auto& id = request.certificate_ids[i];
        const auto field = fmt::format("certificate_ids[{}]", i);
        auto got = catalog::read_certificate(tx, project_id, id);
        if (!got) {
          auto e = std::move(got).error();
          if (e.is(errc::not_found)) return make_error(errc::not_found, fmt::format("{}: no certificate {} in this project", field, id), field);
          return e;
        }
        if (auto why = not_renewable(got->doc, id)) return make_error(errc::conflict, fmt::format("{}: {}", field, *why), field);
        renew.push_back(std::move(*got));
      }
    } else {
      const time_ms before = now + static_cast<time_ms>(request.expiring_within_days) * 86'400'000;
      for (int page = 1;; ++page) {
        auto p = tx.list_objects(project_id, store::kind_certificate, page, 500);
        if (!p) return std::move(p).error();
        for (auto& o : p->items) {
          if (o.not_after == 0 || o.not_after > before) continue;
          auto doc = catalog::parse_certificate_doc(o, true);
          if (!doc) return std::move(doc).error();
          if (auto why = not_renewable(*doc, o.id)) {
            skipped.emplace_back(json::object{{"certificate_id", o.id}, {"name", o.name}, {"reason", *why}});
            continue;
          }
          renew.push_back(catalog::certificate_with_doc{std::move(o), std::move(*doc)});
        }
        if (p->items.size() < 500) break;
      }
      if (renew.size() > lifecycle::bulk_renew_max)
        return make_error(errc::invalid_argument,
                          fmt::format("{} certificates expire within {} days, more than {} per call: renew a shorter window "
                                      "first, or by certificate_ids",
                                      renew.size(), request.expiring_within_days, lifecycle::bulk_renew_max),
                          "expiring_within_days");
    }
    json::array jobs;
    std::vector<store::enqueue_outcome> made;
    for (const auto& c : renew) {
      auto e = enqueue_renewal(tx, project_id, c.object.id, c.doc, actor, now);
      if (!e) return std::move(e).error();
      jobs.emplace_back(json::object{{"certificate_id", c.object.id}, {"name", c.object.name}, {"job_id", e->job.id},
                                     {"created", e->created}});
      made.push_back(std::move(*e));
    }
    const auto new_jobs = std::count_if(made.begin(), made.end(), [](const auto& e) { return e.created; });
    *out = json::object{{"requested", jobs.size()}, {"created", new_jobs}, {"jobs", std::move(jobs)},
                        {"skipped", std::move(skipped)}};
    *created = std::move(made);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::renew_certificate(std::string project_id, std::string id, std::string actor) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    if (auto why = not_renewable(*doc, id)) return make_error(errc::conflict, *why, "id");
    auto e = enqueue_renewal(tx, project_id, id, *doc, actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::validate_manual_dns(std::string project_id, std::string job_id, std::string actor) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto e = lifecycle::enqueue_manual_validation(tx, project_id, job_id, actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::job_workflow(store::job_record job) {
  if (lifecycle::has_msca_workflow(job.type)) {
    store::read_value_fn<json::object> read = [job = std::move(job)](store::catalog_read& rd) {
      return lifecycle::msca_workflow_view(rd, job);
    };
    auto w = co_await store::read_value(st_.catalog(), std::move(read));
    if (!w) co_return std::move(w).error();
    co_return json::value(std::move(*w));
  }
  if (!lifecycle::has_acme_workflow(job.type)) co_return json::value(nullptr);
  store::read_value_fn<json::object> read = [job = std::move(job)](store::catalog_read& rd) {
    return lifecycle::acme_workflow_view(rd, job);
  };
  auto w = co_await store::read_value(st_.catalog(), std::move(read));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*w));
}

op<json::value> service::revoke_certificate(std::string project_id, std::string id, std::string body, std::string actor) {
  auto req = lifecycle::parse_revoke_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  const std::optional<int> reason = req->reason;
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    if (doc->source != "acme" || !doc->acme)
      return make_error(errc::conflict,
                        fmt::format("certificate {} was uploaded, not obtained from an ACME CA: certfleet revokes only the "
                                    "certificates it issued through ACME (revoke this one with the CA that issued it)",
                                    id),
                        "id");
    if (doc->version == 0)
      return make_error(errc::conflict, fmt::format("certificate {} has no issued version to revoke", id), "id");
    if (doc->status == "revoked")
      return make_error(errc::conflict,
                        fmt::format("certificate {} (serial {}) is already revoked{}", id, doc->serial,
                                    doc->revocation ? fmt::format(" since {}", format_iso8601(doc->revocation->revoked_at))
                                                    : std::string()),
                        "id");
    auto e = enqueue_certificate_job(tx, project_id, id, queue::job_names::revoke_certificate,
                                     lifecycle::revoke_job_payload(lifecycle::revoke_job{id, doc->serial, reason}),
                                     lifecycle::revoke_job_key(id, doc->version), actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

namespace detail {

boost::asio::awaitable<result<new_object>> create_certificate(const create_context& ctx, std::string body) {
  if (!ctx.key) co_return no_key();
  auto c = catalog::parse_certificate_request(body, ctx.now);
  if (!c) co_return std::move(c).error();
  auto o = catalog::make_certificate_object(*c, *ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  co_return new_object{std::move(*o), {}};
}

}  // namespace detail

}  // namespace certfleet::service
