// The distribution sweep's two passes over running runs (engine.hpp): reconcile reports the
// terminal children a run is missing and completes it; retrigger_lost re-enqueues the work no job
// holds. Each run in its own transaction, so one bad run does not stop the sweep.
#include "certfleet/distribution/engine.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"

namespace certfleet::distribution {

namespace asio = boost::asio;
using store::run_mode;
using store::run_status;

namespace {

using run_pass = std::function<result<void>(store::catalog_tx&, const std::string& id, time_ms now, bool& touched)>;

// Runs `pass` on each running distribution (up to `limit`, oldest update first), each in its own
// write transaction; returns how many it changed.
asio::awaitable<result<int>> for_each_running(store::store& st, const clock_source& clock, int limit, run_pass pass) {
  store::read_value_fn<std::vector<store::distribution_record>> list = [limit](store::catalog_read& rd) {
    return rd.distributions_in_status(to_string(run_status::running), limit);
  };
  auto running = co_await store::read_value(st.catalog(), std::move(list));
  if (!running) co_return std::move(running).error();
  int changed = 0;
  for (const auto& d : *running) {
    auto touched = std::make_shared<bool>(false);
    auto now = clock.now_ms();
    auto id = d.id;
    store::tx_fn one = [id, now, touched, pass](store::catalog_tx& tx) -> result<void> {
      return pass(tx, id, now, *touched);
    };
    auto w = co_await st.catalog().transact(std::move(one));
    if (!w) co_return std::move(w).error();
    if (*touched) ++changed;
  }
  co_return changed;
}

// One running run: reports its terminal children missing from the finalized set, then completes
// it when every batch is in.
result<void> reconcile_run(store::catalog_tx& tx, const std::string& id, time_ms now, bool& touched) {
  auto dist = tx.get_distribution("", id);
  if (!dist || dist->status != to_string(run_status::running)) return {};
  auto kids = tx.children_of(id, run_key_prefix(id, dist->run_no));
  if (!kids) return std::move(kids).error();
  auto fin = tx.finalized_children(id, dist->run_no);
  if (!fin) return std::move(fin).error();
  std::set<std::string> done;
  for (const auto& f : *fin) done.insert(f.job_id);
  for (const auto& k : *kids) {
    if (!store::is_terminal(k.status) || done.count(k.id)) continue;
    if (auto rep = report_child(tx, k, now); !rep) return rep;
    touched = true;
  }
  auto again = tx.get_distribution("", id);
  if (!again) return std::move(again).error();
  auto completed = try_complete(tx, *again, now);
  if (!completed) return std::move(completed).error();
  if (*completed) touched = true;
  return {};
}

}  // namespace

asio::awaitable<result<int>> reconcile(store::store& st, const clock_source& clock, int limit) {
  run_pass pass = reconcile_run;  // named: GCC 12 destroys a temporary built in a co_await expression twice
  auto changed = co_await for_each_running(st, clock, limit, std::move(pass));
  co_return changed;
}

namespace {

// One running run: re-enqueues the work no job holds (under the lost job's own key, so a job
// that does exist is never doubled), or closes the run when nothing is left to do.
result<void> retrigger_run(store::catalog_tx& tx, const std::string& id, time_ms now, bool& touched) {
  auto dist = tx.get_distribution("", id);
  if (!dist || dist->status != to_string(run_status::running)) return {};
  auto& d = *dist;
  auto kids = tx.children_of(id, run_key_prefix(id, d.run_no));
  if (!kids) return std::move(kids).error();
  std::vector<job_plan> present;
  std::vector<std::string> batch_job_ids;
  std::string canary_job;
  for (const auto& k : *kids) {
    auto p = parse_payload(k.payload);
    if (!p) continue;
    if (p->mode != job_mode::retry) batch_job_ids.push_back(k.id);
    if (p->mode == job_mode::batch && p->batch_no == 1) canary_job = k.id;
    present.push_back(std::move(*p));
  }
  // A batch that reported and whose job row has since gone (retention) is not lost work.
  auto fin = tx.finalized_children(id, d.run_no);
  if (!fin) return std::move(fin).error();
  for (const auto& f : *fin)
    if (f.batch && std::none_of(kids->begin(), kids->end(), [&](const auto& k) { return k.id == f.job_id; })) {
      present.push_back(job_plan{d.id, d.run_no, job_mode::batch, {}, 0, 0, 0});
      batch_job_ids.push_back(f.job_id);
    }
  auto results = tx.run_results(id, d.run_no);
  if (!results) return std::move(results).error();
  std::vector<std::string> with_results;
  for (const auto& r : *results) with_results.push_back(r.target_id);
  auto lost = find_lost_work(d, present, with_results);
  if (lost.missing_batches == 0) return {};
  touched = true;
  d.updated_at = now;
  if (d.mode == to_string(run_mode::rollback)) {
    // A rollback's job carries which run's backups it restores; with the job gone that choice
    // is unknown, so the run ends and the operator starts the rollback again.
    d.status = to_string(run_status::failed);
    d.error = "the rollback job of this run was lost before it ran; start the rollback again";
    d.run_finished_at = now;
    spdlog::warn("distribution {} run {}: rollback job lost, run closed as failed", d.id, d.run_no);
    return tx.update_distribution(d);
  }
  d.fan_out_total -= lost.missing_batches;
  d.job_ids = batch_job_ids;
  if (!lost.uncovered.empty()) {
    const bool fan_out = d.mode == to_string(run_mode::fan_out);
    job_plan p{d.id, d.run_no, fan_out ? job_mode::batch : job_mode::normal, lost.uncovered, lost.batch_no,
               0, 0};
    bool canary_pending = false;
    if (d.canary && fan_out && p.batch_no != 1) {
      canary_pending = std::none_of(fin->begin(), fin->end(), [&](const auto& f) { return f.job_id == canary_job; });
    }
    queue::enqueue_request j;
    j.project_id = d.project_id;
    j.type = queue::job_names::distribution_execute;
    j.payload = to_payload(p);
    j.idempotency_key = job_key(p);
    j.certificate_id = d.certificate_id;
    j.distribution_id = d.id;
    j.triggered_by = queue::triggers::distribution_sweep;
    j.held = canary_pending;
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    ++d.fan_out_total;
    d.job_ids.push_back(e->job.id);
    spdlog::warn("distribution {} run {}: {} lost job(s), {} targets re-triggered as job {}", d.id, d.run_no,
                 lost.missing_batches, lost.uncovered.size(), e->job.id);
  }
  auto done = try_complete(tx, d, now);
  if (!done) return std::move(done).error();
  if (!*done) return tx.update_distribution(d);
  return {};
}

}  // namespace

asio::awaitable<result<int>> retrigger_lost(store::store& st, const clock_source& clock, int limit) {
  run_pass pass = retrigger_run;  // named: GCC 12 destroys a temporary built in a co_await expression twice
  auto changed = co_await for_each_running(st, clock, limit, std::move(pass));
  co_return changed;
}

}  // namespace certfleet::distribution
