// The worker on the real event loop against a real SQLite file.
#include "certfleet/queue/liveness.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/workers.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>

using namespace certfleet;
using namespace certfleet::queue;
using namespace std::chrono_literals;
using testbed::run_sync;
namespace asio = boost::asio;

namespace {

class worker_test : public ::testing::Test {
 protected:
  void SetUp() override {
    st = std::move(*store::open_sqlite({dir.file("w.db"), 2, 5000, false}));
    project = run_sync(st->projects().ensure("default", clock.now_ms()))->first.id;
    register_noop(handlers);
    q = std::make_unique<queue_service>(*st, handlers, clock);
  }

  worker_options options() {
    worker_options o;
    o.worker_id = "test-worker";
    o.lease_ms = 60'000;
    o.poll_ms = 20;
    o.grace_ms = 2'000;
    o.heartbeat_ms = 50;
    return o;
  }

  // Runs `body` on the loop with a started worker; stops the worker afterwards.
  void with_worker(worker_options o, std::function<asio::awaitable<void>(worker&)> body) {
    asio::io_context ioc;
    worker w(ioc.get_executor(), *st, handlers, clock, o);
    q->on_enqueued = [&](std::string_view lane) { w.wake(lane); };
    q->on_cancel_requested = [&](const std::string& id) { w.request_cancel(id); };
    w.start();
    std::exception_ptr failure;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await body(w);
          co_await w.stop();
          ioc.stop();
        },
        [&](std::exception_ptr e) {
          failure = e;
          if (e) ioc.stop();
        });
    ioc.run_for(60s);
    if (failure) std::rethrow_exception(failure);
  }

  asio::awaitable<store::job_record> wait_status(const std::string& id, store::job_status s,
                                                  std::chrono::milliseconds timeout = 10s) {
    asio::steady_timer t(co_await asio::this_coro::executor);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto j = co_await st->jobs().get(project, id);
      if (j && j->status == s) co_return *j;
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("job " + id + " never reached " + std::string(store::to_string(s)) + "; it is " +
                                 std::string(j ? store::to_string(j->status) : "missing"));
      t.expires_after(10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
  }

  asio::awaitable<std::string> enqueue(std::string payload) {
    // A named request: GCC 12 destroys braced temporaries inside co_await expressions twice.
    enqueue_request req{project, "noop", std::move(payload)};
    auto r = co_await q->enqueue(std::move(req), caller::user);
    if (!r) throw std::runtime_error(r.error().message);
    co_return r->job.id;
  }

  testbed::temp_dir dir;
  system_clock_source clock;
  std::unique_ptr<store::store> st;
  handler_registry handlers;
  std::unique_ptr<queue_service> q;
  std::string project;
};

TEST_F(worker_test, runs_jobs_with_logs_and_counts_them) {
  with_worker(options(), [&](worker& w) -> asio::awaitable<void> {
    std::vector<std::string> ids;
    for (int i = 0; i < 50; ++i) ids.push_back(co_await enqueue(R"({"ms":1,"log":true})"));
    for (auto& id : ids) {
      auto j = co_await wait_status(id, store::job_status::completed);
      EXPECT_EQ(j.result_status, "ok");
      EXPECT_EQ(j.attempts, 1);
      EXPECT_EQ(j.fence, 1);
    }
    auto logs = co_await st->jobs().read_logs(ids[0], 0, 10);
    EXPECT_EQ(logs->lines.size(), 2u);
    EXPECT_EQ(w.stats().completed, 50);
  });
}

TEST_F(worker_test, a_failure_waits_its_backoff) {
  with_worker(options(), [&](worker&) -> asio::awaitable<void> {
    auto before = clock.now_ms();
    auto id = co_await enqueue(R"({"fail_times":1})");
    auto j = co_await wait_status(id, store::job_status::failed);
    EXPECT_EQ(j.attempts, 1);
    EXPECT_NE(j.error.find("failing on purpose"), std::string::npos);
    // Stored with the class the noop module names and no code (its own refusal, not an errc).
    EXPECT_EQ(j.error_class, "on_purpose");
    EXPECT_EQ(j.error_code, "");
    EXPECT_GE(j.ready_at, before + 30'000);
    EXPECT_LE(j.ready_at, clock.now_ms() + 30'000);
    // An operator's retry runs it now with attempts reset: attempt 1 again, which fail_times=1
    // fails again, on a new fence.
    auto r = co_await q->retry(project, id);
    EXPECT_TRUE(r);
    j = co_await wait_status(id, store::job_status::failed);
    EXPECT_EQ(j.fence, 2);
  });
}

TEST_F(worker_test, max_attempts_then_dead) {
  with_worker(options(), [&](worker&) -> asio::awaitable<void> {
    enqueue_request req{project, "noop", R"({"fail_times":5})", std::nullopt, 0, "", 2};
    auto r = co_await q->enqueue(std::move(req), caller::user);
    EXPECT_TRUE(r);
    auto id = r->job.id;
    auto j = co_await wait_status(id, store::job_status::failed);
    // Pull its retry forward instead of waiting 30 s: an operator's retry resets attempts, so
    // simulate the scheduler's clock by claiming at its ready_at through the store.
    auto claimed = co_await st->jobs().claim("main", "manual", j.ready_at, 60'000, 1);
    EXPECT_EQ(claimed->size(), 1u);
    std::vector<store::finish_request> reqs(1);
    reqs[0].lease = {id, (*claimed)[0].fence};
    reqs[0].worker_id = "manual";
    reqs[0].kind = store::finish_kind::failed;
    reqs[0].error = "second failure";
    auto done = co_await st->jobs().finish(std::move(reqs), j.ready_at);
    EXPECT_EQ((*done)[0]->status, store::job_status::dead);
    EXPECT_EQ((*done)[0]->attempts, 2);
  });
}

TEST_F(worker_test, cancel_of_an_active_job_stops_it_at_its_checkpoint) {
  with_worker(options(), [&](worker&) -> asio::awaitable<void> {
    auto id = co_await enqueue(R"({"ms":30000})");
    co_await wait_status(id, store::job_status::active);
    auto started = std::chrono::steady_clock::now();
    auto c = co_await q->cancel(project, id);
    EXPECT_TRUE(c);
    EXPECT_FALSE(c->immediate);
    auto j = co_await wait_status(id, store::job_status::cancelled, 5s);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);
    EXPECT_EQ(j.error, "cancelled on request");
  });
}

TEST_F(worker_test, cancel_requested_by_another_process_arrives_through_the_heartbeat) {
  with_worker(options(), [&](worker&) -> asio::awaitable<void> {
    auto id = co_await enqueue(R"({"ms":30000})");
    co_await wait_status(id, store::job_status::active);
    // Straight to the store: no in-process notification.
    auto c = co_await st->jobs().cancel(project, id, clock.now_ms());
    EXPECT_TRUE(c);
    co_await wait_status(id, store::job_status::cancelled, 5s);
  });
}

TEST_F(worker_test, graceful_stop_returns_running_jobs_to_pending_without_spending_an_attempt) {
  std::string id;
  asio::io_context ioc;
  auto o = options();
  worker w(ioc.get_executor(), *st, handlers, clock, o);
  w.start();
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        id = co_await enqueue(R"({"ms":60000})");
        w.wake("main");
        co_await wait_status(id, store::job_status::active);
        co_await w.stop();
        ioc.stop();
      },
      asio::detached);
  ioc.run_for(30s);
  auto j = run_sync(st->jobs().get(project, id));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, store::job_status::pending);
  EXPECT_EQ(j->attempts, 0);
  EXPECT_EQ(j->fence, 1);
  EXPECT_EQ(w.stats().released, 1);
}

TEST_F(worker_test, a_handler_that_ignores_shutdown_is_released_after_the_grace_period) {
  handlers.add("noop", [](job_context&) -> asio::awaitable<outcome> {
    asio::steady_timer t(co_await asio::this_coro::executor, 3s);  // no checkpoint
    co_await t.async_wait(asio::use_awaitable);
    co_return outcome::ok();
  });
  std::string id;
  asio::io_context ioc;
  auto o = options();
  o.grace_ms = 200;
  worker w(ioc.get_executor(), *st, handlers, clock, o);
  w.start();
  std::chrono::steady_clock::duration took{};
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        id = co_await enqueue("{}");
        w.wake("main");
        co_await wait_status(id, store::job_status::active);
        auto t0 = std::chrono::steady_clock::now();
        co_await w.stop();
        took = std::chrono::steady_clock::now() - t0;
        ioc.stop();
      },
      asio::detached);
  ioc.run_for(30s);
  EXPECT_LT(took, 2s);
  auto j = run_sync(st->jobs().get(project, id));
  EXPECT_EQ(j->status, store::job_status::pending);
  EXPECT_EQ(j->attempts, 0);
}

TEST_F(worker_test, a_throwing_handler_fails_the_job_not_the_process) {
  handlers.add("noop", [](job_context&) -> asio::awaitable<outcome> {
    throw std::logic_error("bug in handler");
    co_return outcome::ok();
  });
  with_worker(options(), [&](worker&) -> asio::awaitable<void> {
    auto id = co_await enqueue("{}");
    auto j = co_await wait_status(id, store::job_status::failed);
    EXPECT_EQ(j.error, "handler error: bug in handler");
    EXPECT_EQ(j.error_code, "handler_error");
  });
}

TEST_F(worker_test, a_lost_lease_stops_the_handler_and_its_result_is_refused) {
  with_worker(options(), [&](worker& w) -> asio::awaitable<void> {
    auto id = co_await enqueue(R"({"ms":30000})");
    auto j = co_await wait_status(id, store::job_status::active);
    // Another worker reclaims it as if the lease had expired.
    auto stolen = co_await st->jobs().claim("main", "thief", j.locked_until, 600'000, 1);
    EXPECT_EQ(stolen->size(), 1u);
    asio::steady_timer t(co_await asio::this_coro::executor);
    for (int i = 0; i < 200 && w.stats().lost == 0; ++i) {
      t.expires_after(10ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    EXPECT_EQ(w.stats().lost, 1);
    auto after = co_await st->jobs().get(project, id);
    EXPECT_EQ(after->status, store::job_status::active);
    EXPECT_EQ(after->locked_by, "thief");
    EXPECT_EQ(after->fence, 2);
  });
}

TEST_F(worker_test, lanes_have_their_own_concurrency) {
  int running = 0, peak = 0;
  handlers.add("noop", [&](job_context& ctx) -> asio::awaitable<outcome> {
    peak = std::max(peak, ++running);
    co_await ctx.sleep(30ms);
    --running;
    co_return outcome::ok();
  });
  auto o = options();
  o.main_concurrency = 3;
  with_worker(o, [&](worker&) -> asio::awaitable<void> {
    std::vector<std::string> ids;
    for (int i = 0; i < 12; ++i) ids.push_back(co_await enqueue("{}"));
    for (auto& id : ids) co_await wait_status(id, store::job_status::completed);
  });
  EXPECT_EQ(peak, 3);
}

}  // namespace

namespace {

// Issue 34: the liveness monitor against a real SQLite store. A worker registered from another host
// (another host key) whose pid does not run here is judged by its heartbeat age only; one of this
// host whose process is gone is dead at once; the dead one's job is released, the live one's kept.
TEST_F(worker_test, the_liveness_monitor_judges_other_hosts_by_age_and_this_host_by_pid) {
  asio::io_context ioc;
  const auto now = clock.now_ms();
  auto presence = [&](std::string id, std::string host_key, std::int64_t pid) {
    store::worker_presence p;
    p.id = std::move(id);
    p.host = "elsewhere";
    p.host_key = std::move(host_key);
    p.pid = pid;
    p.proc_start = "1";
    p.lanes = "main,dist";
    p.started_at = now;
    return p;
  };
  constexpr std::int64_t no_such_pid = 4'000'000;  // above pid_max: never runs
  ASSERT_TRUE(run_sync(st->workers().beat(presence("remote-fresh", "other|boot|ns", no_such_pid), now)));
  ASSERT_TRUE(run_sync(st->workers().beat(presence("remote-stale", "other|boot|ns", no_such_pid), now - 25'000)));
  ASSERT_TRUE(run_sync(st->workers().beat(presence("local-gone", this_host().host_key, no_such_pid), now)));
  // Each holds one job.
  std::map<std::string, std::string> job_of;
  for (const char* w : {"remote-fresh", "remote-stale", "local-gone"}) {
    auto id = run_sync(q->enqueue({project, "noop", R"({"ms":1})"}, caller::user))->job.id;
    auto c = run_sync(st->jobs().claim("main", w, clock.now_ms(), 600'000, 1));
    ASSERT_EQ(c->size(), 1u);
    ASSERT_EQ((*c)[0].id, id);
    job_of[w] = id;
  }
  liveness_monitor m(ioc.get_executor(), *st, clock, liveness_options{5'000, 20'000});
  asio::co_spawn(ioc, m.check_once(), asio::detached);
  ioc.run_for(10s);
  EXPECT_EQ(m.stats().declared_dead, 2);
  EXPECT_EQ(m.stats().reclaimed_jobs, 2);
  EXPECT_EQ(m.stats().workers_alive, 1);
  auto get = [&](const std::string& w) { return *run_sync(st->jobs().get(project, job_of[w])); };
  EXPECT_EQ(get("remote-fresh").status, store::job_status::active);  // its pid means nothing here
  EXPECT_EQ(get("remote-fresh").locked_by, "remote-fresh");
  for (const char* w : {"remote-stale", "local-gone"}) {
    auto j = get(w);
    EXPECT_EQ(j.status, store::job_status::pending) << w;
    EXPECT_EQ(j.attempts, 1) << w;
    EXPECT_EQ(j.fence, 1) << w;
    EXPECT_TRUE(j.locked_by.empty()) << w;
  }
  auto all = *run_sync(st->workers().list_workers(clock.now_ms()));
  std::map<std::string, store::worker_presence> by;
  for (auto& w : all) by[w.id] = w;
  EXPECT_EQ(by["remote-fresh"].dead_at, 0);
  EXPECT_NE(by["remote-stale"].dead_reason.find("stopped heartbeating 25 s ago"), std::string::npos)
      << by["remote-stale"].dead_reason;
  EXPECT_NE(by["local-gone"].dead_reason.find("is gone"), std::string::npos) << by["local-gone"].dead_reason;
  EXPECT_EQ(by["local-gone"].released_jobs, 1);
  // A declared-dead worker's later heartbeat is refused: it learns its jobs are gone.
  auto late = run_sync(st->workers().beat(presence("remote-stale", "other|boot|ns", no_such_pid), clock.now_ms()));
  ASSERT_FALSE(late);
  EXPECT_TRUE(late.error().is(errc::lease_lost));
}

// Issue 34: a worker registers itself at start and leaves the registry (declared "stopped") at a
// graceful stop.
TEST_F(worker_test, a_worker_registers_and_leaves_the_registry_when_it_stops) {
  auto o = options();
  o.presence_ms = 50;
  with_worker(o, [&](worker&) -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor);
    t.expires_after(200ms);
    co_await t.async_wait(asio::use_awaitable);
    auto all = co_await st->workers().list_workers(clock.now_ms());
    EXPECT_TRUE(all && all->size() == 1 && (*all)[0].id == "test-worker" && (*all)[0].dead_at == 0);
    if (all && !all->empty()) {
      EXPECT_EQ((*all)[0].lanes, "main,dist");
      EXPECT_EQ((*all)[0].host_key, this_host().host_key);
    }
  });
  auto all = *run_sync(st->workers().list_workers(clock.now_ms()));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_GT(all[0].dead_at, 0);
  EXPECT_NE(all[0].dead_reason.find("stopped"), std::string::npos);
}

}  // namespace
