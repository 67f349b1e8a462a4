// The stored system settings as a settings_map (store::to_settings_map / store::read_settings),
// the one conversion the API's cache and the distribution jobs and routes share.
#include "certfleet/store/auth.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/store.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

using namespace certfleet;
using testbed::run_sync;

TEST(stored_settings, stored_values_win_and_stale_or_unknown_ones_fall_back) {
  auto m = store::to_settings_map({{"jobs_page_size_default", "50"},
                                   {"job_retry_per_minute", "-3"},           // out of range since written
                                   {"certificate_expiry_thresholds_days", "x"},  // no longer parses
                                   {"no_such_setting", "1"}});
  EXPECT_EQ(m.integer("jobs_page_size_default"), 50);
  EXPECT_EQ(m.values(), [] {
    settings_map want;
    EXPECT_TRUE(want.set("jobs_page_size_default", "50"));
    return want;
  }().values()) << "everything else is its default";
  EXPECT_EQ(store::to_settings_map({}).values(), settings_map().values());
}

TEST(stored_settings, read_settings_reads_what_was_put) {
  testbed::temp_dir dir;
  auto st = std::move(*store::open_sqlite({dir.file("s.db"), 1, 5000, false}));
  EXPECT_EQ(run_sync(store::read_settings(*st)).values(), settings_map().values()) << "nothing stored: defaults";
  store::audit_entry a;
  a.project_id = run_sync(st->projects().ensure("default", 1))->first.id;
  a.actor = "test";
  a.action = "settings.update";
  a.object = "settings";
  a.outcome = "ok";
  a.at = 1;
  ASSERT_TRUE(run_sync(st->auth().put_system_settings({{"jobs_page_size_default", "7"}}, a)));
  auto m = run_sync(store::read_settings(*st));
  EXPECT_EQ(m.integer("jobs_page_size_default"), 7);
  st->close();
}
