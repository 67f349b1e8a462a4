// Enqueueing inside a module's catalog transaction (enqueue_in) and waking the lanes of what it
// created once the transaction commits (queue_service::jobs_created).
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/store/catalog.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <map>
#include <memory>

using namespace certfleet;
using namespace certfleet::queue;
using testbed::run_sync;

namespace {

enqueue_request req(std::string project, std::string_view type, std::string payload = "{}") {
  enqueue_request r;
  r.project_id = std::move(project);
  r.type = std::string(type);
  r.payload = std::move(payload);
  return r;
}

class tx_enqueue : public ::testing::Test {
 protected:
  void SetUp() override {
    st = std::move(*store::open_sqlite({dir.file("q.db"), 1, 5000, false}));
    project = run_sync(st->projects().ensure("default", clock.now_ms()))->first.id;
    q = std::make_unique<queue_service>(*st, handlers, clock);
    q->on_enqueued = [this](std::string_view lane) { ++woken[std::string(lane)]; };
  }
  std::int64_t stored() {
    store::job_filter f;
    f.project_id = project;
    return run_sync(st->jobs().list(f))->total;
  }

  testbed::temp_dir dir;
  manual_clock clock;
  std::unique_ptr<store::store> st;
  handler_registry handlers;
  std::unique_ptr<queue_service> q;
  std::string project;
  std::map<std::string, int> woken;
};

}  // namespace

TEST_F(tx_enqueue, jobs_take_the_table_lane_and_each_created_lane_is_woken_once) {
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  const auto now = clock.now_ms();
  const std::string p = project;
  store::tx_fn fn = [created, now, p](store::catalog_tx& tx) -> result<void> {
    for (int i = 0; i < 2; ++i) {
      enqueue_request r = req(p, job_names::distribution_execute);
      r.idempotency_key = "run:" + std::to_string(i);
      auto e = enqueue_in(tx.jobs(), r, now);
      if (!e) return std::move(e).error();
      created->push_back(*e);
    }
    enqueue_request n = req(p, job_names::notification_send);
    n.idempotency_key = "run:0";  // the same key as a distribution job: one key per project
    auto e = enqueue_in(tx.jobs(), n, now);
    if (!e) return std::move(e).error();
    created->push_back(*e);
    return {};
  };
  ASSERT_TRUE(run_sync(st->catalog().transact(fn)));
  ASSERT_EQ(created->size(), 3u);
  EXPECT_EQ((*created)[0].job.lane, "dist");
  EXPECT_EQ((*created)[0].job.max_attempts, 1);
  EXPECT_EQ((*created)[1].job.lane, "dist");
  EXPECT_FALSE((*created)[2].created) << "the key named the first job";
  EXPECT_EQ((*created)[2].job.id, (*created)[0].job.id);
  EXPECT_TRUE(woken.empty()) << "nothing is woken before the caller says the transaction committed";
  q->jobs_created(*created);
  EXPECT_EQ(woken, (std::map<std::string, int>{{"dist", 1}}));

  // Nothing created (a replay of the same keys): no lane is woken.
  woken.clear();
  created->clear();
  ASSERT_TRUE(run_sync(st->catalog().transact(fn)));
  q->jobs_created(*created);
  EXPECT_TRUE(woken.empty());
  EXPECT_EQ(stored(), 2);
}

TEST_F(tx_enqueue, a_refused_request_is_the_transactions_error_and_rolls_it_back) {
  const auto now = clock.now_ms();
  const std::string p = project;
  store::tx_fn fn = [now, p](store::catalog_tx& tx) -> result<void> {
    auto ok = enqueue_in(tx.jobs(), req(p, job_names::cleanup_dns), now);
    if (!ok) return std::move(ok).error();
    auto bad = enqueue_in(tx.jobs(), req(p, job_names::cleanup_dns, "[]"), now);
    if (!bad) return std::move(bad).error();
    return {};
  };
  auto w = run_sync(st->catalog().transact(fn));
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().field, "payload");
  EXPECT_EQ(stored(), 0) << "the first job rolled back with the transaction";
}
