// The DNS-01 records of the issue/renew job (acme_order_job.hpp): where a record goes (CNAME
// delegation), the zone's authoritative servers, waiting for propagation, recording what was
// presented (so cleanup_dns finds it after a crash) and removing it.
#include "lifecycle/acme_order_job.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <fstream>
#include <set>

namespace certfleet::lifecycle::detail {

namespace asio = boost::asio;
namespace json = boost::json;

queue::outcome acme_job::dns_failure(const job_inputs& in, const error& e) {
  auto msg = fmt::format("DNS provider {} ({}): {}", in.provider.name, in.provider_spec.where(), e.message);
  if (acme::dns::dns_permanent(e)) return queue::outcome::permanent_failure(std::move(msg));
  return queue::outcome::failure(std::move(msg));
}

asio::awaitable<result<void>> acme_job::wait_for_propagation(const job_inputs& in) {
  // Where each record is checked. rfc2136: the provider's server first, then every NS address of
  // the zone it knows. exec, httpreq, powerdns: the authoritative servers of the record's own
  // zone as the system's resolver names them (certfleet does not talk DNS to those providers).
  std::vector<std::vector<std::string>> targets_of(presented_.size());
  std::string zone = zone_;
  if (in.provider_spec.through_api()) {
    const auto who = fmt::format("DNS ({})", in.provider_spec.kind);
    for (std::size_t i = 0; i < presented_.size(); ++i) {
      auto servers = co_await zone_servers(presented_[i].fqdn, who);
      if (!servers) co_return std::move(servers).error();
      targets_of[i] = std::move(*servers);
    }
    zone = "(each record's own)";
  } else {
    std::string server = in.provider_spec.server;
    auto ns = co_await acme::dns::authoritative_servers(server, zone, dns_opts_);
    if (!ns) co_return std::move(ns).error();
    for (const auto& n : *ns)
      if (!n.error.empty())
        co_await ctx_.log("warn", fmt::format("DNS: NS {} of zone {} skipped in the propagation check: {}", n.name, zone, n.error));
    auto all = acme::dns::propagation_targets(server, *ns);
    for (auto& t : targets_of) t = all;
  }
  std::set<std::string> servers;
  for (const auto& t : targets_of) servers.insert(t.begin(), t.end());
  co_await ctx_.log("info", fmt::format("DNS: waiting for {} record(s) at {} server(s) ({}), at most {} s",
                                        presented_.size(), servers.size(), fmt::join(servers, ", "),
                                        propagation_timeout_.count()));
  auto started = std::chrono::steady_clock::now();
  auto deadline = started + propagation_timeout_;
  std::set<std::pair<std::string, std::size_t>> seen;  // (server, record)
  std::string missing;
  while (true) {
    missing.clear();
    for (std::size_t i = 0; i < presented_.size(); ++i)
      for (const auto& t : targets_of[i]) {
        const auto& r = presented_[i];
        if (seen.count({t, i})) continue;
        std::string target = t, fqdn = r.fqdn;
        auto a = co_await acme::dns::txt_lookup(target, fqdn, dns_opts_);
        if (!a) co_return std::move(a).error();
        if (std::find(a->values.begin(), a->values.end(), r.value) != a->values.end())
          seen.insert({t, i});
        else if (missing.empty())
          missing = fmt::format("{} at {}", r.fqdn, t);
      }
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() + propagation_poll > deadline)
      co_return make_error(errc::timeout,
                           fmt::format("DNS: the TXT record {} was not answered within {} s (acme_dns_propagation_timeout_s): "
                                       "check that every authoritative server of zone {} receives the zone's updates",
                                       missing, propagation_timeout_.count(), zone),
                           "acme_dns_propagation_timeout_s");
    co_await ctx_.sleep(propagation_poll);
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  co_await ctx_.log("info", fmt::format("DNS: every record answered by every server after {} ms", waited.count()));
  co_return result<void>{};
}

asio::awaitable<result<void>> acme_job::record_presented(const job_inputs& in, const presented_record& r) {
  store::dns_record rec;
  rec.id = r.id;
  rec.project_id = in.cert.project_id;
  rec.provider_id = in.provider.id;
  rec.job_id = ctx_.job().id;
  rec.fence = ctx_.job().fence;
  rec.zone = in.provider_spec.zone;
  rec.fqdn = r.fqdn;
  rec.value = r.value;
  rec.presented_at = ctx_.clock().now_ms();
  store::tx_fn write = [rec](store::catalog_tx& tx) { return tx.add_dns_record(rec); };
  co_return co_await ctx_.store().catalog().transact(std::move(write));
}

asio::awaitable<void> acme_job::remove_records(const job_inputs& in, const dns_provider_handle& provider) {
  std::size_t left = 0;
  const auto call = call_options();
  for (const auto& r : presented_) {
    // zone_ is empty when the record's own update failed before answering: the provider's zone
    // (or the SOA walk) then.
    std::string zone = zone_.empty() ? in.provider_spec.zone : zone_, fqdn = r.fqdn, value = r.value;
    auto removed = co_await remove_dns_record(provider, zone, fqdn, value, call);
    // Tests make this removal fail (CERTFLEET_FAIL_AT) to follow the cleanup_dns job it leaves.
    if (removed && fault_point("acme_dns_remove"))
      removed = make_error(errc::timeout, "removal failed on purpose (CERTFLEET_FAIL_AT=acme_dns_remove)", "server");
    if (!removed) {
      ++left;
      co_await ctx_.log("warn", fmt::format("DNS: could not remove TXT {} (a cleanup_dns job tries again): {}", r.fqdn,
                                            removed.error().message));
      continue;
    }
    co_await ctx_.log("info", fmt::format("DNS: removed TXT {}", r.fqdn));
    const std::string id = r.id;
    const time_ms now = ctx_.clock().now_ms();
    store::tx_fn mark = [id, now](store::catalog_tx& tx) { return tx.mark_dns_record_removed(id, now); };
    if (auto m = co_await ctx_.store().catalog().transact(std::move(mark)); !m)
      co_await ctx_.log("warn", fmt::format("DNS: TXT {} removed, but recording it failed ({}): the DNS cleanup sweep "
                                            "removes it again, harmlessly",
                                            r.fqdn, m.error().message));
  }
  presented_.clear();
  if (left == 0) co_return;
  // What could not be removed now is a cleanup_dns job's, retried with backoff.
  auto j = cleanup_job(in.cert.project_id, ctx_.job().id, ctx_.job().fence, queue::triggers::acme_workflow);
  auto created = std::make_shared<std::string>();
  const time_ms now = ctx_.clock().now_ms();
  store::tx_fn enqueue = [j, now, created](store::catalog_tx& tx) -> result<void> {
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    *created = e->job.id;
    return {};
  };
  if (auto w = co_await ctx_.store().catalog().transact(std::move(enqueue)); !w)
    co_await ctx_.log("warn", fmt::format("DNS: enqueueing cleanup_dns failed ({}): the DNS cleanup sweep finds the "
                                          "{} record(s) left",
                                          w.error().message, left));
  else
    co_await ctx_.log("info", fmt::format("DNS: cleanup_dns job {} removes the {} record(s) left", *created, left));
}

asio::awaitable<result<std::vector<std::string>>> acme_job::manual_check_targets(const job_inputs& in,
                                                                                 const std::string& fqdn) {
  if (!in.provider_spec.check_server.empty()) co_return std::vector<std::string>{in.provider_spec.check_server};
  co_return co_await zone_servers(fqdn, "DNS (manual)");
}

asio::awaitable<result<std::string>> acme_job::system_resolver() {
  if (!resolver_.empty()) co_return resolver_;
  // A file read: on the cpu pool, not the event loop.
  auto found = co_await on_cpu<std::optional<std::string>>(opt_.cpu, [] {
    std::ifstream conf("/etc/resolv.conf");
    std::stringstream text;
    text << conf.rdbuf();
    return acme::dns::resolv_conf_nameserver(text.str());
  });
  if (!found)
    co_return make_error(errc::invalid_argument,
                         "no resolver to find the zone's authoritative servers: /etc/resolv.conf names no nameserver; "
                         "set the system setting acme_dns_resolver (a manual provider: or its manual.check_server)",
                         "acme_dns_resolver");
  co_return *found;
}

asio::awaitable<std::string> acme_job::delegated_name(const std::string& fqdn) {
  auto resolver = co_await system_resolver();
  if (!resolver) {
    co_await ctx_.log("warn", fmt::format("DNS: a CNAME at {} was not looked for: {}", fqdn, resolver.error().message));
    co_return fqdn;
  }
  auto recursive = dns_opts_;
  recursive.recursion_desired = true;
  recursive.egress = nullptr;  // the system's resolver, as in zone_servers
  auto target = co_await acme::dns::follow_cname(*resolver, fqdn, recursive);
  if (!target) {
    co_await ctx_.log("warn", fmt::format("DNS: a CNAME at {} was not looked for ({}): the record goes to the name itself",
                                          fqdn, target.error().message));
    co_return fqdn;
  }
  std::string name = fqdn;
  if (!name.empty() && name.back() == '.') name.pop_back();
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (*target == name) co_return fqdn;
  co_await ctx_.log("info", fmt::format("DNS: {} is a CNAME to {} (found through {}): the challenge record goes there",
                                        fqdn, *target, *resolver));
  co_return *target;
}

asio::awaitable<result<std::vector<std::string>>> acme_job::zone_servers(const std::string& fqdn, std::string_view who) {
  auto found = co_await system_resolver();
  if (!found) co_return std::move(found).error();
  std::string resolver = *found;
  auto recursive = dns_opts_;
  recursive.recursion_desired = true;
  // The resolver is the system's (acme_dns_resolver, /etc/resolv.conf: often 127.0.0.53), not a
  // project's input; the NS addresses it names are checked when they are asked.
  recursive.egress = nullptr;
  std::string name = fqdn;
  auto zone = co_await acme::dns::find_zone(resolver, name, recursive);
  if (!zone) co_return std::move(zone).error();
  std::string zone_name = *zone;
  auto ns = co_await acme::dns::authoritative_servers(resolver, zone_name, recursive);
  if (!ns) co_return std::move(ns).error();
  std::vector<std::string> out;
  for (const auto& n : *ns) {
    if (!n.error.empty()) co_await ctx_.log("warn", fmt::format("{}: NS {} of zone {} skipped: {}", who, n.name, zone_name, n.error));
    for (const auto& a : n.addresses)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  if (out.empty())
    co_return make_error(errc::invalid_argument,
                         fmt::format("no address of an authoritative server of zone {} was found through {}: set the "
                                     "provider's manual.check_server",
                                     zone_name, resolver),
                         "check_server");
  co_await ctx_.log("info", fmt::format("{}: zone {} (found through {}): asking {}", who, zone_name, resolver,
                                        fmt::join(out, ", ")));
  co_return out;
}

dns_call_options acme_job::call_options() {
  dns_call_options o;
  o.dns = dns_opts_;
  o.cpu = opt_.cpu;
  o.log = [this](std::string level, std::string message) -> asio::awaitable<void> {
    co_await ctx_.log(std::move(level), std::move(message));
  };
  return o;
}

}  // namespace certfleet::lifecycle::detail
