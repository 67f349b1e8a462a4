// What the results route and the distribution view compute from a run's results, without I/O:
// the filter, the facet counts, percentiles and the long tail (issue 20); and the order in which
// a job's lanes take targets (target_queue).
#include "certfleet/distribution/run_view.hpp"
#include "certfleet/distribution/target_queue.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <numeric>

namespace certfleet::distribution {
namespace {

store::target_result timed(std::string target, std::string status, std::int64_t total_ms, std::string detail,
                           std::string cls = {}) {
  store::target_result r;
  r.target_id = std::move(target);
  r.status = std::move(status);
  r.error_class = std::move(cls);
  r.started_at = 1'000;
  r.finished_at = 1'000 + total_ms;
  r.detail = std::move(detail);
  return r;
}

TEST(run_view, percentiles_are_nearest_rank) {
  std::vector<std::int64_t> hundred(100);
  std::iota(hundred.begin(), hundred.end(), 1);  // 1 … 100
  EXPECT_EQ(percentile(hundred, 0.50), 50);
  EXPECT_EQ(percentile(hundred, 0.90), 90);
  EXPECT_EQ(percentile(hundred, 0.99), 99);
  EXPECT_EQ(percentile(hundred, 1.0), 100);
  // Few values: the tail percentiles are the largest ones, never an interpolation.
  EXPECT_EQ(percentile({7}, 0.5), 7);
  EXPECT_EQ(percentile({10, 20, 30}, 0.5), 20);
  EXPECT_EQ(percentile({10, 20, 30}, 0.9), 30);
  EXPECT_EQ(percentile({10, 20, 30, 40}, 0.5), 20);
  EXPECT_EQ(percentile({}, 0.99), 0);
}

TEST(run_view, long_tail_spreads_each_phase_and_lists_the_slowest_targets) {
  std::vector<store::target_result> rs;
  // 20 targets, connect 1..20 ms, install 100 ms except one at 5000 ms; one target reused a
  // connection (no connect/handshake/auth phase) and waited 700 ms for a session first.
  for (int i = 1; i <= 20; ++i) {
    auto install = i == 13 ? 5000 : 100;
    auto d = fmt::format(R"({{"timings_ms":{{"resolve":0,"connect":{},"handshake":{},"auth":3,"upload":4,"install":{}}},"phase":""}})",
                         i, 2 * i, install);
    rs.push_back(timed(fmt::format("t{:02}", i), "succeeded", i + 2 * i + 3 + 4 + install, d));
  }
  rs.push_back(timed("t21", "succeeded", 150,
                     R"({"timings_ms":{"hash_check":1,"upload":4,"install":140},"session_wait_ms":700,"reused_connection":true})"));
  // Failed at connect: its connect time counts, the phases it never reached do not.
  rs.push_back(timed("t22", "failed", 10'000, R"({"timings_ms":{"resolve":0,"connect":10000},"phase":"connect"})", "network"));
  // No timings (skipped: deleted after the snapshot) and a pending target: not timed.
  rs.push_back(timed("t23", "skipped", 0, "{}"));
  rs.push_back(timed("t24", "pending", 0, ""));
  rs.push_back(timed("t25", "succeeded", 5, "not json"));

  auto lt = compute_long_tail(rs, 3);
  EXPECT_EQ(lt.timed, 22);
  ASSERT_EQ(lt.phases.size(), tail_phases.size());
  const auto& connect = lt.phases[0];
  EXPECT_EQ(connect.phase, "connect");
  EXPECT_EQ(connect.count, 21);  // 20 + the failed one; the reused target opened none
  EXPECT_EQ(connect.p50_ms, 11);
  EXPECT_EQ(connect.p90_ms, 19);
  EXPECT_EQ(connect.p99_ms, 10000);
  EXPECT_EQ(connect.max_ms, 10000);
  const auto& auth = lt.phases[2];
  EXPECT_EQ(auth.count, 20);
  EXPECT_EQ(auth.p99_ms, 3);
  const auto& install = lt.phases[4];
  EXPECT_EQ(install.phase, "install");
  EXPECT_EQ(install.count, 21);
  EXPECT_EQ(install.p50_ms, 100);
  EXPECT_EQ(install.p90_ms, 100);  // the 19th of 21: nineteen at 100, then 140 and 5000
  EXPECT_EQ(install.p99_ms, 5000);
  EXPECT_EQ(install.max_ms, 5000);
  const auto& validate = lt.phases[5];
  EXPECT_EQ(validate.count, 0);
  EXPECT_EQ(validate.max_ms, 0);

  ASSERT_EQ(lt.slowest.size(), 3u);
  EXPECT_EQ(lt.slowest[0].target_id, "t22");
  EXPECT_EQ(lt.slowest[0].status, "failed");
  EXPECT_EQ(lt.slowest[0].total_ms, 10'000);
  EXPECT_EQ(lt.slowest[1].target_id, "t13");
  EXPECT_EQ(lt.slowest[1].phases_ms.back(), (std::pair<std::string, std::int64_t>{"install", 5000}));
  EXPECT_EQ(lt.slowest[2].target_id, "t20");

  // The waited target's wait is shown, not counted in its own time.
  auto all = compute_long_tail(rs, 100);
  auto w = std::find_if(all.slowest.begin(), all.slowest.end(), [](const auto& s) { return s.target_id == "t21"; });
  ASSERT_NE(w, all.slowest.end());
  EXPECT_EQ(w->session_wait_ms, 700);
  EXPECT_EQ(w->total_ms, 150);

  auto j = long_tail_json(lt);
  EXPECT_EQ(j.at("timed_targets").as_int64(), 22);
  EXPECT_EQ(j.at("phases").as_array().size(), 6u);
  EXPECT_EQ(j.at("phases").as_array()[0].at("p99_ms").as_int64(), 10000);
  EXPECT_EQ(j.at("slowest").as_array()[1].at("timings_ms").at("install").as_int64(), 5000);
  EXPECT_EQ(compute_long_tail({}).timed, 0);
}

TEST(run_view, slowest_ties_break_by_target_id) {
  std::vector<store::target_result> rs{timed("b", "succeeded", 50, R"({"timings_ms":{"install":50}})"),
                                       timed("a", "succeeded", 50, R"({"timings_ms":{"install":50}})"),
                                       timed("c", "succeeded", 60, R"({"timings_ms":{"install":60}})")};
  auto lt = compute_long_tail(rs, 10);
  ASSERT_EQ(lt.slowest.size(), 3u);
  EXPECT_EQ(lt.slowest[0].target_id, "c");
  EXPECT_EQ(lt.slowest[1].target_id, "a");
  EXPECT_EQ(lt.slowest[2].target_id, "b");
}

TEST(run_view, result_filter_names_the_field_of_a_bad_value) {
  auto ok = parse_result_filter("failed", "network");
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->matches(timed("t", "failed", 1, "", "network")));
  EXPECT_FALSE(ok->matches(timed("t", "failed", 1, "", "auth")));
  EXPECT_FALSE(ok->matches(timed("t", "succeeded", 1, "")));
  auto none = parse_result_filter("", "");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->matches(timed("t", "pending", 0, "")));
  for (auto s : result_statuses) EXPECT_TRUE(parse_result_filter(s, "")) << s;
  auto bad_status = parse_result_filter("done", "");
  ASSERT_FALSE(bad_status);
  EXPECT_EQ(bad_status.error().field, "status");
  EXPECT_NE(bad_status.error().message.find("succeeded, failed, skipped, cancelled, pending"), std::string::npos)
      << bad_status.error().message;
  auto bad_class = parse_result_filter("failed", "timeout");
  ASSERT_FALSE(bad_class);
  EXPECT_EQ(bad_class.error().field, "error_class");
  EXPECT_NE(bad_class.error().message.find("network"), std::string::npos) << bad_class.error().message;
  EXPECT_FALSE(parse_result_filter("", "none")) << "\"none\" is no failure class";
  EXPECT_FALSE(parse_result_filter("FAILED", ""));
}

TEST(run_view, facets_count_every_status_and_the_classes_present) {
  std::vector<store::target_result> rs{timed("a", "failed", 1, "", "network"), timed("b", "failed", 1, "", "network"),
                                       timed("c", "failed", 1, "", "auth"), timed("d", "succeeded", 1, ""),
                                       timed("e", "pending", 0, "")};
  auto f = facet_counts(rs);
  EXPECT_EQ(f.status.size(), result_statuses.size());
  EXPECT_EQ(f.status.at("failed"), 3);
  EXPECT_EQ(f.status.at("succeeded"), 1);
  EXPECT_EQ(f.status.at("pending"), 1);
  EXPECT_EQ(f.status.at("cancelled"), 0);
  EXPECT_EQ(f.error_class, (std::map<std::string, std::int64_t>{{"auth", 1}, {"network", 2}}));
  auto j = facets_json(f);
  EXPECT_EQ(j.at("error_class").at("network").as_int64(), 2);
  // In the statuses' own order (the filter menu's), not alphabetical.
  std::vector<std::string> order;
  for (const auto& kv : j.at("status").as_object()) order.emplace_back(kv.key());
  EXPECT_EQ(order, (std::vector<std::string>{"succeeded", "failed", "skipped", "cancelled", "pending"}));
}

// Lanes: a connection is reused by the next target with its key; otherwise the first target
// whose destination may start; a target whose session could not start goes back in its place.
TEST(target_queue, reuse_first_then_order_skipping_full_destinations) {
  target_queue q({{"h1:22", "k1"}, {"h2:22", "k2"}, {"h1:22", "k1"}, {"", ""}, {"h2:22", "k2"}, {"h1:22", "k1b"}});
  EXPECT_EQ(q.pending(), 6u);
  EXPECT_EQ(q.take_reusing("k1"), 0u);
  EXPECT_EQ(q.take_reusing("k1"), 2u);
  EXPECT_EQ(q.take_reusing("k1"), std::nullopt);
  EXPECT_EQ(q.take_reusing(""), std::nullopt) << "an empty key is never shared";
  // h2 is full: the file target (no destination) and then h1's other login go first.
  int asked_h2 = 0;
  auto h2_full = [&](const std::string& d) {
    asked_h2 += d == "h2:22";
    return d != "h2:22";
  };
  EXPECT_EQ(q.take_next(h2_full), 3u);
  EXPECT_EQ(asked_h2, 1);
  asked_h2 = 0;
  EXPECT_EQ(q.take_next(h2_full), 5u);
  EXPECT_EQ(asked_h2, 1) << "asked once per destination, not per target";
  EXPECT_EQ(q.take_next(h2_full), std::nullopt);
  EXPECT_EQ(q.first_pending(), 1u);
  // The session could not start after all: back in its place, reusable by key again.
  auto i = q.take_next([](const std::string&) { return true; });
  ASSERT_EQ(i, 1u);
  q.put_back(*i);
  EXPECT_EQ(q.take_reusing("k2"), 1u);
  EXPECT_EQ(q.take_next([](const std::string&) { return true; }), 4u);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.first_pending(), std::nullopt);
}

// Issue 28: a results page as a role below admin sees it has no error_detail (why a connect
// failed), the rest untouched; anything that is no page is left alone.
TEST(run_view, strip_admin_detail_drops_only_the_detail) {
  auto page = boost::json::parse(R"({"items":[{"target_id":"a","error":"connect: could not connect to h:22",)"
                                 R"("error_detail":"connect: cannot connect to h:22: Connection refused"},)"
                                 R"({"target_id":"b","status":"succeeded"}],"total":2})");
  certfleet::distribution::strip_admin_detail(page);
  EXPECT_EQ(boost::json::serialize(page),
            R"({"items":[{"target_id":"a","error":"connect: could not connect to h:22"},{"target_id":"b","status":"succeeded"}],"total":2})");
  boost::json::value odd = boost::json::parse(R"({"items":7})");
  certfleet::distribution::strip_admin_detail(odd);
  EXPECT_EQ(boost::json::serialize(odd), R"({"items":7})");
}

}  // namespace
}  // namespace certfleet::distribution
