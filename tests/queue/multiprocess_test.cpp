// Real certfleet processes on one store (the SQLite file; a MongoDB scratch database when
// CERTFLEET_TEST_MONGODB_URI is set): exactly-once claiming, SIGKILL recovery, a stale
// worker refused, idempotent enqueue races. Crash points are armed through the environment.
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/store.hpp"
#include "certfleet/store/workers.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <regex>
#include <set>
#include <thread>

using namespace certfleet;
using namespace std::chrono_literals;
using testbed::run_sync;

namespace {

class multiprocess : public ::testing::Test {
 protected:
  // The CLI never makes a store (issue 35): the processes of a test share one made here.
  void SetUp() override {
    auto [rc, out] = testbed::run_command(cli({"store", "init"}));
    ASSERT_EQ(rc, 0) << out;
  }
  std::vector<std::string> cli(std::vector<std::string> args) {
    return testbed::certfleet_command(dir.path().string(), std::move(args));
  }
  std::unique_ptr<testbed::process> worker(std::map<std::string, std::string> env, std::vector<std::string> sets) {
    std::vector<std::string> args{"serve", "--mode", "worker", "--listen", "127.0.0.1:0"};
    for (auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    auto p = std::make_unique<testbed::process>(cli(args), env, dir.file("worker"));
    auto line = p->wait_for_stdout("serving:", 20s);
    EXPECT_FALSE(line.empty()) << p->stderr_text();
    return p;
  }
  static std::string worker_id(testbed::process& p) {
    std::smatch m;
    auto line = p.wait_for_stdout("worker=", 1s);
    if (std::regex_search(line, m, std::regex("worker=(\\S+)"))) return m[1];
    return {};
  }
  std::string enqueue(const std::string& payload) {
    auto [rc, out] = testbed::run_command(cli({"jobs", "enqueue", "--type", "noop", "--payload", payload}));
    EXPECT_EQ(rc, 0) << out;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex("\"id\":\"([0-9a-f]{24})\"")));
    return m[1];
  }
  std::unique_ptr<store::store> open() {
    // The store the processes share: the SQLite file, or the MongoDB scratch database when
    // CERTFLEET_TEST_MONGODB_URI is set.
    if (auto uri = testbed::test_store_uri(dir.path().string()); !uri.empty()) {
      store::mongodb_options o;
      o.uri = uri;
      o.change_stream = false;
      auto s = store::open_mongodb(o);
      if (!s) throw std::runtime_error(s.error().message);
      return std::move(*s);
    }
    auto s = store::open_sqlite({dir.file("certfleet.db"), 1, 10'000, false});
    if (!s) throw std::runtime_error(s.error().message);
    return std::move(*s);
  }
  // SIGSTOP between the worker's write transactions. A SQLite process stopped inside one keeps the
  // file's write lock, and every other process then waits on it past its busy timeout (the next
  // worker cannot even open the store): that is SQLite's nature, not the liveness these tests are
  // about. Stopped, the worker cannot take the lock, so a free lock now stays free.
  void stop_between_writes(testbed::process& p) {
    if (!testbed::test_store_uri(dir.path().string()).empty()) {
      p.signal(SIGSTOP);  // MongoDB: no file lock
      return;
    }
    const std::string probe = "sqlite3 -cmd '.timeout 50' '" + dir.file("certfleet.db") +
                              "' 'BEGIN IMMEDIATE; ROLLBACK;' >/dev/null 2>&1";
    for (int i = 0; i < 100; ++i) {
      p.signal(SIGSTOP);
      if (std::system(probe.c_str()) == 0) return;
      p.signal(SIGCONT);
      std::this_thread::sleep_for(std::chrono::milliseconds(3 + i % 7));
    }
    ADD_FAILURE() << "the worker held the store's write lock at each of 100 tries";
  }
  store::job_record get(store::store& s, const std::string& id) {
    auto p = run_sync(s.projects().find_by_name("default"));
    return *run_sync(s.jobs().get(p->id, id));
  }
  store::job_record wait_status(store::store& s, const std::string& id, store::job_status want,
                                std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto j = get(s, id);
      if (j.status == want || std::chrono::steady_clock::now() > deadline) return j;
      std::this_thread::sleep_for(20ms);
    }
  }
  testbed::temp_dir dir;
};

TEST_F(multiprocess, three_workers_claim_20000_jobs_and_each_runs_exactly_once) {
  constexpr int n = 20'000;
  // Workers first, then the jobs: all three are polling when the work arrives (a worker started
  // alone in front of a full queue can finish it before the others are up). Each job sleeps 5 ms:
  // with instant jobs one process can take every claim in a row (SQLite's busy handler sleeps the
  // waiters while the holder re-takes the lock), and the sharing check below would be luck. With
  // some work, a worker whose 16 slots are full stops claiming and the others get their turn.
  std::vector<std::unique_ptr<testbed::process>> workers;
  for (int i = 0; i < 3; ++i)
    workers.push_back(worker({}, {"worker_main_concurrency=16", "worker_poll_ms=10", "lease_ms=60000"}));
  auto [rc, out] = testbed::run_command(
      cli({"jobs", "enqueue", "--type", "noop", "--payload", R"({"ms":5})", "--count", std::to_string(n)}));
  ASSERT_EQ(rc, 0) << out;
  auto s = open();
  auto project = run_sync(s->projects().find_by_name("default"))->id;
  auto deadline = std::chrono::steady_clock::now() + 180s;
  std::int64_t done = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    done = run_sync(s->jobs().list({project, store::job_status::completed, "", 1, 1}))->total;
    if (done == n) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(done, n);
  for (auto& w : workers) w->signal(SIGTERM);
  for (auto& w : workers) EXPECT_EQ(w->wait(20s), 0) << w->stderr_text();

  auto all = run_sync(s->jobs().list({project, std::nullopt, "", 1, n + 10}));
  ASSERT_EQ(all->total, n);
  std::set<std::string> by;
  for (const auto& j : all->items) {
    ASSERT_EQ(j.status, store::job_status::completed) << j.id;
    ASSERT_EQ(j.attempts, 1) << j.id;
    ASSERT_EQ(j.fence, 1) << j.id << " was claimed more than once";
    by.insert(j.locked_by);
  }
  EXPECT_GE(by.size(), 2u) << "the work was shared between processes";
}

TEST_F(multiprocess, a_worker_killed_mid_job_loses_nothing_the_job_is_reclaimed_after_its_lease) {
  auto id = enqueue(R"({"ms":200})");
  auto a = std::make_unique<testbed::process>(
      cli({"serve", "--mode", "worker", "--listen", "127.0.0.1:0", "--set", "lease_ms=2000", "--set", "worker_poll_ms=20"}),
      std::map<std::string, std::string>{{"CERTFLEET_CRASH_AT", "job_started"}}, dir.file("a"));
  EXPECT_EQ(a->wait(20s), 128 + SIGKILL) << a->stderr_text();
  auto s = open();
  auto mid = get(*s, id);
  EXPECT_EQ(mid.status, store::job_status::active);
  EXPECT_EQ(mid.attempts, 1);

  auto b = worker({}, {"lease_ms=2000", "worker_poll_ms=20"});
  auto t0 = std::chrono::steady_clock::now();
  auto j = wait_status(*s, id, store::job_status::completed, 20s);
  ASSERT_EQ(j.status, store::job_status::completed) << b->stderr_text();
  EXPECT_EQ(j.attempts, 2);
  EXPECT_EQ(j.fence, 2);
  EXPECT_EQ(j.locked_by, worker_id(*b));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  b->signal(SIGTERM);
  EXPECT_EQ(b->wait(20s), 0);
}

// A SIGKILLed worker's job does not stay "active" while the survivors are busy: their reaper
// (every lease/2) puts it back to pending, counted in certfleet_worker_reaped_total.
TEST_F(multiprocess, a_dead_workers_job_goes_back_to_pending_while_the_survivor_is_busy) {
  auto lost = enqueue(R"({"ms":200})");
  auto a = std::make_unique<testbed::process>(
      cli({"serve", "--mode", "worker", "--listen", "127.0.0.1:0", "--set", "lease_ms=2000", "--set", "worker_poll_ms=20"}),
      std::map<std::string, std::string>{{"CERTFLEET_CRASH_AT", "job_started"}}, dir.file("a"));
  EXPECT_EQ(a->wait(20s), 128 + SIGKILL) << a->stderr_text();
  // The survivor's one slot is taken by a long job (enqueued after the crash, so it is first in
  // line: the lost job's place is its lease's end).
  auto busy = enqueue(R"({"ms":30000})");
  auto b = worker({}, {"lease_ms=2000", "worker_poll_ms=20", "worker_main_concurrency=1"});
  auto s = open();
  ASSERT_EQ(wait_status(*s, busy, store::job_status::active, 10s).status, store::job_status::active);
  auto j = wait_status(*s, lost, store::job_status::pending, 10s);
  ASSERT_EQ(j.status, store::job_status::pending) << "still " << store::to_string(j.status) << " after 10 s";
  EXPECT_EQ(j.attempts, 1);
  EXPECT_EQ(j.fence, 1);
  EXPECT_EQ(get(*s, busy).status, store::job_status::active);  // the survivor never claimed it
  std::smatch m;
  auto line = b->wait_for_stdout("listen=", 1s);
  ASSERT_TRUE(std::regex_search(line, m, std::regex("listen=127\\.0\\.0\\.1:(\\d+)"))) << line;
  testbed::http_client http("127.0.0.1", static_cast<unsigned short>(std::stoi(m[1])));
  auto metrics = http.get("/metrics");
  ASSERT_EQ(metrics.status, 200) << metrics.body;
  // The lease's reaper put it back, or — when the killed worker had registered its heartbeat
  // before it died — the worker registry's watcher did, at once (issue 34).
  ASSERT_TRUE(std::regex_search(metrics.body, m, std::regex("\ncertfleet_worker_reaped_total (\\d+)")))
      << metrics.body;
  const int reaped = std::stoi(m[1]);
  ASSERT_TRUE(std::regex_search(metrics.body, m, std::regex("\ncertfleet_jobs_reclaimed_total (\\d+)")))
      << metrics.body;
  EXPECT_GE(reaped + std::stoi(m[1]), 1);
  b->signal(SIGKILL);
  b->wait(20s);
}

// Issue 34: a worker that dies while holding a job (lease 5 min, the default) costs seconds, not
// the lease: a peer on the same host sees its process gone and releases the job at once.
TEST_F(multiprocess, a_killed_workers_job_is_released_in_seconds_not_at_lease_expiry) {
  auto s = open();
  const std::vector<std::string> fast{"worker_poll_ms=20", "worker_heartbeat_ms=500"};
  auto a = worker({}, fast);
  const auto a_id = worker_id(*a);
  // A is registered before it takes the job (its heartbeat is written at start).
  auto deadline = std::chrono::steady_clock::now() + 10s;
  bool registered = false;
  while (!registered && std::chrono::steady_clock::now() < deadline) {
    auto all = run_sync(s->workers().list_workers(0));
    for (const auto& w : *all) registered = registered || w.id == a_id;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(registered) << a_id;
  auto id = enqueue(R"({"ms":60000})");
  ASSERT_EQ(wait_status(*s, id, store::job_status::active, 10s).locked_by, a_id);
  a->signal(SIGKILL);
  EXPECT_EQ(a->wait(20s), 128 + SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  auto b = worker({}, fast);
  const auto b_id = worker_id(*b);
  // Released: pending again, or already claimed by B (its liveness monitor releases A's job and
  // its claim loop may take it before a poll here sees it pending: seen once under ASan).
  auto back = get(*s, id);
  for (auto until = killed + 15s; back.locked_by == a_id && std::chrono::steady_clock::now() < until; back = get(*s, id))
    std::this_thread::sleep_for(20ms);
  EXPECT_NE(back.locked_by, a_id);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s) << "lease_ms is 300000: the registry released it";
  // The lost attempt stays counted: 1 while it waits, 2 once B has claimed it.
  if (back.status == store::job_status::pending) {
    EXPECT_EQ(back.attempts, 1);
  } else {
    EXPECT_EQ(back.locked_by, b_id);
    EXPECT_EQ(back.attempts, 2);
  }
  // The registry says who died, why and what it gave back.
  auto all = run_sync(s->workers().list_workers(0));
  bool seen = false;
  for (const auto& w : *all) {
    if (w.id != a_id) continue;
    seen = true;
    EXPECT_GT(w.dead_at, 0);
    EXPECT_NE(w.dead_reason.find("is gone"), std::string::npos) << w.dead_reason;
    EXPECT_EQ(w.released_jobs, 1);
  }
  EXPECT_TRUE(seen);
  b->signal(SIGTERM);
  EXPECT_EQ(b->wait(20s), 0) << b->stderr_text();
}

// Issue 34: a worker paused (SIGSTOP) past worker_dead_after_ms is dead by heartbeat age though its
// pid runs: its job goes to a peer; woken (SIGCONT), its late writes are refused and it learns it
// was declared dead.
TEST_F(multiprocess, a_paused_worker_past_the_liveness_window_loses_its_job_and_its_late_writes_are_refused) {
  auto s = open();
  const std::vector<std::string> fast{"worker_poll_ms=20", "worker_heartbeat_ms=500", "worker_dead_after_ms=3000"};
  auto a = worker({}, fast);
  const auto a_id = worker_id(*a);
  auto id = enqueue(R"({"ms":4000})");
  ASSERT_EQ(wait_status(*s, id, store::job_status::active, 10s).locked_by, a_id);
  stop_between_writes(*a);
  const auto paused = std::chrono::steady_clock::now();
  auto b = worker({}, fast);
  const auto b_id = worker_id(*b);
  auto j = wait_status(*s, id, store::job_status::completed, 30s);
  ASSERT_EQ(j.status, store::job_status::completed) << b->stderr_text();
  EXPECT_EQ(j.locked_by, b_id);
  EXPECT_EQ(j.attempts, 2);
  EXPECT_EQ(j.fence, 2);
  // Released well before the 5-minute lease: about dead_after (3 s) + the job (4 s).
  EXPECT_LT(std::chrono::steady_clock::now() - paused, 20s);
  const auto completed_at = j.completed_at;
  a->signal(SIGCONT);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline &&
         a->stderr_text().find("declared dead by a peer") == std::string::npos)
    std::this_thread::sleep_for(50ms);
  EXPECT_NE(a->stderr_text().find("declared dead by a peer"), std::string::npos) << a->stderr_text();
  // Woken, it claims again only under a new id: a job claimed under the dead one would wait out
  // its lease (its finish is refused once the worker learns it was declared dead).
  std::vector<std::string> later;
  for (int i = 0; i < 4; ++i) later.push_back(enqueue(R"({"ms":300})"));
  for (const auto& id2 : later) {
    auto done = wait_status(*s, id2, store::job_status::completed, 20s);
    EXPECT_EQ(done.status, store::job_status::completed) << id2 << " held by " << done.locked_by;
    EXPECT_NE(done.locked_by, a_id);
  }
  // Give its handler time to end and try to store its result: refused.
  std::this_thread::sleep_for(4500ms);
  auto after = get(*s, id);
  EXPECT_EQ(after.status, store::job_status::completed);
  EXPECT_EQ(after.locked_by, b_id);
  EXPECT_EQ(after.completed_at, completed_at);
  EXPECT_EQ(after.fence, 2);
  a->signal(SIGTERM);
  b->signal(SIGTERM);
  EXPECT_EQ(a->wait(20s), 0) << a->stderr_text();
  EXPECT_EQ(b->wait(20s), 0) << b->stderr_text();
}

TEST_F(multiprocess, a_frozen_worker_that_wakes_after_its_lease_is_refused) {
  auto id = enqueue(R"({"ms":1500})");
  auto a = worker({}, {"lease_ms=1000", "worker_poll_ms=20"});
  auto s = open();
  ASSERT_EQ(wait_status(*s, id, store::job_status::active, 10s).status, store::job_status::active);
  stop_between_writes(*a);
  auto b = worker({}, {"lease_ms=5000", "worker_poll_ms=20"});
  auto j = wait_status(*s, id, store::job_status::completed, 20s);
  ASSERT_EQ(j.status, store::job_status::completed);
  EXPECT_EQ(j.fence, 2);
  EXPECT_EQ(j.locked_by, worker_id(*b));
  auto completed_at = j.completed_at;
  a->signal(SIGCONT);
  // The stale worker notices (heartbeat or refused finish) and the job stays as B left it.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline && a->stderr_text().find("lease lost") == std::string::npos &&
         a->stderr_text().find("result refused") == std::string::npos)
    std::this_thread::sleep_for(50ms);
  auto err = a->stderr_text();
  EXPECT_TRUE(err.find("lease lost") != std::string::npos || err.find("result refused") != std::string::npos) << err;
  auto after = get(*s, id);
  EXPECT_EQ(after.status, store::job_status::completed);
  EXPECT_EQ(after.fence, 2);
  EXPECT_EQ(after.completed_at, completed_at);
  EXPECT_EQ(after.locked_by, worker_id(*b));
  a->signal(SIGTERM);
  b->signal(SIGTERM);
  EXPECT_EQ(a->wait(20s), 0);
  EXPECT_EQ(b->wait(20s), 0);
}

TEST_F(multiprocess, sigterm_returns_a_running_job_to_pending_without_spending_an_attempt) {
  auto id = enqueue(R"({"ms":60000})");
  auto a = worker({}, {"worker_poll_ms=20", "shutdown_grace_ms=5000"});
  auto s = open();
  ASSERT_EQ(wait_status(*s, id, store::job_status::active, 10s).status, store::job_status::active);
  a->signal(SIGTERM);
  EXPECT_EQ(a->wait(20s), 0) << a->stderr_text();
  auto j = get(*s, id);
  EXPECT_EQ(j.status, store::job_status::pending);
  EXPECT_EQ(j.attempts, 0);
  EXPECT_EQ(j.fence, 1);
}

TEST_F(multiprocess, idempotent_enqueue_from_two_processes_at_once_creates_one_job) {
  for (int round = 0; round < 8; ++round) {
    auto key = "race-" + std::to_string(round);
    auto args = cli({"jobs", "enqueue", "--type", "noop", "--key", key});
    auto a = std::async(std::launch::async, [&] { return testbed::run_command(args); });
    auto b = std::async(std::launch::async, [&] { return testbed::run_command(args); });
    auto ra = a.get(), rb = b.get();
    ASSERT_EQ(ra.first, 0) << ra.second;
    ASSERT_EQ(rb.first, 0) << rb.second;
    std::smatch ma, mb;
    ASSERT_TRUE(std::regex_search(ra.second, ma, std::regex("\"id\":\"([0-9a-f]{24})\"")));
    ASSERT_TRUE(std::regex_search(rb.second, mb, std::regex("\"id\":\"([0-9a-f]{24})\"")));
    EXPECT_EQ(ma[1], mb[1]);
    bool a_created = ra.second.find("\"created\":true") != std::string::npos;
    bool b_created = rb.second.find("\"created\":true") != std::string::npos;
    EXPECT_NE(a_created, b_created) << "exactly one of the two created it";
  }
  auto s = open();
  auto project = run_sync(s->projects().find_by_name("default"))->id;
  EXPECT_EQ(run_sync(s->jobs().list({project, std::nullopt, "", 1, 100}))->total, 8);
}

TEST_F(multiprocess, bad_config_is_refused_with_the_field_named) {
  auto [rc, out] = testbed::run_command(cli({"serve", "--set", "lease_ms=5"}));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("lease_ms"), std::string::npos) << out;
  std::tie(rc, out) = testbed::run_command(cli({"serve", "--mode", "everything"}));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("mode"), std::string::npos) << out;
  std::tie(rc, out) = testbed::run_command(cli({"jobs", "enqueue", "--type", "noop", "--payload", "[]"}));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("payload"), std::string::npos) << out;
}

}  // namespace

namespace {

// Opt-in (CERTFLEET_STRESS=1): workers SIGKILLed at random moments, over and over; no job is
// lost, every job ends completed, and no attempt is counted that was not claimed.
TEST_F(multiprocess, stress_random_sigkill_loses_no_job) {
  if (!std::getenv("CERTFLEET_STRESS")) GTEST_SKIP() << "set CERTFLEET_STRESS=1 to run";
  constexpr int rounds = 30, per_round = 300;
  auto [rc, out] = testbed::run_command(
      cli({"jobs", "enqueue", "--type", "noop", "--payload", R"({"ms":5})", "--count", std::to_string(rounds * per_round)}));
  ASSERT_EQ(rc, 0) << out;
  std::srand(12345);
  auto victim = worker({}, {"lease_ms=1000", "worker_poll_ms=10", "worker_main_concurrency=16"});
  auto steady = worker({}, {"lease_ms=1000", "worker_poll_ms=10", "worker_main_concurrency=16"});
  for (int i = 0; i < rounds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + std::rand() % 200));
    victim->signal(SIGKILL);
    victim->wait(5s);
    victim = worker({}, {"lease_ms=1000", "worker_poll_ms=10", "worker_main_concurrency=16"});
  }
  auto s = open();
  auto project = run_sync(s->projects().find_by_name("default"))->id;
  auto deadline = std::chrono::steady_clock::now() + 300s;
  auto terminal = [&] {
    return run_sync(s->jobs().list({project, store::job_status::completed, "", 1, 1}))->total +
           run_sync(s->jobs().list({project, store::job_status::dead, "", 1, 1}))->total;
  };
  while (std::chrono::steady_clock::now() < deadline && terminal() < rounds * per_round)
    std::this_thread::sleep_for(200ms);
  auto all = run_sync(s->jobs().list({project, std::nullopt, "", 1, rounds * per_round + 1}));
  ASSERT_EQ(all->total, rounds * per_round);
  // The list's counts, kept by each process's writer per commit, agree with the jobs themselves
  // after every kill (a killed writer's uncommitted counts went with its transaction).
  store::status_counts tally{};
  for (const auto& j : all->items) ++tally[static_cast<std::size_t>(j.status)];
  EXPECT_EQ(all->counts, tally);
  for (const auto& j : all->items) {
    ASSERT_EQ(j.attempts, j.fence) << j.id;  // no reset here: every attempt is one claim
    if (j.status == store::job_status::dead) {
      // Killed on every one of its attempts: dead, and saying why.
      ASSERT_EQ(j.error, "lease expired: worker lost");
      ASSERT_EQ(j.attempts, j.max_attempts);
      continue;
    }
    ASSERT_EQ(j.status, store::job_status::completed) << j.id << " " << j.error;
  }
}

}  // namespace
