// issue_certificate / renew_certificate: one RFC 8555 order with DNS-01 through a DNS provider
// (rfc2136, exec, or manual: dns_providers.hpp), the certificate stored as its next version (which opens its auto_execute
// distributions' runs in the same transaction), and the TXT records removed whatever happened.
// revoke_certificate and cleanup_dns are acme_revoke.cpp's and acme_cleanup.cpp's; all are
// registered here.
#include "certfleet/lifecycle/acme_jobs.hpp"

#include "lifecycle/acme_job_common.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/key_type.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/lifecycle/acme_workflow.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <limits>
#include <chrono>
#include <exception>
#include <map>
#include <sstream>
#include <fstream>
#include <set>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using detail::acme_allow_list_of;
using detail::client_options_for;
using detail::from_failure;
using detail::run_cleanup;
using detail::run_revoke;

namespace {


// Waits between propagation checks.
constexpr auto propagation_poll = 500ms;
// Each authorization and order poll.
constexpr auto acme_poll_limit = std::chrono::milliseconds(120'000);
// A CA's Retry-After is honoured up to this (the queue's backoff takes over beyond).
constexpr std::int64_t retry_after_cap_s = 3600;
constexpr std::uint32_t challenge_ttl = 60;
// The first validate_manual_dns of a manual order runs this long after the order was prepared
// (the operator's records rarely exist sooner; validate-dns asks again at once).
constexpr time_ms manual_first_check_ms = 30'000;

// CPU work (key generation) on the pool; back on the caller's executor after.
template <class T, class F>
asio::awaitable<T> on_cpu(asio::thread_pool* cpu, F fn) {
  if (!cpu) co_return fn();
  // co_spawn's value must be default-constructible; result<T> is not.
  auto out = co_await asio::co_spawn(
      cpu->get_executor(), [fn = std::move(fn)]() -> asio::awaitable<std::optional<T>> { co_return fn(); },
      asio::use_awaitable);
  co_return std::move(*out);
}

std::string trust_anchors(const std::string& account_ca, const std::string& extra) {
  if (account_ca.empty()) return extra;
  if (extra.empty()) return account_ca;
  return account_ca + "\n" + extra;
}


// What one job works with, read in one snapshot.
struct job_inputs {
  store::catalog_object cert, account, provider;
  catalog::certificate_doc doc;
  acme_account_spec account_spec;
  dns_provider_spec provider_spec;
};

struct presented_record {
  std::string id;  // its store::dns_record
  std::string fqdn, value;
};

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



class acme_job {
 public:
  // issue_certificate, renew_certificate, or validate_manual_dns (which carries on the order an
  // issue/renew job of a manual provider prepared).
  enum class mode { issue, renew, validate_manual };
  acme_job(queue::job_context& ctx, const acme_job_options& opt, mode m)
      : ctx_(ctx), opt_(opt), mode_(m), renewal_(m == mode::renew) {}

  asio::awaitable<queue::outcome> run();

 private:
  asio::awaitable<void> step(std::string_view name);
  asio::awaitable<result<job_inputs>> load(std::string certificate_id);
  // The directory read and the account's URL known; a failure's outcome otherwise.
  asio::awaitable<std::optional<queue::outcome>> open_account(acme::client& client, const job_inputs& in,
                                                              acme::directory& dir);
  // Everything from the directory to the stored version; records what it presented in presented_.
  // A manual provider's order stops at awaiting_validation instead (hand_to_operator).
  asio::awaitable<queue::outcome> order_and_store(const job_inputs& in, const acme::account_key& akey,
                                                  const dns_provider_handle* provider);
  // From a ready order to the stored version: finalize with a new key, download, store.
  asio::awaitable<queue::outcome> finish_order(const job_inputs& in, acme::client& client, const std::string& order_url);
  asio::awaitable<queue::outcome> hand_to_operator(const job_inputs& in, const std::string& order_url,
                                                   std::vector<catalog::manual_challenge> challenges);
  // validate_manual_dns: the records checked at the provider's check_server, the challenges
  // answered, then finish_order.
  asio::awaitable<queue::outcome> validate_manual(const job_inputs& in, const acme::account_key& akey,
                                                  const std::string& order_job_id);
  asio::awaitable<result<void>> save_manual_statuses(const job_inputs& in, const catalog::manual_order& m);
  asio::awaitable<result<std::vector<std::string>>> manual_check_targets(const job_inputs& in, const std::string& fqdn);
  // The addresses of the authoritative servers of the zone holding `fqdn`, found through the
  // system's resolver (acme_dns_resolver or /etc/resolv.conf); `who` prefixes the log lines.
  asio::awaitable<result<std::vector<std::string>>> zone_servers(const std::string& fqdn, std::string_view who);
  // The system's resolver: acme_dns_resolver, else the first nameserver of /etc/resolv.conf.
  asio::awaitable<result<std::string>> system_resolver();
  // Where the challenge record of `fqdn` goes: the end of a CNAME chain at it (DNS-01
  // delegation), else `fqdn`. A lookup that fails is logged and the name kept.
  asio::awaitable<std::string> delegated_name(const std::string& fqdn);
  dns_call_options call_options();
  asio::awaitable<result<void>> wait_for_propagation(const job_inputs& in);
  asio::awaitable<void> remove_records(const job_inputs& in, const dns_provider_handle& provider);
  asio::awaitable<result<void>> record_presented(const job_inputs& in, const presented_record& r);
  asio::awaitable<void> record_failure(const job_inputs& in, const queue::outcome& o);
  queue::outcome dns_failure(const job_inputs& in, const error& e);

  queue::job_context& ctx_;
  const acme_job_options& opt_;
  mode mode_;
  bool renewal_;
  std::int64_t for_version_ = 0;  // a renewal's payload.version: the version it replaces (0: not given)
  std::vector<presented_record> presented_;
  std::string zone_;  // the zone the records went to
  acme::dns::client_options dns_opts_;
  net::egress_policy allow_;  // acme_allow_list, read at the job's start
  std::chrono::seconds propagation_timeout_{300};
  std::string resolver_;  // acme_dns_resolver ("": /etc/resolv.conf)
};

asio::awaitable<void> acme_job::step(std::string_view name) {
  ctx_.checkpoint();
  // Tests kill a worker at the start of each step (CERTFLEET_CRASH_AT=acme_step_<name>).
  crash_point(std::string("acme_step_") + std::string(name));
  // The job's progress is its step's position: the workflow view reads it back (acme_workflow.hpp).
  const auto steps = acme_workflow_steps();
  auto at = std::find(steps.begin(), steps.end(), name) - steps.begin();
  co_await ctx_.progress(at + 1, static_cast<std::int64_t>(steps.size()));
  co_await ctx_.log("info", fmt::format("workflow step: {}", name));
}

asio::awaitable<result<job_inputs>> acme_job::load(std::string certificate_id) {
  const std::string project = ctx_.job().project_id;
  store::read_value_fn<job_inputs> read = [project, certificate_id](store::catalog_read& rd) -> result<job_inputs> {
    job_inputs in;
    auto got = catalog::read_certificate(rd, project, certificate_id);
    if (!got) return std::move(got).error();
    in.cert = std::move(got->object);
    in.doc = std::move(got->doc);
    if (in.doc.source != "acme" || !in.doc.acme)
      return make_error(errc::invalid_argument,
                        fmt::format("certificate {} is not an ACME certificate (source {})", certificate_id, in.doc.source),
                        "certificate_id");
    // Issuance approval (docs/approval.md): a job enqueued by hand (POST …/jobs) does not go
    // around it; only the approval enqueues the issue job of a waiting request.
    if (in.doc.status == "awaiting_approval")
      return make_error(errc::invalid_argument,
                        fmt::format("certificate {} awaits approval by an admin other than its requester (POST "
                                    "…/certificates/{}/approve): no job orders it before that",
                                    certificate_id, certificate_id),
                        "certificate_id");
    if (in.doc.status == "rejected")
      return make_error(errc::invalid_argument,
                        fmt::format("certificate {} was rejected ({}): nothing is ordered for it; delete it and ask again",
                                    certificate_id, in.doc.acme->approval ? in.doc.acme->approval->reason : ""),
                        "certificate_id");
    auto a = rd.get_object(project, store::kind_acme_account, in.doc.acme->acme_account_id);
    if (!a)
      return make_error(errc::invalid_argument,
                        fmt::format("the ACME account {} of certificate {} no longer exists", in.doc.acme->acme_account_id,
                                    certificate_id),
                        "acme_account_id");
    in.account = std::move(*a);
    auto p = rd.get_object(project, store::kind_dns_provider, in.doc.acme->dns_provider_id);
    if (!p)
      return make_error(errc::invalid_argument,
                        fmt::format("the DNS provider {} of certificate {} no longer exists", in.doc.acme->dns_provider_id,
                                    certificate_id),
                        "dns_provider_id");
    in.provider = std::move(*p);
    auto as = parse_acme_account_doc(in.account);
    if (!as) return std::move(as).error();
    in.account_spec = std::move(*as);
    auto ps = parse_dns_provider_doc(in.provider);
    if (!ps) return std::move(ps).error();
    in.provider_spec = std::move(*ps);
    return in;
  };
  co_return co_await store::read_value(ctx_.store().catalog(), std::move(read));
}

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

asio::awaitable<std::optional<queue::outcome>> acme_job::open_account(acme::client& client, const job_inputs& in,
                                                                        acme::directory& dir) {
  auto d = co_await client.get_directory();
  if (!d) co_return from_failure(d.failure());
  dir = *d;
  if (in.account_spec.account_url.empty()) {
    // Registered at creation; an account stored without its URL (a CA that failed after
    // answering) is looked up again here. The key's existing account comes back unchanged.
    acme::account_request req(in.account_spec.contact, in.account_spec.terms_agreed);
    auto acct = co_await client.new_account(std::move(req));
    if (!acct) co_return from_failure(acct.failure());
  } else {
    client.set_account_url(in.account_spec.account_url);
  }
  co_return std::nullopt;
}

asio::awaitable<queue::outcome> acme_job::order_and_store(const job_inputs& in, const acme::account_key& akey,
                                                          const dns_provider_handle* provider) {
  const auto& acme_doc = *in.doc.acme;
  acme::client client(client_options_for(in.account_spec, opt_, ctx_, allow_), akey);
  acme::directory directory;
  if (auto failed = co_await open_account(client, in, directory)) co_return std::move(*failed);
  const acme::directory* dir = &directory;

  std::string replaces;
  if (renewal_ && !dir->renewal_info.empty()) {
    auto id = acme::ari_cert_id_of(in.doc.cert_pem);
    if (id) replaces = std::move(*id);
  }
  acme::order_request oreq(acme_doc.domains, replaces, acme_doc.profile);
  auto order = co_await client.new_order(std::move(oreq));
  if (!order) co_return from_failure(order.failure());

  // Authorizations: present every pending one's record before answering any challenge (a manual
  // provider's records are the operator's to create: they are listed instead).
  const bool manual = in.provider_spec.manual();
  if (!manual) co_await step("dns_presenting");
  std::vector<std::pair<std::string, std::string>> to_answer;  // (authorization URL, challenge URL)
  std::vector<catalog::manual_challenge> for_operator;
  for (const auto& url : order->order.authorizations) {
    auto z = co_await client.get_authorization(url);
    if (!z) co_return from_failure(z.failure());
    if (z->authorization.status == acme::authorization_status::valid) {
      co_await ctx_.log("info", fmt::format("ACME authorization for {} is already valid (reused)", z->authorization.ident.value));
      continue;
    }
    const acme::challenge* ch = z->authorization.find("dns-01");
    if (!ch)
      co_return queue::outcome::permanent_failure(fmt::format(
          "the CA offers no dns-01 challenge for {}: certfleet answers only DNS-01", z->authorization.ident.value));
    presented_record rec{new_object_id(), acme::dns01_record_name(z->authorization.ident.value),
                         acme::dns01_txt_value(acme::key_authorization(ch->token, akey.thumbprint()))};
    // A delegated challenge (a CNAME at _acme-challenge.<name>) is presented, checked and
    // removed at the CNAME's target; the CA follows the CNAME when it validates.
    if (!manual) rec.fqdn = co_await delegated_name(rec.fqdn);
    if (manual) {
      catalog::manual_challenge c;
      c.fqdn = rec.fqdn;
      c.value = rec.value;
      c.authorization_url = url;
      c.challenge_url = ch->url;
      for_operator.push_back(std::move(c));
      continue;
    }
    std::string zone = in.provider_spec.zone, fqdn = rec.fqdn, value = rec.value;
    // Recorded in the store and listed before the update: a TXT the server took but whose answer
    // was lost is removed too, by this job or, after a crash, by the DNS cleanup sweep.
    if (auto recorded = co_await record_presented(in, rec); !recorded)
      co_return queue::outcome::failure(fmt::format("recording the challenge record {}: {}", rec.fqdn, recorded.error().message));
    presented_.push_back(rec);
    // A local, not a temporary argument: GCC 12 destroys a temporary of a co_await's full
    // expression twice (the std::function inside it then frees twice).
    const auto call = call_options();
    auto put = co_await present_dns_record(*provider, zone, fqdn, value, challenge_ttl, call);
    if (!put) co_return dns_failure(in, put.error());
    std::string in_zone;  // a local, not a ?: temporary inside the co_await (GCC 12 destroys those twice)
    if (!put->empty()) {
      zone_ = *put;
      in_zone = " in zone " + *put;
    }
    auto presented_line = fmt::format("DNS: presented TXT {}{} at {}", rec.fqdn, in_zone, in.provider_spec.where());
    co_await ctx_.log("info", std::move(presented_line));
    crash_point("acme_dns_presented");
    to_answer.emplace_back(url, ch->url);
  }
  if (!for_operator.empty()) co_return co_await hand_to_operator(in, order->url, std::move(for_operator));

  if (!to_answer.empty()) {
    co_await step("dns_propagating");
    if (in.provider_spec.through_api() && !in.provider_spec.check_propagation) {
      co_await ctx_.log("info", fmt::format("DNS: {}.check_propagation is off: the provider's answer is taken as the "
                                            "records being served",
                                            in.provider_spec.kind));
    } else if (auto p = co_await wait_for_propagation(in); !p) {
      if (p.error().is(errc::timeout)) co_return queue::outcome::failure(p.error().message);
      co_return dns_failure(in, p.error());
    }
    co_await step("validating");
    for (const auto& [authz, challenge] : to_answer) {
      auto answered = co_await client.respond_challenge(challenge);
      if (!answered) co_return from_failure(answered.failure());
    }
    for (const auto& [authz, challenge] : to_answer) {
      auto z = co_await client.poll_authorization(authz, acme_poll_limit);
      if (!z) co_return from_failure(z.failure());
    }
  }
  if (!presented_.empty()) co_await remove_records(in, *provider);
  co_return co_await finish_order(in, client, order->url);
}

asio::awaitable<queue::outcome> acme_job::finish_order(const job_inputs& in, acme::client& client,
                                                       const std::string& order_url) {
  const auto& acme_doc = *in.doc.acme;
  co_await step("finalizing");
  auto ready = co_await client.poll_order(order_url, acme_poll_limit);
  if (!ready) co_return from_failure(ready.failure());
  auto type = acme::parse_key_type(acme_doc.key_type).value_or(acme::default_key_type);
  auto key_pem = co_await on_cpu<result<std::string>>(opt_.cpu, [type] { return acme::generate_private_key(type); });
  if (!key_pem) co_return queue::outcome::permanent_failure(key_pem.error().message);
  auto csr = acme::make_csr(*key_pem, acme_doc.domains);
  if (!csr) co_return queue::outcome::permanent_failure(csr.error().message);
  co_await ctx_.log("info", fmt::format("ACME: new {} key made for the CSR ({} name(s))", acme_doc.key_type, acme_doc.domains.size()));
  auto fin = co_await client.finalize(*ready, std::move(*csr));
  if (!fin) co_return from_failure(fin.failure());
  auto valid = co_await client.poll_order(order_url, acme_poll_limit);
  if (!valid) co_return from_failure(valid.failure());
  if (valid->order.status != acme::order_status::valid || valid->order.certificate.empty())
    co_return queue::outcome::failure(fmt::format("order {} is {} after finalize, with no certificate URL", order_url,
                                                  acme::order_status_name(valid->order.status)));

  co_await step("downloading");
  auto pem = co_await client.download_certificate(valid->order.certificate);
  if (!pem) co_return from_failure(pem.failure());
  auto issued = acme::read_issued_chain(*pem, *key_pem);
  if (!issued) co_return queue::outcome::permanent_failure(issued.error().message);

  co_await step("storing");
  auto now = ctx_.clock().now_ms();
  auto info = delivery::parse_certificate_bundle(issued->leaf_pem, issued->chain_pem, *key_pem, now);
  if (!info) co_return queue::outcome::permanent_failure(fmt::format("the CA's certificate: {}", info.error().message));
  auto next = std::make_shared<catalog::new_certificate>();
  next->name = in.cert.name;
  next->key_pem = std::move(*key_pem);
  next->doc.subject = info->subject;
  next->doc.issuer = info->issuer;
  next->doc.sans = info->sans;
  next->doc.not_before = info->not_before_ms;
  next->doc.not_after = info->not_after_ms;
  next->doc.fingerprint_sha256 = info->fingerprint_sha256;
  next->doc.serial = info->serial;
  next->doc.cert_pem = issued->leaf_pem;
  next->doc.chain_pem = issued->chain_pem;

  auto rs = distribution::run_settings_from(co_await store::read_settings(ctx_.store()));
  const kek* key = opt_.key;
  const std::string project = in.cert.project_id, cert_id = in.cert.id;
  const std::int64_t expected_version = in.doc.version;
  const std::string actor = fmt::format("job:{}", ctx_.job().id);
  const std::string job_id = ctx_.job().id, job_type = ctx_.job().type;
  const std::vector<std::string> domains = acme_doc.domains;
  auto stored = std::make_shared<distribution::version_stored>();
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    auto* cert = &got->object;
    auto* doc = &got->doc;
    // Another job stored a version meanwhile (a renewal key of the next version, a retried
    // attempt whose first run committed): this one does not stack a second on it.
    if (doc->version != expected_version)
      return make_error(errc::conflict,
                        fmt::format("certificate {} is at version {} now (this job started from {}): not stored twice",
                                    cert_id, doc->version, expected_version),
                        "version");
    auto s = distribution::store_new_version(tx, *key, *cert, *next, rs, now, actor);
    if (!s) return std::move(s).error();
    *stored = std::move(*s);
    // certificate.issued for the first version, certificate.renewed for the next ones: with the
    // version, in its transaction (committed together or not at all).
    notify::fired_event e;
    e.project_id = project;
    e.event = stored->version == 1 ? notify::event_names::certificate_issued : notify::event_names::certificate_renewed;
    e.event_id = distribution::certificate_event_id(e.event, cert_id, std::to_string(stored->version));
    json::array names;
    for (const auto& n : domains) names.emplace_back(n);
    e.data = json::object{{"certificate_id", cert_id},      {"name", cert->name},
                          {"domains", std::move(names)},   {"version", stored->version},
                          {"serial", next->doc.serial},    {"not_after", next->doc.not_after},
                          {"job_id", job_id}};
    e.key_base = e.event_id;
    e.source.certificate_id = cert_id;
    e.source.parent_job_id = job_id;
    e.source.triggered_by = job_type;
    auto fired = notify::fire_event(tx, e, now);
    if (!fired) return std::move(fired).error();
    return {};
  };
  auto w = co_await ctx_.store().catalog().transact(std::move(write));
  if (!w) {
    if (w.error().is(errc::conflict)) {
      co_await ctx_.log("warn", w.error().message);
      co_return queue::outcome::ok();
    }
    co_return queue::outcome::failure(fmt::format("storing the new version: {}", w.error().message));
  }
  co_await ctx_.log("info", fmt::format("certificate {} version {} stored: serial {}, valid until {}", cert_id, stored->version,
                                        info->serial, format_iso8601(info->not_after_ms)));
  if (!stored->runs_opened.empty())
    co_await ctx_.log("info", fmt::format("auto_execute: runs opened for distribution(s) {}", fmt::join(stored->runs_opened, ", ")));
  if (!stored->runs_deferred.empty())
    co_await ctx_.log("info", fmt::format("auto_execute: distribution(s) {} are running; the distributions sweep opens "
                                          "their run for version {} when it ends",
                                          fmt::join(stored->runs_deferred, ", "), stored->version));
  co_await step("completed");
  co_return queue::outcome::ok();
}

// The manual path (DESIGN §9): the order and its records go on the certificate, with the first
// validate_manual_dns job (due after manual_first_check), in one transaction; this job ends
// completed at awaiting_validation. A retried attempt whose first one committed finds its own
// order there and ends the same way (run()).
asio::awaitable<queue::outcome> acme_job::hand_to_operator(const job_inputs& in, const std::string& order_url,
                                                           std::vector<catalog::manual_challenge> challenges) {
  const std::string project = in.cert.project_id, cert_id = in.cert.id, job_id = ctx_.job().id;
  const std::int64_t version = in.doc.version;
  const time_ms now = ctx_.clock().now_ms();
  auto validation_job = std::make_shared<std::string>();
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    if (doc->version != version || !doc->acme)
      return make_error(errc::conflict,
                        fmt::format("certificate {} is at version {} now (this job started from {})", cert_id,
                                    doc->version, version),
                        "version");
    queue::enqueue_request j;
    j.project_id = project;
    j.type = queue::job_names::validate_manual_dns;
    j.payload = validate_dns_payload(cert_id, job_id);
    j.idempotency_key = validate_dns_key(job_id, 1);
    j.parent_job_id = job_id;
    j.certificate_id = cert_id;
    j.triggered_by = queue::triggers::acme_workflow;
    j.run_at = now + manual_first_check_ms;
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    *validation_job = e->job.id;
    catalog::manual_order m;
    m.job_id = job_id;
    m.order_url = order_url;
    m.from_version = version;
    m.challenges = challenges;
    m.validations = 1;
    m.last_validation_job_id = e->job.id;
    doc->acme->manual = std::move(m);
    doc->acme->last_error.clear();
    return tx.update_object_doc(cert_id, catalog::certificate_doc_json(*doc));
  };
  auto w = co_await ctx_.store().catalog().transact(std::move(write));
  if (!w) {
    if (w.error().is(errc::conflict)) co_return queue::outcome::permanent_failure(w.error().message);
    co_return queue::outcome::failure(fmt::format("storing the manual DNS challenges: {}", w.error().message));
  }
  crash_point("acme_manual_handed_over");
  co_await step("awaiting_validation");
  for (const auto& c : challenges)
    co_await ctx_.log("info", fmt::format("DNS (manual): create TXT {} = \"{}\"", c.fqdn, c.value));
  co_await ctx_.log("info", fmt::format("DNS (manual): {} record(s) to create at your DNS provider; validate_manual_dns job {} "
                                        "checks them in {} s, and POST …/jobs/{}/validate-dns checks them again",
                                        challenges.size(), *validation_job, manual_first_check_ms / 1000, job_id));
  co_return queue::outcome::ok();
}

// Where validate_manual_dns looks for a record: the provider's check_server; without one, every
// authoritative server of the record's zone, found through a recursive resolver (the setting
// acme_dns_resolver, else the worker's /etc/resolv.conf) and then asked themselves.
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

asio::awaitable<result<void>> acme_job::save_manual_statuses(const job_inputs& in, const catalog::manual_order& m) {
  const std::string project = in.cert.project_id, cert_id = in.cert.id, order_job = m.job_id;
  const std::vector<catalog::manual_challenge> challenges = m.challenges;
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    // Another order replaced this one meanwhile: its statuses are not ours to write.
    if (!doc->acme || !doc->acme->manual || doc->acme->manual->job_id != order_job) return {};
    doc->acme->manual->challenges = challenges;
    return tx.update_object_doc(cert_id, catalog::certificate_doc_json(*doc));
  };
  co_return co_await ctx_.store().catalog().transact(std::move(write));
}

asio::awaitable<queue::outcome> acme_job::validate_manual(const job_inputs& in, const acme::account_key& akey,
                                                          const std::string& order_job_id) {
  const auto* waiting = in.doc.acme->manual ? &*in.doc.acme->manual : nullptr;
  if (!waiting || waiting->job_id != order_job_id)
    co_return queue::outcome::permanent_failure(fmt::format(
        "certificate {} has no manual DNS order of job {} waiting (a later issue or renewal job replaced it): validate "
        "the latest one, or renew again",
        in.cert.id, order_job_id));
  if (in.doc.version != waiting->from_version) {
    co_await ctx_.log("info", fmt::format("certificate {} is at version {}: this order was validated and stored already",
                                          in.cert.id, in.doc.version));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  catalog::manual_order m = *waiting;

  // The operator's records, where the provider says to look. Missing ones fail this attempt
  // (retried with backoff; then the operator asks again with validate-dns).
  co_await step("dns_propagating");
  std::vector<std::string> missing;
  for (const auto& c : m.challenges) {
    if (c.status == "valid") continue;
    auto targets = co_await manual_check_targets(in, c.fqdn);
    if (!targets) co_return dns_failure(in, targets.error());
    for (const auto& server : *targets) {
      std::string target = server, fqdn = c.fqdn;
      auto a = co_await acme::dns::txt_lookup(target, fqdn, dns_opts_);
      if (!a) co_return dns_failure(in, a.error());
      if (std::find(a->values.begin(), a->values.end(), c.value) == a->values.end())
        missing.push_back(fmt::format("TXT {} = \"{}\" at {}", c.fqdn, c.value, server));
      else
        co_await ctx_.log("info", fmt::format("DNS (manual): {} answers TXT {} with the challenge value", server, c.fqdn));
    }
  }
  if (!missing.empty())
    co_return queue::outcome::failure(fmt::format(
        "DNS (manual): not answered yet: {}: create the record(s) at your DNS provider, then POST …/jobs/{}/validate-dns",
        fmt::join(missing, ", "), order_job_id));

  acme::client client(client_options_for(in.account_spec, opt_, ctx_, allow_), akey);
  acme::directory dir;
  if (auto failed = co_await open_account(client, in, dir)) co_return std::move(*failed);
  co_await step("validating");
  for (auto& c : m.challenges) {
    auto z = co_await client.get_authorization(c.authorization_url);
    if (!z) co_return from_failure(z.failure());
    if (z->authorization.status == acme::authorization_status::pending) {
      auto answered = co_await client.respond_challenge(c.challenge_url);
      if (!answered) co_return from_failure(answered.failure());
      auto polled = co_await client.poll_authorization(c.authorization_url, acme_poll_limit);
      if (!polled) {
        c.status = "invalid";
        if (auto saved = co_await save_manual_statuses(in, m); !saved)
          co_await ctx_.log("warn", fmt::format("recording the challenge statuses: {}", saved.error().message));
        auto f = from_failure(polled.failure());
        if (f.k == queue::outcome::kind::failed_permanently)
          f.error += " — this order cannot be validated any more: renew (POST …/certificates/{id}/renew) or issue again";
        co_return f;
      }
    } else if (z->authorization.status != acme::authorization_status::valid) {
      c.status = "invalid";
      (void)co_await save_manual_statuses(in, m);
      co_return queue::outcome::permanent_failure(fmt::format(
          "the CA's authorization for {} is {}: this order cannot be validated any more; renew or issue again",
          z->authorization.ident.value, acme::authorization_status_name(z->authorization.status)));
    }
    c.status = "valid";
    co_await ctx_.log("info", fmt::format("ACME: the CA validated TXT {}", c.fqdn));
  }
  if (auto saved = co_await save_manual_statuses(in, m); !saved)
    co_await ctx_.log("warn", fmt::format("recording the challenge statuses: {}", saved.error().message));
  co_return co_await finish_order(in, client, m.order_url);
}

asio::awaitable<void> acme_job::record_failure(const job_inputs& in, const queue::outcome& o) {
  // A failed first issuance leaves the certificate failed when retrying cannot help; a renewal
  // leaves the current version in place. Either way the certificate shows the last error.
  // A manual order whose records are still missing keeps waiting: validate-dns asks again. Only
  // an order the CA refused ends the certificate.
  const bool dead_now = o.k == queue::outcome::kind::failed_permanently ||
                        (mode_ != mode::validate_manual && ctx_.job().attempts >= ctx_.job().max_attempts);
  const std::string project = in.cert.project_id, cert_id = in.cert.id, why = o.error;
  const std::int64_t version = in.doc.version;
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto cert = tx.get_object(project, store::kind_certificate, cert_id);
    if (!cert) return {};
    auto doc = catalog::parse_certificate_doc(*cert, true);
    if (!doc || doc->version != version || !doc->acme) return {};
    doc->acme->last_error = why;
    if (doc->version == 0 && dead_now) doc->status = "failed";
    return tx.update_object_doc(cert_id, catalog::certificate_doc_json(*doc));
  };
  if (auto w = co_await ctx_.store().catalog().transact(std::move(write)); !w)
    co_await ctx_.log("warn", fmt::format("could not record the failure on the certificate: {}", w.error().message));
}

asio::awaitable<queue::outcome> acme_job::run() {
  std::optional<std::string> cert_id;
  std::string order_job_id;
  if (mode_ == mode::validate_manual) {
    auto v = parse_validate_dns_payload(ctx_.payload());
    if (!v) co_return queue::outcome::permanent_failure(v.error().message);
    cert_id = v->certificate_id;
    order_job_id = v->order_job_id;
  } else {
    auto p = certfleet::json::object_reader::parse(ctx_.payload(), "payload");
    if (!p) co_return queue::outcome::permanent_failure(p.error().message);
    auto id = p->required_string("certificate_id");
    if (!id) co_return queue::outcome::permanent_failure(id.error().message);
    cert_id = std::move(*id);
    auto version = p->optional_int("version");
    if (!version) co_return queue::outcome::permanent_failure(version.error().message);
    for_version_ = version->value_or(0);
  }
  if (!opt_.key) co_return queue::outcome::failure("no key-encryption key is loaded in this worker: secrets cannot be opened");

  co_await step("initialized");
  auto in = co_await load(*cert_id);
  if (!in) {
    if (in.error().is(errc::not_found) || in.error().is(errc::invalid_argument))
      co_return queue::outcome::permanent_failure(in.error().message);
    co_return queue::outcome::failure(in.error().message);
  }
  if (mode_ == mode::validate_manual && !in->provider_spec.manual())
    co_return queue::outcome::permanent_failure(fmt::format(
        "the DNS provider {} of certificate {} is not a manual provider: its jobs present their records themselves",
        in->provider.name, *cert_id));
  if (mode_ != mode::validate_manual && in->provider_spec.manual() && in->doc.acme->manual &&
      in->doc.acme->manual->job_id == ctx_.job().id && in->doc.acme->manual->from_version == in->doc.version) {
    // An earlier attempt of this job handed the order over and was interrupted before finishing.
    co_await step("awaiting_validation");
    co_await ctx_.log("info", "DNS (manual): this job's order already waits for the operator's records");
    co_return queue::outcome::ok();
  }
  if (renewal_ && in->doc.version == 0)
    co_return queue::outcome::permanent_failure(
        fmt::format("certificate {} has no issued version to renew: its issue_certificate job issues it", *cert_id));
  // A renewal is for the version it was enqueued for (its key renew:<cert>:<expires_at_unix>
  // names it too, but two versions issued within one second share that): when that version was
  // replaced already (this job's earlier attempt stored the next one and was killed before
  // finishing), renewing again would issue twice for one key.
  if (renewal_ && for_version_ > 0 && in->doc.version > for_version_) {
    co_await ctx_.log("info", fmt::format("certificate {} is at version {}: the version this renewal was for is replaced "
                                          "already, nothing to renew",
                                          *cert_id, in->doc.version));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  if (mode_ == mode::issue && in->doc.version > 0) {
    co_await ctx_.log("info", fmt::format("certificate {} already has version {}: nothing to issue", *cert_id, in->doc.version));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  if (renewal_ && !in->doc.acme->auto_renew && ctx_.job().triggered_by == queue::triggers::renewal_sweep) {
    co_await ctx_.log("info", "auto_renew is off for this certificate: the sweep's renewal does nothing");
    co_return queue::outcome::ok();
  }
  co_await ctx_.log("info", fmt::format("{} of certificate {} ({}) for {} with ACME account {} ({}) and DNS provider {} ({})",
                                        mode_ == mode::validate_manual ? "manual DNS validation"
                                        : renewal_                     ? "renewal"
                                                                       : "issuance",
                                        in->cert.name, *cert_id,
                                        fmt::join(in->doc.acme->domains, ", "), in->account.name,
                                        in->account_spec.directory_url, in->provider.name, in->provider_spec.where()));

  auto secret = open_acme_account_secret(*opt_.key, in->account);
  if (!secret) co_return queue::outcome::permanent_failure(fmt::format("ACME account {}: {}", in->account.name, secret.error().message));
  auto akey = acme::account_key::from_pem(secret->account_key_pem);
  if (!akey) co_return queue::outcome::permanent_failure(fmt::format("ACME account {}: {}", in->account.name, akey.error().message));
  std::optional<dns_provider_handle> provider;
  if (!in->provider_spec.manual()) {
    auto h = open_dns_provider(*opt_.key, in->provider, in->provider_spec);
    if (!h) co_return queue::outcome::permanent_failure(h.error().message);
    provider = std::move(*h);
  }

  auto settings = co_await store::read_settings(ctx_.store());
  propagation_timeout_ = std::chrono::seconds(settings.integer("acme_dns_propagation_timeout_s"));
  dns_opts_.resolve_pool = opt_.cpu;
  dns_opts_.clock = &ctx_.clock();
  dns_opts_.nameserver_port = static_cast<std::uint16_t>(settings.integer("acme_dns_nameserver_port"));
  resolver_ = settings.text("acme_dns_resolver");
  allow_ = acme_allow_list_of(settings);
  dns_opts_.egress = &allow_;

  // The records come out whatever happens, also when the job is interrupted (cancel, lost lease):
  // the interruption is rethrown once they are removed.
  queue::outcome out;
  std::exception_ptr interrupted;
  try {
    if (mode_ == mode::validate_manual)
      out = co_await validate_manual(*in, *akey, order_job_id);
    else
      out = co_await order_and_store(*in, *akey, provider ? &*provider : nullptr);
  } catch (const queue::job_interrupted&) {
    interrupted = std::current_exception();
  }
  if (!presented_.empty() && provider) co_await remove_records(*in, *provider);
  if (interrupted) std::rethrow_exception(interrupted);
  if (out.k == queue::outcome::kind::failed || out.k == queue::outcome::kind::failed_permanently) {
    co_await ctx_.log("error", out.error);
    co_await record_failure(*in, out);
  }
  co_return out;
}

}  // namespace

namespace detail {

queue::outcome from_failure(const acme::failure& f) {
  if (f.permanent()) return queue::outcome::permanent_failure(f.message);
  auto wait = std::chrono::seconds(std::clamp<std::int64_t>(f.retry_after_s.value_or(0), 0, retry_after_cap_s));
  return queue::outcome::failure(f.message, std::chrono::duration_cast<std::chrono::milliseconds>(wait));
}

// acme_allow_list: the one egress policy of every CA URL and DNS-01 server (docs/acme.md). A
// value that no longer parses cannot be stored (the settings table validates it, and a stale
// one reads as the default), so this fails only on a bug; it then refuses everything.
net::egress_policy acme_allow_list_of(const settings_map& settings) {
  auto p = net::parse_egress_allow_list(settings.text("acme_allow_list"), "acme_allow_list");
  return p ? std::move(*p) : net::egress_policy{};
}

acme::client_options client_options_for(const acme_account_spec& account, const acme_job_options& opt,
                                        queue::job_context& ctx, const net::egress_policy& allow) {
  acme::client_options co;
  co.directory_url = account.directory_url;
  co.ca_pem = trust_anchors(account.ca_bundle_pem, opt.ca_pem);
  co.resolve_pool = opt.cpu;
  co.egress = &allow;
  co.log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
    co_await ctx.log(std::move(level), std::move(message));
  };
  return co;
}

}  // namespace detail


std::string acme_job_payload(std::string_view certificate_id, std::int64_t version) {
  json::object o{{"certificate_id", certificate_id}};
  if (version > 0) o["version"] = version;
  return json::serialize(o);
}

asio::awaitable<result<void>> register_acme_account(new_acme_account& account, const acme_job_options& opt) {
  auto key = co_await on_cpu<result<acme::account_key>>(opt.cpu, [] { return acme::account_key::generate(); });
  if (!key) co_return std::move(key).error();
  // The caller read acme_allow_list; without it, the setting's default (never loopback).
  net::egress_policy allow;
  if (opt.acme_allow_list) {
    auto parsed = net::parse_egress_allow_list(*opt.acme_allow_list, "acme_allow_list");
    if (!parsed) co_return std::move(parsed).error();
    allow = std::move(*parsed);
  } else {
    allow = acme_allow_list_of(settings_map{});
  }
  acme::client_options co;
  co.directory_url = account.spec.directory_url;
  co.ca_pem = trust_anchors(account.spec.ca_bundle_pem, opt.ca_pem);
  co.resolve_pool = opt.cpu;
  co.egress = &allow;
  acme::client client(std::move(co), *key);
  std::optional<acme::eab_credentials> eab;
  if (!account.spec.eab_kid.empty()) eab = acme::eab_credentials{account.spec.eab_kid, account.secret.eab_hmac_key};
  acme::account_request req(account.spec.contact, account.spec.terms_agreed, std::move(eab));
  auto registered = co_await client.new_account(std::move(req));
  if (!registered) {
    // A failure without an ACME answer has the client's uniform message (its cause went to the
    // server's log): the same answer for a closed port, a TLS error or a page that is not JSON.
    auto e = registered.failure().to_error();
    if (e.field.empty()) e.field = "directory_url";
    // Nor a Retry-After that only some non-ACME service would have sent.
    if (!registered.failure().detail.empty()) e.retry_after_s = 0;
    co_return e;
  }
  account.secret.account_key_pem = key->private_pem();
  account.spec.account_url = registered->url;
  account.spec.status = registered->account.status.empty() ? std::string("valid") : registered->account.status;
  co_return result<void>{};
}

void register_acme_handlers(queue::handler_registry& r, std::shared_ptr<const acme_job_options> options) {
  auto validate = [](const std::string& payload) -> result<void> {
    auto p = certfleet::json::object_reader::parse(payload, "payload");
    if (!p) return std::move(p).error();
    if (auto ok = p->only({"certificate_id", "version"}); !ok) return ok;
    auto id = p->required_string("certificate_id");
    if (!id) return std::move(id).error();
    auto version = p->optional_int("version");
    if (!version) return std::move(version).error();
    if (*version && **version < 1) return make_error(errc::invalid_argument, "payload.version must be >= 1", "payload.version");
    return {};
  };
  r.add(std::string(queue::job_names::revoke_certificate),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          co_return co_await run_revoke(ctx, *options);
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_revoke_job_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
  r.add(std::string(queue::job_names::cleanup_dns),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          co_return co_await run_cleanup(ctx, *options);
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_cleanup_dns_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
  for (bool renewal : {false, true}) {
    r.add(std::string(renewal ? queue::job_names::renew_certificate : queue::job_names::issue_certificate),
          [options, renewal](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
            acme_job job(ctx, *options, renewal ? acme_job::mode::renew : acme_job::mode::issue);
            co_return co_await job.run();
          },
          validate);
  }
  r.add(std::string(queue::job_names::validate_manual_dns),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          acme_job job(ctx, *options, acme_job::mode::validate_manual);
          co_return co_await job.run();
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_validate_dns_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
}

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
  store::read_fn read = [found](store::catalog_read& rd) -> result<void> {
    auto certs = rd.certificates_expiring(std::numeric_limits<time_ms>::max() / 2, 100'000);
    if (!certs) return std::move(certs).error();
    for (auto& c : *certs) {
      auto doc = catalog::parse_certificate_doc(c, true);
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
      if (auto r = record_acme_job(tx, j.project_id, j.certificate_id, e->job.id); !r) return r;
    }
    return {};
  };
  if (auto w = co_await st.catalog().transact(std::move(write)); !w) co_return std::move(w).error();
  co_return *created;
}

asio::awaitable<result<int>> enqueue_dns_cleanups(store::store& st, const clock_source& clock, sweep_logger log) {
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
