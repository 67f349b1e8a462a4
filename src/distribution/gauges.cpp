#include "certfleet/distribution/gauges.hpp"

#include <boost/json.hpp>

#include <limits>
#include <memory>

namespace certfleet::distribution {

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

store::task<catalog_gauges> read_catalog_gauges(store::store& st, time_ms now, time_ms expiry_window) {
  auto out = std::make_shared<catalog_gauges>();
  store::read_fn fn = [out, now, expiry_window](store::catalog_read& rd) -> result<void> {
    auto certs = rd.certificates_expiring(now + expiry_window, 1'000'000);
    if (!certs) return std::move(certs).error();
    auto running = rd.distributions_in_status("running", 100'000);
    if (!running) return std::move(running).error();
    *out = count_gauges(*certs, *running, now);
    auto all = rd.objects_by_not_after(store::kind_certificate, std::numeric_limits<time_ms>::max(), 1'000'000);
    if (!all) return std::move(all).error();
    out->certificates_revoked = count_revoked(*all);
    return {};
  };
  auto r = co_await st.catalog().read(std::move(fn));
  if (!r) co_return std::move(r).error();
  co_return *out;
}

}  // namespace certfleet::distribution
