// The service's distributions (service.hpp): their views, create/get/list/remove, execute, retry of
// failed targets, re-drive in the ended run, rollback, cancel and the results.
#include "certfleet/service/service.hpp"

#include "certfleet/distribution/request.hpp"

#include "service/service_common.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/redrive.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace certfleet::service {

namespace json = boost::json;
using store::catalog_object;
using namespace detail;

json::object distribution_view(const store::distribution_record& d, const std::vector<store::target_result>& outs,
                               const std::vector<store::finalized_child>& finalized) {
  json::array targets;
  for (const auto& t : d.target_ids) targets.emplace_back(t);
  json::object v{{"id", d.id},
                 {"name", d.name},
                 {"status", d.status},
                 {"run_no", d.run_no},
                 {"certificate_id", d.certificate_id},
                 {"target_ids", std::move(targets)},
                 {"canary", d.canary},
                 {"failure_tolerance", d.failure_tolerance},
                 {"fail_fast", d.fail_fast},
                 {"auto_execute", d.auto_execute},
                 {"created_at", certfleet::json::time_value(d.created_at)},
                 {"updated_at", certfleet::json::time_value(d.updated_at)}};
  if (d.run_no > 0) {
    v["mode"] = d.mode;
    v["run_started_at"] = certfleet::json::time_value(d.run_started_at);
    if (d.run_finished_at) v["run_finished_at"] = certfleet::json::time_value(d.run_finished_at);
    v["run_certificate_version"] = d.run_certificate_version;
    v["run_redrives"] = d.run_redrives;  // retry-targets calls in this run (each re-ends it)
    if (!d.run_trigger.empty()) v["run_trigger"] = d.run_trigger;
    if (!d.error.empty()) v["error"] = d.error;
    json::array jobs;
    for (const auto& j : d.job_ids) jobs.emplace_back(j);
    v["job_ids"] = std::move(jobs);
    auto s = distribution::summarize(d.run_target_ids, outs);
    v["summary"] = json::object{{"targets", s.targets},     {"succeeded", s.succeeded}, {"failed", s.failed},
                                {"skipped", s.skipped},     {"cancelled", s.cancelled}, {"pending", s.pending}};
    v["long_tail"] = distribution::long_tail_json(distribution::compute_long_tail(outs));
    if (d.mode == "fan_out") {
      json::array fin;
      // The counters count batch and retry children alike; the same finalized set, by kind.
      json::object batches{{"total", d.fan_out_total}, {"finished", 0}, {"succeeded", 0},
                           {"failed", 0},              {"partial", 0},  {"cancelled", 0}};
      json::object retries{{"finished", 0}, {"running", d.fan_out_retrying}, {"succeeded", 0},
                           {"failed", 0},   {"partial", 0},                  {"cancelled", 0}};
      for (const auto& f : finalized) {
        fin.push_back(json::object{{"job_id", f.job_id},
                                   {"outcome", f.outcome},
                                   {"kind", f.batch ? "batch" : "retry"},
                                   {"job", fmt::format("jobs/{}", f.job_id)}});
        auto& kind = f.batch ? batches : retries;
        kind["finished"] = kind["finished"].as_int64() + 1;
        if (auto* n = kind.if_contains(f.outcome)) *n = n->as_int64() + 1;
      }
      v["fan_out"] = json::object{{"total", d.fan_out_total},         {"succeeded", d.fan_out_succeeded},
                                  {"failed", d.fan_out_failed},       {"partial", d.fan_out_partial},
                                  {"cancelled", d.fan_out_cancelled}, {"retrying", d.fan_out_retrying},
                                  {"retry_wave", d.fan_out_retry_wave}, {"fail_fast_fired", d.fail_fast_fired},
                                  {"batches", std::move(batches)},    {"retry_jobs", std::move(retries)},
                                  {"finalized_jobs", std::move(fin)}};
    }
  }
  return v;
}

op<json::value> service::create_distribution(std::string project_id, std::string body) {
  bool auto_execute_given = false;
  auto d = distribution::parse_distribution_request(body, &auto_execute_given);
  if (!d) co_return std::move(d).error();
  d->project_id = project_id;
  d->created_at = clock_.now_ms();
  auto rec = std::make_shared<store::distribution_record>(std::move(*d));
  store::tx_fn op5 = [rec, auto_execute_given](store::catalog_tx& tx) -> result<void> {
    if (auto r = check_ref(tx, rec->project_id, store::kind_certificate, rec->certificate_id, "certificate_id"); !r) return r;
    if (!auto_execute_given) {
      // Left out: a certificate that renews itself (ACME) delivers each new version by itself.
      auto cert = tx.get_object(rec->project_id, store::kind_certificate, rec->certificate_id);
      if (!cert) return std::move(cert).error();
      auto doc = catalog::parse_certificate_doc(*cert, true);
      rec->auto_execute = doc && doc->source == "acme";
    }
    auto found = tx.objects_by_ids(rec->project_id, store::kind_target, rec->target_ids);
    if (!found) return std::move(found).error();
    if (found->size() != rec->target_ids.size()) {
      std::set<std::string> have;
      for (const auto& o : *found) have.insert(o.id);
      for (const auto& t : rec->target_ids)
        if (!have.count(t)) return make_error(errc::invalid_argument, fmt::format("unknown target {}", t), "target_ids");
    }
    auto ins = tx.insert_distribution(*rec);
    if (!ins) return std::move(ins).error();
    *rec = std::move(*ins);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op5));
  if (!w) co_return std::move(w).error();
  co_return json::value(distribution_view(*rec, {}, {}));
}

op<json::value> service::get_distribution(std::string project_id, std::string id) {
  auto d = std::make_shared<store::distribution_record>();
  auto outs = std::make_shared<std::vector<store::target_result>>();
  auto fin = std::make_shared<std::vector<store::finalized_child>>();
  store::read_fn op6 = [=](store::catalog_read& rd) -> result<void> {
    auto x = rd.get_distribution(project_id, id);
    if (!x) return std::move(x).error();
    *d = std::move(*x);
    auto o = rd.run_outcomes(id, d->run_no);
    if (!o) return std::move(o).error();
    *outs = std::move(*o);
    auto f = rd.finalized_children(id, d->run_no);
    if (!f) return std::move(f).error();
    *fin = std::move(*f);
    return {};
  };
  auto r = co_await st_.catalog().read(std::move(op6));
  if (!r) co_return std::move(r).error();
  co_return json::value(distribution_view(*d, *outs, *fin));
}

op<json::value> service::list_distributions(std::string project_id, int page, int page_size) {
  store::read_value_fn<store::distribution_page> op7 = [=](store::catalog_read& rd) {
    return rd.list_distributions(project_id, page, page_size);
  };
  auto out = co_await store::read_value(st_.catalog(), std::move(op7));
  if (!out) co_return std::move(out).error();
  json::array items;
  for (const auto& d : out->items) {
    auto v = distribution_view(d, {}, {});
    v.erase("summary");
    v.erase("long_tail");
    items.push_back(std::move(v));
  }
  co_return json::value(page_view(std::move(items), page, page_size, out->total));
}

op<json::value> service::remove_distribution(std::string project_id, std::string id) {
  store::tx_fn op8 = [=](store::catalog_tx& tx) -> result<void> {
    auto d = tx.get_distribution(project_id, id);
    if (!d) return std::move(d).error();
    if (d->status == "running")
      return make_error(errc::conflict, "the distribution is running: cancel it first", "status");
    return tx.delete_distribution(project_id, id);
  };
  auto r = co_await st_.catalog().transact(std::move(op8));
  if (!r) co_return std::move(r).error();
  co_return json::value(json::object{{"id", id}, {"deleted", true}});
}

op<json::value> service::execute(std::string project_id, std::string id, std::string actor) {
  return open_run(std::move(project_id), std::move(id), std::move(actor), distribution::run_kind::execute, 0);
}

op<json::value> service::retry_failed(std::string project_id, std::string id, std::string actor) {
  return open_run(std::move(project_id), std::move(id), std::move(actor), distribution::run_kind::retry_failed, 0);
}

op<json::value> service::retry_targets(std::string project_id, std::string id, std::string body, std::string actor) {
  auto req = distribution::parse_redrive_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=, req = std::move(*req)](store::catalog_tx& tx) -> result<void> {
    created->clear();  // a transaction run again starts over
    auto dr = tx.get_distribution(project_id, id);
    if (!dr) return std::move(dr).error();
    auto& d = *dr;
    auto results = tx.run_results(d.id, d.run_no);
    if (!results) return std::move(results).error();
    auto r = distribution::plan_redrive(d, *results, req);
    if (!r) return std::move(r).error();
    queue::enqueue_request j;
    j.project_id = project_id;
    j.type = queue::job_names::distribution_execute;
    j.payload = distribution::to_payload(r->plan);
    j.idempotency_key = r->key;
    j.parent_job_id = r->parent_job_id;
    j.certificate_id = d.certificate_id;
    j.distribution_id = d.id;
    j.triggered_by = actor;
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    // The key and run_redrives move in one transaction; a job already under the key means a store
    // changed by hand, and counting it would leave the run waiting for a report long made.
    if (!e->created)
      return make_error(errc::conflict,
                        fmt::format("re-drive {} of run {} exists already as job {}: the store's run_redrives is behind its jobs",
                                    d.run_redrives + 1, d.run_no, e->job.id),
                        "status");
    distribution::reopen_for_redrive(d, *r, now);
    if (auto u = tx.update_distribution(d); !u) return u;
    *created = {*e};
    json::array ids;
    for (const auto& t : r->plan.target_ids) ids.emplace_back(t);
    *out = json::object{{"distribution_id", d.id},
                        {"run_no", d.run_no},
                        {"job_id", e->job.id},
                        {"retry_attempt", r->plan.retry_attempt},
                        {"redrive", d.run_redrives},
                        {"target_ids", std::move(ids)}};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::rollback(std::string project_id, std::string id, std::string body, std::string actor) {
  std::int64_t run = 0;
  if (!body.empty()) {
    auto parsed = certfleet::json::parse_value(body, "body", 8);
    if (!parsed) co_return std::move(parsed).error();
    auto& v = *parsed;
    if (!v.is_object())
      co_return make_error(errc::invalid_argument, "body must be a JSON object like {\"run_no\": 3}", "body");
    for (const auto& [k, val] : v.as_object()) {
      if (k != "run_no") co_return make_error(errc::invalid_argument, fmt::format("unknown field \"{}\"", std::string_view(k)), std::string(k));
      if (!val.is_int64() || val.as_int64() < 1)
        co_return make_error(errc::invalid_argument, "run_no must be a run number (1 or more)", "run_no");
      run = val.as_int64();
    }
  }
  co_return co_await open_run(std::move(project_id), std::move(id), std::move(actor), distribution::run_kind::rollback, run);
}

op<json::value> service::open_run(std::string project_id, std::string id, std::string actor, distribution::run_kind kind,
                                  std::int64_t rollback_of) {
  auto rs = distribution::run_settings_from(co_await store::read_settings(st_));
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  distribution::run_request req{std::move(project_id), std::move(id), std::move(actor), kind, rollback_of, {}};
  store::tx_fn op9 = [=](store::catalog_tx& tx) -> result<void> {
    created->clear();  // a transaction run again starts over
    auto opened = distribution::open_run(tx, req, rs, now, created.get());
    if (!opened) return std::move(opened).error();
    *out = std::move(*opened);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op9));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::cancel(std::string project_id, std::string id) {
  auto now = clock_.now_ms();
  auto asked = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<json::object>();
  store::tx_fn op10 = [=](store::catalog_tx& tx) -> result<void> {
    auto dr = tx.get_distribution(project_id, id);
    if (!dr) return std::move(dr).error();
    auto& d = *dr;
    if (d.status != "running")
      return make_error(errc::conflict, fmt::format("the distribution is not running (status {})", d.status), "status");
    d.cancel_requested = true;
    d.updated_at = now;
    if (auto u = tx.update_distribution(d); !u) return u;
    auto prefix = distribution::run_key_prefix(id, d.run_no);
    auto cancelled = tx.cancel_waiting_children(id, prefix, now);
    if (!cancelled) return std::move(cancelled).error();
    // The engine's own cancellations do not pass the terminal hook: report each here; each
    // report reads and writes the distribution itself.
    for (const auto& c : *cancelled)
      if (auto r = distribution::report_child(tx, c, now); !r) return r;
    auto req = tx.request_cancel_children(id, prefix);
    if (!req) return std::move(req).error();
    *asked = *req;
    auto again = tx.get_distribution(project_id, id);
    if (!again) return std::move(again).error();
    d = std::move(*again);
    if (req->empty()) {
      auto done = distribution::try_complete(tx, d, now);
      if (!done) return std::move(done).error();
    }
    *out = json::object{{"distribution_id", id},
                        {"run_no", d.run_no},
                        {"cancelled_jobs", static_cast<std::int64_t>(cancelled->size())},
                        {"stop_requested_jobs", static_cast<std::int64_t>(req->size())},
                        {"status", d.status}};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op10));
  if (!w) co_return std::move(w).error();
  if (queue_.on_cancel_requested)
    for (const auto& j : *asked) queue_.on_cancel_requested(j);
  co_return json::value(std::move(*out));
}

op<json::value> service::results(std::string project_id, std::string id, std::int64_t run_no, int page, int page_size,
                                 distribution::result_filter filter) {
  auto outs = std::make_shared<std::vector<store::target_result>>();
  auto run = std::make_shared<std::int64_t>(run_no);
  auto targets = std::make_shared<std::vector<std::string>>();
  store::read_fn op11 = [=](store::catalog_read& rd) -> result<void> {
    auto d = rd.get_distribution(project_id, id);
    if (!d) return std::move(d).error();
    if (*run == 0) *run = d->run_no;
    if (*run < 0 || *run > d->run_no) return make_error(errc::invalid_argument, "run is not a run of this distribution", "run");
    auto o = rd.run_outcomes(id, *run);
    if (!o) return std::move(o).error();
    *outs = std::move(*o);
    if (*run == d->run_no) *targets = d->run_target_ids;
    return {};
  };
  auto r = co_await st_.catalog().read(std::move(op11));
  if (!r) co_return std::move(r).error();
  // Targets of the current run with no result yet show as pending.
  std::set<std::string> have;
  for (const auto& o : *outs) have.insert(o.target_id);
  for (const auto& t : *targets)
    if (!have.count(t)) {
      store::target_result p;
      p.target_id = t;
      p.status = "pending";
      outs->push_back(std::move(p));
    }
  std::sort(outs->begin(), outs->end(), [](const auto& a, const auto& b) { return a.target_id < b.target_id; });
  std::vector<const store::target_result*> matching;
  for (const auto& o : *outs)
    if (filter.matches(o)) matching.push_back(&o);
  json::array items;
  auto begin = static_cast<std::size_t>(page - 1) * static_cast<std::size_t>(page_size);
  for (std::size_t i = begin; i < matching.size() && i < begin + static_cast<std::size_t>(page_size); ++i)
    items.push_back(result_view(*matching[i]));
  auto v = page_view(std::move(items), page, page_size, static_cast<std::int64_t>(matching.size()));
  v["run"] = *run;
  v["targets"] = static_cast<std::int64_t>(outs->size());
  v["facets"] = distribution::facets_json(distribution::facet_counts(*outs));
  v["long_tail"] = distribution::long_tail_json(distribution::compute_long_tail(*outs));
  co_return json::value(std::move(v));
}

}  // namespace certfleet::service
