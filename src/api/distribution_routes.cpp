// Distribution routes: the catalog object and its runs (execute, roll back, retry the failed
// targets in a new run or re-drive some in the last one, cancel) and their per-target results.
#include "certfleet/api/requests.hpp"
#include "certfleet/distribution/run_view.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>

namespace certfleet::api {

using steady = std::chrono::steady_clock;

namespace {
std::string actor_of(const caller& c) { return c.token ? "token:" + c.token->id : "anonymous"; }
}  // namespace

boost::asio::awaitable<reply> list_distributions(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto pq = parse_page_query(call.query);
  if (!pq) co_return error_reply(pq.error());
  auto r = co_await s.catalog.list_distributions(call.who.project->id, pq->page, pq->page_size);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> create_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.create_distribution(call.who.project->id, call.body);
  co_return co_await catalog_answer(s, call, "create", 201, std::move(r), t0);
}

boost::asio::awaitable<reply> get_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.get_distribution(call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

boost::asio::awaitable<reply> delete_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.remove_distribution(call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "delete", 200, std::move(r), t0);
}

// A run enqueues or cancels jobs: the project's cached job lists are dropped.
boost::asio::awaitable<reply> execute_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = actor_of(call.who);
  auto r = co_await s.catalog.execute(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "execute", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> rollback_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = actor_of(call.who);
  auto r = co_await s.catalog.rollback(call.who.project->id, call.match.id, call.body, actor);
  co_return co_await catalog_answer(s, call, "rollback", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> retry_failed_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = actor_of(call.who);
  auto r = co_await s.catalog.retry_failed(call.who.project->id, call.match.id, actor);
  co_return co_await catalog_answer(s, call, "retry_failed", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> retry_targets_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  const std::string actor = actor_of(call.who);
  auto r = co_await s.catalog.retry_targets(call.who.project->id, call.match.id, call.body, actor);
  co_return co_await catalog_answer(s, call, "retry_targets", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> cancel_distribution(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto r = co_await s.catalog.cancel(call.who.project->id, call.match.id);
  co_return co_await catalog_answer(s, call, "cancel", 202, std::move(r), t0);
}

boost::asio::awaitable<reply> distribution_results(server_state& s, const route_call& call) {
  auto t0 = steady::now();
  auto rq = parse_results_query(call.query);
  if (!rq) co_return error_reply(rq.error());
  auto filter = distribution::parse_result_filter(rq->status, rq->error_class);
  if (!filter) co_return error_reply(filter.error());
  auto r = co_await s.catalog.results(call.who.project->id, call.match.id, rq->run, rq->page, rq->page_size,
                                      std::move(*filter));
  // error_detail (why a connect failed: refused, timed out, no banner) is for admins: to every
  // other role the uniform error is all there is, or results would be a port scanner's report.
  const bool admin = call.who.token && (call.who.token->system || call.who.token->token_role >= store::role::admin);
  if (r && !admin) distribution::strip_admin_detail(*r);
  co_return co_await catalog_answer(s, call, "", 200, std::move(r), t0);
}

}  // namespace certfleet::api
