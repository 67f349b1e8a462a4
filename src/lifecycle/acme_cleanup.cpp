// cleanup_dns: removes the challenge records an ACME attempt left in its zones.
#include "certfleet/lifecycle/acme_jobs.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"
#include "lifecycle/acme_job_common.hpp"

namespace certfleet::lifecycle::detail {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {
struct cleanup_inputs {
  std::vector<store::dns_record> records;                  // still in a zone, of this project
  std::map<std::string, store::catalog_object> providers;  // by id; a deleted one is missing
};

}  // namespace

// Removes the challenge records one attempt left (RFC 2136 delete of exactly that value, TSIG
// with the provider's key), marking each removed. Records whose removal fails stay listed, and
// the job fails naming each: retried while a retry can help (the server did not answer), dead
// at once when not (the key is refused, the provider is gone).
asio::awaitable<queue::outcome> run_cleanup(queue::job_context& ctx, const acme_job_options& opt) {
  auto p = parse_cleanup_dns_payload(ctx.payload());
  if (!p) co_return queue::outcome::permanent_failure(p.error().message);
  if (!opt.key) co_return queue::outcome::failure("no key-encryption key is loaded in this worker: secrets cannot be opened");
  const std::string project = ctx.job().project_id, job_id = p->job_id;
  const std::int64_t fence = p->fence;
  store::read_value_fn<cleanup_inputs> read = [project, job_id, fence](store::catalog_read& rd) -> result<cleanup_inputs> {
    cleanup_inputs in;
    auto all = rd.dns_records_of(job_id, fence);
    if (!all) return std::move(all).error();
    for (auto& r : *all) {
      if (r.removed_at != 0 || r.project_id != project) continue;
      if (!in.providers.count(r.provider_id))
        if (auto o = rd.get_object(project, store::kind_dns_provider, r.provider_id)) in.providers.emplace(r.provider_id, std::move(*o));
      in.records.push_back(std::move(r));
    }
    return in;
  };
  auto in = co_await store::read_value(ctx.store().catalog(), std::move(read));
  if (!in) co_return queue::outcome::failure(in.error().message);
  if (in->records.empty()) {
    auto line = fmt::format("no challenge record of job {} (attempt {}) is left in DNS: nothing to remove", job_id, fence);
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  }
  auto settings = co_await store::read_settings(ctx.store());
  acme::dns::client_options dns_opts;
  dns_opts.resolve_pool = opt.cpu;
  dns_opts.clock = &ctx.clock();
  dns_opts.nameserver_port = static_cast<std::uint16_t>(settings.integer("acme_dns_nameserver_port"));
  const auto allow = acme_allow_list_of(settings);
  dns_opts.egress = &allow;
  dns_call_options call;
  call.dns = dns_opts;
  call.cpu = opt.cpu;
  call.log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
    co_await ctx.log(std::move(level), std::move(message));
  };

  std::vector<std::string> failures;
  bool retry_can_help = false;
  for (const auto& r : in->records) {
    ctx.checkpoint();
    const std::string zone_text = r.zone.empty() ? std::string("(the zone its server serves)") : r.zone;
    auto it = in->providers.find(r.provider_id);
    if (it == in->providers.end()) {
      failures.push_back(fmt::format("TXT {} \"{}\" in zone {}: the DNS provider {} no longer exists", r.fqdn, r.value,
                                     zone_text, r.provider_id));
      continue;
    }
    const auto& provider = it->second;
    auto spec = parse_dns_provider_doc(provider);
    if (!spec) {
      failures.push_back(fmt::format("TXT {} in zone {} (provider {}): {}", r.fqdn, zone_text, provider.name, spec.error().message));
      continue;
    }
    auto handle = open_dns_provider(*opt.key, provider, *spec);
    if (!handle) {
      failures.push_back(fmt::format("TXT {} in zone {} (provider {}): {}", r.fqdn, zone_text, provider.name, handle.error().message));
      continue;
    }
    std::string zone = r.zone, fqdn = r.fqdn, value = r.value;
    auto removed = co_await remove_dns_record(*handle, zone, fqdn, value, call);
    if (!removed) {
      retry_can_help = retry_can_help || !acme::dns::dns_permanent(removed.error());
      failures.push_back(fmt::format("TXT {} in zone {} at {} (provider {}): {}", r.fqdn, zone_text, spec->where(),
                                     provider.name, removed.error().message));
      continue;
    }
    const std::string id = r.id;
    const time_ms now = ctx.clock().now_ms();
    store::tx_fn mark = [id, now](store::catalog_tx& tx) { return tx.mark_dns_record_removed(id, now); };
    if (auto m = co_await ctx.store().catalog().transact(std::move(mark)); !m)
      co_return queue::outcome::failure(fmt::format("TXT {} removed, but recording it failed: {}", r.fqdn, m.error().message));
    auto line = fmt::format("DNS: removed TXT {} in zone {} at {} (provider {}), presented by job {} at {}", r.fqdn,
                            removed->empty() ? zone_text : *removed, spec->where(), provider.name, r.job_id,
                            format_iso8601(r.presented_at));
    co_await ctx.log("info", std::move(line));
  }
  if (failures.empty()) {
    auto line = fmt::format("removed the {} challenge record(s) job {} (attempt {}) left", in->records.size(), job_id, fence);
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  }
  auto msg = fmt::format("{} of {} challenge record(s) not removed: {}", failures.size(), in->records.size(),
                         fmt::join(failures, "; "));
  if (retry_can_help) co_return queue::outcome::failure(std::move(msg));
  co_return queue::outcome::permanent_failure(std::move(msg));
}

}  // namespace certfleet::lifecycle::detail
