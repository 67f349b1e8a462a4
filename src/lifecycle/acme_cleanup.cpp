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
#include "certfleet/lifecycle/dns_providers.hpp"
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
  if (!p) co_return queue::outcome::permanent_failure(p.error());
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
  if (!in) co_return queue::outcome::failure(in.error());
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

// cleanup_dns for one attempt's records (key cleanup_dns:<job>:<fence>).
queue::enqueue_request cleanup_job(std::string project_id, const std::string& job_id, std::int64_t fence,
                                   std::string_view trigger) {
  queue::enqueue_request j;
  j.project_id = std::move(project_id);
  j.type = queue::job_names::cleanup_dns;
  j.payload = cleanup_dns_payload(job_id, fence);
  j.idempotency_key = cleanup_dns_key(job_id, fence);
  j.parent_job_id = job_id;
  j.triggered_by = trigger;
  return j;
}

}  // namespace certfleet::lifecycle::detail

namespace certfleet::lifecycle {

using detail::cleanup_job;

boost::asio::awaitable<result<int>> enqueue_dns_cleanups(store::store& st, const clock_source& clock, sweep_logger log) {
  store::read_value_fn<std::vector<store::dns_record>> read = [](store::catalog_read& rd) { return rd.dns_records_left(1000); };
  auto left = co_await store::read_value(st.catalog(), std::move(read));
  if (!left) co_return std::move(left).error();
  // One cleanup_dns per attempt that left records.
  std::map<std::pair<std::string, std::int64_t>, std::pair<std::string, int>> attempts;  // (job, fence) -> (project, n)
  for (const auto& r : *left) {
    auto& a = attempts[{r.job_id, r.fence}];
    a.first = r.project_id;
    ++a.second;
  }
  if (attempts.empty()) co_return 0;
  std::vector<queue::enqueue_request> jobs;
  for (const auto& [attempt, who] : attempts) jobs.push_back(cleanup_job(who.first, attempt.first, attempt.second, queue::triggers::dns_cleanup_sweep));
  auto now = clock.now_ms();
  auto created = std::make_shared<std::vector<std::string>>();
  store::tx_fn write = [jobs, now, created](store::catalog_tx& tx) -> result<void> {
    for (const auto& j : jobs) {
      auto e = queue::enqueue_in(tx.jobs(), j, now);
      if (!e) return std::move(e).error();
      if (e->created) created->push_back(fmt::format("{} for job {}", e->job.id, j.parent_job_id));
    }
    return {};
  };
  if (auto w = co_await st.catalog().transact(std::move(write)); !w) co_return std::move(w).error();
  if (log)
    for (const auto& c : *created) co_await log("info", fmt::format("acme_dns_cleanup: cleanup_dns {}", c));
  co_return static_cast<int>(created->size());
}

}  // namespace certfleet::lifecycle
