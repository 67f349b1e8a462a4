// The idempotency keys this module alone spells, and the jobs API's refusal of a job retry of a
// distribution's job.
#include "certfleet/distribution/plan.hpp"

#include <gtest/gtest.h>

#include <set>

namespace certfleet::distribution {
namespace {

TEST(keys, every_job_key_of_a_run_starts_with_its_prefix_and_no_other_runs_key_does) {
  const std::string id = "65f0c0ffee0000000000000a";
  EXPECT_EQ(run_key_prefix(id, 1), "dist:" + id + ":1:");
  std::vector<std::string> run1{
      job_key(job_plan{id, 1, job_mode::normal, {}, 0, 0, 0}),
      job_key(job_plan{id, 1, job_mode::batch, {}, 3, 0, 0}),
      job_key(job_plan{id, 1, job_mode::retry, {}, 3, 1, 0}, "65f0c0ffee0000000000000b"),
      job_key(job_plan{id, 1, job_mode::rollback, {}, 0, 0, 1}),
  };
  EXPECT_EQ(std::set<std::string>(run1.begin(), run1.end()).size(), run1.size()) << "distinct";
  for (const auto& k : run1) EXPECT_EQ(k.rfind(run_key_prefix(id, 1), 0), 0u) << k;
  // Run 10 and run 11 of the same distribution, run 1 of another: none starts with run 1's prefix
  // (the ':' after the run number keeps run 1 from matching run 10).
  for (const auto& other : {job_key(job_plan{id, 10, job_mode::normal, {}, 0, 0, 0}),
                            job_key(job_plan{id, 11, job_mode::batch, {}, 1, 0, 0}),
                            job_key(job_plan{"65f0c0ffee0000000000000c", 1, job_mode::normal, {}, 0, 0, 0})})
    EXPECT_NE(other.rfind(run_key_prefix(id, 1), 0), 0u) << other;
}

TEST(keys, notification_keys_are_one_per_run_or_threshold_and_channel) {
  EXPECT_EQ(run_notification_key("d1", 4, "c1"), "notify:d1:4:c1");
  EXPECT_EQ(expiry_notification_key("cert1", 7, "c1"), "notify:cert:cert1:7:c1");
  EXPECT_EQ(expiry_notification_key("cert1", 0, "c1"), "notify:cert:cert1:0:c1");  // the expiry itself
  std::set<std::string> keys{run_notification_key("d1", 4, "c1"), run_notification_key("d1", 4, "c2"),
                             run_notification_key("d1", 5, "c1"), expiry_notification_key("d1", 4, "c1"),
                             expiry_notification_key("cert1", 7, "c1"), expiry_notification_key("cert1", 14, "c1")};
  EXPECT_EQ(keys.size(), 6u);
  // Neither is a run's job key: the store's prefix scan of a run never finds them.
  for (const auto& k : keys) EXPECT_NE(k.rfind("dist:", 0), 0u) << k;
}

TEST(keys, the_expiration_check_key_is_one_per_hour) {
  constexpr time_ms hour = 3'600'000;
  const time_ms t = 1'700'000'000'000 / hour * hour;  // the start of an hour
  EXPECT_EQ(expiration_check_key(t), "exp_check:" + std::to_string(t / hour));
  EXPECT_EQ(expiration_check_key(t + hour - 1), expiration_check_key(t));
  EXPECT_NE(expiration_check_key(t + hour), expiration_check_key(t));
  EXPECT_NE(expiration_check_key(t - 1), expiration_check_key(t));
}

TEST(job_retry, a_distribution_job_is_pointed_at_retry_failed) {
  store::job_record j;
  j.id = "65f0c0ffee0000000000000b";
  j.distribution_id = "65f0c0ffee0000000000000a";
  auto e = job_retry_refusal(j);
  EXPECT_TRUE(e.is(errc::conflict));
  EXPECT_EQ(e.field, "retry-targets");
  EXPECT_EQ(e.message,
            "job 65f0c0ffee0000000000000b belongs to distribution 65f0c0ffee0000000000000a: once its run has ended, "
            "re-drive this job's failed targets in that run with POST "
            "/api/v1/projects/{p}/distributions/65f0c0ffee0000000000000a/retry-targets "
            "{\"job_id\": \"65f0c0ffee0000000000000b\"}, or open a new run over every failed target with "
            ".../retry-failed");
}

}  // namespace
}  // namespace certfleet::distribution
