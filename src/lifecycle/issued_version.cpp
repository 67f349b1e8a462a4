// A CA's certificate stored as the next version (issued_version.hpp).
#include "lifecycle/issued_version.hpp"

#include "certfleet/core/clock.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/notify/events.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace certfleet::lifecycle::detail {

namespace json = boost::json;

result<catalog::new_certificate> issued_version(std::string_view name, const std::string& leaf_pem,
                                                const std::string& chain_pem, std::string key_pem, time_ms now) {
  auto info = delivery::parse_certificate_bundle(leaf_pem, chain_pem, key_pem, now);
  if (!info) return std::move(info).error();
  catalog::new_certificate next;
  next.name = std::string(name);
  next.key_pem = std::move(key_pem);
  next.doc.subject = info->subject;
  next.doc.issuer = info->issuer;
  next.doc.sans = info->sans;
  next.doc.not_before = info->not_before_ms;
  next.doc.not_after = info->not_after_ms;
  next.doc.fingerprint_sha256 = info->fingerprint_sha256;
  next.doc.serial = info->serial;
  next.doc.cert_pem = leaf_pem;
  next.doc.chain_pem = chain_pem;
  return next;
}

result<distribution::version_stored> store_issued_version(store::catalog_tx& tx, const kek& key,
                                                          const catalog::certificate_with_doc& got,
                                                          std::int64_t expected_version,
                                                          const catalog::new_certificate& next,
                                                          const distribution::run_settings& rs, time_ms now,
                                                          const issued_by& by) {
  const auto& cert = got.object;
  // Another job stored a version meanwhile (a renewal key of the next version, a retried attempt
  // whose first run committed): this one does not stack a second on it.
  if (got.doc.version != expected_version)
    return make_error(errc::conflict,
                      fmt::format("certificate {} is at version {} now (this job started from {}): not stored twice",
                                  cert.id, got.doc.version, expected_version),
                      "version");
  auto stored = distribution::store_new_version(tx, key, cert, next, rs, now, fmt::format("job:{}", by.job_id));
  if (!stored) return stored;
  // certificate.issued for the first version, certificate.renewed for the next ones: with the
  // version, in its transaction (committed together or not at all).
  notify::fired_event e;
  e.project_id = cert.project_id;
  e.event = stored->version == 1 ? notify::event_names::certificate_issued : notify::event_names::certificate_renewed;
  e.event_id = distribution::certificate_event_id(e.event, cert.id, std::to_string(stored->version));
  json::array names;
  for (const auto& n : by.names) names.emplace_back(n);
  e.data = json::object{{"certificate_id", cert.id},    {"name", cert.name},         {"domains", std::move(names)},
                        {"version", stored->version}, {"serial", next.doc.serial}, {"not_after", next.doc.not_after},
                        {"job_id", by.job_id}};
  e.key_base = e.event_id;
  e.source.certificate_id = cert.id;
  e.source.parent_job_id = by.job_id;
  e.source.triggered_by = by.job_type;
  if (auto fired = notify::fire_event(tx, e, now); !fired) return std::move(fired).error();
  return stored;
}

boost::asio::awaitable<void> log_stored_version(queue::job_context& ctx, const std::string& certificate_id,
                                                const distribution::version_stored& stored,
                                                const catalog::new_certificate& next) {
  co_await ctx.log("info", fmt::format("certificate {} version {} stored: serial {}, valid until {}", certificate_id,
                                       stored.version, next.doc.serial, format_iso8601(next.doc.not_after)));
  if (!stored.runs_opened.empty())
    co_await ctx.log("info",
                     fmt::format("auto_execute: runs opened for distribution(s) {}", fmt::join(stored.runs_opened, ", ")));
  if (!stored.runs_deferred.empty())
    co_await ctx.log("info", fmt::format("auto_execute: distribution(s) {} are running; the distributions sweep opens "
                                         "their run for version {} when it ends",
                                         fmt::join(stored.runs_deferred, ", "), stored.version));
}

}  // namespace certfleet::lifecycle::detail
