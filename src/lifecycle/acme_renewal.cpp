// The renewal sweep (acme_jobs.hpp): which ACME certificates are due (the lifetime rule, or the
// CA's renewal information, RFC 9773) and one renew_certificate each under the renewal key; AD CS
// certificates due by the lifetime rule get msca_renew_certificate under the same key.
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/lifecycle/msca_jobs.hpp"

#include "lifecycle/acme_catalog_common.hpp"
#include "lifecycle/acme_job_common.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"

#include <fmt/format.h>

#include <limits>
#include <map>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
namespace json = boost::json;
using detail::acme_allow_list_of;
using detail::on_cpu;
using detail::trust_anchors;

renewal_due acme_renewal_due(const catalog::certificate_doc& d, time_ms now, std::optional<acme_renewal_window> ari) {
  renewal_due out;
  if (!d.acme || d.version == 0 || !d.acme->auto_renew || d.status == "revoked") return out;
  acme::renewal_inputs in;
  in.now = now;
  in.not_before = d.not_before;
  in.not_after = d.not_after;
  if (ari) in.ari = acme::renewal_window{ari->start, ari->end};
  in.seed = std::hash<std::string>{}(d.serial);
  auto decision = acme::decide_renewal(in);
  out.due = decision.renew_now;
  out.renew_at = decision.renew_at;
  out.source = std::string(acme::renewal_source_name(decision.source));
  out.reason = decision.reason;
  return out;
}

namespace {

// One CA's renewal information for the sweep: the directory once per account, then one GET per
// certificate. Requests are unauthenticated; the client still wants a key, so a throwaway one.
class ari_reader {
 public:
  ari_reader(const acme_job_options& opt, sweep_logger log, net::egress_policy allow)
      : opt_(opt), log_(std::move(log)), allow_(std::move(allow)) {}

  asio::awaitable<std::optional<acme_renewal_window>> window(const acme_account_spec& account, const std::string& account_id,
                                                             const catalog::certificate_doc& d, const std::string& cert_id) {
    if (!key_) {
      auto k = co_await on_cpu<result<acme::account_key>>(opt_.cpu, [] { return acme::account_key::generate(); });
      if (!k) co_return std::nullopt;
      key_ = std::make_unique<acme::account_key>(std::move(*k));
    }
    auto& c = clients_[account_id];
    if (!c) {
      acme::client_options co;
      co.directory_url = account.directory_url;
      co.ca_pem = trust_anchors(account.ca_bundle_pem, opt_.ca_pem);
      co.resolve_pool = opt_.cpu;
      co.egress = &allow_;
      c = std::make_unique<acme::client>(std::move(co), *key_);
    }
    auto dir = co_await c->get_directory();
    if (!dir) {
      co_await say("warn", fmt::format("acme_renewal: certificate {}: directory of its account {}: {} (lifetime rule used)",
                                       cert_id, account_id, dir.failure().message));
      co_return std::nullopt;
    }
    if (dir->renewal_info.empty()) co_return std::nullopt;
    auto id = acme::ari_cert_id_of(d.cert_pem);
    if (!id) {
      co_await say("warn", fmt::format("acme_renewal: certificate {}: {} (lifetime rule used)", cert_id, id.error().message));
      co_return std::nullopt;
    }
    auto info = co_await c->get_renewal_info(*id);
    if (!info) {
      co_await say("warn", fmt::format("acme_renewal: certificate {}: {} (lifetime rule used)", cert_id, info.failure().message));
      co_return std::nullopt;
    }
    co_return acme_renewal_window{info->info.suggested_window.start, info->info.suggested_window.end};
  }

 private:
  asio::awaitable<void> say(std::string level, std::string message) {
    if (log_) co_await log_(std::move(level), std::move(message));
  }
  const acme_job_options& opt_;
  sweep_logger log_;
  net::egress_policy allow_;  // acme_allow_list, read at the sweep's start
  std::unique_ptr<acme::account_key> key_;
  std::map<std::string, std::unique_ptr<acme::client>> clients_;
};

}  // namespace

asio::awaitable<result<int>> enqueue_due_renewals(store::store& st, const clock_source& clock, const acme_job_options* opt,
                                                  sweep_logger log) {
  auto now = clock.now_ms();
  // Every certificate that has an expiry (the catalog index by not_after, all projects), and the
  // accounts of the ACME ones.
  struct candidate {
    store::catalog_object cert;
    catalog::certificate_doc doc;
    acme_account_spec account;
  };
  auto found = std::make_shared<std::vector<candidate>>();
  // AD CS certificates due by the lifetime rule (msca_jobs.hpp): msca_renew_certificate each.
  auto msca_due = std::make_shared<std::vector<std::pair<store::catalog_object, catalog::certificate_doc>>>();
  store::read_fn read = [found, msca_due, now](store::catalog_read& rd) -> result<void> {
    auto certs = rd.certificates_expiring(std::numeric_limits<time_ms>::max() / 2, 100'000);
    if (!certs) return std::move(certs).error();
    for (auto& c : *certs) {
      auto doc = catalog::parse_certificate_doc(c, true);
      if (doc && doc->msca && msca_renewal_due(*doc, now)) {
        msca_due->emplace_back(std::move(c), std::move(*doc));
        continue;
      }
      if (!doc || !doc->acme || doc->version == 0 || !doc->acme->auto_renew || doc->status == "revoked") continue;
      auto a = rd.get_object(c.project_id, store::kind_acme_account, doc->acme->acme_account_id);
      if (!a) continue;
      auto spec = parse_acme_account_doc(*a);
      if (!spec) continue;
      found->push_back(candidate{std::move(c), std::move(*doc), std::move(*spec)});
    }
    return {};
  };
  if (auto r = co_await st.catalog().read(std::move(read)); !r) co_return std::move(r).error();

  std::optional<ari_reader> ari;
  if (opt) {
    auto sweep_settings = co_await store::read_settings(st);
    ari.emplace(*opt, log, acme_allow_list_of(sweep_settings));
  }
  std::vector<queue::enqueue_request> jobs;
  // The CA windows read this sweep, kept on each certificate for its view (renewal.source "ari").
  struct ari_note {
    std::string project_id, certificate_id, serial;
    acme_renewal_window window;
  };
  std::vector<ari_note> windows;
  for (const auto& c : *found) {
    std::optional<acme_renewal_window> window;
    if (ari) window = co_await ari->window(c.account, c.doc.acme->acme_account_id, c.doc, c.cert.id);
    if (window) windows.push_back({c.cert.project_id, c.cert.id, c.doc.serial, *window});
    auto due = acme_renewal_due(c.doc, now, window);
    if (!due.due) continue;
    if (log) co_await log("info", fmt::format("acme_renewal: certificate {} is due ({}): {}", c.cert.id, due.source, due.reason));
    queue::enqueue_request j;
    j.project_id = c.cert.project_id;
    j.type = queue::job_names::renew_certificate;
    j.payload = acme_job_payload(c.cert.id, c.doc.version);
    j.idempotency_key = renew_job_key(c.cert.id, c.doc.not_after);
    j.certificate_id = c.cert.id;
    j.triggered_by = queue::triggers::renewal_sweep;
    jobs.push_back(std::move(j));
  }
  for (const auto& [cert, doc] : *msca_due) {
    if (log) co_await log("info", fmt::format("msca_renewal: certificate {} is due (lifetime)", cert.id));
    queue::enqueue_request j;
    j.project_id = cert.project_id;
    j.type = queue::job_names::msca_renew_certificate;
    j.payload = acme_job_payload(cert.id, doc.version);
    j.idempotency_key = renew_job_key(cert.id, doc.not_after);
    j.certificate_id = cert.id;
    j.triggered_by = queue::triggers::renewal_sweep;
    jobs.push_back(std::move(j));
  }
  if (jobs.empty() && windows.empty()) co_return 0;
  auto created = std::make_shared<int>(0);
  store::tx_fn write = [jobs, windows, now, created](store::catalog_tx& tx) -> result<void> {
    for (const auto& w : windows) {
      auto cert = tx.get_object(w.project_id, store::kind_certificate, w.certificate_id);
      if (!cert) continue;  // deleted since the read
      auto doc = catalog::parse_certificate_doc(*cert, true);
      // A renewal stored another version since the read: that window was for the old one.
      if (!doc || !doc->acme || doc->serial != w.serial) continue;
      doc->acme->ari = {w.serial, w.window.start, w.window.end, now};
      if (auto u = tx.update_object_doc(w.certificate_id, catalog::certificate_doc_json(*doc)); !u) return u;
    }
    for (const auto& j : jobs) {
      auto e = queue::enqueue_in(tx.jobs(), j, now);
      if (!e) return std::move(e).error();
      if (!e->created) continue;
      ++*created;
      auto r = detail::record_last_job(tx, j.project_id, j.certificate_id, e->job.id);
      if (!r) return r;
    }
    return {};
  };
  if (auto w = co_await st.catalog().transact(std::move(write)); !w) co_return std::move(w).error();
  co_return *created;
}

}  // namespace certfleet::lifecycle
