// The catalog gauges of /metrics: the expiry window and "running longer than expected".
#include "certfleet/checks/gauges.hpp"

#include <gtest/gtest.h>

namespace certfleet::checks {
namespace {

constexpr time_ms now = 1'700'000'000'000;

TEST(gauges, the_expiry_window_is_the_largest_threshold) {
  EXPECT_EQ(expiry_window_ms(std::vector<std::int64_t>{30, 14, 7, 1}), 30 * day_ms);
  EXPECT_EQ(expiry_window_ms(std::vector<std::int64_t>{5}), 5 * day_ms);
  EXPECT_EQ(expiry_window_ms(std::vector<std::int64_t>{}), 0);
  settings_map s;  // the default, 30,14,7,1
  EXPECT_EQ(expiry_window_ms(s), 30 * day_ms);
  ASSERT_TRUE(s.set("certificate_expiry_thresholds_days", "60,10"));
  EXPECT_EQ(expiry_window_ms(s), 60 * day_ms);
}

store::distribution_record running_since(time_ms started) {
  store::distribution_record d;
  d.status = "running";
  d.run_started_at = started;
  return d;
}

TEST(gauges, a_run_is_long_after_an_hour_in_progress) {
  EXPECT_FALSE(running_longer_than_expected(running_since(now), now));
  EXPECT_FALSE(running_longer_than_expected(running_since(now - expected_run_ms), now));  // exactly an hour
  EXPECT_TRUE(running_longer_than_expected(running_since(now - expected_run_ms - 1), now));
  auto done = running_since(now - 10 * expected_run_ms);
  done.status = "success";
  EXPECT_FALSE(running_longer_than_expected(done, now)) << "a finished run is not running at all";
}

TEST(gauges, counts_split_expired_from_expiring_and_long_runs_from_running) {
  auto cert = [](time_ms not_after) {
    store::catalog_object c;
    c.kind = "certificate";
    c.not_after = not_after;
    return c;
  };
  // cert(0): an ACME certificate not issued yet, counted as neither.
  std::vector<store::catalog_object> certs{cert(now - day_ms), cert(now), cert(now + 1), cert(now + 29 * day_ms), cert(0)};
  std::vector<store::distribution_record> running{running_since(now - 2 * expected_run_ms), running_since(now - 60'000),
                                                  running_since(now - expected_run_ms - 1)};
  auto g = count_gauges(certs, running, now);
  EXPECT_EQ(g.certificates_expired, 2);  // not_after at or before now
  EXPECT_EQ(g.certificates_expiring_soon, 2);
  EXPECT_EQ(g.distributions_running, 3);
  EXPECT_EQ(g.distributions_running_long, 2);
  auto none = count_gauges({}, {}, now);
  EXPECT_EQ(none.certificates_expired + none.certificates_expiring_soon + none.distributions_running +
                none.distributions_running_long,
            0);
}

}  // namespace
}  // namespace certfleet::checks
