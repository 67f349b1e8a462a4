// The session-slot interface (certfleet/store/session_slots.hpp), run against every store
// backend (backends.hpp): the limit per destination, holders, renewal and expiry, and slots that
// die with their job's attempt — finished, reaped, or a lease that ran out (a SIGKILLed worker).
#include "backends.hpp"
#include "certfleet/store/session_slots.hpp"
#include "certfleet/store/store.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using namespace certfleet;
using namespace certfleet::store;
using testbed::run_sync;
using store_conformance_backends::backend;
using store_conformance_backends::backends;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;
constexpr time_ms lease = 10'000;
constexpr time_ms ttl = 10'000;

class session_slots_conformance : public ::testing::TestWithParam<backend> {
 protected:
  void SetUp() override {
    st = GetParam().open(dir);
    project = run_sync(st->projects().ensure("default", t0))->first.id;
  }
  void TearDown() override { st->close(); }

  // An active distribution job attempt, claimed at `now` by `worker`.
  job_record active_job(const std::string& worker = "w", time_ms now = t0) {
    new_job j;
    j.project_id = project;
    j.type = "distribution_execute";
    j.lane = "dist";
    j.max_attempts = 1;
    auto e = run_sync(st->jobs().enqueue(j, now));
    EXPECT_TRUE(e) << e.error().message;
    auto c = run_sync(st->jobs().claim("dist", worker, now, lease, 1));
    EXPECT_TRUE(c && c->size() == 1);
    return c->front();
  }
  slot_holder holder(const job_record& j) { return {j.id, j.fence}; }
  slot_grant acquire(const std::string& dest, const job_record& j, int limit, time_ms now = t0) {
    auto g = run_sync(st->session_slots().acquire(dest, holder(j), limit, now, ttl));
    EXPECT_TRUE(g) << g.error().message;
    return g ? *g : slot_grant{};
  }
  std::vector<std::pair<std::string, std::int64_t>> live(time_ms now = t0) {
    auto l = run_sync(st->session_slots().live(now));
    EXPECT_TRUE(l);
    return l ? *l : std::vector<std::pair<std::string, std::int64_t>>{};
  }

  testbed::temp_dir dir;
  std::unique_ptr<certfleet::store::store> st;
  std::string project;
};

using live_list = std::vector<std::pair<std::string, std::int64_t>>;

TEST_P(session_slots_conformance, at_most_limit_per_destination_across_holders) {
  auto a = active_job("w1"), b = active_job("w2");
  auto g1 = acquire("h1:22", a, 2);
  auto g2 = acquire("h1:22", b, 2);
  EXPECT_TRUE(g1.granted());
  EXPECT_TRUE(g2.granted());
  EXPECT_NE(g1.slot_id, g2.slot_id);
  EXPECT_EQ(g2.in_use, 2);
  // Full, whoever asks; another destination is counted apart.
  auto g3 = acquire("h1:22", a, 2);
  EXPECT_FALSE(g3.granted());
  EXPECT_EQ(g3.in_use, 2);
  EXPECT_TRUE(acquire("h2:22", a, 2).granted());
  // One holder may have several slots of one destination (several lanes of a job).
  EXPECT_TRUE(acquire("h1:22", a, 3).granted());
  EXPECT_EQ(live(), (live_list{{"h1:22", 3}, {"h2:22", 1}}));
  // Released: the slot comes back at once.
  ASSERT_TRUE(run_sync(st->session_slots().release(g1.slot_id, holder(a))));
  EXPECT_TRUE(acquire("h1:22", b, 3).granted());
  auto bad = run_sync(st->session_slots().acquire("h1:22", holder(a), 0, t0, ttl));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "limit");
}

TEST_P(session_slots_conformance, release_only_by_the_holder) {
  auto a = active_job("w1"), b = active_job("w2");
  auto g = acquire("h:22", a, 1);
  ASSERT_TRUE(g.granted());
  ASSERT_TRUE(run_sync(st->session_slots().release(g.slot_id, holder(b))));  // not b's: no effect
  EXPECT_FALSE(acquire("h:22", b, 1).granted());
  ASSERT_TRUE(run_sync(st->session_slots().release(g.slot_id, {a.id, a.fence + 1})));  // another attempt's
  EXPECT_FALSE(acquire("h:22", b, 1).granted());
  ASSERT_TRUE(run_sync(st->session_slots().release(g.slot_id, holder(a))));
  EXPECT_TRUE(acquire("h:22", b, 1).granted());
}

TEST_P(session_slots_conformance, an_unrenewed_slot_expires_and_a_renewed_one_does_not) {
  auto a = active_job("w1", t0), b = active_job("w2", t0);
  ASSERT_TRUE(acquire("h:22", a, 1, t0).granted());
  // Both jobs keep their leases (their workers heartbeat).
  auto keep = [&](time_ms now) {
    auto hb = run_sync(st->jobs().heartbeat({{a.id, a.fence}}, "w1", now, lease));
    ASSERT_TRUE(hb);
    auto hb2 = run_sync(st->jobs().heartbeat({{b.id, b.fence}}, "w2", now, lease));
    ASSERT_TRUE(hb2);
  };
  keep(t0 + 6000);
  auto renewed = run_sync(st->session_slots().renew(holder(a), t0 + 6000, ttl));
  ASSERT_TRUE(renewed);
  EXPECT_EQ(*renewed, 1);
  keep(t0 + 12'000);
  EXPECT_FALSE(acquire("h:22", b, 1, t0 + 12'000).granted()) << "renewed until t0 + 16 s";
  keep(t0 + 17'000);
  EXPECT_TRUE(acquire("h:22", b, 1, t0 + 17'000).granted()) << "not renewed since: expired";
  auto none = run_sync(st->session_slots().renew(holder(a), t0 + 17'000, ttl));
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0) << "the expired slot was freed by the acquire";
}

TEST_P(session_slots_conformance, slots_die_with_their_attempt) {
  // Finished: its slots are free at once.
  auto a = active_job("w1", t0), b = active_job("w2", t0);
  ASSERT_TRUE(acquire("h:22", a, 1).granted());
  EXPECT_FALSE(acquire("h:22", b, 1).granted());
  finish_request f;
  f.lease = {a.id, a.fence};
  f.worker_id = "w1";
  f.kind = finish_kind::completed;
  f.result_status = "ok";
  ASSERT_TRUE(run_sync(st->jobs().finish({f}, t0 + 10)));
  EXPECT_TRUE(acquire("h:22", b, 1, t0 + 20).granted());
}

TEST_P(session_slots_conformance, a_lost_workers_slots_come_back_with_its_lease) {
  // The holder's worker stops heartbeating (SIGKILL): the slot is renewed by nobody, but what
  // frees it is the job's lease running out, even before the slot's own expiry and any reaper.
  auto a = active_job("w1", t0);
  auto g = run_sync(st->session_slots().acquire("h:22", holder(a), 1, t0, 60'000));  // a long slot ttl
  ASSERT_TRUE(g && g->granted());
  auto b = active_job("w2", t0 + 9000);
  EXPECT_FALSE(acquire("h:22", b, 1, t0 + 9000).granted()) << "a's lease runs until t0 + 10 s";
  EXPECT_TRUE(acquire("h:22", b, 1, t0 + 10'001).granted()) << "a's lease ran out: its slot is free";
  EXPECT_EQ(live(t0 + 10'001), (live_list{{"h:22", 1}}));
}

INSTANTIATE_TEST_SUITE_P(backends, session_slots_conformance, ::testing::ValuesIn(backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
