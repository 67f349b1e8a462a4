// The leader lease and the sweeps, in-process on a real SQLite file, and across real processes.
#include "certfleet/queue/worker.hpp"
#include "certfleet/scheduler/scheduler.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/maintenance.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <thread>

using namespace certfleet;
using namespace std::chrono_literals;
using testbed::run_sync;

namespace {

constexpr time_ms t0 = 1'700'000'000'000;

class lease_test : public ::testing::Test {
 protected:
  void SetUp() override { st = std::move(*store::open_sqlite({dir.file("s.db"), 1, 5000, false})); }
  store::leader_lease acquire(const std::string& who, time_ms now, time_ms ttl = 1000) {
    return *run_sync(st->leases().acquire("scheduler", who, now, ttl));
  }
  testbed::temp_dir dir;
  std::unique_ptr<store::store> st;
};

TEST_F(lease_test, one_holder_renewals_keep_the_epoch_takeover_bumps_it) {
  auto a = acquire("a", t0);
  EXPECT_TRUE(a.held);
  EXPECT_EQ(a.epoch, 1);
  auto b = acquire("b", t0 + 500);
  EXPECT_FALSE(b.held);
  EXPECT_EQ(b.holder, "a");
  auto a2 = acquire("a", t0 + 900);  // renewal
  EXPECT_TRUE(a2.held);
  EXPECT_EQ(a2.epoch, 1);
  EXPECT_EQ(a2.expires_at, t0 + 1900);
  EXPECT_FALSE(acquire("b", t0 + 1899).held);
  auto b2 = acquire("b", t0 + 1900);  // a stopped renewing: b takes over
  EXPECT_TRUE(b2.held);
  EXPECT_EQ(b2.epoch, 2);
  auto a3 = acquire("a", t0 + 1950);  // the deposed leader wakes: refused
  EXPECT_FALSE(a3.held);
  EXPECT_EQ(a3.holder, "b");
}

TEST_F(lease_test, release_lets_another_take_over_at_once_but_only_by_the_holder) {
  auto a = acquire("a", t0, 60'000);
  ASSERT_TRUE(run_sync(st->leases().release("scheduler", "b", a.epoch)));  // not b's: no effect
  EXPECT_FALSE(acquire("b", t0 + 1).held);
  ASSERT_TRUE(run_sync(st->leases().release("scheduler", "a", a.epoch)));
  auto b = acquire("b", t0 + 2);
  EXPECT_TRUE(b.held);
  EXPECT_EQ(b.epoch, 2);
}

TEST_F(lease_test, retention_deletes_old_completed_and_cancelled_jobs_with_their_logs_only) {
  auto project = run_sync(st->projects().ensure("default", t0))->first.id;
  auto now = system_clock().now_ms();
  auto mk = [&](const char* type) {
    store::new_job j;
    j.project_id = project;
    j.type = type;
    j.lane = "main";
    j.max_attempts = 1;
    return run_sync(st->jobs().enqueue(j, now))->job;
  };
  auto done_old = mk("noop");
  auto dead_old = mk("noop");
  auto cancelled_old = mk("noop");
  auto claimed = run_sync(st->jobs().claim("main", "w", now, 60'000, 10));
  ASSERT_EQ(claimed->size(), 3u);
  ASSERT_TRUE(run_sync(st->jobs().append_log(done_old.id, std::nullopt, "info", "x", "", now)));
  std::vector<store::finish_request> f(3);
  for (int i = 0; i < 3; ++i) {
    f[i].lease = {(*claimed)[i].id, (*claimed)[i].fence};
    f[i].worker_id = "w";
  }
  auto kind_of = [&](const std::string& id) {
    return id == done_old.id ? store::finish_kind::completed
           : id == dead_old.id ? store::finish_kind::dead : store::finish_kind::cancelled;
  };
  for (auto& r : f) r.kind = kind_of(r.lease.id);
  ASSERT_TRUE(run_sync(st->jobs().finish(f, now)));
  auto recent = mk("noop");
  // Finished at `now`: a cutoff before it deletes nothing; after it, the completed and
  // cancelled ones only.
  EXPECT_EQ(*run_sync(st->maintenance().purge_finished(now - 1, 100)), 0);
  EXPECT_EQ(*run_sync(st->maintenance().purge_finished(now + 2000, 100)), 2);
  EXPECT_TRUE(run_sync(st->jobs().get(project, done_old.id)).error().is(errc::not_found));
  EXPECT_TRUE(run_sync(st->jobs().get(project, cancelled_old.id)).error().is(errc::not_found));
  EXPECT_EQ(run_sync(st->jobs().get(project, dead_old.id))->status, store::job_status::dead);
  EXPECT_EQ(run_sync(st->jobs().get(project, recent.id))->status, store::job_status::pending);
  EXPECT_TRUE(run_sync(st->jobs().read_logs(done_old.id, 0, 10))->lines.empty());
}

TEST_F(lease_test, retention_deletes_audit_entries_written_before_the_cutoff_oldest_first) {
  auto project = run_sync(st->projects().ensure("default", t0))->first.id;
  for (int i = 0; i < 7; ++i) {
    store::audit_entry e;
    e.project_id = project;
    e.actor = "cli";
    e.action = "job.enqueue";
    e.object = "job/" + std::to_string(i);
    e.outcome = "ok";
    e.at = t0 + i * 1000;
    ASSERT_TRUE(run_sync(st->auth().append_audit(e)));
  }
  EXPECT_EQ(*run_sync(st->maintenance().purge_audit(t0, 100)), 0) << "nothing before the first entry";
  // Bounded: at most `limit` per call, oldest first.
  EXPECT_EQ(*run_sync(st->maintenance().purge_audit(t0 + 3500, 2)), 2);
  EXPECT_EQ(*run_sync(st->maintenance().purge_audit(t0 + 3500, 100)), 2);
  EXPECT_EQ(*run_sync(st->maintenance().purge_audit(t0 + 3500, 100)), 0);
  auto left = run_sync(st->auth().list_audit(project, 1, 50));
  ASSERT_TRUE(left);
  ASSERT_EQ(left->items.size(), 3u);
  for (const auto& e : left->items) EXPECT_GE(e.at, t0 + 4000) << e.object;
}

TEST_F(lease_test, backup_is_a_consistent_copy_and_never_overwrites) {
  auto project = run_sync(st->projects().ensure("default", t0))->first.id;
  store::new_job j;
  j.project_id = project;
  j.type = "noop";
  j.lane = "main";
  auto id = run_sync(st->jobs().enqueue(j, t0))->job.id;
  auto path = dir.file("backup.db");
  ASSERT_TRUE(run_sync(st->maintenance().backup_to(path)));
  auto again = run_sync(st->maintenance().backup_to(path));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().field, "to");
  auto copy = store::open_sqlite({path, 1, 5000, false});
  ASSERT_TRUE(copy);
  EXPECT_EQ(run_sync((*copy)->jobs().get(project, id))->status, store::job_status::pending);
}

class scheduler_processes : public ::testing::Test {
 protected:
  std::vector<std::string> cli(std::vector<std::string> args) {
    return testbed::certfleet_command(dir.path().string(), std::move(args));
  }
  std::unique_ptr<testbed::process> start(const std::string& mode, std::vector<std::string> sets) {
    std::vector<std::string> args{"serve", "--mode", mode, "--listen", "127.0.0.1:0"};
    for (auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    auto p = std::make_unique<testbed::process>(cli(args), std::map<std::string, std::string>{}, dir.file(mode));
    EXPECT_FALSE(p->wait_for_stdout("serving:", 20s).empty()) << p->stderr_text();
    return p;
  }
  static std::string field(testbed::process& p, const std::string& name) {
    std::smatch m;
    auto line = p.wait_for_stdout(name + "=", 1s);
    return std::regex_search(line, m, std::regex(name + "=(\\S+)")) ? std::string(m[1]) : std::string();
  }
  testbed::temp_dir dir;
};

TEST_F(scheduler_processes, three_schedulers_one_sweep_per_cycle_and_takeover_after_sigkill) {
  const std::vector<std::string> sets{"scheduler_interval_ms=1000", "scheduler_lease_ms=1500"};
  std::vector<std::unique_ptr<testbed::process>> s;
  for (int i = 0; i < 3; ++i) s.push_back(start("scheduler", sets));
  auto worker = start("worker", {"worker_poll_ms=20"});
  std::map<std::string, int> by_holder;
  for (int i = 0; i < 3; ++i) by_holder[field(*s[i], "scheduler")] = i;

  auto st = std::move(*store::open_sqlite({dir.file("certfleet.db"), 1, 10'000, false}));
  auto project = run_sync(st->projects().find_by_name("default"))->id;
  auto sweeps = [&] {
    return run_sync(st->jobs().list({project, std::nullopt, "maintenance_sweep", 1, 10'000}))->items;
  };
  std::this_thread::sleep_for(3500ms);
  auto first = sweeps();
  ASSERT_FALSE(first.empty());
  std::set<std::string> leaders;
  for (auto& j : first) leaders.insert(j.triggered_by.substr(std::string("scheduler:").size()));
  ASSERT_EQ(leaders.size(), 1u) << "one leader while nobody dies";
  int leader = by_holder.at(*leaders.begin());
  s[leader]->signal(SIGKILL);
  s[leader]->wait(5s);
  auto killed_at = system_clock().now_ms();
  std::this_thread::sleep_for(4000ms);

  auto all = sweeps();
  std::map<std::string, int> per_key;
  std::set<std::string> after_kill;
  for (auto& j : all) {
    per_key[j.idempotency_key]++;
    if (j.created_at > killed_at + 1500 + 1000)  // past one TTL and one cycle
      after_kill.insert(j.triggered_by);
  }
  for (auto& [key, n] : per_key) EXPECT_EQ(n, 1) << key;  // never twice for one cycle
  ASSERT_FALSE(after_kill.empty()) << "a new leader took over within the TTL";
  EXPECT_EQ(after_kill.count("scheduler:" + *leaders.begin()), 0u);
  // Cycles are contiguous: each cycle from the first to the last has both sweeps.
  std::set<long long> cycles;
  for (auto& [key, n] : per_key)
    if (key.rfind("sweep:retention:", 0) == 0) cycles.insert(std::stoll(key.substr(16)));
  for (auto c : cycles) EXPECT_EQ(per_key.count("sweep:lost_leases:" + std::to_string(c)), 1u) << c;
  EXPECT_LE(*cycles.rbegin() - *cycles.begin() + 1 - static_cast<long long>(cycles.size()), 1)
      << "at most the cycle of the takeover is missing";
  // The worker ran them; what they did is in their logs.
  int completed = 0;
  for (auto& j : sweeps()) completed += j.status == store::job_status::completed;
  EXPECT_GT(completed, 0);
  auto done = std::find_if(all.begin(), all.end(), [](auto& j) { return j.status == store::job_status::completed; });
  if (done != all.end()) {
    auto logs = run_sync(st->jobs().read_logs(done->id, 0, 10));
    ASSERT_FALSE(logs->lines.empty());
  }
  for (auto& p : s)
    if (p->running()) p->signal(SIGTERM);
  worker->signal(SIGTERM);
  for (auto& p : s)
    if (p->running()) EXPECT_EQ(p->wait(20s), 0);
  EXPECT_EQ(worker->wait(20s), 0);
}

TEST_F(scheduler_processes, a_dead_lease_job_is_reaped_by_the_sweep) {
  auto st = std::move(*store::open_sqlite({dir.file("certfleet.db"), 1, 10'000, false}));
  auto project = run_sync(st->projects().ensure("default", system_clock().now_ms()))->first.id;
  store::new_job j;
  j.project_id = project;
  j.type = "noop";
  j.lane = "main";
  j.max_attempts = 1;
  auto now = system_clock().now_ms();
  auto id = run_sync(st->jobs().enqueue(j, now))->job.id;
  ASSERT_EQ(run_sync(st->jobs().claim("main", "ghost", now, 500, 1))->size(), 1u);  // a worker that died
  std::this_thread::sleep_for(600ms);
  // The scheduler's lost_leases sweep, run by an `all` process (its own worker's reaper would
  // find it too; either way, exactly one terminal transition happens).
  auto all = start("all", {"scheduler_interval_ms=1000", "scheduler_lease_ms=1500", "worker_poll_ms=20", "lease_ms=1000"});
  auto deadline = std::chrono::steady_clock::now() + 10s;
  store::job_record rec;
  do {
    rec = *run_sync(st->jobs().get(project, id));
    std::this_thread::sleep_for(50ms);
  } while (rec.status != store::job_status::dead && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(rec.status, store::job_status::dead);
  EXPECT_EQ(rec.error, "lease expired: worker lost");
  all->signal(SIGTERM);
  EXPECT_EQ(all->wait(20s), 0);
}

TEST_F(scheduler_processes, backup_and_restore_through_the_cli) {
  ASSERT_EQ(testbed::run_command(cli({"store", "init"})).first, 0);
  auto [rc, out] = testbed::run_command(cli({"jobs", "enqueue", "--type", "noop"}));
  ASSERT_EQ(rc, 0) << out;
  auto backup = dir.file("b.db");
  ::umask(022);  // a permissive umask: the backup is 0600 all the same (it holds every sealed secret)
  std::tie(rc, out) = testbed::run_command(cli({"backup", "--to", backup}));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(std::filesystem::status(backup).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::tie(rc, out) = testbed::run_command(cli({"backup", "--to", backup}));  // never overwrites
  EXPECT_NE(rc, 0) << out;
  EXPECT_GT(std::filesystem::file_size(backup), 0u);
  std::tie(rc, out) = testbed::run_command(cli({"jobs", "enqueue", "--type", "noop"}));  // after the backup
  std::tie(rc, out) = testbed::run_command(cli({"restore", "--from", backup}));
  EXPECT_EQ(rc, 4) << out;  // a store exists: refused without --force
  EXPECT_NE(out.find("--force"), std::string::npos);
  std::tie(rc, out) = testbed::run_command(cli({"restore", "--from", dir.file("missing.db"), "--force"}));
  EXPECT_EQ(rc, 2) << out;
  std::tie(rc, out) = testbed::run_command(cli({"restore", "--from", backup, "--force"}));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = testbed::run_command(cli({"jobs", "list", "--json"}));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"total\":1"), std::string::npos) << out;  // the state at the backup
}

}  // namespace
