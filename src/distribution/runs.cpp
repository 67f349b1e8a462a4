#include "certfleet/distribution/runs.hpp"

#include "certfleet/core/crash.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <set>

namespace certfleet::distribution {

namespace json = boost::json;
using store::run_mode;
using store::run_status;
using store::target_status;

run_settings run_settings_from(const settings_map& s) {
  return {s.integer("distribution_fanout_threshold"), effective_batch_size(s.integer("distribution_fanout_batch_size"))};
}

result<json::object> open_run(store::catalog_tx& tx, const run_request& req, const run_settings& rs, time_ms now,
                              std::vector<store::enqueue_outcome>* created) {
  const auto& project_id = req.project_id;
  const auto& id = req.distribution_id;
  auto dr = tx.get_distribution(project_id, id);
  if (!dr) return std::move(dr).error();
  auto& d = *dr;
  if (d.status == to_string(run_status::running))
    return make_error(errc::conflict, fmt::format("run {} of this distribution is still running", d.run_no), "status");
  auto cert = tx.get_object(project_id, store::kind_certificate, d.certificate_id);
  if (!cert) return make_error(errc::conflict, "the distribution's certificate was deleted", "certificate_id");
  auto cert_doc = catalog::parse_certificate_doc(*cert, true);
  if (!cert_doc) return std::move(cert_doc).error();
  if (cert_doc->version == 0 && req.kind != run_kind::rollback)
    return make_error(errc::conflict,
                      fmt::format("certificate {} has no issued version yet (status {}): execute after its issuance",
                                  d.certificate_id, cert_doc->status),
                      "certificate_id");

  std::vector<std::string> targets;
  std::int64_t files_run = 0;
  job_mode mode = job_mode::normal;
  if (req.kind == run_kind::execute) {
    targets = d.target_ids;
  } else if (req.kind == run_kind::retry_failed) {
    if (d.run_no == 0 || d.mode == to_string(run_mode::rollback)) return make_error(errc::conflict, "retry-failed needs a finished delivery run", "run_no");
    auto outs = tx.run_outcomes(id, d.run_no);
    if (!outs) return std::move(outs).error();
    std::set<std::string> done;
    for (const auto& o : *outs) {
      if (o.status == to_string(target_status::failed) || o.status == to_string(target_status::cancelled))
        targets.push_back(o.target_id);
      done.insert(o.target_id);
    }
    for (const auto& t : d.run_target_ids)
      if (!done.count(t)) targets.push_back(t);  // never got a result
    std::sort(targets.begin(), targets.end());
    if (targets.empty()) return make_error(errc::conflict, fmt::format("run {} has no failed targets", d.run_no), "run_no");
  } else {
    mode = job_mode::rollback;
    files_run = req.rollback_of ? req.rollback_of : d.run_no;
    // The last delivery run: skip over rollback runs.
    if (!req.rollback_of && d.mode == to_string(run_mode::rollback)) files_run = 0;
    if (files_run <= 0 || files_run > d.run_no)
      return make_error(errc::invalid_argument, "run_no must name a delivery run of this distribution", "run_no");
    auto outs = tx.run_outcomes(id, files_run);
    if (!outs) return std::move(outs).error();
    for (const auto& o : *outs) targets.push_back(o.target_id);
    if (targets.empty()) return make_error(errc::conflict, fmt::format("run {} delivered to no target", files_run), "run_no");
  }

  d.run_no += 1;
  d.status = to_string(run_status::running);
  d.run_target_ids = targets;
  d.job_ids.clear();
  d.error.clear();
  d.fan_out_total = d.fan_out_succeeded = d.fan_out_failed = d.fan_out_partial = d.fan_out_cancelled = 0;
  d.fan_out_retrying = d.fan_out_retry_wave = 0;
  d.fail_fast_fired = false;
  d.cancel_requested = false;
  d.run_started_at = now;
  d.run_finished_at = 0;
  d.run_certificate_version = cert_doc->version;
  d.run_trigger = req.trigger;
  d.updated_at = now;

  std::vector<job_plan> plans;
  bool fan = mode != job_mode::rollback && fans_out(targets.size(), rs.fanout_threshold);
  if (fan) {
    d.mode = to_string(run_mode::fan_out);
    auto batches = split_batches(targets, rs.batch_size);
    for (std::size_t i = 0; i < batches.size(); ++i) {
      job_plan p{d.id, d.run_no, job_mode::batch, std::move(batches[i]), static_cast<std::int64_t>(i + 1), 0, 0};
      plans.push_back(std::move(p));
    }
  } else {
    d.mode = to_string(mode == job_mode::rollback ? run_mode::rollback : run_mode::normal);
    plans.push_back(job_plan{d.id, d.run_no, mode, targets, 0, 0, files_run});
  }
  d.fan_out_total = static_cast<std::int64_t>(plans.size());
  // Recovery tests: the run opens but its jobs are not stored, as when an execute is aborted
  // between the two on a store without multi-document transactions; the distribution sweep
  // re-triggers it.
  if (fault_point("distribution_enqueue")) plans.clear();
  for (std::size_t i = 0; i < plans.size(); ++i) {
    queue::enqueue_request j;
    j.project_id = project_id;
    j.type = mode == job_mode::rollback ? queue::job_names::distribution_rollback : queue::job_names::distribution_execute;
    j.payload = to_payload(plans[i]);
    j.idempotency_key = job_key(plans[i]);
    j.certificate_id = d.certificate_id;
    j.distribution_id = d.id;
    j.triggered_by = req.actor;
    // Canary: the first batch runs alone; the rest wait, held, for its verdict.
    j.held = fan && d.canary && i > 0;
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    d.job_ids.push_back(e->job.id);
    if (created) created->push_back(*e);
    if (i == 0) crash_point("fanout_first_child_enqueued");
  }
  if (auto u = tx.update_distribution(d); !u) return std::move(u).error();
  json::array ids;
  for (const auto& j : d.job_ids) ids.emplace_back(j);
  return json::object{{"distribution_id", d.id}, {"run_no", d.run_no}, {"mode", d.mode},
                      {"job_ids", std::move(ids)}, {"targets", static_cast<std::int64_t>(targets.size())}};
}

}  // namespace certfleet::distribution
