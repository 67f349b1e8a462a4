// One conformance suite, run against every store backend available: SQLite always; MongoDB when
// CERTFLEET_TEST_MONGODB_URI is set (and the backend is built).
#include "backends.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/maintenance.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/job_policy.hpp"
#include "certfleet/store/store.hpp"
#include "certfleet/store/workers.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <set>

using namespace certfleet;
using namespace certfleet::store;
using testbed::run_sync;

namespace {

using store_conformance_backends::backend;
using store_conformance_backends::backends;

constexpr time_ms t0 = 1'700'000'000'000;
constexpr time_ms lease = 10'000;

class store_conformance : public ::testing::TestWithParam<backend> {
 protected:
  void SetUp() override {
    st = GetParam().open(dir);
    project = run_sync(st->projects().ensure("default", t0))->first.id;
    other_project = run_sync(st->projects().ensure("other", t0))->first.id;
  }
  void TearDown() override { st->close(); }

  new_job job(std::string type = "noop", std::string lane = "main") {
    new_job j;
    j.project_id = project;
    j.type = std::move(type);
    j.lane = std::move(lane);
    j.max_attempts = 3;
    return j;
  }
  job_record enqueue(new_job j, time_ms now = t0) {
    auto r = run_sync(st->jobs().enqueue(std::move(j), now));
    EXPECT_TRUE(r) << r.error().message;
    return r->job;
  }
  std::vector<job_record> claim(const std::string& worker, time_ms now, int limit = 10, std::string lane = "main") {
    auto r = run_sync(st->jobs().claim(lane, worker, now, lease, limit));
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : std::vector<job_record>{};
  }
  result<job_record> finish(const job_record& j, const std::string& worker, finish_kind kind, time_ms now,
                            time_ms retry_at = 0) {
    finish_request f;
    f.lease = {j.id, j.fence};
    f.worker_id = worker;
    f.kind = kind;
    f.result_status = kind == finish_kind::completed ? "ok" : "";
    f.error = kind == finish_kind::failed || kind == finish_kind::dead ? "boom" : "";
    f.retry_at = retry_at;
    auto r = run_sync(st->jobs().finish({f}, now));
    EXPECT_TRUE(r);
    return (*r)[0];
  }
  job_record get(const std::string& id) { return *run_sync(st->jobs().get(project, id)); }

  testbed::temp_dir dir;
  std::unique_ptr<certfleet::store::store> st;
  std::string project, other_project;
};

TEST_P(store_conformance, enqueue_and_get) {
  auto j = job();
  j.payload = R"({"ms":1})";
  j.parent_job_id = "p1";
  auto rec = enqueue(j);
  EXPECT_TRUE(is_object_id(rec.id));
  EXPECT_EQ(rec.status, job_status::pending);
  EXPECT_EQ(rec.attempts, 0);
  EXPECT_EQ(rec.fence, 0);
  EXPECT_EQ(rec.ready_at, t0);
  auto again = get(rec.id);
  EXPECT_EQ(again.payload, R"({"ms":1})");
  EXPECT_EQ(again.parent_job_id, "p1");
  EXPECT_EQ(again.max_attempts, 3);
  // Another project never sees it.
  auto foreign = run_sync(st->jobs().get(other_project, rec.id));
  ASSERT_FALSE(foreign);
  EXPECT_TRUE(foreign.error().is(errc::not_found));
}

TEST_P(store_conformance, idempotency_key_is_unique_per_project_whatever_the_status) {
  auto j = job();
  j.idempotency_key = "k1";
  auto first = run_sync(st->jobs().enqueue(j, t0));
  ASSERT_TRUE(first && first->created);
  auto c = claim("w", t0);
  ASSERT_EQ(c.size(), 1u);
  ASSERT_TRUE(finish(c[0], "w", finish_kind::completed, t0 + 1));
  auto second = run_sync(st->jobs().enqueue(j, t0 + 5));
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->job.id, first->job.id);
  EXPECT_EQ(second->job.status, job_status::completed);
  j.project_id = other_project;
  auto third = run_sync(st->jobs().enqueue(j, t0));
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->created);
  EXPECT_NE(third->job.id, first->job.id);
}

TEST_P(store_conformance, enqueue_many_is_all_or_nothing) {
  std::vector<new_job> jobs(3, job());
  jobs[1].id = "not-an-id-but-unique";
  jobs[2].id = "not-an-id-but-unique";  // duplicate primary id: the whole batch fails
  auto r = run_sync(st->jobs().enqueue_many(jobs, t0));
  EXPECT_FALSE(r);
  auto page = run_sync(st->jobs().list({project, std::nullopt, "", 1, 50}));
  EXPECT_EQ(page->total, 0);
  jobs[2].id.clear();
  auto ok = run_sync(st->jobs().enqueue_many(jobs, t0));
  ASSERT_TRUE(ok);
  EXPECT_EQ(run_sync(st->jobs().list({project, std::nullopt, "", 1, 50}))->total, 3);
}

TEST_P(store_conformance, claim_orders_by_ready_at_then_id_and_respects_lane_held_and_run_at) {
  auto late = job();
  late.run_at = t0 + 100;
  auto a = enqueue(late);
  auto b = enqueue(job());
  auto c = enqueue(job());
  auto dist = enqueue(job("distribution_execute", "dist"));
  auto held = job();
  held.held = true;
  enqueue(held);
  auto future = job();
  future.run_at = t0 + 1'000'000;
  enqueue(future);

  auto got = claim("w1", t0 + 100, 10);
  ASSERT_EQ(got.size(), 3u);
  std::set<std::string> ids;
  for (auto& g : got) {
    ids.insert(g.id);
    EXPECT_EQ(g.status, job_status::active);
    EXPECT_EQ(g.attempts, 1);
    EXPECT_EQ(g.fence, 1);
    EXPECT_EQ(g.locked_by, "w1");
    EXPECT_EQ(g.locked_until, t0 + 100 + lease);
    EXPECT_EQ(g.ready_at, t0 + 100 + lease);
    EXPECT_EQ(g.started_at, t0 + 100);
  }
  EXPECT_EQ(ids, (std::set<std::string>{a.id, b.id, c.id}));
  EXPECT_TRUE(claim("w1", t0 + 100).empty());  // held, future and other-lane jobs stay
  auto d = claim("w1", t0 + 100, 10, "dist");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, dist.id);
}

TEST_P(store_conformance, claim_takes_oldest_first_with_limit) {
  auto first = job();
  first.run_at = t0 - 50;
  auto older = enqueue(first);
  enqueue(job());
  enqueue(job());
  auto got = claim("w", t0, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, older.id);
}

TEST_P(store_conformance, concurrent_claims_never_share_a_job) {
  std::vector<new_job> jobs(500, job());
  ASSERT_TRUE(run_sync(st->jobs().enqueue_many(jobs, t0)));
  boost::asio::io_context ioc;
  std::multiset<std::string> seen;
  for (int w = 0; w < 8; ++w) {
    boost::asio::co_spawn(
        ioc,
        [&, w]() -> boost::asio::awaitable<void> {
          for (;;) {
            auto r = co_await st->jobs().claim("main", "w" + std::to_string(w), t0, lease, 7);
            if (!r || r->empty()) co_return;
            for (auto& j : *r) seen.insert(j.id);
          }
        },
        boost::asio::detached);
  }
  ioc.run();
  EXPECT_EQ(seen.size(), 500u);
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), 500u);
}

TEST_P(store_conformance, finish_is_fenced) {
  auto j = enqueue(job());
  auto c = claim("w1", t0);
  ASSERT_EQ(c.size(), 1u);
  auto stale = c[0];
  stale.fence -= 1;
  auto refused = finish(stale, "w1", finish_kind::completed, t0 + 1);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::lease_lost));
  auto other_worker = finish(c[0], "w2", finish_kind::completed, t0 + 1);
  ASSERT_FALSE(other_worker);
  EXPECT_EQ(get(j.id).status, job_status::active);
  auto ok = finish(c[0], "w1", finish_kind::completed, t0 + 2);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, job_status::completed);
  EXPECT_EQ(ok->result_status, "ok");
  EXPECT_EQ(ok->completed_at, t0 + 2);
  // A second finish of the same attempt changes nothing.
  EXPECT_FALSE(finish(c[0], "w1", finish_kind::failed, t0 + 3));
  EXPECT_EQ(get(j.id).status, job_status::completed);
}

TEST_P(store_conformance, failed_waits_for_retry_at_then_dead_at_max_attempts) {
  auto j = enqueue(job());
  time_ms now = t0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto c = claim("w", now);
    ASSERT_EQ(c.size(), 1u) << "attempt " << attempt;
    EXPECT_EQ(c[0].attempts, attempt);
    EXPECT_EQ(c[0].fence, attempt);
    auto f = finish(c[0], "w", finish_kind::failed, now, now + 30'000);
    ASSERT_TRUE(f);
    if (attempt < 3) {
      EXPECT_EQ(f->status, job_status::failed);
      EXPECT_EQ(f->ready_at, now + 30'000);
      EXPECT_EQ(f->error, "boom");
      EXPECT_TRUE(claim("w", now + 29'999).empty());  // not before its run_at
      now += 30'000;
    } else {
      EXPECT_EQ(f->status, job_status::dead);
      EXPECT_EQ(f->completed_at, now);
    }
  }
  EXPECT_TRUE(claim("w", now + 10'000'000).empty());
}

TEST_P(store_conformance, dead_kind_and_released_kind) {
  auto a = enqueue(job());
  auto c = claim("w", t0);
  auto d = finish(c[0], "w", finish_kind::dead, t0);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, job_status::dead);
  EXPECT_EQ(d->attempts, 1);

  auto b = enqueue(job());
  c = claim("w", t0);
  ASSERT_EQ(c.size(), 1u);
  auto r = finish(c[0], "w", finish_kind::released, t0 + 5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, job_status::pending);
  EXPECT_EQ(r->attempts, 0);  // the attempt was not spent
  EXPECT_EQ(r->fence, 1);     // the fence never goes back
  auto again = claim("w", t0 + 5);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].fence, 2);
  EXPECT_EQ(again[0].attempts, 1);
}

TEST_P(store_conformance, heartbeat_extends_and_reports_lost_and_cancel) {
  auto a = enqueue(job());
  auto c = claim("w1", t0);
  auto hb = run_sync(st->jobs().heartbeat({{a.id, c[0].fence}}, "w1", t0 + 5'000, lease));
  ASSERT_TRUE(hb);
  EXPECT_EQ((*hb)[0].state, lease_state::held);
  EXPECT_EQ(get(a.id).locked_until, t0 + 5'000 + lease);
  EXPECT_TRUE(claim("w2", t0 + lease + 1).empty());  // extended: not yet expired
  ASSERT_TRUE(run_sync(st->jobs().cancel(project, a.id, t0 + 6'000)));
  hb = run_sync(st->jobs().heartbeat({{a.id, c[0].fence}}, "w1", t0 + 7'000, lease));
  EXPECT_EQ((*hb)[0].state, lease_state::cancel_requested);
  hb = run_sync(st->jobs().heartbeat({{a.id, c[0].fence + 1}}, "w1", t0 + 7'000, lease));
  EXPECT_EQ((*hb)[0].state, lease_state::lost);
}

TEST_P(store_conformance, expired_lease_is_reclaimed_and_the_stale_worker_refused) {
  auto a = enqueue(job());
  auto first = claim("w1", t0);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(claim("w2", t0 + lease - 1).empty());
  auto second = claim("w2", t0 + lease);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].attempts, 2);
  EXPECT_EQ(second[0].fence, 2);
  auto late = finish(first[0], "w1", finish_kind::completed, t0 + lease + 1);
  ASSERT_FALSE(late);
  EXPECT_TRUE(late.error().is(errc::lease_lost));
  auto hb = run_sync(st->jobs().heartbeat({{a.id, first[0].fence}}, "w1", t0 + lease + 1, lease));
  EXPECT_EQ((*hb)[0].state, lease_state::lost);
  ASSERT_TRUE(finish(second[0], "w2", finish_kind::completed, t0 + lease + 2));
}

TEST_P(store_conformance, reaper_kills_expired_leases_without_attempts_and_runs_the_hook_in_the_transaction) {
  std::vector<std::string> hooked;
  st->jobs().set_terminal_hook({[&](job_tx& tx, const job_record& j) {
                                  hooked.push_back(j.id + ":" + std::string(to_string(j.status)));
                                  if (j.type == "child") {
                                    new_job follow;
                                    follow.project_id = j.project_id;
                                    follow.type = "noop";
                                    follow.lane = "main";
                                    follow.max_attempts = 1;
                                    follow.idempotency_key = "after:" + j.id;
                                    ASSERT_TRUE(tx.enqueue(follow, j.completed_at));
                                  }
                                },
                                {}});
  auto j = job("child");
  j.max_attempts = 1;
  auto a = enqueue(j);
  auto c = claim("w1", t0);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + lease - 1, 100)), 0);
  EXPECT_TRUE(claim("w2", t0 + lease).empty());  // no attempts left: not reclaimable
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + lease, 100)), 1);
  auto dead = get(a.id);
  EXPECT_EQ(dead.status, job_status::dead);
  EXPECT_EQ(dead.error, "lease expired: worker lost");
  ASSERT_EQ(hooked.size(), 1u);
  EXPECT_EQ(hooked[0], a.id + ":dead");
  auto follow = run_sync(st->jobs().list({project, job_status::pending, "noop", 1, 10}));
  ASSERT_EQ(follow->total, 1);
  EXPECT_EQ(follow->items[0].idempotency_key, "after:" + a.id);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 2 * lease, 100)), 0);  // once
}

// A dead worker's job with attempts left does not stay "active" until some claim reaches it:
// the reaper puts it back to pending, keeping the used attempt and the fence, and the lost
// worker's heartbeat and finish are refused.
TEST_P(store_conformance, reaper_returns_expired_leases_with_attempts_left_to_pending) {
  auto a = enqueue(job());
  auto c = claim("w1", t0);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + lease - 1, 100)), 0);
  EXPECT_EQ(get(a.id).status, job_status::active);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + lease, 100)), 1);
  auto back = get(a.id);
  EXPECT_EQ(back.status, job_status::pending);
  EXPECT_EQ(back.attempts, 1);
  EXPECT_EQ(back.fence, 1);
  EXPECT_TRUE(back.locked_by.empty()) << back.locked_by;
  auto active = run_sync(st->jobs().list({project, job_status::active, "", 1, 10}));
  EXPECT_EQ(active->total, 0);
  auto hb = run_sync(st->jobs().heartbeat({{a.id, c[0].fence}}, "w1", t0 + lease + 1, lease));
  EXPECT_EQ((*hb)[0].state, lease_state::lost);
  auto late = finish(c[0], "w1", finish_kind::completed, t0 + lease + 1);
  ASSERT_FALSE(late);
  EXPECT_TRUE(late.error().is(errc::lease_lost));
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 2 * lease, 100)), 0);  // once
  auto again = claim("w2", t0 + lease + 2);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].attempts, 2);
  EXPECT_EQ(again[0].fence, 2);
  ASSERT_TRUE(finish(again[0], "w2", finish_kind::completed, t0 + lease + 3));
  EXPECT_EQ(get(a.id).status, job_status::completed);
  // The last attempt's lease expiring still ends the job dead, as before.
  auto b = job();
  b.max_attempts = 2;
  auto bj = enqueue(b, t0 + 3 * lease);
  ASSERT_EQ(claim("w1", t0 + 3 * lease).size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 4 * lease, 100)), 1);
  EXPECT_EQ(get(bj.id).status, job_status::pending);
  ASSERT_EQ(claim("w2", t0 + 4 * lease).size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 5 * lease, 100)), 1);
  EXPECT_EQ(get(bj.id).status, job_status::dead);
}

TEST_P(store_conformance, a_hook_for_some_types_sees_only_those) {
  std::vector<std::string> hooked;
  st->jobs().set_terminal_hook({[&](job_tx&, const job_record& j) { hooked.push_back(j.type + ":" + j.id); }, {"child"}});
  auto other = enqueue(job("noop"));
  auto mine = enqueue(job("child"));
  auto c = claim("w", t0);
  ASSERT_EQ(c.size(), 2u);
  for (const auto& j : c) ASSERT_TRUE(finish(j, "w", finish_kind::completed, t0 + 1));
  ASSERT_EQ(hooked.size(), 1u);
  EXPECT_EQ(hooked[0], "child:" + mine.id);
  EXPECT_EQ(get(other.id).status, job_status::completed);
}

TEST_P(store_conformance, a_hook_for_every_dead_job_sees_dead_jobs_of_any_type_and_nothing_else) {
  std::vector<std::string> hooked;
  st->jobs().set_terminal_hook(
      {[&](job_tx&, const job_record& j) { hooked.push_back(j.type + ":" + std::string(to_string(j.status))); },
       {"child"},
       true});
  auto completed = enqueue(job("noop"));
  auto dies = enqueue(job("noop"));
  auto child = enqueue(job("child"));
  auto c = claim("w", t0);
  ASSERT_EQ(c.size(), 3u);
  for (const auto& j : c)
    ASSERT_TRUE(finish(j, "w", j.id == dies.id ? finish_kind::dead : finish_kind::completed, t0 + 1));
  // The child (a type it names) whatever its end, the dead noop, never the completed noop.
  std::sort(hooked.begin(), hooked.end());
  EXPECT_EQ(hooked, (std::vector<std::string>{"child:completed", "noop:dead"}));
  // A lease lost with no attempts left is dead too, through the reaper.
  hooked.clear();
  auto lost = job("noop");
  lost.max_attempts = 1;
  auto l = enqueue(lost, t0 + 10);
  ASSERT_EQ(claim("w", t0 + 10).size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 10 + 10 * lease, 100)), 1);
  EXPECT_EQ(hooked, (std::vector<std::string>{"noop:dead"}));
  EXPECT_EQ(get(l.id).status, job_status::dead);
  (void)completed;
  (void)child;
}

TEST_P(store_conformance, a_failing_hook_rolls_back_the_transition) {
  st->jobs().set_terminal_hook({[](job_tx&, const job_record&) { throw std::runtime_error("hook bug"); }, {}});
  auto a = enqueue(job());
  auto c = claim("w", t0);
  finish_request f;
  f.lease = {a.id, c[0].fence};
  f.worker_id = "w";
  f.kind = finish_kind::completed;
  EXPECT_THROW(run_sync(st->jobs().finish({f}, t0)), std::runtime_error);
  EXPECT_EQ(get(a.id).status, job_status::active);
}

TEST_P(store_conformance, cancel_rules) {
  auto pending = enqueue(job());
  auto r = run_sync(st->jobs().cancel(project, pending.id, t0));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->immediate);
  EXPECT_EQ(r->job.status, job_status::cancelled);

  auto active = enqueue(job());
  auto c = claim("w", t0);
  ASSERT_EQ(c.size(), 1u);
  r = run_sync(st->jobs().cancel(project, active.id, t0));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->immediate);
  EXPECT_EQ(r->job.status, job_status::active);
  EXPECT_TRUE(r->job.cancel_requested);
  auto done = finish(c[0], "w", finish_kind::cancelled, t0 + 1);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, job_status::cancelled);

  auto failed = enqueue(job());
  c = claim("w", t0);
  ASSERT_TRUE(finish(c[0], "w", finish_kind::failed, t0, t0 + 30'000));
  EXPECT_TRUE(run_sync(st->jobs().cancel(project, failed.id, t0))->immediate);

  // Terminal jobs: conflict, and nothing changes.
  for (const auto& id : {pending.id, active.id, failed.id}) {
    auto before = get(id);
    auto again = run_sync(st->jobs().cancel(project, id, t0 + 9));
    ASSERT_FALSE(again);
    EXPECT_TRUE(again.error().is(errc::conflict));
    auto after = get(id);
    EXPECT_EQ(after.status, before.status);
    EXPECT_EQ(after.completed_at, before.completed_at);
  }
  EXPECT_TRUE(run_sync(st->jobs().cancel(project, new_object_id(), t0)).error().is(errc::not_found));
  EXPECT_TRUE(run_sync(st->jobs().cancel(other_project, pending.id, t0)).error().is(errc::not_found));
}

// A job's error is stored with its code and class, so nothing reads its words again: a handler's
// failure keeps what the worker gave, a lost lease and a cancel are the store's own, and a retry
// or a success clears them.
TEST_P(store_conformance, errors_are_stored_with_their_code_and_class) {
  auto a = enqueue(job());
  auto c = claim("w", t0);
  ASSERT_EQ(c.size(), 1u);
  finish_request f;
  f.lease = {a.id, c[0].fence};
  f.worker_id = "w";
  f.kind = finish_kind::failed;
  f.error = "AD CS [msca_auth]: the service refused the password";
  f.error_code = "invalid_argument";
  f.error_class = "msca_auth";
  f.retry_at = t0 + 1'000;
  auto r = run_sync(st->jobs().finish({f}, t0));
  ASSERT_TRUE(r && (*r)[0]);
  EXPECT_EQ((*r)[0]->error_code, "invalid_argument");
  auto stored = get(a.id);
  EXPECT_EQ(stored.status, job_status::failed);
  EXPECT_EQ(stored.error_code, "invalid_argument");
  EXPECT_EQ(stored.error_class, "msca_auth");

  // The next attempt's lease expires: the store's own code and class replace the handler's.
  c = claim("w", t0 + 1'000);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(*run_sync(st->jobs().reap_expired(t0 + 1'000 + lease, 100)), 1);
  stored = get(a.id);
  EXPECT_EQ(stored.status, job_status::pending);
  EXPECT_EQ(stored.error_code, lease_lost_code);
  EXPECT_EQ(stored.error_class, lease_lost_class);
  EXPECT_EQ(lease_lost_code, errc_name(errc::lease_lost));
  EXPECT_EQ(cancelled_code, errc_name(errc::cancelled));

  // Cancelled while waiting: its code is the cancel's and it has no class.
  auto cancelled = run_sync(st->jobs().cancel(project, a.id, t0 + 2'000 + lease));
  ASSERT_TRUE(cancelled);
  stored = get(a.id);
  EXPECT_EQ(stored.status, job_status::cancelled);
  EXPECT_EQ(stored.error_code, cancelled_code);
  EXPECT_EQ(stored.error_class, "");

  // A dead job retried by hand, then completed: nothing of the old error is left.
  auto b = enqueue(job());
  c = claim("w", t0);
  ASSERT_EQ(c.size(), 1u);
  f.lease = {b.id, c[0].fence};
  f.kind = finish_kind::dead;
  f.error_code = "timeout";
  f.error_class = "timeout";
  ASSERT_TRUE(run_sync(st->jobs().finish({f}, t0)));
  EXPECT_EQ(get(b.id).error_class, "timeout");
  auto retried = run_sync(st->jobs().retry(project, b.id, t0 + 1, 10));
  ASSERT_TRUE(retried);
  EXPECT_EQ(retried->error_code, "");
  EXPECT_EQ(retried->error_class, "");
  c = claim("w", t0 + 2);
  ASSERT_EQ(c.size(), 1u);
  auto done = finish(c[0], "w", finish_kind::completed, t0 + 3);
  ASSERT_TRUE(done);
  stored = get(b.id);
  EXPECT_EQ(stored.status, job_status::completed);
  EXPECT_EQ(stored.error_code, "");
  EXPECT_EQ(stored.error_class, "");
}

TEST_P(store_conformance, retry_rules_keep_document_key_and_fence) {
  auto j = job();
  j.idempotency_key = "r1";
  j.max_attempts = 1;
  auto a = enqueue(j);
  auto c = claim("w", t0);
  auto dead = finish(c[0], "w", finish_kind::failed, t0);
  ASSERT_EQ(dead->status, job_status::dead);
  auto r = run_sync(st->jobs().retry(project, a.id, t0 + 10, 20));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->id, a.id);
  EXPECT_EQ(r->status, job_status::pending);
  EXPECT_EQ(r->attempts, 0);
  EXPECT_EQ(r->fence, 1);
  EXPECT_EQ(r->idempotency_key, "r1");
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->ready_at, t0 + 10);
  // pending, active, completed, cancelled: conflict, unchanged.
  auto p = run_sync(st->jobs().retry(project, a.id, t0 + 11, 20));
  ASSERT_FALSE(p);
  EXPECT_TRUE(p.error().is(errc::conflict));
  c = claim("w", t0 + 20);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].fence, 2);
  EXPECT_TRUE(run_sync(st->jobs().retry(project, a.id, t0 + 21, 20)).error().is(errc::conflict));
  ASSERT_TRUE(finish(c[0], "w", finish_kind::completed, t0 + 22));
  EXPECT_TRUE(run_sync(st->jobs().retry(project, a.id, t0 + 23, 20)).error().is(errc::conflict));
  EXPECT_EQ(get(a.id).status, job_status::completed);
}

TEST_P(store_conformance, retry_of_a_fanout_child_points_at_retry_failed) {
  auto j = job("distribution_execute", "dist");
  j.parent_job_id = new_object_id();
  j.distribution_id = "d1";
  j.max_attempts = 1;
  auto a = enqueue(j);
  auto c = claim("w", t0, 1, "dist");
  ASSERT_TRUE(finish(c[0], "w", finish_kind::failed, t0));
  auto r = run_sync(st->jobs().retry(project, a.id, t0, 20));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::conflict));
  EXPECT_NE(r.error().message.find("retry-failed"), std::string::npos);
}

TEST_P(store_conformance, retry_is_rate_limited_per_project_per_minute) {
  std::vector<std::string> ids;
  for (int i = 0; i < 22; ++i) {
    auto j = job();
    j.max_attempts = 1;
    ids.push_back(enqueue(j).id);
  }
  auto c = claim("w", t0, 30);
  ASSERT_EQ(c.size(), 22u);
  for (auto& j : c) ASSERT_TRUE(finish(j, "w", finish_kind::failed, t0));
  time_ms minute_start = (t0 / 60'000) * 60'000;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(run_sync(st->jobs().retry(project, ids[i], minute_start + 1'000, 20)));
  auto limited = run_sync(st->jobs().retry(project, ids[20], minute_start + 2'000, 20));
  ASSERT_FALSE(limited);
  EXPECT_TRUE(limited.error().is(errc::rate_limited));
  EXPECT_EQ(limited.error().retry_after_s, 58);
  EXPECT_EQ(get(ids[20]).status, job_status::dead);
  EXPECT_TRUE(run_sync(st->jobs().retry(project, ids[20], minute_start + 60'000, 20)));
}

TEST_P(store_conformance, logs_by_cursor_and_fenced_appends) {
  auto a = enqueue(job());
  auto c = claim("w", t0);
  lease_ref l{a.id, c[0].fence};
  for (int i = 1; i <= 5; ++i) {
    auto seq = run_sync(st->jobs().append_log(a.id, l, "info", "line " + std::to_string(i), "", t0 + i));
    ASSERT_TRUE(seq);
    EXPECT_EQ(*seq, i);
  }
  auto page = run_sync(st->jobs().read_logs(a.id, 0, 2));
  ASSERT_EQ(page->lines.size(), 2u);
  EXPECT_EQ(page->next_cursor, 2);
  page = run_sync(st->jobs().read_logs(a.id, page->next_cursor, 100));
  ASSERT_EQ(page->lines.size(), 3u);
  EXPECT_EQ(page->lines[0].message, "line 3");
  EXPECT_EQ(page->next_cursor, 5);
  page = run_sync(st->jobs().read_logs(a.id, 5, 100));
  EXPECT_TRUE(page->lines.empty());
  EXPECT_EQ(page->next_cursor, 5);
  // Reclaimed by another worker: the old attempt can no longer write.
  auto c2 = claim("w2", t0 + lease);
  ASSERT_EQ(c2.size(), 1u);
  auto refused = run_sync(st->jobs().append_log(a.id, l, "info", "late", "", t0 + lease));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::lease_lost));
  EXPECT_EQ(*run_sync(st->jobs().append_log(a.id, lease_ref{a.id, c2[0].fence}, "info", "new", "", t0 + lease)), 6);
  EXPECT_TRUE(run_sync(st->jobs().append_log(new_object_id(), std::nullopt, "info", "x", "", t0)).error().is(errc::not_found));
}

TEST_P(store_conformance, progress_is_fenced) {
  auto a = enqueue(job());
  auto c = claim("w", t0);
  ASSERT_TRUE(run_sync(st->jobs().set_progress({a.id, c[0].fence}, 3, 10)));
  auto g = get(a.id);
  EXPECT_EQ(g.progress_current, 3);
  EXPECT_EQ(g.progress_total, 10);
  EXPECT_TRUE(run_sync(st->jobs().set_progress({a.id, c[0].fence + 1}, 4, 10)).error().is(errc::lease_lost));
}

TEST_P(store_conformance, list_filters_pages_newest_first) {
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(enqueue(job(i % 2 ? "noop" : "other")).id);
  auto c = claim("w", t0, 2);
  ASSERT_EQ(c.size(), 2u);
  auto all = run_sync(st->jobs().list({project, std::nullopt, "", 1, 3}));
  EXPECT_EQ(all->total, 7);
  ASSERT_EQ(all->items.size(), 3u);
  EXPECT_EQ(all->items[0].id, ids[6]);
  auto p3 = run_sync(st->jobs().list({project, std::nullopt, "", 3, 3}));
  ASSERT_EQ(p3->items.size(), 1u);
  EXPECT_EQ(p3->items[0].id, ids[0]);
  EXPECT_EQ(run_sync(st->jobs().list({project, job_status::active, "", 1, 10}))->total, 2);
  EXPECT_EQ(run_sync(st->jobs().list({project, job_status::pending, "", 1, 10}))->total, 5);
  EXPECT_EQ(run_sync(st->jobs().list({project, std::nullopt, "noop", 1, 10}))->total, 3);
  EXPECT_EQ(run_sync(st->jobs().list({other_project, std::nullopt, "", 1, 10}))->total, 0);
}

// Every page of a filter, walked by cursor: each matching job once, newest first.
std::vector<job_record> walk(certfleet::store::store& st, job_filter f) {
  std::vector<job_record> out;
  for (int guard = 0; guard < 1000; ++guard) {
    auto p = run_sync(st.jobs().list(f));
    EXPECT_TRUE(p) << p.error().message;
    if (!p) break;
    out.insert(out.end(), p->items.begin(), p->items.end());
    if (p->next_cursor.empty()) break;
    f.cursor = p->next_cursor;
  }
  return out;
}

// The tab counts come from counts the store keeps with each status change; here they are checked
// against a tally of the jobs themselves after every kind of transition.
TEST_P(store_conformance, tab_counts_stay_exact_through_every_transition) {
  auto check = [&](const char* when) {
    for (std::string type : {"", "noop", "other"}) {
      auto all = walk(*st, {project, std::nullopt, type, 1, 7});
      status_counts tally{};
      for (const auto& j : all) ++tally[static_cast<std::size_t>(j.status)];
      auto page = run_sync(st->jobs().list({project, std::nullopt, type, 1, 1}));
      ASSERT_TRUE(page);
      EXPECT_EQ(page->counts, tally) << when << ", type '" << type << "'";
      EXPECT_EQ(page->total, static_cast<std::int64_t>(all.size())) << when;
      for (int s = 0; s < 6; ++s) {
        auto by = walk(*st, {project, static_cast<job_status>(s), type, 1, 3});
        EXPECT_EQ(static_cast<std::int64_t>(by.size()), tally[static_cast<std::size_t>(s)])
            << when << ", status " << to_string(static_cast<job_status>(s)) << ", type '" << type << "'";
        for (const auto& j : by) EXPECT_EQ(j.status, static_cast<job_status>(s));
      }
    }
  };
  for (int i = 0; i < 12; ++i) enqueue(job(i % 3 ? "noop" : "other"));
  enqueue(job(), t0);  // one more, then one in another project that must count nowhere here
  auto foreign = job();
  foreign.project_id = other_project;
  enqueue(foreign);
  check("enqueued");
  auto c = claim("w", t0, 8);
  ASSERT_EQ(c.size(), 8u);
  check("claimed");
  finish(c[0], "w", finish_kind::completed, t0 + 1);
  finish(c[1], "w", finish_kind::failed, t0 + 1, t0 + 60'000);
  finish(c[2], "w", finish_kind::dead, t0 + 1);
  finish(c[3], "w", finish_kind::released, t0 + 1);
  check("finished");
  ASSERT_TRUE(run_sync(st->jobs().cancel(project, c[4].id, t0 + 2)));  // active: cancel requested only
  auto pending = walk(*st, {project, job_status::pending, "", 1, 50});
  ASSERT_FALSE(pending.empty());
  ASSERT_TRUE(run_sync(st->jobs().cancel(project, pending[0].id, t0 + 2)));
  ASSERT_TRUE(run_sync(st->jobs().retry(project, c[2].id, t0 + 3, 100)));
  check("cancelled and retried");
  // A transaction that enqueues and then fails changes no count: its changes, and the counts'
  // changes it recorded, roll back with it.
  tx_fn rolled_back = [&](catalog_tx& tx) -> result<void> {
    for (const char* type : {"other", "noop"})
      if (auto e = tx.jobs().enqueue(job(type), t0 + 4); !e) return std::move(e).error();
    return make_error(errc::conflict, "rolled back on purpose");
  };
  EXPECT_FALSE(run_sync(st->catalog().transact(std::move(rolled_back))));
  check("a transaction rolled back");
  auto reaped = run_sync(st->jobs().reap_expired(t0 + 10 * lease, 100));
  ASSERT_TRUE(reaped);
  EXPECT_GE(*reaped, 1);
  check("reaped");
  // Ids carry the real creation time (not t0): the cutoff must be later than both.
  auto purged = run_sync(st->maintenance().purge_finished(4'000'000'000'000, 100));
  ASSERT_TRUE(purged);
  EXPECT_GE(*purged, 1);
  check("purged");
  // The other project kept its own.
  auto theirs = run_sync(st->jobs().list({other_project, std::nullopt, "", 1, 1}));
  EXPECT_EQ(theirs->total, 1);
  EXPECT_EQ(theirs->counts[static_cast<std::size_t>(job_status::pending)], 1);
}

// Keyset pages in every filter shape agree with offset pages, and a job made between two pages
// neither repeats a job nor hides one that was there.
TEST_P(store_conformance, cursor_pages_agree_with_offset_pages_in_every_shape) {
  for (int i = 0; i < 11; ++i) enqueue(job(i % 2 ? "noop" : "other"));
  auto c = claim("w", t0, 5);
  ASSERT_EQ(c.size(), 5u);
  finish(c[0], "w", finish_kind::completed, t0 + 1);
  finish(c[1], "w", finish_kind::completed, t0 + 1);
  const std::vector<job_filter> shapes = {
      {project, std::nullopt, "", 1, 2},         {project, job_status::active, "", 1, 2},
      {project, job_status::pending, "", 1, 2},  {project, std::nullopt, "noop", 1, 2},
      {project, job_status::completed, "other", 1, 1}, {project, job_status::active, "noop", 1, 1}};
  for (const auto& f : shapes) {
    auto by_cursor = walk(*st, f);
    std::vector<job_record> by_offset;
    for (int page = 1; page < 100; ++page) {
      auto g = f;
      g.page = page;
      auto p = run_sync(st->jobs().list(g));
      if (p->items.empty()) break;
      by_offset.insert(by_offset.end(), p->items.begin(), p->items.end());
    }
    ASSERT_EQ(by_cursor.size(), by_offset.size()) << (f.status ? to_string(*f.status) : "all") << " " << f.type;
    for (std::size_t i = 0; i < by_cursor.size(); ++i) EXPECT_EQ(by_cursor[i].id, by_offset[i].id);
    for (std::size_t i = 1; i < by_cursor.size(); ++i) EXPECT_GT(by_cursor[i - 1].id, by_cursor[i].id);
  }
  auto first = run_sync(st->jobs().list({project, std::nullopt, "", 1, 4}));
  enqueue(job());  // newer than every listed job: the next page does not shift
  auto second = run_sync(st->jobs().list({project, std::nullopt, "", 1, 4, first->next_cursor}));
  EXPECT_LT(second->items.front().id, first->items.back().id);
}

// A deep page (migration 10) walks per-block counts to the block of its first row: over several
// blocks of rids shared with another project, every page of every shape is the same slice of the
// list that a cursor walk reads from the index alone, before and after jobs are deleted.
TEST_P(store_conformance, deep_offset_pages_are_the_cursor_walk_cut_in_pages) {
  const char* types[] = {"noop", "other", "third"};
  std::vector<std::string> stored;  // ours, in the order the store took them
  for (int batch = 0; batch < 3; ++batch) {
    std::vector<new_job> ours, theirs;
    for (int i = 0; i < 900; ++i) ours.push_back(job(types[(batch + i) % 3]));
    for (int i = 0; i < 300; ++i) {
      auto j = job();
      j.project_id = other_project;
      theirs.push_back(j);
    }
    auto made = run_sync(st->jobs().enqueue_many(std::move(ours), t0));
    ASSERT_TRUE(made);
    for (auto& o : *made) stored.push_back(o.job.id);
    ASSERT_TRUE(run_sync(st->jobs().enqueue_many(std::move(theirs), t0)));
  }
  auto c = claim("w", t0, 1500);
  std::vector<finish_request> done;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (i % 5 == 4) continue;  // stays active
    finish_request f;
    f.lease = {c[i].id, c[i].fence};
    f.worker_id = "w";
    f.kind = i % 5 == 3 ? finish_kind::dead : finish_kind::completed;
    f.error = f.kind == finish_kind::dead ? "boom" : "";
    done.push_back(f);
  }
  ASSERT_TRUE(run_sync(st->jobs().finish(std::move(done), t0 + 1)));
  auto check = [&](const char* when) {
    const std::vector<job_filter> shapes = {
        {project, std::nullopt, "", 1, 37},          {project, job_status::completed, "", 1, 37},
        {project, job_status::pending, "", 1, 37},   {project, std::nullopt, "other", 1, 37},
        {project, job_status::dead, "third", 1, 11}, {project, job_status::active, "", 1, 37},
        {project, job_status::completed, "noop", 1, 64}};
    for (const auto& f : shapes) {
      const auto name = std::string(when) + ": " + (f.status ? std::string(to_string(*f.status)) : "all") + " '" + f.type + "'";
      auto by_cursor = walk(*st, f);
      ASSERT_FALSE(by_cursor.empty()) << name;
      const auto pages = static_cast<int>((by_cursor.size() + f.page_size - 1) / f.page_size);
      for (int page = 1; page <= pages + 1; ++page) {
        auto g = f;
        g.page = page;
        auto p = run_sync(st->jobs().list(g));
        ASSERT_TRUE(p) << name;
        EXPECT_EQ(p->total, static_cast<std::int64_t>(by_cursor.size())) << name;
        const auto from = static_cast<std::size_t>(page - 1) * f.page_size;
        const auto to = std::min(by_cursor.size(), from + f.page_size);
        ASSERT_EQ(p->items.size(), from < to ? to - from : 0) << name << ", page " << page;
        for (std::size_t i = 0; i < p->items.size(); ++i)
          ASSERT_EQ(p->items[i].id, by_cursor[from + i].id) << name << ", page " << page << ", row " << i;
      }
    }
    // Newest first is the order the store took the jobs in.
    auto all = walk(*st, {project, std::nullopt, "", 1, 200});
    std::set<std::string> listed;
    for (const auto& j : all) listed.insert(j.id);
    std::vector<std::string> expect;
    for (auto it = stored.rbegin(); it != stored.rend(); ++it)
      if (listed.count(*it)) expect.push_back(*it);
    ASSERT_EQ(all.size(), expect.size()) << when;
    for (std::size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].id, expect[i]) << when << ", row " << i;
  };
  check("stored");
  // Retention takes completed jobs out of the middle of every block.
  auto purged = run_sync(st->maintenance().purge_finished(4'000'000'000'000, 400));
  ASSERT_TRUE(purged);
  EXPECT_EQ(*purged, 400);
  check("purged");
}

// Browser sessions: found by hash while unexpired and while their token is active.
TEST_P(store_conformance, sessions_expire_end_and_follow_their_token) {
  new_token t;
  t.project_id = project;
  t.token_role = role::admin;
  t.name = "alice";
  t.hash = std::string(64, 'a');
  auto tok = run_sync(st->auth().create_token(t, t0));
  ASSERT_TRUE(tok);
  ASSERT_TRUE(run_sync(st->auth().create_session("h1", tok->id, t0 + 1000, t0)));
  ASSERT_TRUE(run_sync(st->auth().create_session("h2", tok->id, t0 + 5000, t0)));
  auto s = run_sync(st->auth().find_session("h1", t0 + 999));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->token.id, tok->id);
  EXPECT_EQ(s->token.name, "alice");
  EXPECT_EQ(s->token.token_role, role::admin);
  EXPECT_EQ(s->expires_at, t0 + 1000);
  EXPECT_TRUE(run_sync(st->auth().find_session("h1", t0 + 1000)).error().is(errc::not_found));
  EXPECT_TRUE(run_sync(st->auth().find_session("nope", t0)).error().is(errc::not_found));
  ASSERT_TRUE(run_sync(st->auth().delete_session("h2")));
  EXPECT_TRUE(run_sync(st->auth().find_session("h2", t0)).error().is(errc::not_found));
  ASSERT_TRUE(run_sync(st->auth().create_session("h3", tok->id, t0 + 5000, t0)));
  ASSERT_TRUE(run_sync(st->auth().revoke_token(tok->id, t0 + 1)));
  EXPECT_TRUE(run_sync(st->auth().find_session("h3", t0 + 2)).error().is(errc::not_found));
}

TEST_P(store_conformance, lane_statistics_count_claimable_jobs) {
  auto j = job();
  j.run_at = t0 - 5'000;
  enqueue(j);
  enqueue(job());
  enqueue(job("distribution_execute", "dist"));
  auto s = run_sync(st->jobs().lane_statistics(t0));
  ASSERT_TRUE(s);
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].lane, "main");
  EXPECT_EQ((*s)[0].pending, 2);
  EXPECT_EQ((*s)[0].oldest_ready_at, t0 - 5'000);
  EXPECT_EQ((*s)[1].pending, 1);
}

TEST_P(store_conformance, projects) {
  auto again = run_sync(st->projects().ensure("default", t0 + 1));
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->second);
  EXPECT_EQ(again->first.id, project);
  EXPECT_EQ(run_sync(st->projects().list())->size(), 2u);
  EXPECT_TRUE(run_sync(st->projects().find_by_name("nope")).error().is(errc::not_found));
}

// The worker registry (issue 34).
worker_presence presence(std::string id, std::int64_t running = 0) {
  worker_presence w;
  w.id = std::move(id);
  w.host = "vm1";
  w.host_key = "vm1/boot-1/ns-1";
  w.pid = 4242;
  w.proc_start = "123456";
  w.version = "1.2.3";
  w.lanes = "main,dist";
  w.started_at = t0 - 60'000;
  w.running = running;
  return w;
}

TEST_P(store_conformance, a_heartbeat_is_listed_with_its_age_newest_first) {
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1"), t0)));
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w2", 3), t0 + 1'000)));
  auto l = run_sync(st->workers().list_workers(t0 + 3'000));
  ASSERT_TRUE(l) << l.error().message;
  ASSERT_EQ(l->size(), 2u);
  const auto& w2 = (*l)[0];
  EXPECT_EQ(w2.id, "w2");
  EXPECT_EQ(w2.host, "vm1");
  EXPECT_EQ(w2.host_key, "vm1/boot-1/ns-1");
  EXPECT_EQ(w2.pid, 4242);
  EXPECT_EQ(w2.proc_start, "123456");
  EXPECT_EQ(w2.version, "1.2.3");
  EXPECT_EQ(w2.lanes, "main,dist");
  EXPECT_EQ(w2.started_at, t0 - 60'000);
  EXPECT_EQ(w2.running, 3);
  EXPECT_EQ(w2.last_seen, t0 + 1'000);
  EXPECT_EQ(w2.age_ms, 2'000);
  EXPECT_EQ(w2.dead_at, 0);
  EXPECT_EQ((*l)[1].id, "w1");
  EXPECT_EQ((*l)[1].age_ms, 3'000);
  // A later beat moves it up and records what it runs now.
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1", 5), t0 + 2'500)));
  l = run_sync(st->workers().list_workers(t0 + 3'000));
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "w1");
  EXPECT_EQ((*l)[0].running, 5);
  EXPECT_EQ((*l)[0].age_ms, 500);
}

// A dead worker's jobs are released at once, long before their leases end, each exactly as lease
// expiry does it: attempts left → pending (the attempt counted, the fence kept for the next claim
// to raise); none left → dead with its terminal hook in the same transaction; a cancel request →
// cancelled. Another worker's job is not touched.
TEST_P(store_conformance, declare_dead_releases_the_workers_jobs_at_once_as_lease_expiry_does) {
  std::vector<std::string> hooked;
  st->jobs().set_terminal_hook({[&](job_tx& tx, const job_record& j) {
                                  hooked.push_back(j.id + ":" + std::string(to_string(j.status)));
                                  new_job follow;
                                  follow.project_id = j.project_id;
                                  follow.type = "noop";
                                  follow.lane = "dist";
                                  follow.max_attempts = 1;
                                  follow.idempotency_key = "after:" + j.id;
                                  ASSERT_TRUE(tx.enqueue(follow, j.completed_at));
                                },
                                {}});
  auto a = enqueue(job());  // attempts left
  auto last = job();
  last.max_attempts = 1;
  auto b = enqueue(last, t0 + 1);  // its only attempt
  auto c = enqueue(job(), t0 + 2);  // cancel requested while it runs
  auto held = claim("w1", t0 + 10);
  ASSERT_EQ(held.size(), 3u);
  auto other = enqueue(job(), t0 + 20);
  auto theirs = claim("w2", t0 + 20);
  ASSERT_EQ(theirs.size(), 1u);
  ASSERT_TRUE(run_sync(st->jobs().cancel(project, c.id, t0 + 30)));
  // w1 last beat 25 s ago; every lease (10 s) still runs.
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1", 3), t0 - 25'000)));
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w2", 1), t0 + 4'000)));
  const time_ms now = t0 + 5'000;
  ASSERT_EQ(*run_sync(st->jobs().reap_expired(now, 100)), 0);
  auto n = run_sync(st->workers().declare_dead("w1", "no heartbeat for 30 s", 20'000, now));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 3);
  auto fence_of = [&](const std::string& id) {
    for (const auto& h : held)
      if (h.id == id) return h.fence;
    ADD_FAILURE() << "not claimed: " << id;
    return std::int64_t{0};
  };
  auto back = get(a.id);
  EXPECT_EQ(back.status, job_status::pending);
  EXPECT_EQ(back.attempts, 1);  // the lost attempt stays counted
  EXPECT_EQ(back.fence, fence_of(a.id));
  EXPECT_TRUE(back.locked_by.empty()) << back.locked_by;
  EXPECT_EQ(back.error, "lease expired: worker lost; returned to pending");
  EXPECT_LE(back.ready_at, now);  // in line at once, not at the lease's end
  auto dead = get(b.id);
  EXPECT_EQ(dead.status, job_status::dead);
  EXPECT_EQ(dead.error, "lease expired: worker lost");
  EXPECT_EQ(dead.completed_at, now);
  auto cancelled = get(c.id);
  EXPECT_EQ(cancelled.status, job_status::cancelled);
  EXPECT_EQ(cancelled.error, "cancelled on request (worker lost)");
  std::sort(hooked.begin(), hooked.end());
  std::vector<std::string> want{b.id + ":dead", c.id + ":cancelled"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(hooked, want);
  // What the hooks wrote committed with the transition.
  job_filter waiting;
  waiting.project_id = project;
  waiting.status = job_status::pending;
  auto follow = run_sync(st->jobs().list(waiting));
  std::set<std::string> keys;
  for (const auto& j : follow->items) keys.insert(j.idempotency_key);
  EXPECT_TRUE(keys.count("after:" + b.id)) << follow->total;
  EXPECT_TRUE(keys.count("after:" + c.id)) << follow->total;
  // The other worker's job is untouched.
  auto kept = get(other.id);
  EXPECT_EQ(kept.status, job_status::active);
  EXPECT_EQ(kept.locked_by, "w2");
  EXPECT_EQ(kept.fence, theirs[0].fence);
  // The verdict is on the list: dead last, with what it gave back.
  auto l = run_sync(st->workers().list_workers(now + 1'000));
  ASSERT_TRUE(l);
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "w2");
  EXPECT_EQ((*l)[1].id, "w1");
  EXPECT_EQ((*l)[1].dead_at, now);
  EXPECT_EQ((*l)[1].dead_reason, "no heartbeat for 30 s");
  EXPECT_EQ((*l)[1].released_jobs, 3);
  // The released job goes to the next worker at once; its attempt has the next fence.
  auto again = claim("w2", now + 1, 10, "main");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].id, a.id);
  EXPECT_EQ(again[0].attempts, 2);
  EXPECT_EQ(again[0].fence, fence_of(a.id) + 1);
  // Once is enough: the verdict is not given twice.
  auto twice = run_sync(st->workers().declare_dead("w1", "again", 20'000, now + 5'000));
  ASSERT_FALSE(twice);
  EXPECT_TRUE(twice.error().is(errc::conflict));
}

// A worker that was only paused wakes up to find it is dead: its beat and its late writes of the
// released attempts are refused.
TEST_P(store_conformance, a_dead_workers_beat_and_late_finish_are_lease_lost) {
  auto a = enqueue(job());
  auto held = claim("w1", t0);
  ASSERT_EQ(held.size(), 1u);
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1", 1), t0)));
  ASSERT_EQ(*run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0 + 20'000)), 1);
  auto beat = run_sync(st->workers().beat(presence("w1", 1), t0 + 21'000));
  ASSERT_FALSE(beat);
  EXPECT_TRUE(beat.error().is(errc::lease_lost)) << beat.error().message;
  EXPECT_EQ(beat.error().field, "worker");
  auto l = run_sync(st->workers().list_workers(t0 + 22'000));
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ(l->front().last_seen, t0);  // the refused beat changed nothing
  EXPECT_EQ(l->front().dead_at, t0 + 20'000);
  auto hb = run_sync(st->jobs().heartbeat({{a.id, held[0].fence}}, "w1", t0 + 21'000, lease));
  EXPECT_EQ((*hb)[0].state, lease_state::lost);
  auto late = finish(held[0], "w1", finish_kind::completed, t0 + 21'000);
  ASSERT_FALSE(late);
  EXPECT_TRUE(late.error().is(errc::lease_lost));
  EXPECT_EQ(get(a.id).status, job_status::pending);
  // Taken by another worker, the job refuses the old attempt's writes under the new fence too.
  auto next = claim("w2", t0 + 21'000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].fence, held[0].fence + 1);
  auto stale = finish(held[0], "w1", finish_kind::completed, t0 + 22'000);
  ASSERT_FALSE(stale);
  EXPECT_TRUE(stale.error().is(errc::lease_lost));
  ASSERT_TRUE(finish(next[0], "w2", finish_kind::completed, t0 + 22'000));
}

// A heartbeat newer than min_age wins over a stale verdict: nothing changes.
TEST_P(store_conformance, declare_dead_on_a_worker_that_beat_within_min_age_is_a_conflict_and_changes_nothing) {
  auto a = enqueue(job());
  auto held = claim("w1", t0);
  ASSERT_EQ(held.size(), 1u);
  ASSERT_TRUE(run_sync(st->workers().beat(presence("w1", 1), t0 + 15'000)));
  auto r = run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0 + 30'000));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::conflict)) << r.error().message;
  EXPECT_EQ(r.error().field, "worker");
  auto kept = get(a.id);
  EXPECT_EQ(kept.status, job_status::active);
  EXPECT_EQ(kept.locked_by, "w1");
  EXPECT_EQ(kept.fence, held[0].fence);
  auto l = run_sync(st->workers().list_workers(t0 + 30'000));
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ(l->front().dead_at, 0);
  EXPECT_TRUE(run_sync(st->workers().beat(presence("w1", 1), t0 + 31'000)));
  // Exactly min_age old is old enough; a worker never registered is a conflict too.
  auto unknown = run_sync(st->workers().declare_dead("nobody", "silent", 20'000, t0 + 60'000));
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(unknown.error().is(errc::conflict));
  auto n = run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0 + 51'000));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 1);
}

TEST_P(store_conformance, prune_forgets_workers_dead_before_the_cutoff_only) {
  for (const char* w : {"w1", "w2", "w3"}) ASSERT_TRUE(run_sync(st->workers().beat(presence(w), t0)));
  ASSERT_EQ(*run_sync(st->workers().declare_dead("w1", "silent", 20'000, t0 + 30'000)), 0);
  ASSERT_EQ(*run_sync(st->workers().declare_dead("w2", "silent", 20'000, t0 + 50'000)), 0);
  auto n = run_sync(st->workers().prune_workers(t0 + 40'000));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 1);
  auto l = run_sync(st->workers().list_workers(t0 + 60'000));
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].id, "w3");  // alive, however old its heartbeat: never pruned
  EXPECT_EQ((*l)[1].id, "w2");
  EXPECT_EQ(*run_sync(st->workers().prune_workers(t0 + 40'000)), 0);
}

INSTANTIATE_TEST_SUITE_P(backends, store_conformance, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return info.param.name; });

TEST(sqlite_store, reopening_keeps_jobs_and_schema) {
  testbed::temp_dir dir;
  std::string id;
  {
    auto s = open_sqlite({dir.file("c.db"), 1, 5000, false});
    ASSERT_TRUE(s);
    auto p = run_sync((*s)->projects().ensure("default", t0));
    new_job j;
    j.project_id = p->first.id;
    j.type = "noop";
    j.lane = "main";
    id = run_sync((*s)->jobs().enqueue(j, t0))->job.id;
  }
  auto s = open_sqlite({dir.file("c.db"), 1, 5000, false});
  ASSERT_TRUE(s);
  auto p = run_sync((*s)->projects().find_by_name("default"));
  EXPECT_EQ(run_sync((*s)->jobs().get(p->id, id))->status, job_status::pending);
}

// Migration 7 fills the tab counts from the jobs already stored: a store written before it (its
// counts table and triggers removed, its version set back) reopens with exact counts.
TEST(sqlite_store, migration_fills_the_tab_counts_of_existing_jobs) {
  testbed::temp_dir dir;
  const auto file = dir.file("m.db");
  std::string pid;
  {
    auto s = open_sqlite({file, 1, 5000, false});
    ASSERT_TRUE(s);
    pid = run_sync((*s)->projects().ensure("default", t0))->first.id;
    for (int i = 0; i < 5; ++i) {
      new_job j;
      j.project_id = pid;
      j.type = i < 3 ? "noop" : "other";
      j.lane = "main";
      j.max_attempts = 1;
      ASSERT_TRUE(run_sync((*s)->jobs().enqueue(j, t0)));
    }
    ASSERT_EQ(run_sync((*s)->jobs().claim("main", "w", t0, 1000, 2))->size(), 2u);
    (*s)->close();
  }
  // Back to the schema before migration 7: its objects and those of every later migration go
  // (each later one then runs again on top).
  const std::string undo =
      "DROP TRIGGER IF EXISTS job_counts_insert; DROP TRIGGER IF EXISTS job_counts_delete; "
      "DROP TRIGGER IF EXISTS job_counts_status; "
      "DROP TABLE job_counts; DROP TABLE ui_sessions; DROP INDEX jobs_project_type_status; "
      "ALTER TABLE distributions DROP COLUMN auto_execute; "
      "ALTER TABLE distributions DROP COLUMN run_certificate_version; "
      "ALTER TABLE distributions DROP COLUMN run_trigger; "
      "DROP TABLE session_slots; "
      "DROP TRIGGER IF EXISTS job_blocks_insert; DROP TRIGGER IF EXISTS job_blocks_delete; "
      "DROP TRIGGER IF EXISTS job_blocks_status; "
      "DROP TABLE job_blocks; DROP TABLE acme_dns_records; DROP TABLE workers; "
      "DROP INDEX tokens_expiry; ALTER TABLE tokens DROP COLUMN expires_at; ALTER TABLE tokens DROP COLUMN last_used_at; "
      "ALTER TABLE distributions DROP COLUMN run_redrives; "
      "ALTER TABLE jobs DROP COLUMN error_code; ALTER TABLE jobs DROP COLUMN error_class; "
      "DELETE FROM schema_migrations WHERE version >= 7;";
  ASSERT_EQ(std::system(("sqlite3 '" + file + "' \"" + undo + "\"").c_str()), 0);
  auto s = open_sqlite({file, 1, 5000, false});
  ASSERT_TRUE(s) << s.error().message;
  auto p = run_sync((*s)->jobs().list({pid, std::nullopt, "", 1, 1}));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->total, 5);
  EXPECT_EQ(p->counts[static_cast<std::size_t>(job_status::pending)], 3);
  EXPECT_EQ(p->counts[static_cast<std::size_t>(job_status::active)], 2);
  EXPECT_EQ(run_sync((*s)->jobs().list({pid, std::nullopt, "other", 1, 1}))->total, 2);
  // Migration 10 filled the block counts: each offset page is the cursor walk's next job.
  auto walked = walk(**s, {pid, std::nullopt, "", 1, 1});
  ASSERT_EQ(walked.size(), 5u);
  for (int page = 1; page <= 5; ++page) {
    auto one = run_sync((*s)->jobs().list({pid, std::nullopt, "", page, 1}));
    ASSERT_EQ(one->items.size(), 1u);
    EXPECT_EQ(one->items[0].id, walked[static_cast<std::size_t>(page - 1)].id);
  }
  auto second_other = run_sync((*s)->jobs().list({pid, job_status::pending, "other", 2, 1}));
  ASSERT_EQ(second_other->items.size(), 1u);
  EXPECT_EQ(second_other->items[0].type, "other");
}

TEST(sqlite_store, unopenable_path_is_an_error_value) {
  auto s = open_sqlite({"/proc/certfleet/nope.db", 1, 100, false});
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().field, "data");
}

}  // namespace
