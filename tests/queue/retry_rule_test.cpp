// The job-type table's named types and its driven_by_distribution flag, and the retry rule the
// queue reads from it: a distribution's job is refused, in its owner's words when it gave them.
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <set>

using namespace certfleet;
using namespace certfleet::queue;
using testbed::run_sync;

TEST(job_types, named_types_are_the_rows_of_the_table) {
  namespace n = job_names;
  const std::set<std::string_view> named{
      n::issue_certificate,        n::renew_certificate,       n::validate_manual_dns,
      n::cleanup_dns,              n::revoke_certificate,      n::msca_issue_certificate,
      n::msca_renew_certificate,   n::msca_poll_pending,       n::distribution_execute,
      n::distribution_rollback,    n::kek_rotation_orchestrate, n::kek_rotation_collection,
      n::certificate_expiration_check, n::domain_expiration_check, n::revocation_check,
      n::notification_send,        n::discovery_execute,       n::noop,
      n::maintenance_sweep};
  std::set<std::string_view> rows;
  for (const auto& t : all_job_types()) rows.insert(t.name);
  EXPECT_EQ(rows, named);
  EXPECT_EQ(rows.size(), all_job_types().size()) << "a name is in the table twice";
}

TEST(job_types, exactly_the_distribution_run_types_are_driven_by_a_distribution) {
  std::set<std::string_view> driven;
  for (const auto& t : all_job_types())
    if (t.driven_by_distribution) driven.insert(t.name);
  EXPECT_EQ(driven, (std::set<std::string_view>{job_names::distribution_execute, job_names::distribution_rollback}));
  EXPECT_TRUE(driven_by_distribution("distribution_execute"));
  EXPECT_TRUE(driven_by_distribution("distribution_rollback"));
  EXPECT_FALSE(driven_by_distribution("notification.send"));  // has a distribution_id, but is retried alone
  EXPECT_FALSE(driven_by_distribution("noop"));
  EXPECT_FALSE(driven_by_distribution("no_such_type"));
}

namespace {

class retry_rule : public ::testing::Test {
 protected:
  void SetUp() override {
    st = std::move(*store::open_sqlite({dir.file("q.db"), 1, 5000, false}));
    project = run_sync(st->projects().ensure("default", clock.now_ms()))->first.id;
    q = std::make_unique<queue_service>(*st, handlers, clock);
  }
  // A dead job of `type` (one attempt, failed), as a distribution stores its jobs.
  store::job_record dead_job(std::string_view type, std::string_view lane) {
    store::new_job j;
    j.project_id = project;
    j.type = type;
    j.lane = lane;
    j.max_attempts = 1;
    j.distribution_id = "d1";
    auto e = run_sync(st->jobs().enqueue(j, clock.now_ms()));
    EXPECT_TRUE(e);
    auto c = run_sync(st->jobs().claim(std::string(lane), "w", clock.now_ms(), 10'000, 1));
    EXPECT_TRUE(c && c->size() == 1);
    store::finish_request f;
    f.lease = {(*c)[0].id, (*c)[0].fence};
    f.worker_id = "w";
    f.kind = store::finish_kind::failed;
    f.error = "boom";
    auto done = run_sync(st->jobs().finish({f}, clock.now_ms()));
    EXPECT_TRUE(done && (*done)[0]);
    EXPECT_EQ((*done)[0]->status, store::job_status::dead);
    return *(*done)[0];
  }
  static boost::asio::awaitable<outcome> nothing(job_context&) { co_return outcome::ok(); }

  testbed::temp_dir dir;
  manual_clock clock;
  std::unique_ptr<store::store> st;
  handler_registry handlers;
  std::unique_ptr<queue_service> q;
  std::string project;
};

}  // namespace

TEST_F(retry_rule, a_distribution_job_is_refused_in_its_owners_words) {
  handlers.add(std::string(job_names::distribution_execute), nothing, {}, [](const store::job_record& j) {
    return make_error(errc::conflict, "owner says no to " + j.id + " of " + j.distribution_id, "owner_field");
  });
  auto job = dead_job(job_names::distribution_execute, lane_dist);
  auto r = run_sync(q->retry(project, job.id));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::conflict));
  EXPECT_EQ(r.error().message, "owner says no to " + job.id + " of d1");
  EXPECT_EQ(r.error().field, "owner_field");
  EXPECT_EQ(run_sync(st->jobs().get(project, job.id))->status, store::job_status::dead) << "unchanged";
}

TEST_F(retry_rule, without_the_owners_words_the_queue_refuses_without_naming_a_route) {
  auto job = dead_job(job_names::distribution_rollback, lane_dist);
  auto r = run_sync(q->retry(project, job.id));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::conflict));
  EXPECT_EQ(r.error().field, "id");
  EXPECT_NE(r.error().message.find("distribution d1"), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find("/api/"), std::string::npos) << r.error().message;
  EXPECT_EQ(run_sync(st->jobs().get(project, job.id))->status, store::job_status::dead) << "unchanged";
}

TEST_F(retry_rule, another_type_with_a_distribution_id_is_retried) {
  // A run's notification carries its distribution_id but is no part of the run.
  handlers.add(std::string(job_names::notification_send), nothing, {},
               [](const store::job_record&) { return make_error(errc::invalid_argument, "never asked"); });
  auto job = dead_job(job_names::notification_send, lane_main);
  auto r = run_sync(q->retry(project, job.id));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, store::job_status::pending);
}
