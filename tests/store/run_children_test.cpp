// A distribution run's children are found by the key prefix the caller gives (the distribution
// module spells its keys; the store only matches a prefix, as one index range).
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace certfleet;
using namespace certfleet::store;
using testbed::run_sync;

namespace {

class run_children : public ::testing::Test {
 protected:
  void SetUp() override {
    st = std::move(*open_sqlite({dir.file("c.db"), 1, 5000, false}));
    project = run_sync(st->projects().ensure("default", now))->first.id;
    other = run_sync(st->projects().ensure("other", now))->first.id;
    tx_fn put = [this](catalog_tx& tx) -> result<void> {
      distribution_record d;
      d.project_id = project;
      d.name = "d";
      d.certificate_id = "cert";
      d.created_at = now;
      auto r = tx.insert_distribution(d);
      if (!r) return std::move(r).error();
      dist = r->id;
      return {};
    };
    EXPECT_TRUE(run_sync(st->catalog().transact(std::move(put))));
  }
  void TearDown() override { st->close(); }

  std::string enqueue(const std::string& key, std::string project_id = {}) {
    new_job j;
    j.project_id = project_id.empty() ? project : project_id;
    j.type = "distribution_execute";
    j.lane = "dist";
    j.idempotency_key = key;
    auto r = run_sync(st->jobs().enqueue(j, now));
    EXPECT_TRUE(r);
    return r->job.id;
  }
  std::set<std::string> children(const std::string& prefix) {
    std::set<std::string> keys;
    read_fn fn = [&](catalog_read& rd) -> result<void> {
      auto kids = rd.children_of(dist, prefix);
      if (!kids) return std::move(kids).error();
      for (const auto& k : *kids) keys.insert(k.idempotency_key);
      return {};
    };
    EXPECT_TRUE(run_sync(st->catalog().read(std::move(fn))));
    return keys;
  }

  static constexpr time_ms now = 1'700'000'000'000;
  testbed::temp_dir dir;
  std::unique_ptr<certfleet::store::store> st;
  std::string project, other, dist;
};

}  // namespace

TEST_F(run_children, exactly_the_jobs_of_the_distributions_project_with_the_prefix) {
  const std::string run1 = "dist:" + dist + ":1:";
  for (const auto& k : {run1 + "normal", run1 + "batch:2", "dist:" + dist + ":10:normal", "dist:" + dist + ":2:normal",
                        std::string("dist:other:1:normal"), "notify:" + dist + ":1:c", run1.substr(0, run1.size() - 1)})
    enqueue(k);
  enqueue(run1 + "batch:3", other);  // another project's key: not this distribution's job
  EXPECT_EQ(children(run1), (std::set<std::string>{run1 + "normal", run1 + "batch:2"}));

  // A prefix ending in 0xff bytes still is one range: up to (not including) the key after it.
  enqueue("z\xff\x01");
  enqueue("z\xff\xff");
  enqueue("{");  // 'z' + 1
  EXPECT_EQ(children("z\xff"), (std::set<std::string>{"z\xff\x01", "z\xff\xff"}));
  EXPECT_EQ(children("\xff"), std::set<std::string>{}) << "no upper bound, and nothing there";
}

TEST_F(run_children, the_child_operations_act_on_the_prefix_only) {
  const std::string run1 = "dist:" + dist + ":1:", run10 = "dist:" + dist + ":10:";
  auto a = enqueue(run1 + "batch:1");
  auto b = enqueue(run10 + "batch:1");
  std::vector<job_record> cancelled;
  tx_fn fn = [&](catalog_tx& tx) -> result<void> {
    auto c = tx.cancel_waiting_children(dist, run1, now + 1);
    if (!c) return std::move(c).error();
    cancelled = std::move(*c);
    return {};
  };
  ASSERT_TRUE(run_sync(st->catalog().transact(std::move(fn))));
  ASSERT_EQ(cancelled.size(), 1u);
  EXPECT_EQ(cancelled[0].id, a);
  EXPECT_EQ(run_sync(st->jobs().get(project, a))->status, job_status::cancelled);
  EXPECT_EQ(run_sync(st->jobs().get(project, b))->status, job_status::pending) << "run 10 is another run";
}
