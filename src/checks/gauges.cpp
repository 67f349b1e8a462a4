#include "certfleet/checks/gauges.hpp"

#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/catalog/catalog.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <tuple>

#include <limits>
#include <memory>

namespace certfleet::checks {

namespace {
constexpr std::string_view thresholds_setting = "certificate_expiry_thresholds_days";
}

time_ms expiry_window_ms(const std::vector<std::int64_t>& thresholds_days) noexcept {
  return thresholds_days.empty() ? 0 : thresholds_days.front() * day_ms;
}

time_ms expiry_window_ms(const settings_map& settings) {
  auto t = parse_expiry_thresholds(settings.text(thresholds_setting));
  // settings_map validates what it is given, so only a default that stopped parsing gets here.
  if (!t) t = parse_expiry_thresholds(find_setting(thresholds_setting)->default_value);
  return t ? expiry_window_ms(*t) : 0;
}

bool running_longer_than_expected(const store::distribution_record& d, time_ms now) noexcept {
  return d.status == "running" && d.run_started_at < now - expected_run_ms;
}

catalog_gauges count_gauges(const std::vector<store::catalog_object>& expiring_certificates,
                            const std::vector<store::distribution_record>& running, time_ms now) {
  catalog_gauges g;
  for (const auto& c : expiring_certificates) {
    // not_after 0: an ACME certificate whose first issuance is under way has no expiry yet.
    if (c.not_after == 0) continue;
    ++(c.not_after <= now ? g.certificates_expired : g.certificates_expiring_soon);
  }
  g.distributions_running = static_cast<std::int64_t>(running.size());
  for (const auto& d : running)
    if (running_longer_than_expected(d, now)) ++g.distributions_running_long;
  return g;
}

std::int64_t count_revoked(const std::vector<store::catalog_object>& certificates) {
  std::int64_t n = 0;
  for (const auto& c : certificates) {
    // Most documents never mention a revocation: skip their parse.
    if (c.doc.find("\"revoked\"") == std::string::npos) continue;
    boost::system::error_code ec;
    auto v = boost::json::parse(c.doc, ec);
    if (ec || !v.is_object()) continue;
    auto* st = v.as_object().if_contains("status");
    if (st && st->is_string() && st->as_string() == "revoked") ++n;
  }
  return n;
}

namespace {
// The order of every per-object family on /metrics.
struct by_project_then_name {
  template <class T>
  bool operator()(const T& a, const T& b) const {
    return std::tie(a.project, a.name) < std::tie(b.project, b.name);
  }
};
}  // namespace

std::vector<certificate_series> certificate_series_of(const std::vector<store::catalog_object>& certificates,
                                                      const std::map<std::string, std::string>& project_names,
                                                      time_ms now) {
  std::vector<certificate_series> out;
  for (const auto& o : certificates) {
    if (static_cast<int>(out.size()) >= max_series_per_family) break;
    auto d = catalog::parse_certificate_doc(o, true);
    if (!d || d->version == 0 || d->not_after == 0) continue;
    auto p = project_names.find(o.project_id);
    certificate_series c;
    c.project = p == project_names.end() ? o.project_id : p->second;
    c.name = o.name;
    c.issuer = d->issuer;
    c.not_before = d->not_before;
    c.not_after = d->not_after;
    if (d->acme && d->acme->auto_renew && d->status != "revoked") c.renewal_due = lifecycle::acme_renewal_due(*d, now).renew_at;
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), by_project_then_name{});
  return out;
}

store::task<catalog_gauges> read_catalog_gauges(store::store& st, time_ms now, time_ms expiry_window) {
  auto projects = co_await st.projects().list();
  if (!projects) co_return std::move(projects).error();
  std::map<std::string, std::string> names;
  for (const auto& p : *projects) names.emplace(p.id, p.name);
  auto out = std::make_shared<catalog_gauges>();
  store::read_fn fn = [out, now, expiry_window, names = std::move(names)](store::catalog_read& rd) -> result<void> {
    auto certs = rd.certificates_expiring(now + expiry_window, 1'000'000);
    if (!certs) return std::move(certs).error();
    auto running = rd.distributions_in_status("running", 100'000);
    if (!running) return std::move(running).error();
    *out = count_gauges(*certs, *running, now);
    auto all = rd.objects_by_not_after(store::kind_certificate, std::numeric_limits<time_ms>::max(), 1'000'000);
    if (!all) return std::move(all).error();
    out->certificates_revoked = count_revoked(*all);
    out->certificates = certificate_series_of(*all, names, now);
    std::map<std::string, std::pair<std::string, std::string>> target_names;  // id → (project, name)
    for (const auto& [project_id, project_name] : names) {
      auto ds = rd.list_distributions(project_id, 1, max_series_per_family);
      if (!ds) return std::move(ds).error();
      for (const auto& d : ds->items)
        out->distributions.push_back({project_name, d.name, d.status, d.run_finished_at});
      auto ts = rd.list_objects(project_id, store::kind_target, 1, max_series_per_family);
      if (!ts) return std::move(ts).error();
      for (const auto& t : ts->items) target_names.emplace(t.id, std::pair{project_name, t.name});
    }
    std::sort(out->distributions.begin(), out->distributions.end(), by_project_then_name{});
    if (out->distributions.size() > static_cast<std::size_t>(max_series_per_family))
      out->distributions.resize(max_series_per_family);
    auto last = rd.target_last_successes(max_series_per_family);
    if (!last) return std::move(last).error();
    for (const auto& [target_id, at] : *last) {
      // A deleted target's results outlive it: it has no series.
      auto t = target_names.find(target_id);
      if (t != target_names.end()) out->targets.push_back({t->second.first, t->second.second, at});
    }
    std::sort(out->targets.begin(), out->targets.end(), by_project_then_name{});
    return {};
  };
  auto r = co_await st.catalog().read(std::move(fn));
  if (!r) co_return std::move(r).error();
  co_return *out;
}

}  // namespace certfleet::checks
