#include "certfleet/distribution/redrive.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/catalog/id_list.hpp"
#include "certfleet/store/job_policy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace certfleet::distribution {

using store::run_mode;
using store::run_status;
using store::target_status;

namespace {
error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}
}  // namespace

result<redrive_request> parse_redrive_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"job_id", "target_ids"}); !ok) return std::move(ok).error();
  auto job = r->optional_string("job_id");
  if (!job) return std::move(job).error();
  auto raw = r->optional_raw("target_ids", false);
  if (!raw) return std::move(raw).error();
  if (*job && *raw) return bad("body", "give either job_id or target_ids, not both");
  redrive_request out;
  if (*job) {
    if (!is_object_id(**job)) return bad("job_id", "job_id must be a 24-character hex job id");
    out.job_id = std::move(**job);
    return out;
  }
  if (!*raw) return bad("body", "give job_id (a job of the run: its failed targets) or target_ids (a list of target ids)");
  auto ids = catalog::parse_id_list(**raw, "target_ids", max_redrive_targets, "target");
  if (!ids) return std::move(ids).error();
  // Kept in the client's order: a refusal of target_ids[i] names the i-th id the client sent.
  out.target_ids = std::move(*ids);
  return out;
}

result<redrive> plan_redrive(const store::distribution_record& d, const std::vector<store::target_result>& run_results,
                             const redrive_request& req) {
  const std::string field = req.job_id.empty() ? "target_ids" : "job_id";
  if (d.run_no == 0) return make_error(errc::conflict, "the distribution has not run yet: execute it first", "run_no");
  if (d.status == to_string(run_status::running))
    return make_error(errc::conflict,
                      fmt::format("run {} is still running: its retry waves take the failed targets; re-drive after it ends",
                                  d.run_no),
                      "status");
  if (d.mode == to_string(run_mode::rollback))
    return make_error(errc::conflict,
                      fmt::format("run {} is a rollback: re-drive targets of a delivery run (Execute or Retry failed)", d.run_no),
                      "run_no");

  std::map<std::string_view, const store::target_result*> last;  // each target's outcome
  auto outs = store::target_outcomes(run_results);
  for (const auto& o : outs) last[o.target_id] = &o;
  auto failed = [&](std::string_view t) {
    auto it = last.find(t);
    return it == last.end() || it->second->status == to_string(target_status::failed) ||
           it->second->status == to_string(target_status::cancelled);
  };

  redrive out;
  std::vector<std::string> chosen;
  if (!req.job_id.empty()) {
    std::set<std::string> of_job;
    for (const auto& r : run_results)
      if (r.job_id == req.job_id) of_job.insert(r.target_id);
    if (of_job.empty())
      return make_error(errc::not_found,
                        fmt::format("job {} has no target result in run {} of distribution {}: name a job of its last run",
                                    req.job_id, d.run_no, d.id),
                        "job_id");
    for (const auto& t : of_job)
      if (failed(t)) chosen.push_back(t);
    if (chosen.empty())
      return make_error(errc::conflict,
                        fmt::format("every target of job {} succeeded or was skipped in run {} (their last results): "
                                    "nothing to retry",
                                    req.job_id, d.run_no),
                        "job_id");
    out.parent_job_id = req.job_id;
  } else {
    const std::set<std::string_view> in_run(d.run_target_ids.begin(), d.run_target_ids.end());
    for (const auto& t : req.target_ids) {
      const auto i = static_cast<std::size_t>(&t - req.target_ids.data());
      if (!in_run.count(t))
        return make_error(errc::invalid_argument, fmt::format("target {} is not a target of run {}", t, d.run_no),
                          fmt::format("target_ids[{}]", i));
      if (!failed(t))
        return make_error(errc::conflict,
                          fmt::format("target {} {} in run {}: nothing to retry", t, last.at(t)->status, d.run_no),
                          fmt::format("target_ids[{}]", i));
    }
    chosen = req.target_ids;
    std::sort(chosen.begin(), chosen.end());  // the job's targets in one order, however they were named
    if (auto it = last.find(chosen.front()); it != last.end()) out.parent_job_id = it->second->job_id;
  }

  // The new results must outrank every earlier one of these targets (a target's outcome is its
  // result with the highest retry_attempt), so the wave is one above the highest they reached.
  std::int64_t highest = 0;
  const std::set<std::string_view> picked(chosen.begin(), chosen.end());
  for (const auto& r : run_results)
    if (picked.count(r.target_id)) highest = std::max(highest, r.retry_attempt);
  if (highest + 1 > max_retry_attempt)
    return make_error(errc::conflict,
                      fmt::format("these targets ran {} times in run {} already (at most {}): open a new run with Retry "
                                  "failed",
                                  highest + 1, d.run_no, max_retry_attempt),
                      field);

  out.plan.distribution_id = d.id;
  out.plan.run_no = d.run_no;
  out.plan.mode = job_mode::retry;
  out.plan.target_ids = std::move(chosen);
  out.plan.retry_attempt = highest + 1;
  out.key = fmt::format("{}redrive:{}", run_key_prefix(d.id, d.run_no), d.run_redrives + 1);
  return out;
}

void reopen_for_redrive(store::distribution_record& d, const redrive& r, time_ms now) {
  d.status = to_string(run_status::running);
  d.run_finished_at = 0;
  d.error.clear();
  d.fail_fast_fired = false;
  d.cancel_requested = false;
  ++d.fan_out_retrying;
  d.fan_out_retry_wave = std::max(d.fan_out_retry_wave, r.plan.retry_attempt);
  ++d.run_redrives;
  d.updated_at = now;
}

}  // namespace certfleet::distribution
