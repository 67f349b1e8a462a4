// The AD CS jobs (msca_jobs.hpp): enrollment and renewal, the poll of a request held for
// approval, the policy fetch, the MSCA workflow view and the renewal rule.
#include "certfleet/lifecycle/msca_jobs.hpp"

#include "lifecycle/acme_job_common.hpp"
#include "lifecycle/issued_version.hpp"
#include "lifecycle/msca_client.hpp"

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
using msca::failure_class;

namespace {

constexpr std::array<std::string_view, 8> steps{"initialized", "fetching_policy", "generating_key", "submitting",
                                                "pending_approval", "retrieving", "storing",         "completed"};

std::int64_t step_number(std::string_view name) {
  return std::find(steps.begin(), steps.end(), name) - steps.begin() + 1;
}

struct msca_settings {
  net::egress_policy allow;
  std::chrono::milliseconds timeout{30000};
  std::int64_t poll_first_s = 60, poll_max_s = 3600, give_up_h = 168;
};

asio::awaitable<msca_settings> read_msca_settings(store::store& st) {
  auto s = co_await store::read_settings(st);
  msca_settings out;
  // The settings table validates the list; a value that no longer parses refuses everything.
  if (auto p = net::parse_egress_allow_list(s.text("msca_allow_list"), "msca_allow_list")) out.allow = std::move(*p);
  out.timeout = std::chrono::seconds(s.integer("msca_timeout_s"));
  out.poll_first_s = s.integer("msca_poll_first_delay_s");
  out.poll_max_s = s.integer("msca_poll_max_delay_s");
  out.give_up_h = s.integer("msca_poll_give_up_h");
  co_return out;
}

// What a job works with, read in one snapshot.
struct msca_inputs {
  store::catalog_object cert, ca;
  catalog::certificate_doc doc;
  msca_ca_spec ca_spec;
  msca_ca_secret secret;
};

std::string der_summary(const catalog::certificate_msca& m) {
  if (!m.subject.empty()) return m.subject;
  return m.sans.empty() ? std::string() : fmt::format("DNS:{}", fmt::join(m.sans, ", DNS:"));
}

// A policy older than the CA says to keep it (its nextUpdate, 8 hours when it gives none) is
// fetched again.
bool policy_fresh(const msca_cached_policy& p, time_ms now) {
  const std::int64_t hours = p.next_update_hours > 0 ? p.next_update_hours : 8;
  return p.fetched_at > 0 && now - p.fetched_at < hours * 3'600'000;
}

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
  queue::outcome failed(const msca_failure& f) const {
    return f.permanent ? queue::outcome::permanent_failure(f.message) : queue::outcome::failure(f.message);
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
    if (!t) co_return queue::outcome::permanent_failure(t.error().message);
    certificate_id = t->certificate_id;
    target = std::move(*t);
  } else {
    auto p = certfleet::json::object_reader::parse(ctx_.payload(), "payload");
    if (!p) co_return queue::outcome::permanent_failure(p.error().message);
    auto id = p->required_string("certificate_id");
    if (!id) co_return queue::outcome::permanent_failure(id.error().message);
    certificate_id = std::move(*id);
    auto v = p->optional_int("version");
    if (v && *v) version = **v;
  }
  auto in = co_await load(certificate_id);
  if (!in) {
    if (in.error().is(errc::not_found))
      co_return queue::outcome::permanent_failure(
          fmt::format("certificate {} or its AD CS CA is gone: {}", certificate_id, in.error().message));
    if (in.error().is(errc::conflict)) co_return queue::outcome::permanent_failure(in.error().message);
    co_return queue::outcome::failure(in.error().message);
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
  if (!kept) co_return queue::outcome::failure(kept.error().message);
  if (*kept) {
    auto doc = parse_msca_request_doc(**kept);
    if (!doc) co_return queue::outcome::permanent_failure(doc.error().message);
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
    if (!signed_req) co_return queue::outcome::permanent_failure(signed_req.error().message);
    req.kind = msca::request_kind::renew;
    req.token_der = std::move(*signed_req);
  }
  co_await ctx_.log("info", fmt::format("{} request for template {} ({}, {}) to {}", renewal ? "renewal" : "enrollment",
                                        tmpl->name, *kt_name, der_summary(m), *ces));

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
    if (!issued_held) co_return queue::outcome::failure(issued_held.error().message);
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
  if (!held) co_return queue::outcome::failure(held.error().message);
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
  if (!found) co_return queue::outcome::failure(found.error().message);
  if (!*found) {
    co_await ctx_.log("info", fmt::format("request {} is no longer held for certificate {}: nothing to poll",
                                          target.request_id, cert_id));
    co_await step("completed");
    co_return queue::outcome::ok();
  }
  const auto held = std::move(**found);
  auto rd = parse_msca_request_doc(held);
  if (!rd) co_return queue::outcome::permanent_failure(rd.error().message);
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
  co_return queue::outcome::permanent_failure(f.message);
}

}  // namespace

asio::awaitable<result<msca_cached_policy>> fetch_msca_policy(store::store& st, const msca_ca_spec& ca,
                                                             const msca_ca_secret& secret, const msca_job_options& opt,
                                                             time_ms now) {
  auto s = co_await read_msca_settings(st);
  msca_connection c;
  c.ca = &ca;
  c.secret = &secret;
  c.extra_ca_pem = opt.ca_pem;
  c.cpu = opt.cpu;
  c.egress = &s.allow;
  c.timeout = s.timeout;
  auto answer = co_await detail::msca_get_policies(c);
  if (!answer.value) {
    // A refusal of the credentials names the one the operator gave.
    const std::string field = !answer.failure.field.empty()               ? answer.failure.field
                              : answer.failure.cls != failure_class::auth ? "cep_url"
                              : ca.auth_kind == "client_certificate"     ? "auth.cert_pem"
                              : ca.krb_credential == "keytab"            ? "auth.keytab_b64"
                                                                         : "auth.password";
    // The CA refusing the credentials given is a bad field, not a 401: the API's 401 means this
    // caller's own token (clients sign out on it, the audit log records it as anonymous).
    auto e = make_error(answer.failure.permanent ? errc::invalid_argument : errc::timeout, answer.failure.message, field);
    co_return e;
  }
  co_return cache_policy(*answer.value, now);
}

asio::awaitable<result<msca_cached_policy>> refresh_msca_policy(store::store& st, const store::catalog_object& ca,
                                                               const msca_job_options& opt, time_ms now) {
  if (!opt.key) co_return make_error(errc::config_invalid, "no key-encryption key: the CA's secret cannot be opened");
  auto spec = parse_msca_ca_doc(ca);
  if (!spec) co_return std::move(spec).error();
  auto secret = open_msca_ca_secret(*opt.key, ca);
  if (!secret) co_return std::move(secret).error();
  auto policy = co_await fetch_msca_policy(st, *spec, *secret, opt, now);
  if (!policy) co_return std::move(policy).error();
  spec->policy = *policy;
  // Only the policy changes: the rest of the CA as it is now (it may have been edited meanwhile).
  store::tx_fn save = [project = ca.project_id, id = ca.id, fresh = *policy](store::catalog_tx& tx) -> result<void> {
    auto o = tx.get_object(project, store::kind_msca_ca, id);
    if (!o) return std::move(o).error();
    auto current = parse_msca_ca_doc(*o);
    if (!current) return std::move(current).error();
    current->policy = fresh;
    return tx.update_object_doc(id, msca_ca_doc_json(*current));
  };
  if (auto w = co_await st.catalog().transact(std::move(save)); !w) co_return std::move(w).error();
  co_return std::move(*policy);
}

asio::awaitable<result<int>> refresh_stale_msca_policies(
    store::store& st, const clock_source& clock, const msca_job_options& opt,
    std::function<asio::awaitable<void>(std::string level, std::string message)> log) {
  const time_ms now = clock.now_ms();
  store::read_value_fn<std::vector<store::catalog_object>> read = [](store::catalog_read& rd) {
    return rd.objects_by_not_after(store::kind_msca_ca, std::numeric_limits<time_ms>::max(), 100'000);
  };
  auto cas = co_await store::read_value(st.catalog(), std::move(read));
  if (!cas) co_return std::move(cas).error();
  int refreshed = 0;
  for (const auto& ca : *cas) {
    auto spec = parse_msca_ca_doc(ca);
    if (!spec || policy_fresh(spec->policy, now)) continue;
    auto r = co_await refresh_msca_policy(st, ca, opt, now);
    if (r) {
      ++refreshed;
      if (log)
        co_await log("info", fmt::format("msca_policy: CA {} ({}): policy {} fetched again, {} template(s)", ca.name,
                                         ca.id, r->policy_id, r->templates.size()));
    } else if (log) {
      co_await log("warn", fmt::format("msca_policy: CA {} ({}) keeps its cached policy: {}", ca.name, ca.id,
                                       r.error().message));
    }
  }
  co_return refreshed;
}

std::span<const std::string_view> msca_workflow_steps() noexcept { return steps; }

bool has_msca_workflow(std::string_view job_type) noexcept {
  return job_type == queue::job_names::msca_issue_certificate || job_type == queue::job_names::msca_renew_certificate ||
         job_type == queue::job_names::msca_poll_pending;
}

result<json::object> msca_workflow_view(store::catalog_read& rd, const store::job_record& j) {
  json::array names;
  for (auto s : steps) names.emplace_back(s);
  const auto at = j.progress_total == static_cast<std::int64_t>(steps.size()) && j.progress_current >= 1 &&
                          j.progress_current <= static_cast<std::int64_t>(steps.size())
                      ? static_cast<std::size_t>(j.progress_current - 1)
                      : 0;
  json::object w{{"kind", "msca"}, {"step", steps[at]}, {"steps", std::move(names)}};
  const bool failed = j.status == store::job_status::failed || j.status == store::job_status::dead;
  if (failed) w["failed_step"] = steps[at];
  // A request issued at once never waits or retrieves; a poll starts at the wait.
  json::array skipped;
  const bool poll = j.type == queue::job_names::msca_poll_pending;
  if (poll) {
    skipped.emplace_back("fetching_policy");
    skipped.emplace_back("generating_key");
    skipped.emplace_back("submitting");
  } else if (j.status == store::job_status::completed && steps[at] == "completed") {
    skipped.emplace_back("pending_approval");
    skipped.emplace_back("retrieving");
  }
  w["skipped_steps"] = std::move(skipped);
  std::string template_name, subject, request_id, renewal_mode, last_error, disposition;
  std::int64_t polls = 0;
  if (poll)
    if (auto t = parse_msca_poll_payload(j.payload)) {
      request_id = t->request_id;
      polls = t->n;
    }
  if (!j.certificate_id.empty()) {
    auto cert = rd.get_object(j.project_id, store::kind_certificate, j.certificate_id);
    if (cert) {
      auto doc = catalog::parse_certificate_doc(*cert, true);
      if (doc && doc->msca) {
        template_name = doc->msca->template_name;
        subject = der_summary(*doc->msca);
        if (request_id.empty()) request_id = doc->msca->request_id;
        last_error = doc->msca->last_error;
        disposition = doc->msca->disposition;
        if (auto ca = rd.get_object(j.project_id, store::kind_msca_ca, doc->msca->msca_ca_id))
          if (auto spec = parse_msca_ca_doc(*ca)) renewal_mode = spec->renewal_mode;
        if (!request_id.empty() && polls == 0)
          if (auto o = rd.objects_named(j.project_id, store::kind_msca_request,
                                        fmt::format("{}:{}", j.certificate_id, request_id), 1);
              o && !o->empty())
            if (auto d = parse_msca_request_doc(o->front())) polls = d->polls;
      }
    } else if (!cert.error().is(errc::not_found)) {
      return std::move(cert).error();
    }
  }
  w["template"] = template_name;
  w["request_id"] = certfleet::json::text_value(request_id);
  w["poll_count"] = polls;
  w["renewal_mode"] = j.type == queue::job_names::msca_issue_certificate ? std::string("new_key")
                      : renewal_mode.empty()                            ? std::string("new_key")
                                                                         : renewal_mode;
  w["subject"] = subject;
  std::string terminal;
  if (failed) terminal = j.error.empty() ? last_error : j.error;
  else if (j.status == store::job_status::completed)
    terminal = steps[at] == "completed" ? std::string("issued")
               : steps[at] == "pending_approval" ? std::string("pending approval at the CA")
                                                 : std::string();
  w["terminal_reason"] = certfleet::json::text_value(terminal);
  w["started_at"] = certfleet::json::time_value(j.started_at);
  return w;
}

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
