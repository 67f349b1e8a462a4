// Job policy both backends apply, without I/O (store/job_policy.hpp), and the run states' stored
// words (store/states.hpp). The backends' use of them is in the store conformance suite (SQLite)
// and the MongoDB wire tests.
#include "certfleet/store/job_policy.hpp"
#include "certfleet/store/states.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace certfleet;
using namespace certfleet::store;

namespace {

constexpr time_ms now = 1'700'000'000'000;

job_record active_job(int attempts, int max_attempts, bool cancel_requested) {
  job_record j;
  j.id = "j1";
  j.status = job_status::active;
  j.attempts = attempts;
  j.max_attempts = max_attempts;
  j.cancel_requested = cancel_requested;
  return j;
}

job_record ended_job(job_status s) {
  job_record j;
  j.id = "j1";
  j.status = s;
  return j;
}

target_result result_of(std::string target, std::string status, std::int64_t wave, std::int64_t fence,
                        std::string job = "job") {
  target_result r;
  r.target_id = std::move(target);
  r.status = std::move(status);
  r.retry_attempt = wave;
  r.fence = fence;
  r.job_id = std::move(job);
  return r;
}

}  // namespace

TEST(job_policy, a_lost_lease_with_attempts_left_returns_the_job_to_pending) {
  auto t = reap_transition_of(active_job(1, 3, false), now);
  EXPECT_TRUE(t.returns_to_pending());
  EXPECT_EQ(t.status, job_status::pending);
  EXPECT_EQ(t.error, "lease expired: worker lost; returned to pending");
  EXPECT_EQ(t.completed_at, 0);
}

TEST(job_policy, a_lost_lease_on_the_last_attempt_ends_the_job_dead) {
  auto t = reap_transition_of(active_job(3, 3, false), now);
  EXPECT_FALSE(t.returns_to_pending());
  EXPECT_EQ(t.status, job_status::dead);
  EXPECT_EQ(t.error, "lease expired: worker lost");
  EXPECT_EQ(t.completed_at, now);
}

TEST(job_policy, a_lost_lease_of_a_job_asked_to_cancel_ends_it_cancelled_even_with_attempts_left) {
  for (int attempts : {1, 3}) {
    auto t = reap_transition_of(active_job(attempts, 3, true), now);
    EXPECT_EQ(t.status, job_status::cancelled) << attempts;
    EXPECT_EQ(t.error, "cancelled on request (worker lost)");
    EXPECT_EQ(t.completed_at, now);
  }
}

TEST(job_policy, only_failed_or_dead_jobs_can_be_retried) {
  EXPECT_FALSE(retry_refusal(ended_job(job_status::failed)));
  EXPECT_FALSE(retry_refusal(ended_job(job_status::dead)));
  for (auto s : {job_status::pending, job_status::active, job_status::completed, job_status::cancelled}) {
    auto e = retry_refusal(ended_job(s));
    ASSERT_TRUE(e) << to_string(s);
    EXPECT_TRUE(e->is(errc::conflict));
    EXPECT_EQ(e->field, "status");
    EXPECT_EQ(e->message, "job j1 is " + std::string(to_string(s)) + "; only failed or dead jobs can be retried");
  }
}

TEST(job_policy, a_fan_out_child_is_never_retried_alone) {
  auto j = ended_job(job_status::failed);
  j.distribution_id = "d1";
  EXPECT_FALSE(retry_refusal(j));  // a run's own job: the queue's type table refuses it, not the store
  j.parent_job_id = "p1";
  auto e = retry_refusal(j);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->is(errc::conflict));
  EXPECT_EQ(e->field, "id");
  EXPECT_EQ(e->message, "job j1 is a fan-out child of distribution d1: use the distribution's retry-failed instead");
  // The status is told first: a live child is refused for what it is now.
  j.status = job_status::pending;
  EXPECT_EQ(retry_refusal(j)->field, "status");
}

TEST(job_policy, retries_are_counted_per_minute_window) {
  const time_ms minute_start = (now / retry_window_ms) * retry_window_ms;
  const std::int64_t w = now / retry_window_ms;
  auto first = count_retry(std::nullopt, now, 3);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->window, w);
  EXPECT_EQ(first->count, 1);
  auto next = count_retry(rate_window{w, 2}, now, 3);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->window, w);
  EXPECT_EQ(next->count, 3);
  // An older window's counter, however high, starts over.
  auto fresh = count_retry(rate_window{w - 1, 50}, now, 3);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->window, w);
  EXPECT_EQ(fresh->count, 1);
  // Used up: refused until the next window, in whole seconds rounded up, at least 1.
  auto refused = count_retry(rate_window{w, 3}, minute_start + 1'000, 3);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::rate_limited));
  EXPECT_EQ(refused.error().message, "more than 3 job retries this minute in this project");
  EXPECT_EQ(refused.error().retry_after_s, 59);
  EXPECT_EQ(count_retry(rate_window{w, 3}, minute_start + 59'999, 3).error().retry_after_s, 1);
  EXPECT_EQ(count_retry(rate_window{w, 3}, minute_start + 58'500, 3).error().retry_after_s, 2);
  EXPECT_EQ(count_retry(rate_window{w, 7}, minute_start, 3).error().retry_after_s, 60);
}

TEST(job_policy, a_targets_outcome_is_its_last_result) {
  std::vector<target_result> rs{
      result_of("b", "failed", 0, 5),         result_of("a", "succeeded", 1, 1), result_of("b", "succeeded", 0, 4),
      result_of("a", "failed", 0, 9),         result_of("c", "failed", 2, 1, "j1"),
      result_of("c", "succeeded", 2, 1, "j2"),
  };
  auto o = target_outcomes(rs);
  ASSERT_EQ(o.size(), 3u);
  EXPECT_EQ(o[0].target_id, "a");
  EXPECT_EQ(o[0].status, "succeeded");  // wave 1 beats wave 0, whatever the fence
  EXPECT_EQ(o[1].target_id, "b");
  EXPECT_EQ(o[1].status, "failed");  // fence 5 beats fence 4
  EXPECT_EQ(o[2].target_id, "c");
  EXPECT_EQ(o[2].job_id, "j2");  // same wave and fence: the higher job id, as the backends order rows
  // The order given does not matter.
  std::reverse(rs.begin(), rs.end());
  auto again = target_outcomes(rs);
  ASSERT_EQ(again.size(), 3u);
  for (std::size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].target_id, o[i].target_id);
    EXPECT_EQ(again[i].status, o[i].status);
    EXPECT_EQ(again[i].job_id, o[i].job_id);
  }
  EXPECT_TRUE(target_outcomes({}).empty());
}

// The words are stored (no migration): each must stay what the stored documents say.
TEST(run_states, each_state_is_stored_as_its_word_and_parses_back) {
  EXPECT_EQ(to_string(run_status::idle), "idle");
  EXPECT_EQ(to_string(run_status::running), "running");
  EXPECT_EQ(to_string(run_status::success), "success");
  EXPECT_EQ(to_string(run_status::partial), "partial");
  EXPECT_EQ(to_string(run_status::failed), "failed");
  EXPECT_EQ(to_string(run_status::cancelled), "cancelled");
  EXPECT_EQ(to_string(run_mode::none), "");
  EXPECT_EQ(to_string(run_mode::normal), "normal");
  EXPECT_EQ(to_string(run_mode::fan_out), "fan_out");
  EXPECT_EQ(to_string(run_mode::rollback), "rollback");
  EXPECT_EQ(to_string(target_status::succeeded), "succeeded");
  EXPECT_EQ(to_string(target_status::failed), "failed");
  EXPECT_EQ(to_string(target_status::skipped), "skipped");
  EXPECT_EQ(to_string(target_status::cancelled), "cancelled");
  EXPECT_EQ(to_string(fan_out_outcome::succeeded), "succeeded");
  EXPECT_EQ(to_string(fan_out_outcome::failed), "failed");
  EXPECT_EQ(to_string(fan_out_outcome::partial), "partial");
  EXPECT_EQ(to_string(fan_out_outcome::cancelled), "cancelled");
  for (std::size_t i = 0; i < run_status_names.size(); ++i)
    EXPECT_EQ(parse_run_status(run_status_names[i]), static_cast<run_status>(i));
  for (std::size_t i = 0; i < run_mode_names.size(); ++i)
    EXPECT_EQ(parse_run_mode(run_mode_names[i]), static_cast<run_mode>(i));
  for (std::size_t i = 0; i < target_status_names.size(); ++i)
    EXPECT_EQ(parse_target_status(target_status_names[i]), static_cast<target_status>(i));
  for (std::size_t i = 0; i < fan_out_outcome_names.size(); ++i)
    EXPECT_EQ(parse_fan_out_outcome(fan_out_outcome_names[i]), static_cast<fan_out_outcome>(i));
}

TEST(run_states, an_unknown_word_parses_to_nothing) {
  EXPECT_FALSE(parse_run_status("Running"));
  EXPECT_FALSE(parse_run_status(""));
  EXPECT_FALSE(parse_run_mode("batch"));  // a job's mode, not a run's
  EXPECT_FALSE(parse_target_status("partial"));
  EXPECT_FALSE(parse_target_status("pending"));  // a view's word for a target without a result
  EXPECT_FALSE(parse_fan_out_outcome("skipped"));
  EXPECT_EQ(distribution_record{}.status, "idle");
}
