// Worker liveness (issue 34), without I/O: the verdict on a registered worker and the dist lane's
// fair share. The store side (declare_dead releasing jobs, fenced) is in the store conformance
// suite; the whole story with killed and paused processes in queue_process_tests.
#include "certfleet/queue/liveness.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

using namespace certfleet;
using queue::liveness_state;

namespace {

store::worker_presence worker(std::string host_key, std::int64_t pid, std::string start, time_ms age) {
  store::worker_presence w;
  w.id = "vm:" + std::to_string(pid) + ":x";
  w.host = "vm";
  w.host_key = std::move(host_key);
  w.pid = pid;
  w.proc_start = std::move(start);
  w.age_ms = age;
  return w;
}

const queue::host_identity here{"vm", "vm|boot-1|pid:[1]"};

std::function<std::string(std::int64_t)> running(std::map<std::int64_t, std::string> procs) {
  return [procs = std::move(procs)](std::int64_t pid) {
    auto it = procs.find(pid);
    return it == procs.end() ? std::string() : it->second;
  };
}

TEST(liveness, a_fresh_worker_whose_process_runs_is_alive) {
  auto v = queue::judge_worker(worker(here.host_key, 10, "500", 1'000), here, 20'000, running({{10, "500"}}));
  EXPECT_EQ(v.state, liveness_state::alive);
  EXPECT_FALSE(v.dead());
}

TEST(liveness, on_this_host_a_vanished_process_is_dead_at_once_whatever_its_heartbeat) {
  auto v = queue::judge_worker(worker(here.host_key, 10, "500", 100), here, 20'000, running({}));
  EXPECT_EQ(v.state, liveness_state::dead_process);
  EXPECT_TRUE(v.dead());
  EXPECT_NE(v.reason.find("process 10 on vm is gone"), std::string::npos) << v.reason;
}

TEST(liveness, a_reused_pid_is_another_process) {
  auto v = queue::judge_worker(worker(here.host_key, 10, "500", 100), here, 20'000, running({{10, "777"}}));
  EXPECT_EQ(v.state, liveness_state::dead_process);
  EXPECT_NE(v.reason.find("another process"), std::string::npos) << v.reason;
}

TEST(liveness, on_another_host_only_the_heartbeat_age_counts) {
  // The same pid does not run here, but the worker lives on another host (or pid namespace).
  for (const char* other : {"vm2|boot-1|pid:[1]", "vm|boot-2|pid:[1]", "vm|boot-1|pid:[2]"}) {
    auto fresh = queue::judge_worker(worker(other, 10, "500", 19'000), here, 20'000, running({}));
    EXPECT_EQ(fresh.state, liveness_state::alive) << other;
    auto stale = queue::judge_worker(worker(other, 10, "500", 25'000), here, 20'000, running({}));
    EXPECT_EQ(stale.state, liveness_state::dead_heartbeat) << other;
    EXPECT_NE(stale.reason.find("stopped heartbeating 25 s ago"), std::string::npos) << stale.reason;
  }
}

TEST(liveness, a_paused_process_on_this_host_is_dead_by_age) {
  // SIGSTOP: the pid runs (same start time) but beats no more.
  auto v = queue::judge_worker(worker(here.host_key, 10, "500", 21'000), here, 20'000, running({{10, "500"}}));
  EXPECT_EQ(v.state, liveness_state::dead_heartbeat);
}

TEST(liveness, a_declared_dead_worker_stays_dead) {
  auto w = worker(here.host_key, 10, "500", 1);
  w.dead_at = 5;
  w.dead_reason = "stopped";
  auto v = queue::judge_worker(w, here, 20'000, running({{10, "500"}}));
  EXPECT_EQ(v.state, liveness_state::declared_dead);
  EXPECT_FALSE(v.dead());  // nothing left to release
}

TEST(liveness, this_process_is_found_running_with_its_own_start_time) {
  const auto mine = queue::process_start_of(getpid());
  ASSERT_FALSE(mine.empty());
  EXPECT_EQ(queue::process_start_of(getpid()), mine);
  EXPECT_EQ(queue::process_start_of(0), "");
  EXPECT_EQ(queue::process_start_of(-1), "");
  EXPECT_FALSE(queue::this_host().host_key.empty());
  EXPECT_NE(queue::this_host().host_key.find(queue::this_host().host), std::string::npos);
}

TEST(fair_share, a_lone_worker_takes_everything) {
  EXPECT_EQ(queue::fair_share(12, 0, 0, 1, 16), 12);
  EXPECT_EQ(queue::fair_share(12, 0, 0, 1, 5), 5);  // never more than its free slots
}

TEST(fair_share, two_workers_split_a_twelve_child_run) {
  // The first to look takes half; the run's rest is left for the other.
  EXPECT_EQ(queue::fair_share(12, 0, 0, 2, 16), 6);
  // Its next look: it runs 6 of 12, its share is full.
  EXPECT_EQ(queue::fair_share(6, 6, 6, 2, 10), 0);
  // The other one's look: the other half.
  EXPECT_EQ(queue::fair_share(6, 6, 0, 2, 16), 6);
  // Three workers: 4 each.
  EXPECT_EQ(queue::fair_share(12, 0, 0, 3, 16), 4);
}

TEST(fair_share, a_worker_running_none_always_gets_one_so_nothing_waits_on_a_peer) {
  // One waiting child, two workers: ceil(1/2) = 1.
  EXPECT_EQ(queue::fair_share(1, 0, 0, 2, 16), 1);
  // A busy peer holds many: this idle worker still takes its share and at least one.
  EXPECT_EQ(queue::fair_share(2, 30, 0, 2, 16), 2);
  EXPECT_EQ(queue::fair_share(0, 30, 0, 2, 16), 0);  // nothing waits
}

TEST(fair_share, a_peer_whose_slots_are_full_leaves_the_rest_to_this_one) {
  // This worker runs 6, the peer runs 16 other jobs: 6 more wait. Share = ceil(28/2) - 6 = 8 → 6.
  EXPECT_EQ(queue::fair_share(6, 22, 6, 2, 10), 6);
}

}  // namespace

namespace {

TEST(liveness, state_names_are_the_workers_lists_words) {
  EXPECT_STREQ(queue::liveness_state_name(liveness_state::alive), "alive");
  EXPECT_STREQ(queue::liveness_state_name(liveness_state::dead_process), "dead (being reclaimed)");
  EXPECT_STREQ(queue::liveness_state_name(liveness_state::dead_heartbeat), "dead (being reclaimed)");
  EXPECT_STREQ(queue::liveness_state_name(liveness_state::declared_dead), "dead");
}

}  // namespace
