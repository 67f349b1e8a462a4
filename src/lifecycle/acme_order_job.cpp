// The order steps of the issue/renew/validate_manual_dns job (acme_order_job.hpp): load the inputs,
// open the account, order and authorize, finalize with a new key, store the next version (which
// opens its auto_execute distributions' runs in the same transaction), or hand a manual order to
// the operator and carry it on when the records are in place.
#include "lifecycle/acme_order_job.hpp"
#include "lifecycle/issued_version.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/key_type.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
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

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace certfleet::lifecycle::detail {

namespace asio = boost::asio;
namespace json = boost::json;

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
      if (p.error().is(errc::timeout)) co_return queue::outcome::failure(p.error());
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
  if (!key_pem) co_return queue::outcome::permanent_failure(key_pem.error());
  auto csr = acme::make_csr(*key_pem, acme_doc.domains);
  if (!csr) co_return queue::outcome::permanent_failure(csr.error());
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
  if (!issued) co_return queue::outcome::permanent_failure(issued.error());

  co_await step("storing");
  auto now = ctx_.clock().now_ms();
  auto version = issued_version(in.cert.name, issued->leaf_pem, issued->chain_pem, std::move(*key_pem), now);
  if (!version)
    co_return queue::outcome::permanent_failure(fmt::format("the CA's certificate: {}", version.error().message));
  auto next = std::make_shared<catalog::new_certificate>(std::move(*version));

  auto rs = distribution::run_settings_from(co_await store::read_settings(ctx_.store()));
  const kek* key = opt_.key;
  const std::string project = in.cert.project_id, cert_id = in.cert.id;
  const std::int64_t expected_version = in.doc.version;
  const issued_by by{ctx_.job().id, ctx_.job().type, acme_doc.domains};
  auto stored = std::make_shared<distribution::version_stored>();
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    auto s = store_issued_version(tx, *key, *got, expected_version, *next, rs, now, by);
    if (!s) return std::move(s).error();
    *stored = std::move(*s);
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
  co_await log_stored_version(ctx_, cert_id, *stored, *next);
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
    if (w.error().is(errc::conflict)) co_return queue::outcome::permanent_failure(w.error());
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
    if (!v) co_return queue::outcome::permanent_failure(v.error());
    cert_id = v->certificate_id;
    order_job_id = v->order_job_id;
  } else {
    auto p = certfleet::json::object_reader::parse(ctx_.payload(), "payload");
    if (!p) co_return queue::outcome::permanent_failure(p.error());
    auto id = p->required_string("certificate_id");
    if (!id) co_return queue::outcome::permanent_failure(id.error());
    cert_id = std::move(*id);
    auto version = p->optional_int("version");
    if (!version) co_return queue::outcome::permanent_failure(version.error());
    for_version_ = version->value_or(0);
  }
  if (!opt_.key) co_return queue::outcome::failure("no key-encryption key is loaded in this worker: secrets cannot be opened");

  co_await step("initialized");
  auto in = co_await load(*cert_id);
  if (!in) {
    if (in.error().is(errc::not_found) || in.error().is(errc::invalid_argument))
      co_return queue::outcome::permanent_failure(in.error());
    co_return queue::outcome::failure(in.error());
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
    if (!h) co_return queue::outcome::permanent_failure(h.error());
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

}  // namespace certfleet::lifecycle::detail
