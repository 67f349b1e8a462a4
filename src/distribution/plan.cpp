#include "certfleet/distribution/plan.hpp"

#include "certfleet/notify/events.hpp"

#include "certfleet/net/error_class.hpp"
#include "certfleet/store/job_policy.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>

namespace certfleet::distribution {

namespace {
using store::fan_out_outcome;
using store::run_mode;
using store::run_status;
using store::target_status;

constexpr std::array<std::string_view, 4> mode_names{"normal", "batch", "retry", "rollback"};
constexpr std::size_t max_payload_targets = 100'000;

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}

// DESIGN §4 names a batch child's targets `target_id_batch` and a retry child's
// `retry_target_ids`; normal and rollback jobs keep `target_ids`.
std::string_view target_ids_field(job_mode m) noexcept {
  switch (m) {
    case job_mode::batch: return "target_id_batch";
    case job_mode::retry: return "retry_target_ids";
    default: return "target_ids";
  }
}
}  // namespace

std::string_view to_string(job_mode m) noexcept { return mode_names[static_cast<std::size_t>(m)]; }

std::string to_payload(const job_plan& p) {
  boost::json::array ids;
  ids.reserve(p.target_ids.size());
  for (const auto& t : p.target_ids) ids.emplace_back(t);
  boost::json::object o{{"distribution_id", p.distribution_id},
                        {"run_no", p.run_no},
                        {"mode", to_string(p.mode)}};
  o[std::string(target_ids_field(p.mode))] = std::move(ids);
  if (p.batch_no) o["batch_no"] = p.batch_no;
  if (p.retry_attempt) o["retry_attempt"] = p.retry_attempt;
  if (p.rollback_of_run) o["rollback_of_run"] = p.rollback_of_run;
  return boost::json::serialize(o);
}

result<job_plan> parse_payload(std::string_view payload) {
  boost::system::error_code ec;
  auto v = boost::json::parse(payload, ec);
  if (ec || !v.is_object()) return bad("payload", "payload must be a JSON object");
  const auto& o = v.as_object();
  job_plan p;
  auto text = [&](std::string_view k, std::string& out) -> result<void> {
    auto* f = o.if_contains(k);
    if (!f || !f->is_string() || f->as_string().empty()) return bad(std::string(k), fmt::format("{} must be a non-empty string", k));
    out = std::string(f->as_string());
    return {};
  };
  auto integer = [&](std::string_view k, std::int64_t& out, bool required) -> result<void> {
    auto* f = o.if_contains(k);
    if (!f) {
      if (required) return bad(std::string(k), fmt::format("{} is required", k));
      return {};
    }
    if (!f->is_int64() || f->as_int64() < 0) return bad(std::string(k), fmt::format("{} must be a non-negative integer", k));
    out = f->as_int64();
    return {};
  };
  if (auto r = text("distribution_id", p.distribution_id); !r) return std::move(r).error();
  if (auto r = integer("run_no", p.run_no, true); !r) return std::move(r).error();
  std::string mode;
  if (auto r = text("mode", mode); !r) return std::move(r).error();
  auto m = std::find(mode_names.begin(), mode_names.end(), mode);
  if (m == mode_names.end()) return bad("mode", "mode must be normal, batch, retry or rollback");
  p.mode = static_cast<job_mode>(m - mode_names.begin());
  // Jobs stored before the contract's names carry `target_ids` in every mode: still read them.
  std::string ids_key(target_ids_field(p.mode));
  auto* ids = o.if_contains(ids_key);
  if (!ids && ids_key != "target_ids") {
    ids = o.if_contains("target_ids");
    if (ids) ids_key = "target_ids";
  }
  if (!ids || !ids->is_array()) return bad(ids_key, fmt::format("{} must be an array of ids", ids_key));
  if (ids->as_array().size() > max_payload_targets) return bad(ids_key, fmt::format("{} has too many entries", ids_key));
  for (const auto& e : ids->as_array()) {
    if (!e.is_string() || e.as_string().empty()) return bad(ids_key, fmt::format("{} must hold non-empty strings", ids_key));
    p.target_ids.emplace_back(e.as_string());
  }
  std::sort(p.target_ids.begin(), p.target_ids.end());
  p.target_ids.erase(std::unique(p.target_ids.begin(), p.target_ids.end()), p.target_ids.end());
  if (auto r = integer("batch_no", p.batch_no, false); !r) return std::move(r).error();
  if (auto r = integer("retry_attempt", p.retry_attempt, false); !r) return std::move(r).error();
  if (auto r = integer("rollback_of_run", p.rollback_of_run, false); !r) return std::move(r).error();
  if (p.retry_attempt > max_retry_attempt) return bad("retry_attempt", fmt::format("retry_attempt is at most {}", max_retry_attempt));
  return p;
}

std::string job_key(const job_plan& p, std::string_view parent_job_id) {
  auto key = run_key_prefix(p.distribution_id, p.run_no);
  switch (p.mode) {
    case job_mode::normal: return key + "normal";
    case job_mode::batch: return fmt::format("{}batch:{}", key, p.batch_no);
    case job_mode::retry: return fmt::format("{}retry:{}", key, parent_job_id);
    case job_mode::rollback: return key + "rollback";
  }
  return {};
}

std::string run_key_prefix(std::string_view distribution_id, std::int64_t run_no) {
  return fmt::format("dist:{}:{}:", distribution_id, run_no);
}

std::string run_notification_base(std::string_view distribution_id, std::int64_t run_no, std::int64_t redrives) {
  if (redrives > 0) return fmt::format("{}:{}:redrive:{}", distribution_id, run_no, redrives);
  return fmt::format("{}:{}", distribution_id, run_no);
}

std::string run_notification_key(std::string_view distribution_id, std::int64_t run_no, std::string_view channel_id,
                                 std::int64_t redrives) {
  return notify::notification_key(run_notification_base(distribution_id, run_no, redrives), channel_id);
}

std::string expiry_notification_base(std::string_view certificate_id, std::int64_t days) {
  return fmt::format("cert:{}:{}", certificate_id, days);
}

std::string renewal_run_trigger(std::string_view distribution_id, std::int64_t version) {
  return fmt::format("dist-renew:{}:{}", distribution_id, version);
}

std::string expiry_notification_key(std::string_view certificate_id, std::int64_t days, std::string_view channel_id) {
  return notify::notification_key(expiry_notification_base(certificate_id, days), channel_id);
}

std::string dead_job_notification_base(std::string_view job_id, std::int64_t fence) {
  return fmt::format("job:{}:{}", job_id, fence);
}

std::string certificate_event_id(std::string_view event, std::string_view certificate_id, std::string_view which) {
  return fmt::format("{}:{}:{}", event, certificate_id, which);
}

std::string expiration_check_key(time_ms now) { return fmt::format("exp_check:{}", now / 3'600'000); }

error job_retry_refusal(const store::job_record& job) {
  return make_error(errc::conflict,
                    fmt::format("job {} belongs to distribution {}: once its run has ended, re-drive this job's failed "
                                "targets in that run with POST /api/v1/projects/{{p}}/distributions/{}/retry-targets "
                                "{{\"job_id\": \"{}\"}}, or open a new run over every failed target with "
                                ".../retry-failed",
                                job.id, job.distribution_id, job.distribution_id, job.id),
                    "retry-targets");
}

int effective_batch_size(std::int64_t setting) noexcept {
  return setting <= 0 ? default_batch_size : static_cast<int>(setting);
}
int effective_ssh_concurrency(std::int64_t setting) noexcept {
  return setting <= 0 ? default_ssh_concurrency : static_cast<int>(setting);
}
bool fans_out(std::size_t targets, std::int64_t threshold) noexcept {
  return threshold > 0 && targets >= static_cast<std::size_t>(threshold);
}

std::vector<std::vector<std::string>> split_batches(std::vector<std::string> ids, int batch_size) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  auto size = static_cast<std::size_t>(effective_batch_size(batch_size));
  std::vector<std::vector<std::string>> out;
  for (std::size_t i = 0; i < ids.size(); i += size)
    out.emplace_back(ids.begin() + static_cast<std::ptrdiff_t>(i),
                     ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), i + size)));
  return out;
}

bool retryable_class(std::string_view c) noexcept { return net::retryable(c); }

std::vector<store::target_result> outcomes(const std::vector<store::target_result>& results) {
  return store::target_outcomes(results);
}

std::string child_outcome(const std::vector<store::target_result>& own, bool job_cancelled) {
  auto word = [](fan_out_outcome o) { return std::string(to_string(o)); };
  if (job_cancelled) return word(fan_out_outcome::cancelled);
  std::size_t ok = 0, failed = 0;
  for (const auto& r : outcomes(own)) {
    if (r.status == to_string(target_status::succeeded) || r.status == to_string(target_status::skipped)) ++ok;
    else ++failed;
  }
  if (failed == 0) return word(fan_out_outcome::succeeded);
  return word(ok == 0 ? fan_out_outcome::failed : fan_out_outcome::partial);
}

std::vector<std::string> retry_targets(const std::vector<store::target_result>& own, std::int64_t child_retry_attempt) {
  std::vector<std::string> out;
  if (child_retry_attempt >= max_retry_waves) return out;
  for (const auto& r : outcomes(own))
    if (r.status == to_string(target_status::failed) && retryable_class(r.error_class)) out.push_back(r.target_id);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool over_failure_budget(std::size_t failed, std::size_t total, double tolerance) noexcept {
  if (total == 0) return false;
  return static_cast<double>(failed) > tolerance * static_cast<double>(total);
}

run_summary summarize(const std::vector<std::string>& run_targets, const std::vector<store::target_result>& outs) {
  run_summary s;
  s.targets = static_cast<std::int64_t>(run_targets.size());
  std::map<std::string_view, std::string_view> by_target;
  for (const auto& r : outs) by_target.emplace(r.target_id, r.status);
  for (const auto& t : run_targets) {
    auto it = by_target.find(t);
    if (it == by_target.end()) ++s.pending;
    else if (it->second == to_string(target_status::succeeded)) ++s.succeeded;
    else if (it->second == to_string(target_status::skipped)) ++s.skipped;
    else if (it->second == to_string(target_status::cancelled)) ++s.cancelled;
    else ++s.failed;
  }
  return s;
}

final_verdict final_status(const store::distribution_record& d, const std::vector<store::finalized_child>& children,
                           const run_summary& s, std::string_view first_error) {
  auto verdict = [](run_status st, std::string error) { return final_verdict{std::string(to_string(st)), std::move(error)}; };
  bool all_cancelled = !children.empty();
  for (const auto& c : children)
    if (c.outcome != to_string(fan_out_outcome::cancelled)) all_cancelled = false;
  if (all_cancelled || d.cancel_requested) return verdict(run_status::cancelled, "cancelled on request");
  if (d.fail_fast_fired) return verdict(run_status::failed, "stopped: failure budget exceeded");
  auto non_skipped = s.targets - s.skipped;
  if (s.succeeded == 0) {
    if (non_skipped == 0) return verdict(run_status::failed, "no target left to deliver to (all were deleted)");
    if (s.cancelled + s.pending == 0)
      return verdict(run_status::failed, fmt::format("all {} targets failed: {}", non_skipped, first_error));
    return verdict(run_status::failed, fmt::format("no target succeeded ({} failed, {} cancelled){}{}", s.failed,
                                                   s.cancelled + s.pending, first_error.empty() ? "" : ": ", first_error));
  }
  if (s.succeeded == non_skipped) return verdict(run_status::success, "");
  return verdict(run_status::partial,
                 fmt::format("{} of {} targets failed, {} cancelled", s.failed, non_skipped, s.cancelled));
}

lost_work find_lost_work(const store::distribution_record& d, const std::vector<job_plan>& present,
                         const std::vector<std::string>& with_results) {
  lost_work w;
  std::set<std::string> covered(with_results.begin(), with_results.end());
  std::set<std::int64_t> batch_nos;
  std::int64_t counted = 0;
  for (const auto& p : present) {
    if (p.distribution_id != d.id || p.run_no != d.run_no) continue;
    covered.insert(p.target_ids.begin(), p.target_ids.end());
    if (p.mode == job_mode::retry) continue;
    ++counted;
    batch_nos.insert(p.batch_no);
  }
  w.missing_batches = std::max<std::int64_t>(d.fan_out_total - counted, 0);
  if (w.missing_batches == 0) return w;
  if (d.mode == to_string(run_mode::fan_out)) {
    w.batch_no = 1;
    while (batch_nos.count(w.batch_no)) ++w.batch_no;
  }
  for (const auto& t : d.run_target_ids)
    if (!covered.count(t)) w.uncovered.push_back(t);
  std::sort(w.uncovered.begin(), w.uncovered.end());
  w.uncovered.erase(std::unique(w.uncovered.begin(), w.uncovered.end()), w.uncovered.end());
  return w;
}

}  // namespace certfleet::distribution
