#include "certfleet/distribution/certificates.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/store/settings.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

namespace certfleet::distribution {

namespace {

std::string key_aad(std::string_view kind, std::string_view id) { return fmt::format("{}:{}:key", kind, id); }

}  // namespace

bool owes_auto_execute(const store::distribution_record& d, std::int64_t certificate_version) {
  return d.auto_execute && d.run_no > 0 && d.status != "running" && d.run_certificate_version < certificate_version;
}

result<version_stored> store_new_version(store::catalog_tx& tx, const kek& key, const store::catalog_object& cert,
                                         const catalog::new_certificate& next, const run_settings& rs, time_ms now,
                                         std::string_view actor) {
  auto current = catalog::parse_certificate_doc(cert, true);
  if (!current) return std::move(current).error();
  version_stored out;
  out.version = current->version + 1;

  if (current->version > 0) {
    // The version being replaced, kept whole: its document and its key, sealed to the new row.
    store::catalog_object old;
    old.id = new_object_id();
    old.project_id = cert.project_id;
    old.kind = std::string(store::kind_certificate_version);
    old.name = fmt::format("{}/v{}", cert.id, current->version);
    old.doc = cert.doc;
    old.ref_id = cert.id;
    old.not_after = current->not_after;
    old.created_at = current->version_created_at;
    auto pem = open_sealed(key, cert.sealed, key_aad(cert.kind, cert.id));
    if (!pem) return std::move(pem).error();
    auto resealed = seal(key, *pem, key_aad(old.kind, old.id));
    if (!resealed) return std::move(resealed).error();
    old.sealed = std::move(*resealed);
    if (auto ins = tx.insert_object(std::move(old)); !ins) return std::move(ins).error();
  }

  catalog::certificate_doc doc = next.doc;
  doc.version = out.version;
  doc.version_created_at = now;
  doc.versions = current->versions;
  doc.versions.push_back({out.version, doc.serial, doc.fingerprint_sha256, doc.not_before, doc.not_after, now});
  doc.expired = false;
  doc.notified_days.clear();
  doc.source = current->source;
  doc.status = "active";
  // What an ACME certificate is renewed with stays; the failure of an earlier attempt is over.
  doc.acme = current->acme;
  if (doc.acme) doc.acme->last_error.clear();
  doc.msca = current->msca;
  if (doc.msca) doc.msca->last_error.clear();

  store::catalog_object updated = cert;
  updated.doc = catalog::certificate_doc_json(doc);
  updated.not_after = doc.not_after;
  auto sealed = seal(key, next.key_pem, key_aad(cert.kind, cert.id));
  if (!sealed) return std::move(sealed).error();
  updated.sealed = std::move(*sealed);
  if (auto u = tx.update_object(updated); !u) return std::move(u).error();

  auto users = tx.distributions_using(cert.project_id, cert.id);
  if (!users) return std::move(users).error();
  for (const auto& id : *users) {
    auto d = tx.get_distribution(cert.project_id, id);
    if (!d) return std::move(d).error();
    if (!d->auto_execute || d->certificate_id != cert.id) continue;
    if (d->status == "running") {
      out.runs_deferred.push_back(id);
      continue;
    }
    run_request req{cert.project_id, id, std::string(actor), run_kind::execute, 0, renewal_run_trigger(id, out.version)};
    auto opened = open_run(tx, req, rs, now, &out.jobs);
    if (!opened) return std::move(opened).error();
    out.runs_opened.push_back(id);
  }
  return out;
}

boost::asio::awaitable<result<int>> run_pending_auto_executes(store::store& st, const clock_source& clock) {
  auto rs = run_settings_from(co_await store::read_settings(st));
  auto candidates = std::make_shared<std::vector<store::distribution_record>>();
  store::read_fn list = [candidates](store::catalog_read& rd) -> result<void> {
    auto ds = rd.auto_execute_distributions(1000);
    if (!ds) return std::move(ds).error();
    for (auto& d : *ds) {
      if (d.run_no == 0) continue;
      auto cert = rd.get_object(d.project_id, store::kind_certificate, d.certificate_id);
      if (!cert) continue;
      auto doc = catalog::parse_certificate_doc(*cert, true);
      if (doc && owes_auto_execute(d, doc->version)) candidates->push_back(std::move(d));
    }
    return {};
  };
  if (auto r = co_await st.catalog().read(std::move(list)); !r) co_return std::move(r).error();

  int opened = 0;
  for (const auto& d : *candidates) {
    auto now = clock.now_ms();
    auto did = std::make_shared<bool>(false);
    // Checked again in the write transaction: another process may have opened it meanwhile.
    store::tx_fn op = [d, rs, now, did](store::catalog_tx& tx) -> result<void> {
      auto fresh = tx.get_distribution(d.project_id, d.id);
      if (!fresh) return {};
      auto cert = tx.get_object(d.project_id, store::kind_certificate, fresh->certificate_id);
      if (!cert) return {};
      auto doc = catalog::parse_certificate_doc(*cert, true);
      if (!doc || !owes_auto_execute(*fresh, doc->version)) return {};
      run_request req{d.project_id, d.id, "distribution sweep", run_kind::execute, 0,
                      renewal_run_trigger(d.id, doc->version)};
      auto r = open_run(tx, req, rs, now);
      if (!r) return std::move(r).error();
      *did = true;
      return {};
    };
    auto w = co_await st.catalog().transact(std::move(op));
    if (!w) co_return std::move(w).error();
    if (*did) ++opened;
  }
  co_return opened;
}

}  // namespace certfleet::distribution
