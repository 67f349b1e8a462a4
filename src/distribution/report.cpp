// Reporting finished children and completing runs: synchronous code that runs inside one store
// write transaction, so every counter, guard, spawned retry child and notification commits with
// the job transition that caused it, or not at all.
#include "certfleet/core/log.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/job_policy.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

namespace certfleet::distribution {

using store::fan_out_outcome;
using store::run_mode;
using store::run_status;
using store::target_status;

namespace {

void count(store::distribution_record& d, std::string_view outcome) {
  switch (store::parse_fan_out_outcome(outcome).value_or(fan_out_outcome::cancelled)) {
    case fan_out_outcome::succeeded: ++d.fan_out_succeeded; break;
    case fan_out_outcome::failed: ++d.fan_out_failed; break;
    case fan_out_outcome::partial: ++d.fan_out_partial; break;
    case fan_out_outcome::cancelled: ++d.fan_out_cancelled; break;
  }
}

// The result row a job's target gets when the job ended before reporting it (status and error
// filled in by the caller).
store::target_result unreported_result(const store::distribution_record& d, const job_plan& plan,
                                       const store::job_record& job, const std::string& target_id, time_ms now) {
  store::target_result r;
  r.distribution_id = d.id;
  r.run_no = d.run_no;
  r.target_id = target_id;
  r.job_id = job.id;
  r.retry_attempt = plan.retry_attempt;
  r.fence = job.fence;
  r.finished_at = now;
  return r;
}

// Children cancelled by the engine itself (canary verdict, failure budget, distribution cancel)
// do not pass through the terminal hook: they are accounted for here, in the same transaction.
result<void> account_cancelled(store::catalog_tx& tx, store::distribution_record& d,
                               const std::vector<store::job_record>& cancelled, time_ms now) {
  for (const auto& c : cancelled) {
    auto plan = parse_payload(c.payload);
    bool batch = plan && plan->mode != job_mode::retry;
    if (plan) {
      for (const auto& t : plan->target_ids) {
        auto r = unreported_result(d, *plan, c, t, now);
        r.status = to_string(target_status::cancelled);
        r.error = c.error;
        if (auto a = tx.add_result(r); !a) return a;
      }
      if (plan->mode == job_mode::retry) --d.fan_out_retrying;
    }
    const std::string outcome(to_string(fan_out_outcome::cancelled));
    auto added = tx.add_finalized(d.id, d.run_no, store::finalized_child{c.id, outcome, batch});
    if (!added) return std::move(added).error();
    if (*added) count(d, outcome);
  }
  return {};
}

result<void> stop_children(store::catalog_tx& tx, store::distribution_record& d, time_ms now) {
  auto prefix = run_key_prefix(d.id, d.run_no);
  auto cancelled = tx.cancel_waiting_children(d.id, prefix, now);
  if (!cancelled) return std::move(cancelled).error();
  if (auto r = account_cancelled(tx, d, *cancelled, now); !r) return r;
  auto asked = tx.request_cancel_children(d.id, prefix);
  if (!asked) return std::move(asked).error();
  return {};
}

// The run's distribution.finished, in the transaction that completes it.
result<void> notify_finished(store::catalog_tx& tx, const store::distribution_record& d, const run_summary& s,
                             time_ms now) {
  boost::json::object summary{{"targets", s.targets},     {"succeeded", s.succeeded}, {"failed", s.failed},
                              {"skipped", s.skipped},     {"cancelled", s.cancelled + s.pending}};
  notify::fired_event e;
  e.project_id = d.project_id;
  e.event = notify::event_names::distribution_finished;
  // A re-driven run ends once more per re-drive: each end is its own event.
  e.event_id = fmt::format("{}:{}", notify::event_names::distribution_finished, run_notification_base(d.id, d.run_no, d.run_redrives));
  e.data = boost::json::object{{"distribution_id", d.id}, {"name", d.name},   {"run_no", d.run_no},
                               {"status", d.status},      {"error", d.error}, {"summary", std::move(summary)}};
  e.key_base = run_notification_base(d.id, d.run_no, d.run_redrives);
  e.source.distribution_id = d.id;
  e.source.triggered_by = queue::triggers::distribution;
  auto fired = notify::fire_event(tx, e, now);
  if (!fired) return std::move(fired).error();
  return {};
}

}  // namespace

std::string run_backup_id(std::string_view distribution_id, std::int64_t run_no) {
  return fmt::format("{}-r{}", distribution_id, run_no);
}

result<bool> try_complete(store::catalog_tx& tx, store::distribution_record& d, time_ms now) {
  if (d.status != to_string(run_status::running)) return false;
  auto children = tx.finalized_children(d.id, d.run_no);
  if (!children) return std::move(children).error();
  auto batches = std::count_if(children->begin(), children->end(), [](const auto& c) { return c.batch; });
  if (batches < d.fan_out_total || d.fan_out_retrying > 0) return false;
  // Recovery tests: the final write "fails", leaving a run whose children have all reported for
  // the reconciliation pass to complete.
  if (fault_point("distribution_final")) return false;
  auto results = tx.run_results(d.id, d.run_no);
  if (!results) return std::move(results).error();
  auto outs = outcomes(*results);
  auto summary = summarize(d.run_target_ids, outs);
  std::string first_error;
  for (const auto& o : outs)
    if (o.status == to_string(target_status::failed)) {
      first_error = o.error;
      break;
    }
  auto verdict = final_status(d, *children, summary, first_error);
  d.status = verdict.status;
  // A reason set during the run (the canary's verdict) stays in front of the summary.
  d.error = d.error.empty() || verdict.status == to_string(run_status::success) ? verdict.error : d.error + "; " + verdict.error;
  d.run_finished_at = now;
  d.updated_at = now;
  crash_point("distribution_before_final");
  if (auto r = tx.update_distribution(d); !r) return std::move(r).error();
  if (d.mode != to_string(run_mode::rollback))
    if (auto r = notify_finished(tx, d, summary, now); !r) return std::move(r).error();
  return true;
}

result<void> report_child(store::catalog_tx& tx, const store::job_record& job, time_ms now) {
  if (!queue::driven_by_distribution(job.type) || !store::is_terminal(job.status)) return {};
  auto plan = parse_payload(job.payload);
  if (!plan) {
    log::write(spdlog::level::err, {.job_id = job.id}, "distribution job {} has a bad payload: {}", job.id, plan.error().message);
    return {};
  }
  auto dr = tx.get_distribution("", plan->distribution_id);
  if (!dr) return {};  // deleted meanwhile
  auto& d = *dr;
  if (d.run_no != plan->run_no) return {};  // a job of an older run: its run is closed

  bool cancelled = job.status == store::job_status::cancelled;
  auto mine = tx.job_results(d.id, d.run_no, job.id);
  if (!mine) return std::move(mine).error();
  auto own = std::move(*mine);
  // Targets this job never reported: its worker died (a transient cause, retried in a wave) or
  // it was cancelled before reaching them.
  std::set<std::string> reported;
  for (const auto& r : own) reported.insert(r.target_id);
  for (const auto& t : plan->target_ids) {
    if (reported.count(t)) continue;
    auto r = unreported_result(d, *plan, job, t, now);
    if (cancelled) {
      r.status = to_string(target_status::cancelled);
      r.error = "cancelled before this target was delivered";
    } else {
      r.status = to_string(target_status::failed);
      // A lost lease is transient (another worker can do it); a job that failed on its own before
      // reaching the target (its certificate gone, a secret that does not open) is not. A row
      // stored before errors had codes (store migration 16) is told by its words.
      const bool lost = job.error.empty() || job.error_code == store::lease_lost_code ||
                        (job.error_code.empty() && job.error.find("lease") != std::string::npos);
      r.error_class = lost ? "worker_lost" : "unknown";
      r.error = job.error.empty() ? "the job ended before this target got a result" : job.error;
    }
    if (auto a = tx.add_result(r); !a) return a;
    own.push_back(std::move(r));
  }

  bool batch = plan->mode != job_mode::retry;
  auto outcome = child_outcome(own, cancelled);
  auto added = tx.add_finalized(d.id, d.run_no, store::finalized_child{job.id, outcome, batch});
  if (!added) return std::move(added).error();
  if (!*added) return {};  // reported before: nothing changes
  count(d, outcome);
  if (plan->mode == job_mode::retry) --d.fan_out_retrying;
  d.updated_at = now;

  // Results that arrive after a terminal status never reopen it.
  if (d.status == to_string(run_status::running) && d.mode == to_string(run_mode::fan_out) && !d.cancel_requested) {
    bool stopping = false;
    if (d.canary && plan->mode == job_mode::batch && plan->batch_no == 1) {
      std::size_t failed = 0;
      for (const auto& r : outcomes(own))
        if (r.status == to_string(target_status::failed)) ++failed;
      if (over_failure_budget(failed, plan->target_ids.size(), d.failure_tolerance)) {
        stopping = true;
        d.error = fmt::format("canary batch failed {} of {} targets (tolerance {}): the other batches were cancelled",
                              failed, plan->target_ids.size(), d.failure_tolerance);
        if (auto r = stop_children(tx, d, now); !r) return r;
      } else if (auto r = tx.release_held_children(d.id, run_key_prefix(d.id, d.run_no), now); !r) {
        return std::move(r).error();
      }
    }
    if (d.fail_fast && !d.fail_fast_fired) {
      auto latest = tx.run_results(d.id, d.run_no);
      if (!latest) return std::move(latest).error();
      std::size_t failed = 0;
      for (const auto& r : outcomes(*latest))
        if (r.status == to_string(target_status::failed)) ++failed;
      if (over_failure_budget(failed, d.run_target_ids.size(), d.failure_tolerance)) {
        d.fail_fast_fired = true;
        stopping = true;
        if (auto r = stop_children(tx, d, now); !r) return r;
      }
    }
    if (!stopping && !d.fail_fast_fired && !cancelled &&
        (outcome == to_string(fan_out_outcome::failed) || outcome == to_string(fan_out_outcome::partial))) {
      auto again = retry_targets(own, plan->retry_attempt);
      if (!again.empty()) {
        job_plan next;
        next.distribution_id = d.id;
        next.run_no = d.run_no;
        next.mode = job_mode::retry;
        next.target_ids = std::move(again);
        next.batch_no = plan->batch_no;
        next.retry_attempt = plan->retry_attempt + 1;
        queue::enqueue_request j;
        j.project_id = d.project_id;
        j.type = queue::job_names::distribution_execute;
        j.payload = to_payload(next);
        j.idempotency_key = job_key(next, job.id);
        j.parent_job_id = job.id;
        j.certificate_id = d.certificate_id;
        j.distribution_id = d.id;
        j.triggered_by = queue::triggers::retry_wave;
        auto e = queue::enqueue_in(tx.jobs(), j, now);
        if (!e) return std::move(e).error();
        if (e->created) {
          ++d.fan_out_retrying;
          d.fan_out_retry_wave = std::max(d.fan_out_retry_wave, next.retry_attempt);
        }
      }
    }
  }
  crash_point("child_counted");
  auto done = try_complete(tx, d, now);
  if (!done) return std::move(done).error();
  if (!*done)
    if (auto r = tx.update_distribution(d); !r) return r;
  return {};
}

namespace {

// job.dead, in the transaction that made the job dead. Not for notification.send (a message
// about a message that could not be sent would fail the same way, and could loop) nor for
// distribution jobs (their run's distribution.finished tells). A project without a job.dead
// rule pays one indexed read of its rules.
result<void> fire_job_dead(store::catalog_tx& tx, const store::job_record& job, time_ms now) {
  if (job.type == queue::job_names::notification_send || queue::driven_by_distribution(job.type)) return {};
  boost::json::object data{{"job_id", job.id},
                           {"type", job.type},
                           {"error", job.error.substr(0, 2000)},
                           {"attempts", job.attempts},
                           {"max_attempts", job.max_attempts}};
  if (!job.certificate_id.empty()) data["certificate_id"] = job.certificate_id;
  if (!job.distribution_id.empty()) data["distribution_id"] = job.distribution_id;
  notify::fired_event e;
  e.project_id = job.project_id;
  e.event = notify::event_names::job_dead;
  // The fence tells apart two deaths of one job (dead, retried by hand, dead again).
  e.event_id = fmt::format("{}:{}:{}", notify::event_names::job_dead, job.id, job.fence);
  e.data = std::move(data);
  e.key_base = dead_job_notification_base(job.id, job.fence);
  e.source.certificate_id = job.certificate_id;
  e.source.parent_job_id = job.id;
  e.source.triggered_by = queue::triggers::job_dead;
  auto fired = notify::fire_event(tx, e, now);
  if (!fired) return std::move(fired).error();
  return {};
}

// certificate.renewal_failed, in the transaction that made a renew_certificate job dead: the
// current version stays in place (its not_after is the one the event shows). Nothing when the
// certificate is gone.
result<void> fire_renewal_failed(store::catalog_tx& tx, const store::job_record& job, time_ms now) {
  if (job.type != queue::job_names::renew_certificate) return {};
  // The route and the sweep set the job's certificate; POST …/jobs leaves it to the payload.
  std::string cert_id = job.certificate_id;
  if (cert_id.empty()) {
    boost::system::error_code ec;
    auto p = boost::json::parse(job.payload, ec);
    if (!ec && p.is_object())
      if (auto* id = p.as_object().if_contains("certificate_id"); id && id->is_string()) cert_id = id->as_string();
  }
  if (cert_id.empty()) return {};
  auto cert = tx.get_object(job.project_id, store::kind_certificate, cert_id);
  if (!cert) return {};
  auto doc = catalog::parse_certificate_doc(*cert, true);
  if (!doc) return {};
  boost::json::array domains;
  if (doc->acme)
    for (const auto& d : doc->acme->domains) domains.emplace_back(d);
  notify::fired_event e;
  e.project_id = job.project_id;
  e.event = notify::event_names::certificate_renewal_failed;
  e.event_id = certificate_event_id(e.event, cert_id, fmt::format("{}:{}", job.id, job.fence));
  e.data = boost::json::object{{"certificate_id", cert_id},
                               {"name", cert->name},
                               {"domains", std::move(domains)},
                               {"error", job.error.substr(0, 2000)},
                               {"job_id", job.id}};
  if (doc->version > 0) e.data["not_after"] = doc->not_after;  // none yet: never issued
  e.key_base = e.event_id;
  e.source.certificate_id = cert_id;
  e.source.parent_job_id = job.id;
  e.source.triggered_by = queue::triggers::job_dead;
  auto fired = notify::fire_event(tx, e, now);
  if (!fired) return std::move(fired).error();
  return {};
}

}  // namespace

store::terminal_hook make_terminal_hook() {
  auto hook = [](store::job_tx& tx, const store::job_record& job) {
    const time_ms now = job.completed_at ? job.completed_at : system_clock().now_ms();
    // An error here is a store failure inside the transaction: fail it, so the job's transition
    // is retried (by its worker or the reaper) rather than committed without its report.
    if (queue::driven_by_distribution(job.type)) {
      if (auto r = report_child(tx.catalog(), job, now); !r)
        throw std::runtime_error("distribution report failed: " + r.error().message);
      return;
    }
    if (job.status == store::job_status::dead) {
      if (auto r = fire_job_dead(tx.catalog(), job, now); !r)
        throw std::runtime_error("job.dead notification failed: " + r.error().message);
      if (auto r = fire_renewal_failed(tx.catalog(), job, now); !r)
        throw std::runtime_error("certificate.renewal_failed notification failed: " + r.error().message);
    }
  };
  std::vector<std::string> types;
  for (const auto& t : queue::all_job_types())
    if (t.driven_by_distribution) types.emplace_back(t.name);
  return {hook, std::move(types), /*every_dead=*/true};
}

}  // namespace certfleet::distribution
