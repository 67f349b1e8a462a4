// Re-driving a finished run's failed targets (issue 31), without I/O: the body, the choice of
// targets, wave and key, and the run as the re-drive reopens it.
#include "certfleet/distribution/redrive.hpp"

#include <gtest/gtest.h>

namespace certfleet::distribution {
namespace {

const std::string t1 = "65f0c0ffee00000000000001", t2 = "65f0c0ffee00000000000002", t3 = "65f0c0ffee00000000000003";
const std::string j1 = "65f0c0ffee0000000000000a", j2 = "65f0c0ffee0000000000000b";

store::target_result result(const std::string& target, const std::string& job, std::int64_t attempt, const char* status) {
  store::target_result r;
  r.distribution_id = "d1";
  r.run_no = 4;
  r.target_id = target;
  r.job_id = job;
  r.retry_attempt = attempt;
  r.fence = 1;
  r.status = status;
  return r;
}

store::distribution_record ended_run() {
  store::distribution_record d;
  d.id = "d1";
  d.run_no = 4;
  d.status = "partial";
  d.mode = "fan_out";
  d.run_target_ids = {t1, t2, t3};
  d.error = "1 of 3 targets failed, 0 cancelled";
  d.fan_out_total = 2;
  d.fan_out_retry_wave = 1;
  d.fail_fast_fired = true;
  d.run_finished_at = 5;
  return d;
}

// j1 had t1 (succeeded) and t2 (failed, then failed again in wave 1 by j2); t3 was cancelled.
std::vector<store::target_result> run_results() {
  return {result(t1, j1, 0, "succeeded"), result(t2, j1, 0, "failed"), result(t2, j2, 1, "failed"),
          result(t3, j2, 0, "cancelled")};
}

TEST(redrive_request, takes_a_job_or_targets_and_names_the_field_of_a_bad_one) {
  auto a = parse_redrive_request(R"({"job_id":")" + j1 + R"("})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->job_id, j1);
  auto b = parse_redrive_request(R"({"target_ids":[")" + t3 + R"(",")" + t1 + R"("]})");
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->target_ids, (std::vector<std::string>{t3, t1}));  // the client's order: errors name its index
  for (auto [body, field] : std::vector<std::pair<std::string, std::string>>{
           {"", "body"},
           {"[]", "body"},
           {"{}", "body"},
           {R"({"job_id":"x"})", "job_id"},
           {R"({"job_id":7})", "job_id"},
           {R"({"job_id":")" + j1 + R"(","target_ids":[")" + t1 + R"("]})", "body"},
           {R"({"target_ids":[]})", "target_ids"},
           {R"({"target_ids":"abc"})", "target_ids"},
           {R"({"target_ids":[")" + t1 + R"(",1]})", "target_ids[1]"},
           {R"({"target_ids":[")" + t1 + R"(",")" + t1 + R"("]})", "target_ids[1]"},
           {R"({"targets":[]})", "targets"}}) {
    auto r = parse_redrive_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().field, field) << body;
  }
  std::string many = R"({"target_ids":[)";
  for (std::size_t i = 0; i <= max_redrive_targets; ++i) many += (i ? ",\"" : "\"") + t1 + "\"";
  auto over = parse_redrive_request(many + "]}");
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().field, "target_ids");
}

TEST(redrive_plan, a_job_takes_its_targets_whose_last_result_failed_one_wave_above_theirs) {
  auto d = ended_run();
  auto r = plan_redrive(d, run_results(), redrive_request{j1, {}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->plan.target_ids, (std::vector<std::string>{t2}));  // t1 succeeded
  EXPECT_EQ(r->plan.mode, job_mode::retry);
  EXPECT_EQ(r->plan.run_no, 4);
  EXPECT_EQ(r->plan.retry_attempt, 2);  // t2 reached wave 1
  EXPECT_EQ(r->parent_job_id, j1);
  EXPECT_EQ(r->key, "dist:d1:4:redrive:1");
  EXPECT_EQ(r->key.rfind(run_key_prefix("d1", 4), 0), 0u);  // found with the run's jobs

  reopen_for_redrive(d, *r, 99);
  EXPECT_EQ(d.status, "running");
  EXPECT_EQ(d.run_finished_at, 0);
  EXPECT_EQ(d.error, "");
  EXPECT_FALSE(d.fail_fast_fired);
  EXPECT_EQ(d.fan_out_retrying, 1);
  EXPECT_EQ(d.fan_out_retry_wave, 2);
  EXPECT_EQ(d.run_redrives, 1);
  EXPECT_EQ(d.updated_at, 99);
  // The next re-drive of this run gets the next key once it has ended again.
  d.status = "partial";
  auto again = plan_redrive(d, run_results(), redrive_request{j1, {}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->key, "dist:d1:4:redrive:2");
}

TEST(redrive_plan, named_targets_failed_or_cancelled_run_again_and_others_are_refused) {
  auto d = ended_run();
  auto r = plan_redrive(d, run_results(), redrive_request{{}, {t2, t3}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->plan.target_ids, (std::vector<std::string>{t2, t3}));
  EXPECT_EQ(r->plan.retry_attempt, 2);
  EXPECT_EQ(r->parent_job_id, j2);  // the job of t2's last result

  auto ok = plan_redrive(d, run_results(), redrive_request{{}, {t1}});
  ASSERT_FALSE(ok);
  EXPECT_TRUE(ok.error().is(errc::conflict));
  EXPECT_EQ(ok.error().field, "target_ids[0]");
  EXPECT_NE(ok.error().message.find("succeeded"), std::string::npos) << ok.error().message;

  auto outside = plan_redrive(d, run_results(), redrive_request{{}, {t2, "65f0c0ffee00000000000009"}});
  ASSERT_FALSE(outside);
  EXPECT_TRUE(outside.error().is(errc::invalid_argument));
  EXPECT_EQ(outside.error().field, "target_ids[1]");
  // Named out of order: the refusal names the position the client used, not a sorted one.
  auto late = plan_redrive(d, run_results(), redrive_request{{}, {t3, t1}});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().field, "target_ids[1]");
  auto reversed = plan_redrive(d, run_results(), redrive_request{{}, {t3, t2}});
  ASSERT_TRUE(reversed) << reversed.error().message;
  EXPECT_EQ(reversed->plan.target_ids, (std::vector<std::string>{t2, t3}));
  EXPECT_EQ(reversed->parent_job_id, j2);

  auto no_job = plan_redrive(d, run_results(), redrive_request{"65f0c0ffee0000000000000c", {}});
  ASSERT_FALSE(no_job);
  EXPECT_TRUE(no_job.error().is(errc::not_found));
  EXPECT_EQ(no_job.error().field, "job_id");

  // j2's targets: t2 failed (redone), t3 cancelled (redone): both.
  auto by_j2 = plan_redrive(d, run_results(), redrive_request{j2, {}});
  ASSERT_TRUE(by_j2);
  EXPECT_EQ(by_j2->plan.target_ids, (std::vector<std::string>{t2, t3}));
}

TEST(redrive_plan, refused_while_running_for_a_rollback_before_any_run_and_past_the_attempt_cap) {
  auto d = ended_run();
  d.status = "running";
  auto running = plan_redrive(d, run_results(), redrive_request{j1, {}});
  ASSERT_FALSE(running);
  EXPECT_TRUE(running.error().is(errc::conflict));
  EXPECT_EQ(running.error().field, "status");

  d = ended_run();
  d.mode = "rollback";
  auto rollback = plan_redrive(d, run_results(), redrive_request{j1, {}});
  ASSERT_FALSE(rollback);
  EXPECT_EQ(rollback.error().field, "run_no");

  d = ended_run();
  d.run_no = 0;
  auto never = plan_redrive(d, {}, redrive_request{j1, {}});
  ASSERT_FALSE(never);
  EXPECT_EQ(never.error().field, "run_no");

  d = ended_run();
  auto results = run_results();
  results.push_back(result(t2, j2, max_retry_attempt, "failed"));
  auto capped = plan_redrive(d, results, redrive_request{{}, {t2}});
  ASSERT_FALSE(capped);
  EXPECT_TRUE(capped.error().is(errc::conflict));
  EXPECT_EQ(capped.error().field, "target_ids");
  EXPECT_NE(capped.error().message.find("Retry failed"), std::string::npos);
}

TEST(redrive_keys, a_redriven_end_is_a_new_notification_and_the_first_keeps_its_key) {
  EXPECT_EQ(run_notification_key("d1", 4, "c1"), "notify:d1:4:c1");
  EXPECT_EQ(run_notification_key("d1", 4, "c1", 2), "notify:d1:4:redrive:2:c1");
  EXPECT_NE(run_notification_key("d1", 4, "c1", 1), run_notification_key("d1", 4, "c1", 2));
}

}  // namespace
}  // namespace certfleet::distribution
