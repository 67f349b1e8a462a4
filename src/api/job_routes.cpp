// Jobs: list (with the tab counts and keyset pages), enqueue, get, retry, cancel, and the log pages.
#include "certfleet/api/requests.hpp"
#include "certfleet/queue/error_hint.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/store/workers.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/triggers.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <array>

namespace certfleet::api {

using steady = std::chrono::steady_clock;

namespace {

// Token names, read again when a job names a token this process has not seen (a new one), at
// most every few seconds so a flood of unknown ids cannot turn each list into a token scan.
boost::asio::awaitable<void> learn_token_names(server_state& s, const std::vector<store::job_record>& jobs) {
  bool missing = false;
  for (const auto& j : jobs)
    if (auto id = queue::token_of(j.triggered_by); id && !s.token_names.contains(std::string(*id))) missing = true;
  if (!missing || steady::now() - s.token_names_read < std::chrono::seconds(5)) co_return;
  s.token_names_read = steady::now();
  auto all = co_await s.timed("token_list", s.st.auth().list_tokens(""));
  if (!all) co_return;  // the column shows the id instead; the list itself does not fail for it
  for (const auto& t : *all) s.remember_token_name(t);
}

// A job as the API answers it: the stored fields (queue::to_json) and what the UI shows about
// them — who triggered it in words, and the context hint for its error.
boost::json::object job_json(const server_state& s, const store::job_record& j) {
  auto o = queue::to_json(j);
  boost::json::value name = nullptr;
  if (auto words = queue::trigger_in_words(j.triggered_by)) {
    name = *words;
  } else if (auto token = queue::token_of(j.triggered_by)) {
    const std::string id(*token);
    auto it = s.token_names.find(id);
    name = it != s.token_names.end() ? it->second : "token " + id.substr(0, 8);
  }
  o["triggered_by_name"] = std::move(name);
  auto hint = queue::hint_of_job(j.type, j.error_class, j.error_code, j.error);
  o["error_class"] = hint ? boost::json::value(hint->error_class) : boost::json::value(nullptr);
  o["error_hint"] = hint && !hint->hint.empty() ? boost::json::value(hint->hint) : boost::json::value(nullptr);
  return o;
}

constexpr std::array<store::job_status, 6> tab_order{store::job_status::pending, store::job_status::active,
                                                      store::job_status::completed, store::job_status::failed,
                                                      store::job_status::dead, store::job_status::cancelled};

}  // namespace

boost::json::object tab_counts_json(const store::status_counts& c) {
  boost::json::object counts;
  std::int64_t all = 0;
  for (auto st : tab_order) all += c[static_cast<std::size_t>(st)];
  counts["all"] = all;
  for (auto st : tab_order) counts[store::to_string(st)] = c[static_cast<std::size_t>(st)];
  return counts;
}

boost::asio::awaitable<reply> list_jobs(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto lq = parse_job_list_query(call.query);
  if (!lq) co_return error_reply(lq.error());
  if (lq->page_size == 0) lq->page_size = static_cast<int>(co_await s.setting_int("jobs_page_size_default"));
  store::job_filter f{c.project->id, lq->status, lq->type, lq->page, lq->page_size, lq->cursor};
  auto page = co_await s.timed("job_list", s.st.jobs().list(f));
  if (!page) co_return error_reply(page.error());
  co_await learn_token_names(s, page->items);
  boost::json::array items;
  items.reserve(page->items.size());
  for (const auto& j : page->items) items.push_back(job_json(s, j));
  auto counts = tab_counts_json(page->counts);
  co_return json_reply(200, boost::json::object{
                                {"items", std::move(items)},
                                {"page", lq->page},
                                {"page_size", lq->page_size},
                                {"total", page->total},
                                {"counts", std::move(counts)},
                                {"next_cursor", page->next_cursor.empty() ? boost::json::value(nullptr)
                                                                          : boost::json::value(page->next_cursor)}});
}

boost::asio::awaitable<reply> enqueue_job(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto b = parse_enqueue_body(call.body);
  if (!b) {
    co_await s.audit(c, "job.enqueue", "job", errc_name(b.error().value()), error_body("", b.error().message, b.error().field));
    co_return error_reply(b.error());
  }
  queue::enqueue_request req;
  req.project_id = c.project->id;
  req.type = b->type;
  req.payload = b->payload;
  req.idempotency_key = b->idempotency_key;
  req.run_at = b->run_at;
  req.triggered_by = queue::token_trigger(c.token->id);
  auto t0 = steady::now();
  auto out = co_await s.queue.enqueue(std::move(req), queue::caller::user);
  s.metrics.store_call("job_enqueue", std::chrono::duration<double>(steady::now() - t0).count());
  if (!out) {
    // Built outside the co_await: GCC 12 miscompiles braced lists of literals inside one.
    boost::json::object d;
    d["type"] = b->type;
    d["message"] = out.error().message;
    auto detail = boost::json::serialize(d);
    co_await s.audit(c, "job.enqueue", "job", errc_name(out.error().value()), detail);
    co_return error_reply(out.error());
  }
  boost::json::object d;
  d["type"] = b->type;
  d["created"] = out->created;
  auto detail = boost::json::serialize(d);
  co_await s.audit(c, "job.enqueue", "job/" + out->job.id, "ok", detail);
  auto o = job_json(s, out->job);
  o["created"] = out->created;
  co_return json_reply(out->created ? 201 : 200, o);
}

boost::asio::awaitable<reply> get_job(server_state& s, const route_call& call) {
  auto j = co_await s.timed("job_get", s.st.jobs().get(call.who.project->id, call.match.id));
  if (!j) co_return error_reply(j.error());
  const std::vector<store::job_record> one{*j};
  co_await learn_token_names(s, one);
  auto o = job_json(s, *j);
  if (j->status == store::job_status::pending || j->status == store::job_status::failed) {
    // "Why is it waiting?": what decides when a worker takes it. Active jobs of its lane are
    // counted over every project: the lanes are shared.
    std::int64_t lane_active = 0;
    auto counts = co_await s.timed("job_counts", s.st.observe().job_counts());
    if (counts)
      for (const auto& n : *counts)
        if (n.status == "active")
          if (const auto* t = queue::find_job_type(n.type); t && t->lane == j->lane) lane_active += n.count;
    boost::json::object w;
    w["lane"] = j->lane;
    w["ready_at"] = format_iso8601(j->ready_at);
    w["ready"] = j->ready_at <= s.clock.now_ms();
    w["held"] = j->held;
    w["cancel_requested"] = j->cancel_requested;
    w["lane_concurrency"] = s.worker ? boost::json::value(s.worker->concurrency(j->lane)) : boost::json::value(nullptr);
    w["lane_active"] = counts ? boost::json::value(lane_active) : boost::json::value(nullptr);
    o["waiting"] = std::move(w);
  }
  if (j->status == store::job_status::active) {
    // The Lease card (issue 28, 34): whether the lease ran out, and what the registry says of the
    // worker holding it — a dead worker's job is shown as such whatever processes run.
    const auto now = s.clock.now_ms();
    boost::json::object l;
    l["locked_by"] = j->locked_by;
    l["locked_until"] = format_iso8601(j->locked_until);
    l["lease_expired"] = j->locked_until <= now;
    if (auto all = co_await s.timed("worker_list", s.st.workers().list_workers(now))) {
      const time_ms dead_after = s.liveness ? s.liveness->options().dead_after_ms : queue::liveness_options{}.dead_after_ms;
      for (const auto& w : *all) {
        if (w.id != j->locked_by) continue;
        const auto v = queue::judge_worker(w, queue::this_host(), dead_after, queue::process_start_of);
        boost::json::object wo{{"id", w.id},
                               {"host", w.host},
                               {"alive", v.state == queue::liveness_state::alive},
                               {"heartbeat_age_ms", w.age_ms}};
        if (!v.reason.empty()) wo["reason"] = v.reason;
        l["worker"] = std::move(wo);
      }
    }
    o["lease"] = std::move(l);
  }
  // An ACME job's workflow (DESIGN §9); a failed read leaves it out rather than failing the page.
  auto workflow = co_await s.catalog.job_workflow(*j);
  if (workflow && !workflow->is_null()) o["workflow"] = std::move(*workflow);
  co_return json_reply(200, o);
}

boost::asio::awaitable<reply> retry_job(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  s.queue.set_retry_per_minute(static_cast<int>(co_await s.setting_int("job_retry_per_minute")));
  auto t0 = steady::now();
  auto r = co_await s.queue.retry(c.project->id, id);
  s.metrics.store_call("job_retry", std::chrono::duration<double>(steady::now() - t0).count());
  co_await s.audit(c, "job.retry", "job/" + id, r ? "ok" : errc_name(r.error().value()));
  if (!r) co_return error_reply(r.error());
  co_return json_reply(200, job_json(s, *r));
}

boost::asio::awaitable<reply> cancel_job(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  auto t0 = steady::now();
  auto r = co_await s.queue.cancel(c.project->id, id);
  s.metrics.store_call("job_cancel", std::chrono::duration<double>(steady::now() - t0).count());
  co_await s.audit(c, "job.cancel", "job/" + id, r ? "ok" : errc_name(r.error().value()));
  if (!r) co_return error_reply(r.error());
  auto o = job_json(s, r->job);
  o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
  co_return json_reply(r->immediate ? 200 : 202, o);
}

// The manual DNS path's "the records are in place" (DESIGN §9): 202 {job_id, created}.
boost::asio::awaitable<reply> validate_job_dns(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  const std::string actor = c.token ? "token:" + c.token->id : "anonymous";
  auto t0 = steady::now();
  auto r = co_await s.catalog.validate_manual_dns(c.project->id, id, actor);
  s.metrics.store_call("job_validate_dns", std::chrono::duration<double>(steady::now() - t0).count());
  co_await s.audit(c, "job.validate_dns", "job/" + id, r ? "ok" : errc_name(r.error().value()));
  if (!r) co_return error_reply(r.error());
  co_return json_reply(202, *r);
}

boost::asio::awaitable<reply> read_job_logs(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  auto lq = parse_log_query(call.query, false);
  if (!lq) co_return error_reply(lq.error());
  // The project check: a foreign job is not found.
  auto job = co_await s.timed("job_get", s.st.jobs().get(c.project->id, id));
  if (!job) co_return error_reply(job.error());
  auto page = co_await s.timed("log_read", s.st.jobs().read_logs(id, lq->after, lq->limit));
  if (!page) co_return error_reply(page.error());
  boost::json::array lines;
  lines.reserve(page->lines.size());
  for (const auto& l : page->lines) lines.push_back(queue::to_json(l));
  // done: the job is over (read before the lines, so none can follow) and this page ends the log.
  bool done = store::is_terminal(job->status) && static_cast<int>(page->lines.size()) < lq->limit;
  co_return json_reply(200, boost::json::object{{"lines", std::move(lines)},
                                                {"next_cursor", page->next_cursor},
                                                {"done", done}});
}

}  // namespace certfleet::api
