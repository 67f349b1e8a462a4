#include "certfleet/queue/backoff.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

using namespace certfleet;
using namespace certfleet::queue;
using testbed::run_sync;

TEST(backoff, doubles_from_30s_and_caps_at_10min) {
  EXPECT_EQ(backoff_ms(1), 30'000);
  EXPECT_EQ(backoff_ms(2), 60'000);
  EXPECT_EQ(backoff_ms(3), 120'000);
  EXPECT_EQ(backoff_ms(4), 240'000);
  EXPECT_EQ(backoff_ms(5), 480'000);
  EXPECT_EQ(backoff_ms(6), 600'000);
  EXPECT_EQ(backoff_ms(50), 600'000);
  EXPECT_EQ(backoff_ms(0), 30'000);
}

TEST(job_types, table_matches_design) {
  EXPECT_EQ(find_job_type("distribution_execute")->lane, lane_dist);
  EXPECT_EQ(find_job_type("distribution_execute")->max_attempts, 1);
  EXPECT_EQ(find_job_type("distribution_rollback")->lane, lane_dist);
  EXPECT_EQ(find_job_type("distribution_rollback")->max_attempts, 3);
  EXPECT_EQ(find_job_type("discovery_execute")->max_attempts, 1);
  EXPECT_EQ(find_job_type("notification.send")->lane, lane_main);
  EXPECT_EQ(find_job_type("nope"), nullptr);
  int dist = 0;
  for (const auto& t : all_job_types()) dist += t.lane == lane_dist;
  EXPECT_EQ(dist, 2);
}

class enqueue_validation : public ::testing::Test {
 protected:
  void SetUp() override {
    st = std::move(*store::open_sqlite({dir.file("q.db"), 1, 5000, false}));
    project = run_sync(st->projects().ensure("default", clock.now_ms()))->first.id;
    register_noop(handlers);
    q = std::make_unique<queue_service>(*st, handlers, clock);
  }
  error refused(enqueue_request r, caller who = caller::user) {
    r.project_id = project;
    auto out = run_sync(q->enqueue(r, who));
    EXPECT_FALSE(out);
    EXPECT_EQ(run_sync(st->jobs().list({project, std::nullopt, "", 1, 10}))->total, 0) << "nothing stored";
    return out ? error{} : out.error();
  }
  testbed::temp_dir dir;
  manual_clock clock;
  std::unique_ptr<store::store> st;
  handler_registry handlers;
  std::unique_ptr<queue_service> q;
  std::string project;
};

TEST_F(enqueue_validation, bad_input_names_the_field_and_stores_nothing) {
  auto e = refused({"", "bogus_type"});
  EXPECT_TRUE(e.is(errc::unknown_job_type));
  EXPECT_EQ(e.field, "type");

  e = refused({"", "issue_certificate"});  // in the table, no handler in this build
  EXPECT_TRUE(e.is(errc::unknown_job_type));
  EXPECT_NE(e.message.find("no handler"), std::string::npos);

  e = refused({"", "noop", "[1,2]"});
  EXPECT_EQ(e.field, "payload");
  e = refused({"", "noop", "{not json"});
  EXPECT_EQ(e.field, "payload");
  e = refused({"", "noop", "\"text\""});
  EXPECT_EQ(e.field, "payload");
  e = refused({"", "noop", "{\"pad\":\"" + std::string(1 << 20, 'x') + "\"}"});
  EXPECT_TRUE(e.is(errc::payload_too_large));
  EXPECT_EQ(e.field, "payload");

  e = refused({"", "noop", "{\"ms\":-1}"});
  EXPECT_EQ(e.field, "payload.ms");
  // Payload fields are named by their path from the request, as payload.ms is above.
  e = refused({"", "noop", "{\"ms\":\"fast\"}"});
  EXPECT_EQ(e.field, "payload.ms");
  EXPECT_NE(e.message.find("payload.ms must be an integer"), std::string::npos) << e.message;
  e = refused({"", "noop", "{\"unexpected\":1}"});
  EXPECT_EQ(e.field, "payload.unexpected");
  // A key given twice: the validator would see the first, the API the last; refused instead.
  e = refused({"", "noop", R"({"ms":1,"ms":-5})"});
  EXPECT_TRUE(e.is(errc::invalid_argument));
  EXPECT_EQ(e.field, "payload.ms");
  e = refused({"", "noop", R"({"ms":1,"extra":{"a":[{"b":1,"b":2}]}})"});
  EXPECT_EQ(e.field, "payload.extra.a[0].b");

  enqueue_request r{"", "noop"};
  r.idempotency_key = "";
  e = refused(r);
  EXPECT_EQ(e.field, "idempotency_key");
  r.idempotency_key = std::string(201, 'k');
  e = refused(r);
  EXPECT_EQ(e.field, "idempotency_key");
  r.idempotency_key = std::string("a\nb");
  e = refused(r);
  EXPECT_EQ(e.field, "idempotency_key");

  enqueue_request neg{"", "noop"};
  neg.run_at = -5;
  EXPECT_EQ(refused(neg).field, "run_at");
}

TEST_F(enqueue_validation, system_types_are_not_user_triggerable) {
  handlers.add("distribution_execute", [](job_context&) -> boost::asio::awaitable<outcome> { co_return outcome::ok(); });
  auto e = refused({"", "distribution_execute"}, caller::user);
  EXPECT_EQ(e.field, "type");
  auto ok = run_sync(q->enqueue({project, "distribution_execute"}, caller::system));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->job.lane, "dist");
  EXPECT_EQ(ok->job.max_attempts, 1);
}

TEST_F(enqueue_validation, accepted_job_uses_the_type_table_defaults) {
  enqueue_request r{project, "noop", R"({"ms":5})"};
  r.idempotency_key = std::string(200, 'k');
  int woken = 0;
  q->on_enqueued = [&](std::string_view lane) { woken += lane == "main"; };
  auto ok = run_sync(q->enqueue(r, caller::user));
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->created);
  EXPECT_EQ(ok->job.max_attempts, 3);
  EXPECT_EQ(ok->job.lane, "main");
  auto again = run_sync(q->enqueue(r, caller::user));
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, ok->job.id);
  EXPECT_EQ(woken, 1);
}
