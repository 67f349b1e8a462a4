// Jobs: list (cached briefly), enqueue, get, retry, cancel, and the log pages.
#include "certfleet/api/requests.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::api {

using steady = std::chrono::steady_clock;

boost::asio::awaitable<reply> list_jobs(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto lq = parse_job_list_query(call.query);
  if (!lq) co_return error_reply(lq.error());
  if (lq->page_size == 0) lq->page_size = static_cast<int>(co_await s.setting_int("jobs_page_size_default"));
  std::string key;
  auto& list_cache = s.list_cache;
  if (s.opt.list_cache_ttl.count() > 0) {
    key = fmt::format("{}|{}|{}|{}|{}", c.project->id, lq->status ? store::to_string(*lq->status) : "all", lq->type,
                      lq->page, lq->page_size);
    if (auto it = list_cache.find(key); it != list_cache.end()) {
      // Fresh, or expired while another request is already re-reading it: no store call, so
      // a busy list never sends every waiting connection to the store at once.
      if (it->second.expires > steady::now() || it->second.refreshing) {
        reply r;
        r.body = it->second.body;
        co_return r;
      }
      it->second.refreshing = true;
    }
  }
  store::job_filter f{c.project->id, lq->status, lq->type, lq->page, lq->page_size};
  const auto generation = s.list_generation[c.project->id];
  auto page = co_await s.timed("job_list", s.st.jobs().list(f));
  if (!page) {
    if (auto it = list_cache.find(key); !key.empty() && it != list_cache.end()) it->second.refreshing = false;
    co_return error_reply(page.error());
  }
  boost::json::array items;
  items.reserve(page->items.size());
  for (const auto& j : page->items) items.push_back(queue::to_json(j));
  auto r = json_reply(200, boost::json::object{{"items", std::move(items)},
                                               {"page", lq->page},
                                               {"page_size", lq->page_size},
                                               {"total", page->total}});
  // A write through this API during the read may not be in it: cache only a read no write
  // overtook.
  if (!key.empty() && s.list_generation[c.project->id] == generation) {
    if (list_cache.size() >= 1000) list_cache.clear();
    list_cache[key] = server_state::cached_list{r.body, steady::now() + s.opt.list_cache_ttl, false};
  }
  co_return r;
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
  req.triggered_by = "token:" + c.token->id;
  auto t0 = steady::now();
  auto out = co_await s.queue.enqueue(std::move(req), queue::caller::user);
  s.forget_lists(c.project->id);
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
  auto o = queue::to_json(out->job);
  o["created"] = out->created;
  co_return json_reply(out->created ? 201 : 200, o);
}

boost::asio::awaitable<reply> get_job(server_state& s, const route_call& call) {
  auto j = co_await s.timed("job_get", s.st.jobs().get(call.who.project->id, call.match.id));
  if (!j) co_return error_reply(j.error());
  co_return json_reply(200, queue::to_json(*j));
}

boost::asio::awaitable<reply> retry_job(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  s.queue.set_retry_per_minute(static_cast<int>(co_await s.setting_int("job_retry_per_minute")));
  auto t0 = steady::now();
  auto r = co_await s.queue.retry(c.project->id, id);
  s.forget_lists(c.project->id);
  s.metrics.store_call("job_retry", std::chrono::duration<double>(steady::now() - t0).count());
  co_await s.audit(c, "job.retry", "job/" + id, r ? "ok" : errc_name(r.error().value()));
  if (!r) co_return error_reply(r.error());
  co_return json_reply(200, queue::to_json(*r));
}

boost::asio::awaitable<reply> cancel_job(server_state& s, const route_call& call) {
  const caller& c = call.who;
  const std::string& id = call.match.id;
  auto t0 = steady::now();
  auto r = co_await s.queue.cancel(c.project->id, id);
  s.forget_lists(c.project->id);
  s.metrics.store_call("job_cancel", std::chrono::duration<double>(steady::now() - t0).count());
  co_await s.audit(c, "job.cancel", "job/" + id, r ? "ok" : errc_name(r.error().value()));
  if (!r) co_return error_reply(r.error());
  auto o = queue::to_json(r->job);
  o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
  co_return json_reply(r->immediate ? 200 : 202, o);
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
