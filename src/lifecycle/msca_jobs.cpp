// The AD CS jobs (msca_jobs.hpp): enrollment and renewal, the poll of a request held for
// approval, the renewal rule. The policy is msca_policy.cpp's, the workflow view msca_workflow.cpp's.
#include "certfleet/lifecycle/msca_jobs.hpp"

#include "lifecycle/acme_job_common.hpp"
#include "lifecycle/issued_version.hpp"
#include "lifecycle/msca_client.hpp"
#include "lifecycle/msca_common.hpp"

#include "certfleet/acme/key_type.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/msca/issued.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
namespace json = boost::json;
using detail::msca_answer;
using detail::msca_connection;
using detail::msca_failure;
using detail::msca_fail;
using detail::msca_message;
using detail::issued_by;
using detail::issued_version;
using detail::log_stored_version;
using detail::on_cpu;
using detail::store_issued_version;
using detail::msca_settings;
using detail::policy_fresh;
using detail::read_msca_settings;
using detail::subject_summary;
using msca::failure_class;

namespace {

constexpr const auto& steps = detail::msca_steps;

std::int64_t step_number(std::string_view name) {
  return std::find(steps.begin(), steps.end(), name) - steps.begin() + 1;
}

// What a job works with, read in one snapshot.
struct msca_inputs {
  store::catalog_object cert, ca;
  catalog::certificate_doc doc;
  msca_ca_spec ca_spec;
  msca_ca_secret secret;
};

class msca_job {
 public:
  enum class mode { issue, renew, poll };
  msca_job(queue::job_context& ctx, const msca_job_options& opt, mode m) : ctx_(ctx), opt_(opt), mode_(m) {}

  asio::awaitable<queue::outcome> run();

 private:
  asio::awaitable<void> step(std::string_view name) {
    ctx_.checkpoint();
    // Tests kill a worker at the start of each step (CERTFLEET_CRASH_AT=msca_step_<name>).
    crash_point(std::string("msca_step_") + std::string(name));
    co_await ctx_.progress(step_number(name), static_cast<std::int64_t>(steps.size()));
    co_await ctx_.log("info", fmt::format("workflow step: {}", name));
  }
  asio::awaitable<result<msca_inputs>> load(std::string certificate_id);
  asio::awaitable<queue::outcome> enroll(const msca_inputs& in);
  asio::awaitable<queue::outcome> poll(const msca_inputs& in, const msca_poll_target& target);
  // What the CA issued (kept in the held request until stored): the certificate stored as the
  // next version (from `from_version`), the held request removed in the same transaction.
  // (Arguments are references and views: GCC 12 destroys temporaries made inside a co_await
  // expression twice.)
  asio::awaitable<queue::outcome> store_issued(const msca_inputs& in, const msca_request_doc& issued,
                                               std::string& key_pem, std::string_view held_request_object);
  // An issued request a lost attempt kept but did not store (this version's), if any.
  asio::awaitable<result<std::optional<store::catalog_object>>> kept_issued(const msca_inputs& in);
  // A refusal or give-up: written on the certificate (a first enrollment is failed), the held
  // request marked; the job then fails permanently with `f`'s message.
  asio::awaitable<queue::outcome> record_failure(const msca_inputs& in, const msca_failure& f,
                                                 std::string_view disposition, std::string_view held_request_object);
  msca_connection connection(const msca_inputs& in) const {
    msca_connection c;
    c.ca = &in.ca_spec;
    c.secret = &in.secret;
    c.extra_ca_pem = opt_.ca_pem;
    c.cpu = opt_.cpu;
    c.egress = &settings_.allow;
    c.timeout = settings_.timeout;
    return c;
  }
  // The failure's class goes with the stored error (its hint row); "other" has none of its own, so
  // the words of its message pick one (a timeout, a refused connection).
  static queue::outcome failed(const msca_failure& f) { return failed(f, f.permanent); }
  static queue::outcome failed(const msca_failure& f, bool permanent) {
    auto out = permanent ? queue::outcome::permanent_failure(f.message) : queue::outcome::failure(f.message);
    if (f.cls != failure_class::other) out.error_class = msca::failure_class_name(f.cls);
    return out;
  }

  queue::job_context& ctx_;
  const msca_job_options& opt_;
  mode mode_;
  msca_settings settings_;
};

asio::awaitable<result<msca_inputs>> msca_job::load(std::string certificate_id) {
  const std::string project = ctx_.job().project_id;
  const kek* key = opt_.key;
  store::read_value_fn<msca_inputs> read = [project, certificate_id, key](store::catalog_read& rd) -> result<msca_inputs> {
    msca_inputs in;
    auto got = catalog::read_certificate(rd, project, certificate_id);
    if (!got) return std::move(got).error();
    in.cert = std::move(got->object);
    in.doc = std::move(got->doc);
    if (in.doc.source != "msca" || !in.doc.msca)
      return make_error(errc::conflict,
                        fmt::format("certificate {} is not from AD CS (source {}): the msca jobs enroll only certificates "
                                    "made with POST …/certificates/enroll",
                                    certificate_id, in.doc.source),
                        "certificate_id");
    auto ca = rd.get_object(project, store::kind_msca_ca, in.doc.msca->msca_ca_id);
    if (!ca) return std::move(ca).error();
    in.ca = std::move(*ca);
    auto spec = parse_msca_ca_doc(in.ca);
    if (!spec) return std::move(spec).error();
    in.ca_spec = std::move(*spec);
    auto secret = open_msca_ca_secret(*key, in.ca);
    if (!secret) return std::move(secret).error();
    in.secret = std::move(*secret);
    return in;
  };
  co_return co_await store::read_value(ctx_.store().catalog(), std::move(read));
}

asio::awaitable<queue::outcome> msca_job::run() {
  if (!opt_.key) co_return queue::outcome::permanent_failure("no key-encryption key is configured: the CA's secret cannot be opened");
  co_await step("initialized");
  settings_ = co_await read_msca_settings(ctx_.store());
  std::string certificate_id;
  std::int64_t version = 0;
  std::optional<msca_poll_target> target;
  if (mode_ == mode::poll) {
    auto t = parse_msca_poll_payload(ctx_.payload());
    if (!t) co_return queue::outcome::permanent_failure(t.error());
    certificate_id = t->certificate_id;
    target = std::move(*t);
  } else {
    auto p = certfleet::json::object_reader::parse(ctx_.payload(), "payload");
    if (!p) co_return queue::outcome::permanent_failure(p.error());
    auto id = p->required_string("certificate_id");
    if (!id) co_return queue::outcome::permanent_failure(id.error());
    certificate_id = std::move(*id);
    auto v = p->optional_int("version");
    if (v && *v) version = **v;
  }
  auto in = co_await load(certificate_id);
  if (!in) {
    if (in.error().is(errc::not_found))
      co_return queue::outcome::permanent_failure(
          fmt::format("certificate {} or its AD CS CA is gone: {}", certificate_id, in.error().message));
    if (in.error().is(errc::conflict)) co_return queue::outcome::permanent_failure(in.error());
    co_return queue::outcome::failure(in.error());
  }
  if (mode_ == mode::poll) co_return co_await poll(*in, *target);
  if (mode_ == mode::issue && in->doc.version > 0) {
    co_await ctx_.log("info", fmt::format("certificate {} is issued already (version {}): nothing to enroll",
                                          certificate_id, in->doc.version));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  if (mode_ == mode::renew) {
    if (in->doc.version == 0)
      co_return queue::outcome::permanent_failure(
          fmt::format("certificate {} has no issued version to renew: its msca_issue_certificate job enrolls it", certificate_id));
    if (version > 0 && in->doc.version != version) {
      co_await ctx_.log("info", fmt::format("certificate {} is at version {} now (this renewal was for {}): renewed already",
                                            certificate_id, in->doc.version, version));
      co_await step("completed");
      co_return queue::outcome::ok();
    }
  }
  // A retried attempt whose last one was issued a certificate and lost before storing it: store
  // that one, rather than asking the CA for another.
  auto kept = co_await kept_issued(*in);
  if (!kept) co_return queue::outcome::failure(kept.error());
  if (*kept) {
    auto doc = parse_msca_request_doc(**kept);
    if (!doc) co_return queue::outcome::permanent_failure(doc.error());
    auto key = open_msca_request_key(*opt_.key, **kept);
    if (!key) co_return queue::outcome::permanent_failure(fmt::format("opening the kept key: {}", key.error().message));
    co_await ctx_.log("info", fmt::format("request {} was issued to an attempt that stopped before storing it: "
                                          "storing that certificate",
                                          doc->request_id));
    const std::string held_id = (*kept)->id;
    co_return co_await store_issued(*in, *doc, *key, held_id);
  }
  // A retried attempt whose first one left the request pending: the poll chain carries it.
  if (in->doc.msca->disposition == "pending" && !in->doc.msca->request_id.empty()) {
    store::read_value_fn<bool> pending_request = [p = in->cert.project_id, c = in->cert.id, r = in->doc.msca->request_id,
                                                  v = in->doc.version](store::catalog_read& rd) -> result<bool> {
      auto o = rd.objects_named(p, store::kind_msca_request, fmt::format("{}:{}", c, r), 1);
      if (!o) return std::move(o).error();
      if (o->empty()) return false;
      auto d = parse_msca_request_doc(o->front());
      return d && d->status == "pending" && d->from_version == v;
    };
    auto held = co_await store::read_value(ctx_.store().catalog(), std::move(pending_request));
    if (held && *held) {
      co_await ctx_.log("info", fmt::format("request {} of this certificate is waiting for approval at the CA; its "
                                            "msca_poll_pending chain retrieves it",
                                            in->doc.msca->request_id));
      co_await step("pending_approval");
      co_return queue::outcome::ok();
    }
  }
  co_return co_await enroll(*in);
}

asio::awaitable<queue::outcome> msca_job::enroll(const msca_inputs& in) {
  const auto& m = *in.doc.msca;
  const bool renewal = mode_ == mode::renew;
  const time_ms now = ctx_.clock().now_ms();

  co_await step("fetching_policy");
  msca_cached_policy policy = in.ca_spec.policy;
  if (!policy_fresh(policy, now) || !find_template(policy, m.template_name)) {
    const auto conn = connection(in);
    auto fetched = co_await detail::msca_get_policies(conn);
    if (!fetched) co_return failed(fetched.failure);
    policy = cache_policy(*fetched.value, now);
    // Kept on the CA for the next jobs and the templates view; a failure to keep it costs a fetch.
    const std::string ca_id = in.ca.id, project = in.ca.project_id;
    auto spec = in.ca_spec;
    spec.policy = policy;
    store::tx_fn save = [ca_id, project, doc = msca_ca_doc_json(spec)](store::catalog_tx& tx) -> result<void> {
      auto o = tx.get_object(project, store::kind_msca_ca, ca_id);
      if (!o) return {};
      return tx.update_object_doc(ca_id, doc);
    };
    if (auto w = co_await ctx_.store().catalog().transact(std::move(save)); !w)
      co_await ctx_.log("warn", fmt::format("the fetched policy was not kept on CA {}: {}", ca_id, w.error().message));
    co_await ctx_.log("info", fmt::format("policy {} fetched: {} template(s)", policy.policy_id, policy.templates.size()));
  }
  const auto* tmpl = find_template(policy, m.template_name);
  if (!tmpl) {
    auto f = msca_fail(failure_class::template_not_allowed, fmt::format("template {} is not in the CA's enrollment policy (the account may not read "
                                            "it, or it is not published)",
                                            m.template_name), true);
    co_return co_await record_failure(in, f, "denied", "");
  }
  auto ces = ces_url_for(in.ca_spec, *tmpl, renewal);
  if (!ces) {
    auto f = msca_fail(failure_class::template_not_allowed, ces.error().message, true);
    co_return co_await record_failure(in, f, "denied", "");
  }

  co_await step("generating_key");
  auto kt_name = msca_key_type_for(*tmpl, m.key_type);
  if (!kt_name) {
    auto f = msca_fail(failure_class::bad_request, kt_name.error().message, true);
    co_return co_await record_failure(in, f, "denied", "");
  }
  const auto kt = *acme::parse_key_type(*kt_name);
  auto key_pem = co_await on_cpu<result<std::string>>(opt_.cpu, [kt] { return acme::generate_private_key(kt); });
  if (!key_pem) co_return queue::outcome::failure(fmt::format("generating the key: {}", key_pem.error().message));
  auto csr = msca::make_enrollment_csr(*key_pem, m.subject, m.sans, *tmpl);
  if (!csr) {
    auto f = msca_fail(failure_class::bad_request, csr.error().message, true);
    co_return co_await record_failure(in, f, "denied", "");
  }
  msca::enroll_request req;
  req.template_name = tmpl->name;
  req.kind = msca::request_kind::issue;
  req.token_der = std::move(*csr);
  if (renewal && in.ca_spec.renewal_mode == "renew_with_current") {
    auto current_key = catalog::open_certificate_key(*opt_.key, in.cert);
    if (!current_key) co_return queue::outcome::failure(fmt::format("opening the current key: {}", current_key.error().message));
    auto signed_req = msca::make_renewal_request(req.token_der, in.doc.cert_pem, *current_key);
    if (!signed_req) co_return queue::outcome::permanent_failure(signed_req.error());
    req.kind = msca::request_kind::renew;
    req.token_der = std::move(*signed_req);
  }
  co_await ctx_.log("info", fmt::format("{} request for template {} ({}, {}) to {}", renewal ? "renewal" : "enrollment",
                                        tmpl->name, *kt_name, subject_summary(m), *ces));

  co_await step("submitting");
  const auto conn = connection(in);
  const std::string ces_url = *ces;
  auto answer = co_await detail::msca_enroll(conn, ces_url, req);
  if (!answer.value) {
    if (!answer.failure.permanent) co_return failed(answer.failure);
    co_return co_await record_failure(in, answer.failure, "", "");
  }
  const auto& a = *answer.value;
  if (a.status == msca::disposition::refused) {
    // The CA away (its CES answered for it): another attempt may find it back.
    if (!answer.failure.permanent) co_return failed(answer.failure);
    co_return co_await record_failure(in, answer.failure, "denied", "");
  }
  msca_request_doc rd;
  rd.certificate_id = in.cert.id;
  rd.request_id = a.request_id;
  rd.template_name = tmpl->name;
  rd.key_type = *kt_name;
  rd.renewal = renewal;
  rd.from_version = in.doc.version;
  rd.submitted_by = ctx_.job().id;
  rd.submitted_at = now;
  rd.disposition_message = a.disposition_message;
  if (a.status == msca::disposition::issued) {
    co_await ctx_.log("info", fmt::format("the CA issued request {} at once: {}", a.request_id, a.disposition_message));
    auto pem = msca::issued_certificate_pem(a);
    if (!pem) {
      auto f = msca_fail(failure_class::other, pem.error().message, true);
      co_return co_await record_failure(in, f, "", "");
    }
    // Kept with its key before anything else, as a pending request is: a worker lost before the
    // version is stored leaves the next attempt this certificate to store (run()).
    rd.status = "issued";
    rd.leaf_pem = std::move(pem->leaf_pem);
    rd.chain_pem = std::move(pem->chain_pem);
    auto issued_held = make_msca_request_object(rd, *key_pem, *opt_.key, new_object_id(), in.cert.project_id, now);
    if (!issued_held) co_return queue::outcome::failure(issued_held.error());
    const std::string issued_id = issued_held->id;
    store::tx_fn keep = [o = std::move(*issued_held)](store::catalog_tx& tx) -> result<void> {
      if (auto ins = tx.insert_object(o); !ins) return std::move(ins).error();
      return {};
    };
    if (auto w = co_await ctx_.store().catalog().transact(std::move(keep)); !w)
      co_return queue::outcome::failure(fmt::format("keeping issued request {}: {}", a.request_id, w.error().message));
    co_return co_await store_issued(in, rd, *key_pem, issued_id);
  }

  // Pending: the request (its key sealed), the certificate's note of it and the first poll, in one
  // transaction, before anything else: a worker lost after it leaves the retry to find the request
  // held (run()), not to submit a second one.
  auto held = make_msca_request_object(rd, *key_pem, *opt_.key, new_object_id(), in.cert.project_id, now);
  if (!held) co_return queue::outcome::failure(held.error());
  msca_poll_target first{in.cert.id, a.request_id, 1};
  queue::enqueue_request poll_job;
  poll_job.project_id = in.cert.project_id;
  poll_job.type = queue::job_names::msca_poll_pending;
  poll_job.payload = msca_poll_payload(first);
  poll_job.idempotency_key = msca_poll_key(first);
  poll_job.run_at = now + settings_.poll_first_s * 1000;
  poll_job.certificate_id = in.cert.id;
  poll_job.triggered_by = queue::triggers::msca_workflow;
  poll_job.parent_job_id = ctx_.job().id;
  const std::string project = in.cert.project_id, cert_id = in.cert.id, message = a.disposition_message,
                    request_id = a.request_id;
  store::tx_fn write = [held = std::move(*held), poll_job, project, cert_id, message, request_id,
                        now](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    if (auto ins = tx.insert_object(held); !ins) return std::move(ins).error();
    auto e = queue::enqueue_in(tx.jobs(), poll_job, now);
    if (!e) return std::move(e).error();
    auto& m = *got->doc.msca;
    m.request_id = request_id;
    m.disposition = "pending";
    m.disposition_message = message;
    m.error_code.clear();
    m.last_error.clear();
    m.last_job_id = e->job.id;
    return tx.update_object_doc(cert_id, catalog::certificate_doc_json(got->doc));
  };
  if (auto w = co_await ctx_.store().catalog().transact(std::move(write)); !w)
    co_return queue::outcome::failure(fmt::format("keeping pending request {}: {}", a.request_id, w.error().message));
  co_await step("pending_approval");
  co_await ctx_.log("info", fmt::format("request {} is pending at the CA ({}); msca_poll_pending asks again in {} s",
                                        a.request_id, a.disposition_message, settings_.poll_first_s));
  co_return queue::outcome::ok();
}

asio::awaitable<queue::outcome> msca_job::poll(const msca_inputs& in, const msca_poll_target& target) {
  const time_ms now = ctx_.clock().now_ms();
  const std::string project = in.cert.project_id, cert_id = in.cert.id;
  const std::string name = fmt::format("{}:{}", cert_id, target.request_id);
  store::read_value_fn<std::optional<store::catalog_object>> find_request =
      [project, name](store::catalog_read& rd) -> result<std::optional<store::catalog_object>> {
    auto o = rd.objects_named(project, store::kind_msca_request, name, 1);
    if (!o) return std::move(o).error();
    if (o->empty() || o->front().name != name) return std::optional<store::catalog_object>{};
    return std::optional<store::catalog_object>(std::move(o->front()));
  };
  auto found = co_await store::read_value(ctx_.store().catalog(), std::move(find_request));
  if (!found) co_return queue::outcome::failure(found.error());
  if (!*found) {
    co_await ctx_.log("info", fmt::format("request {} is no longer held for certificate {}: nothing to poll",
                                          target.request_id, cert_id));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  const auto held = std::move(**found);
  auto rd = parse_msca_request_doc(held);
  if (!rd) co_return queue::outcome::permanent_failure(rd.error());
  if (rd->status != "pending") {
    co_await ctx_.log("info", fmt::format("request {} is {} already", target.request_id, rd->status));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  co_await step("pending_approval");
  const auto* tmpl = find_template(in.ca_spec.policy, rd->template_name);
  msca::policy_template fallback;
  fallback.name = rd->template_name;
  auto ces = ces_url_for(in.ca_spec, tmpl ? *tmpl : fallback, rd->renewal);
  if (!ces) co_return queue::outcome::permanent_failure(msca_message(failure_class::other, ces.error().message));
  msca::enroll_request q;
  q.kind = msca::request_kind::query;
  q.request_id = target.request_id;
  q.template_name = rd->template_name;
  const auto conn = connection(in);
  const std::string ces_url = *ces;
  auto answer = co_await detail::msca_enroll(conn, ces_url, q);

  // The CA away (no answer, or its CES answering for it) is waited out like a pending request.
  const bool transient =
      (!answer.value || answer.value->status == msca::disposition::refused) && !answer.failure.permanent;
  const bool still_pending = (answer.value && answer.value->status == msca::disposition::pending) || transient;
  if (still_pending) {
    if (transient) co_await ctx_.log("warn", fmt::format("{} (polling again later)", answer.failure.message));
    const time_ms age = now - rd->submitted_at;
    if (age >= settings_.give_up_h * 3'600'000) {
      auto f = msca_fail(failure_class::pending, fmt::format("request {} is still pending at the CA after {} hours "
                                              "(msca_poll_give_up_h): given up; a certificate manager can still "
                                              "approve it there, then enroll again",
                                              target.request_id, age / 3'600'000), true);
      co_return co_await record_failure(in, f, "abandoned", held.id);
    }
    msca_poll_target next{cert_id, target.request_id, target.n + 1};
    const auto delay = msca_poll_delay_s(target.n + 1, settings_.poll_first_s, settings_.poll_max_s);
    queue::enqueue_request j;
    j.project_id = project;
    j.type = queue::job_names::msca_poll_pending;
    j.payload = msca_poll_payload(next);
    j.idempotency_key = msca_poll_key(next);
    j.run_at = now + delay * 1000;
    j.certificate_id = cert_id;
    j.triggered_by = queue::triggers::msca_workflow;
    j.parent_job_id = ctx_.job().id;
    auto doc = *rd;
    doc.polls = target.n;
    store::tx_fn write = [j, held_id = held.id, doc, project, cert_id, now](store::catalog_tx& tx) -> result<void> {
      auto e = queue::enqueue_in(tx.jobs(), j, now);
      if (!e) return std::move(e).error();
      if (auto u = tx.update_object_doc(held_id, msca_request_doc_json(doc)); !u) return u;
      return record_msca_job(tx, project, cert_id, e->job.id);
    };
    if (auto w = co_await ctx_.store().catalog().transact(std::move(write)); !w)
      co_return queue::outcome::failure(fmt::format("scheduling the next poll: {}", w.error().message));
    co_await ctx_.log("info", fmt::format("request {} still pending (poll {}); next poll in {} s", target.request_id, target.n,
                                          delay));
    co_return queue::outcome::ok();
  }
  if (!answer.value || answer.value->status == msca::disposition::refused)
    co_return co_await record_failure(in, answer.failure, "denied", held.id);

  co_await step("retrieving");
  auto key = open_msca_request_key(*opt_.key, held);
  if (!key) co_return queue::outcome::permanent_failure(fmt::format("opening the held key: {}", key.error().message));
  co_await ctx_.log("info", fmt::format("request {} was issued after approval: {}", target.request_id,
                                        answer.value->disposition_message));
  auto pem = msca::issued_certificate_pem(*answer.value);
  if (!pem) {
    auto f = msca_fail(failure_class::other, pem.error().message, true);
    co_return co_await record_failure(in, f, "", held.id);
  }
  auto issued = *rd;
  issued.request_id = target.request_id;
  issued.disposition_message = answer.value->disposition_message;
  issued.leaf_pem = std::move(pem->leaf_pem);
  issued.chain_pem = std::move(pem->chain_pem);
  issued.polls = target.n;  // this poll retrieved it
  co_return co_await store_issued(in, issued, *key, held.id);
}

asio::awaitable<result<std::optional<store::catalog_object>>> msca_job::kept_issued(const msca_inputs& in) {
  store::read_value_fn<std::optional<store::catalog_object>> read =
      [p = in.cert.project_id, c = in.cert.id, v = in.doc.version](
          store::catalog_read& rd) -> result<std::optional<store::catalog_object>> {
    auto held = rd.objects_referencing(p, store::kind_msca_request, c);
    if (!held) return std::move(held).error();
    for (auto& o : *held) {
      auto d = parse_msca_request_doc(o);
      if (d && d->status == "issued" && d->from_version == v && !d->leaf_pem.empty())
        return std::optional<store::catalog_object>(std::move(o));
    }
    return std::optional<store::catalog_object>{};
  };
  co_return co_await store::read_value(ctx_.store().catalog(), std::move(read));
}

asio::awaitable<queue::outcome> msca_job::store_issued(const msca_inputs& in, const msca_request_doc& issued,
                                                       std::string& key_pem, std::string_view held_view) {
  const std::string held_request_object(held_view);
  const std::int64_t from_version = issued.from_version;
  co_await step("storing");
  const time_ms now = ctx_.clock().now_ms();
  // The key must be the one this request was made with: a certificate for another key is refused.
  auto version = issued_version(in.cert.name, issued.leaf_pem, issued.chain_pem, std::move(key_pem), now);
  if (!version) {
    auto f = msca_fail(failure_class::other, fmt::format("the CA's certificate for request {}: {}",
                                                                  issued.request_id, version.error().message), true);
    co_return co_await record_failure(in, f, "", held_request_object);
  }
  auto next = std::make_shared<catalog::new_certificate>(std::move(*version));
  auto rs = distribution::run_settings_from(co_await store::read_settings(ctx_.store()));
  const kek* key = opt_.key;
  const std::string project = in.cert.project_id, cert_id = in.cert.id;
  const issued_by by{ctx_.job().id, ctx_.job().type, next->doc.sans};
  const std::string request_id = issued.request_id, disposition_message = issued.disposition_message;
  const std::int64_t polls = issued.polls;
  auto stored = std::make_shared<distribution::version_stored>();
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    // The request's outcome goes on the document store_new_version carries over.
    auto& m = *got->doc.msca;
    m.request_id = request_id;
    m.disposition = "issued";
    m.disposition_message = disposition_message;
    m.error_code.clear();
    m.polls = polls;  // kept here: the held request goes with this transaction
    got->object.doc = catalog::certificate_doc_json(got->doc);
    auto s = store_issued_version(tx, *key, *got, from_version, *next, rs, now, by);
    if (!s) return std::move(s).error();
    *stored = std::move(*s);
    if (!held_request_object.empty())
      if (auto del = tx.delete_object(project, store::kind_msca_request, held_request_object); !del) return del;
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

asio::awaitable<queue::outcome> msca_job::record_failure(const msca_inputs& in, const msca_failure& f,
                                                         std::string_view disposition_view,
                                                         std::string_view held_view) {
  const std::string disposition(disposition_view), held_request_object(held_view);
  co_await ctx_.log("error", f.message);
  const std::string project = in.cert.project_id, cert_id = in.cert.id, message = f.message, code = f.error_code,
                    request_id = f.request_id;
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return got.error().is(errc::not_found) ? result<void>{} : result<void>(std::move(got).error());
    auto& m = *got->doc.msca;
    m.last_error = message;
    if (!disposition.empty()) m.disposition = disposition;
    m.error_code = code;
    if (!request_id.empty()) m.request_id = request_id;
    // A first enrollment that cannot come is failed; a renewal leaves the issued version as it is.
    if (got->doc.version == 0) got->doc.status = "failed";
    if (auto u = tx.update_object_doc(cert_id, catalog::certificate_doc_json(got->doc)); !u) return u;
    if (!held_request_object.empty()) {
      auto o = tx.get_object(project, store::kind_msca_request, held_request_object);
      if (o) {
        auto d = parse_msca_request_doc(*o);
        if (d) {
          d->status = disposition.empty() ? std::string("denied") : disposition;
          d->reason = message;
          if (auto u = tx.update_object_doc(held_request_object, msca_request_doc_json(*d)); !u) return u;
        }
      }
    }
    return {};
  };
  if (auto w = co_await ctx_.store().catalog().transact(std::move(write)); !w)
    co_await ctx_.log("warn", fmt::format("the failure was not noted on certificate {}: {}", cert_id, w.error().message));
  co_return failed(f, true);
}

}  // namespace

bool msca_renewal_due(const catalog::certificate_doc& d, time_ms now) {
  if (!d.msca || d.version == 0 || !d.msca->auto_renew || d.status == "revoked") return false;
  if (d.not_after <= d.not_before) return now >= d.not_after;
  return now >= d.not_after - (d.not_after - d.not_before) / 3;
}

void register_msca_handlers(queue::handler_registry& r, std::shared_ptr<const msca_job_options> options) {
  for (auto [type, m] : {std::pair{queue::job_names::msca_issue_certificate, msca_job::mode::issue},
                         std::pair{queue::job_names::msca_renew_certificate, msca_job::mode::renew}})
    r.add(std::string(type),
          [options, m](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
            msca_job job(ctx, *options, m);
            co_return co_await job.run();
          },
          check_certificate_job_payload);
  r.add(std::string(queue::job_names::msca_poll_pending),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          msca_job job(ctx, *options, msca_job::mode::poll);
          co_return co_await job.run();
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_msca_poll_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
}

}  // namespace certfleet::lifecycle
