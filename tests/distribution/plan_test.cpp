// The protocol's decisions, without I/O.
#include "certfleet/distribution/plan.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace certfleet::distribution {
namespace {

store::target_result res(std::string target, std::string status, std::string cls = {}, std::int64_t wave = 0,
                         std::int64_t fence = 1, std::string job = "j1") {
  store::target_result r;
  r.target_id = std::move(target);
  r.status = std::move(status);
  r.error_class = std::move(cls);
  r.retry_attempt = wave;
  r.fence = fence;
  r.job_id = std::move(job);
  return r;
}

TEST(plan, payload_round_trips_and_bad_payloads_name_the_field) {
  job_plan p{"d1", 3, job_mode::retry, {"t2", "t1", "t2"}, 4, 2, 0};
  auto back = parse_payload(to_payload(p));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->distribution_id, "d1");
  EXPECT_EQ(back->run_no, 3);
  EXPECT_EQ(back->mode, job_mode::retry);
  EXPECT_EQ(back->target_ids, (std::vector<std::string>{"t1", "t2"}));
  EXPECT_EQ(back->batch_no, 4);
  EXPECT_EQ(back->retry_attempt, 2);
  for (auto [text, field] : std::vector<std::pair<const char*, const char*>>{
           {"[]", "payload"},
           {R"({"run_no":1,"mode":"normal","target_ids":[]})", "distribution_id"},
           {R"({"distribution_id":"d","run_no":-1,"mode":"normal","target_ids":[]})", "run_no"},
           {R"({"distribution_id":"d","run_no":1,"mode":"sideways","target_ids":[]})", "mode"},
           {R"({"distribution_id":"d","run_no":1,"mode":"normal","target_ids":[1]})", "target_ids"},
           {R"({"distribution_id":"d","run_no":1,"mode":"retry","target_ids":[],"retry_attempt":21})", "retry_attempt"}}) {
    auto r = parse_payload(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().field, field) << text;
  }
}

// DESIGN §4's names for a child's targets: `target_id_batch` (batch), `retry_target_ids` and
// `retry_attempt` (retry); jobs stored with the old `target_ids` still parse.
TEST(plan, children_use_the_contract_field_names_and_old_payloads_still_parse) {
  auto batch = boost::json::parse(to_payload({"d1", 1, job_mode::batch, {"t1", "t2"}, 2, 0, 0})).as_object();
  EXPECT_TRUE(batch.contains("target_id_batch")) << boost::json::serialize(batch);
  EXPECT_FALSE(batch.contains("target_ids")) << boost::json::serialize(batch);
  auto retry = boost::json::parse(to_payload({"d1", 1, job_mode::retry, {"t2"}, 2, 1, 0})).as_object();
  EXPECT_TRUE(retry.contains("retry_target_ids")) << boost::json::serialize(retry);
  EXPECT_EQ(retry.at("retry_attempt").as_int64(), 1);
  EXPECT_FALSE(retry.contains("target_ids")) << boost::json::serialize(retry);
  auto normal = boost::json::parse(to_payload({"d1", 1, job_mode::normal, {"t1"}, 0, 0, 0})).as_object();
  EXPECT_TRUE(normal.contains("target_ids"));

  auto old_batch = parse_payload(R"({"distribution_id":"d","run_no":1,"mode":"batch","target_ids":["b","a"],"batch_no":3})");
  ASSERT_TRUE(old_batch) << old_batch.error().message;
  EXPECT_EQ(old_batch->target_ids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(old_batch->batch_no, 3);
  auto old_retry =
      parse_payload(R"({"distribution_id":"d","run_no":1,"mode":"retry","target_ids":["c"],"batch_no":3,"retry_attempt":2})");
  ASSERT_TRUE(old_retry) << old_retry.error().message;
  EXPECT_EQ(old_retry->target_ids, (std::vector<std::string>{"c"}));
  EXPECT_EQ(old_retry->retry_attempt, 2);
  auto new_retry = parse_payload(R"({"distribution_id":"d","run_no":1,"mode":"retry","retry_target_ids":["c"],"retry_attempt":1})");
  ASSERT_TRUE(new_retry) << new_retry.error().message;
  EXPECT_EQ(new_retry->target_ids, (std::vector<std::string>{"c"}));
  // A new-style payload's errors name the new field.
  auto bad = parse_payload(R"({"distribution_id":"d","run_no":1,"mode":"batch","target_id_batch":[7]})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "target_id_batch");
  auto missing = parse_payload(R"({"distribution_id":"d","run_no":1,"mode":"retry","retry_attempt":1})");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().field, "retry_target_ids");
}

TEST(plan, keys_share_one_prefix_per_run) {
  job_plan b{"d", 2, job_mode::batch, {}, 7, 0, 0};
  EXPECT_EQ(job_key(b), "dist:d:2:batch:7");
  job_plan r{"d", 2, job_mode::retry, {}, 7, 1, 0};
  EXPECT_EQ(job_key(r, "parent"), "dist:d:2:retry:parent");
  EXPECT_EQ(job_key(job_plan{"d", 2, job_mode::normal, {}, 0, 0, 0}), "dist:d:2:normal");
}

TEST(plan, batches_are_sorted_unique_and_sized) {
  std::vector<std::string> ids;
  for (int i = 119; i >= 0; --i) ids.push_back(fmt::format("t{:03}", i));
  ids.push_back("t000");
  auto b = split_batches(ids, 50);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].size(), 50u);
  EXPECT_EQ(b[2].size(), 20u);
  EXPECT_EQ(b[0].front(), "t000");
  EXPECT_EQ(b[2].back(), "t119");
  EXPECT_EQ(split_batches(ids, 0).size(), 3u);  // 0 -> 50
  EXPECT_TRUE(fans_out(100, 100));
  EXPECT_FALSE(fans_out(99, 100));
  EXPECT_FALSE(fans_out(1000, 0));
  EXPECT_EQ(effective_ssh_concurrency(0), 10);
  EXPECT_EQ(effective_ssh_concurrency(50), 50);
}

TEST(plan, outcome_is_the_result_with_the_highest_wave_then_fence) {
  auto o = outcomes({res("a", "failed", "network", 0, 1), res("a", "succeeded", "", 1, 1), res("b", "failed", "network", 0, 5),
                     res("b", "succeeded", "", 0, 4)});
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(o[0].status, "succeeded");  // a: wave 1 beats wave 0
  EXPECT_EQ(o[1].status, "failed");     // b: fence 5 beats fence 4
}

TEST(plan, only_transient_classes_are_retried_and_waves_end_at_three) {
  std::vector<store::target_result> own{res("c", "failed", "io_transient"), res("a", "failed", "network"),
                                        res("b", "failed", "auth"),         res("d", "failed", "worker_lost"),
                                        res("e", "succeeded"),              res("f", "failed", "io_permanent"),
                                        res("g", "failed", "validation"),   res("h", "failed", "unknown")};
  EXPECT_EQ(retry_targets(own, 0), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_EQ(retry_targets(own, 2), (std::vector<std::string>{"a", "c", "d"}));
  EXPECT_TRUE(retry_targets(own, 3).empty());
  EXPECT_EQ(child_outcome(own, false), "partial");
  EXPECT_EQ(child_outcome({res("a", "succeeded"), res("b", "skipped")}, false), "succeeded");
  EXPECT_EQ(child_outcome({res("a", "failed", "auth")}, false), "failed");
  EXPECT_EQ(child_outcome({res("a", "succeeded")}, true), "cancelled");
}

TEST(plan, final_status_follows_design_section_4) {
  store::distribution_record d;
  std::vector<std::string> targets{"a", "b", "c"};
  std::vector<store::finalized_child> kids{{"j1", "partial", true}};
  auto verdict = [&](std::vector<store::target_result> rs) {
    return final_status(d, kids, summarize(targets, outcomes(rs)), "boom");
  };
  EXPECT_EQ(verdict({res("a", "succeeded"), res("b", "succeeded"), res("c", "skipped")}).status, "success");
  EXPECT_EQ(verdict({res("a", "succeeded"), res("b", "failed", "auth"), res("c", "skipped")}).status, "partial");
  auto f = verdict({res("a", "failed", "auth"), res("b", "failed", "auth"), res("c", "skipped")});
  EXPECT_EQ(f.status, "failed");
  EXPECT_EQ(f.error, "all 2 targets failed: boom");
  EXPECT_EQ(verdict({res("a", "skipped"), res("b", "skipped"), res("c", "skipped")}).status, "failed");
  d.fail_fast_fired = true;
  EXPECT_EQ(verdict({res("a", "succeeded"), res("b", "succeeded"), res("c", "succeeded")}).error,
            "stopped: failure budget exceeded");
  d.fail_fast_fired = false;
  kids = {{"j1", "cancelled", true}, {"j2", "cancelled", true}};
  EXPECT_EQ(verdict({res("a", "cancelled")}).status, "cancelled");
  EXPECT_TRUE(over_failure_budget(1, 10, 0.0));
  EXPECT_FALSE(over_failure_budget(1, 10, 0.1));
  EXPECT_TRUE(over_failure_budget(2, 10, 0.1));
}

TEST(plan, lost_work_is_the_run_targets_no_job_holds) {
  store::distribution_record d;
  d.id = "d1";
  d.run_no = 2;
  d.mode = "fan_out";
  d.run_target_ids = {"a", "b", "c", "d", "e", "f"};
  d.fan_out_total = 3;
  auto plan = [&](job_mode m, std::vector<std::string> t, std::int64_t batch, std::int64_t run = 2) {
    return job_plan{"d1", run, m, std::move(t), batch, m == job_mode::retry ? 1 : 0, 0};
  };
  // Every batch present: nothing lost, whatever the results say.
  auto none = find_lost_work(d, {plan(job_mode::batch, {"a", "b"}, 1), plan(job_mode::batch, {"c", "d"}, 2),
                                 plan(job_mode::batch, {"e", "f"}, 3)},
                             {});
  EXPECT_EQ(none.missing_batches, 0);
  EXPECT_TRUE(none.uncovered.empty());
  // Batch 2 lost; "d" already has a result, a retry child of batch 1 holds "b".
  auto lost = find_lost_work(d, {plan(job_mode::batch, {"a", "b"}, 1), plan(job_mode::retry, {"b"}, 1),
                                 plan(job_mode::batch, {"e", "f"}, 3)},
                             {"a", "d"});
  EXPECT_EQ(lost.missing_batches, 1);
  EXPECT_EQ(lost.batch_no, 2);
  EXPECT_EQ(lost.uncovered, (std::vector<std::string>{"c"}));
  // Every job gone (execute aborted before enqueuing): all targets, under batch 1.
  auto all = find_lost_work(d, {plan(job_mode::batch, {"a", "b"}, 1, 1)}, {});
  EXPECT_EQ(all.missing_batches, 3) << "a job of an older run does not count";
  EXPECT_EQ(all.batch_no, 1);
  EXPECT_EQ(all.uncovered, d.run_target_ids);
  // A normal run: batch number 0 (its key is dist:<id>:<run>:normal).
  d.mode = "normal";
  d.fan_out_total = 1;
  auto normal = find_lost_work(d, {}, {"f"});
  EXPECT_EQ(normal.missing_batches, 1);
  EXPECT_EQ(normal.batch_no, 0);
  EXPECT_EQ(normal.uncovered.size(), 5u);
}

}  // namespace
}  // namespace certfleet::distribution
