// certificate_expiration_check: marks expired certificates and sends each certificate's
// expiry notifications once per threshold crossed. Each certificate is one transaction: its
// document (expired, notified_days) and its notification jobs commit together, and the
// notification keys make a repeat harmless.
#include "certfleet/core/settings.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/checks/expiry.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/checks/gauges.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::checks {

namespace asio = boost::asio;
namespace json = boost::json;

asio::awaitable<result<expiry_report>> check_expirations(store::store& st, time_ms now) {
  auto settings = co_await store::read_settings(st);
  auto thresholds = parse_expiry_thresholds(settings.text("certificate_expiry_thresholds_days"));
  if (!thresholds) co_return std::move(thresholds).error();
  const time_ms window = expiry_window_ms(*thresholds);

  store::read_value_fn<std::vector<store::catalog_object>> read = [now, window](store::catalog_read& rd) {
    return rd.certificates_expiring(now + window, 100'000);
  };
  auto certs = co_await store::read_value(st.catalog(), std::move(read));
  if (!certs) co_return std::move(certs).error();

  expiry_report report;
  for (const auto& cert : *certs) {
    auto doc = catalog::parse_certificate_doc(cert);
    if (!doc) continue;
    ++report.examined;
    auto step = catalog::plan_expiry(*doc, now, *thresholds);
    if (step.expiring_soon) ++report.expiring_soon;
    if (!step.mark_expired && step.newly_crossed.empty()) continue;
    auto sent = std::make_shared<int>(0);
    store::tx_fn fn = [cert, step, now, sent](store::catalog_tx& tx) -> result<void> {
      // Re-read inside the transaction: another check may have recorded these thresholds.
      auto fresh = tx.get_object(cert.project_id, store::kind_certificate, cert.id);
      if (!fresh) return {};  // deleted meanwhile
      auto d = catalog::parse_certificate_doc(*fresh);
      if (!d) return std::move(d).error();
      bool changed = false;
      if (step.mark_expired && !d->expired) {
        d->expired = true;
        changed = true;
      }
      bool already = step.notify_days &&
                     std::find(d->notified_days.begin(), d->notified_days.end(), *step.notify_days) != d->notified_days.end();
      for (auto t : step.newly_crossed)
        if (std::find(d->notified_days.begin(), d->notified_days.end(), t) == d->notified_days.end()) {
          d->notified_days.push_back(t);
          changed = true;
        }
      if (step.notify_days && !already) {
        notify::fired_event e;
        e.project_id = cert.project_id;
        e.event = *step.notify_days == 0 ? notify::event_names::certificate_expired : notify::event_names::certificate_expiring;
        e.event_id = fmt::format("{}:{}:{}", e.event, cert.id, *step.notify_days);
        e.data = json::object{{"certificate_id", cert.id},         {"name", cert.name},
                              {"subject", d->subject},             {"not_after", d->not_after},
                              {"days_threshold", *step.notify_days}, {"fingerprint_sha256", d->fingerprint_sha256}};
        e.key_base = distribution::expiry_notification_base(cert.id, *step.notify_days);
        e.source.certificate_id = cert.id;
        e.source.triggered_by = queue::triggers::certificate_expiration_check;
        auto fired = notify::fire_event(tx, e, now);
        if (!fired) return std::move(fired).error();
        *sent += *fired;
      }
      if (changed) return tx.update_object_doc(cert.id, catalog::certificate_doc_json(*d));
      return {};
    };
    if (auto w = co_await st.catalog().transact(std::move(fn)); !w) co_return std::move(w).error();
    if (step.mark_expired) ++report.expired_marked;
    report.notifications += *sent;
  }
  co_return report;
}

void register_expiration_check(queue::handler_registry& r) {
  auto check = [](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
    auto rep = co_await check_expirations(ctx.store(), ctx.clock().now_ms());
    if (!rep) co_return queue::outcome::failure(rep.error());
    auto line = fmt::format("examined {} certificates: {} expiring soon, {} newly marked expired, {} notifications enqueued",
                            rep->examined, rep->expiring_soon, rep->expired_marked, rep->notifications);
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  };
  r.add(std::string(queue::job_names::certificate_expiration_check), std::move(check));
}

}  // namespace certfleet::checks
