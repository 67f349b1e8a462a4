// Fan-out end to end: batch children in parallel, retry waves, one aggregate, one notification,
// canary, fail-fast, cancel, and recovery from a worker SIGKILLed at each crash point.
#include "certfleet/distribution/engine.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/store/catalog.hpp"
#include "answer_times.hpp"
#include "dist_fixture.hpp"
#include "run_sync.hpp"

#include <random>
#include <set>

namespace dist_test {
namespace {

constexpr const char* hook_secret = "notify-secret";

// Settings, a signed webhook channel on the sink and a distribution.finished rule.
void wire_notifications(dist_env& env, testbed::webhook_sink& sink, json::object settings) {
  settings["egress_allow_list"] = "127.0.0.1/32";
  env.set_settings(settings);
  auto secret = str(env.ok("POST", "credentials",
                           json::serialize(json::object{{"name", "hook-secret"}, {"kind", "password"}, {"password", hook_secret}}),
                           201),
                    "id");
  auto channel = str(env.ok("POST", "notification-channels",
                            json::serialize(json::object{{"name", "sink"}, {"kind", "webhook"}, {"url", sink.url()},
                                                         {"secret_credential_id", secret}}),
                            201),
                     "id");
  env.ok("POST", "notification-rules",
         json::serialize(json::object{{"event", "distribution.finished"}, {"channel_id", channel}}), 201);
}

// Exactly one notification for this distribution's run arrives (and no second one within a grace).
void expect_one_notification(testbed::webhook_sink& sink, const std::string& dist, std::int64_t run) {
  EXPECT_TRUE(sink.wait_for(1, 30s));
  std::this_thread::sleep_for(1500ms);
  int n = 0;
  for (const auto& r : sink.requests()) {
    auto body = json::parse(r.body);
    if (str(body.at("data"), "distribution_id") != dist || num(body.at("data"), "run_no") != run) continue;
    ++n;
    EXPECT_TRUE(r.signature_valid(hook_secret));
    EXPECT_EQ(r.header("x-certfleet-event-id"), str(body, "event_id"));
  }
  EXPECT_EQ(n, 1);
}

struct fleet_run {
  std::string cert, cred, dist;
  std::vector<std::string> targets;
};

fleet_run make_fleet_distribution(dist_env& env, int n, json::object extra = {},
                                  const std::function<void(json::object&, int)>& tweak = {}) {
  fleet_run f;
  f.cert = env.create_certificate("fleet-cert", testbed::make_certificate({}));
  f.cred = env.create_credential();
  for (int i = 0; i < n; ++i) {
    auto body = env.ssh_target_body(fmt::format("host{:03}", i), static_cast<std::size_t>(i), f.cred);
    if (tweak) tweak(body, i);
    f.targets.push_back(env.create_target(body));
  }
  f.dist = env.create_distribution("fleet", f.cert, f.targets, std::move(extra));
  return f;
}

std::map<std::string, json::object> by_target(const std::vector<json::object>& results) {
  std::map<std::string, json::object> out;
  for (const auto& r : results) out[str(r, "target_id")] = r;
  return out;
}

TEST(fanout, five_hundred_targets_ten_parallel_children_each_target_once_one_notification) {
  dist_env env(10);
  env.start("all", {"worker_dist_concurrency=16"});
  testbed::webhook_sink sink;
  wire_notifications(env, sink,
                     {{"distribution_fanout_threshold", "100"}, {"distribution_fanout_batch_size", "50"},
                      {"distribution_ssh_max_concurrency", "10"}});
  auto f = make_fleet_distribution(env, 500);
  auto run = env.execute(f.dist);
  EXPECT_EQ(str(run, "mode"), "fan_out");
  ASSERT_EQ(run.at("job_ids").as_array().size(), 10u);
  auto d = env.wait_done(f.dist, 600s);
  ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
  auto& fo = d.at("fan_out");
  EXPECT_EQ(num(fo, "total"), 10);
  EXPECT_EQ(num(fo, "retrying"), 0);
  // Ten batch children; on a loaded machine a session may time out and go through a retry wave
  // (a transient class), which adds retry children, never batches.
  int batches = 0;
  for (auto& c : fo.at("finalized_jobs").as_array()) batches += str(c, "kind") == "batch";
  EXPECT_EQ(batches, 10);
  auto results = env.results(f.dist);
  ASSERT_EQ(results.size(), 500u);
  // DESIGN §6's one time format: created/updated/run_started/run_finished_at, each result's
  // started/finished_at.
  EXPECT_GE(testbed::expect_answer_times(d, "distribution"), 4);
  EXPECT_EQ(testbed::expect_answer_times(json::value_from(results), "results"), 1000);
  std::set<std::string> seen;
  int retried = 0;
  for (auto& r : results) {
    EXPECT_EQ(r.at("status"), "succeeded");
    retried += r.at("retry_attempt").as_int64() > 0;
    EXPECT_TRUE(seen.insert(str(r, "target_id")).second);
  }
  if (retried) std::cerr << retried << " of 500 targets needed a retry wave (machine load)\n";
  // Delivered once: every target's files are there, and each child ran its own 50.
  for (int i = 0; i < 500; i += 37)
    EXPECT_FALSE(slurp(env.target_dir(fmt::format("host{:03}", i)) / "cert.pem").empty());
  // The children overlapped in time (they ran in parallel, not one after another).
  // ISO-8601 UTC times of one format compare as text.
  std::vector<std::pair<std::string, std::string>> spans;
  for (auto& id : run.at("job_ids").as_array()) {
    auto j = env.ok("GET", "jobs/" + std::string(id.as_string()));
    EXPECT_EQ(str(j, "status"), "completed");
    spans.emplace_back(str(j, "started_at"), str(j, "completed_at"));
  }
  int max_overlap = 0;
  for (auto& a : spans) {
    int n = 0;
    for (auto& b : spans) n += b.first <= a.first && a.first < b.second;
    max_overlap = std::max(max_overlap, n);
  }
  EXPECT_GE(max_overlap, 2) << "children did not run in parallel";
  expect_one_notification(sink, f.dist, 1);
}

TEST(fanout, transient_targets_go_through_waves_permanent_ones_never_and_a_late_success_counts) {
  dist_env env(2);
  env.start();
  testbed::webhook_sink sink;
  wire_notifications(env, sink, {{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  testbed::closed_port closed;
  // host000, host001: fine. host002: post command fails once (transient, then succeeds).
  // host003: nothing listens (network: retried, never succeeds). host004: destination under a
  // file (io_permanent: never retried). host005: fine.
  auto f = make_fleet_distribution(env, 6, {}, [&](json::object& b, int i) {
    auto& ssh = b["ssh"].as_object();
    if (i == 2) {
      auto marker = env.target_dir("host002") / "flaky-once";
      ssh["post_command"] = fmt::format("test -f {0} || {{ touch {0}; exit 1; }}", marker.string());
    }
    if (i == 3) ssh["port"] = closed.port();
    if (i == 4) {
      write_file(env.dir.path() / "a-file", "x");
      ssh["cert_path"] = (env.dir.path() / "a-file" / "cert.pem").string();
      ssh["key_path"] = (env.dir.path() / "a-file" / "key.pem").string();
    }
  });
  env.execute(f.dist);
  auto d = env.wait_done(f.dist, 180s);
  EXPECT_EQ(str(d, "status"), "partial") << json::serialize(d);
  auto r = by_target(env.results(f.dist));
  // On a loaded machine any session may time out once (network, transient) and succeed in a
  // wave: the healthy targets must succeed, at whatever wave.
  for (int i : {0, 1, 5}) EXPECT_EQ(r[f.targets[i]].at("status"), "succeeded");
  EXPECT_EQ(r[f.targets[2]].at("status"), "succeeded") << json::serialize(r[f.targets[2]]);
  EXPECT_GE(r[f.targets[2]].at("retry_attempt").as_int64(), 1);
  EXPECT_EQ(r[f.targets[3]].at("status"), "failed");
  EXPECT_EQ(str(r[f.targets[3]], "error_class"), "network");
  EXPECT_EQ(r[f.targets[3]].at("retry_attempt").as_int64(), 3);
  EXPECT_EQ(r[f.targets[4]].at("status"), "failed");
  EXPECT_EQ(str(r[f.targets[4]], "error_class"), "io_permanent");
  EXPECT_LE(r[f.targets[4]].at("retry_attempt").as_int64(), 1);  // never retried after io_permanent
  auto& fo = d.at("fan_out");
  EXPECT_EQ(num(fo, "total"), 3);
  EXPECT_EQ(num(fo, "retrying"), 0);
  EXPECT_EQ(num(fo, "retry_wave"), 3);
  auto finalized = static_cast<std::int64_t>(fo.at("finalized_jobs").as_array().size());
  EXPECT_EQ(num(fo, "succeeded") + num(fo, "failed") + num(fo, "partial") + num(fo, "cancelled"), finalized);
  // batch 1 ok; batch 2 (flaky, closed) partial -> retry 1 (both) partial -> retries 2, 3 of the
  // closed one failed; batch 3 (permanent, ok) partial with nothing retryable: 6 children (more
  // when a healthy session timed out under load and took a wave).
  EXPECT_GE(finalized, 6);
  EXPECT_EQ(d.at("summary").at("succeeded").as_int64(), 4);
  EXPECT_EQ(d.at("summary").at("failed").as_int64(), 2);
  expect_one_notification(sink, f.dist, 1);

  // The stored children carry DESIGN §4's field names: batches `target_id_batch`, retry waves
  // `retry_target_ids` with `retry_attempt`, never the old `target_ids`.
  auto jobs = env.ok("GET", "jobs?type=distribution_execute&page_size=200");
  int batch_children = 0, retry_children = 0;
  for (auto& jv : jobs.at("items").as_array()) {
    auto& payload = jv.at("payload").as_object();
    auto mode = str(payload, "mode");
    EXPECT_FALSE(payload.contains("target_ids")) << json::serialize(payload);
    if (mode == "batch") {
      ++batch_children;
      EXPECT_TRUE(payload.contains("target_id_batch")) << json::serialize(payload);
    } else if (mode == "retry") {
      ++retry_children;
      EXPECT_TRUE(payload.contains("retry_target_ids")) << json::serialize(payload);
      EXPECT_GE(num(payload, "retry_attempt"), 1);
    }
  }
  EXPECT_EQ(batch_children, 3);
  EXPECT_GE(retry_children, 3);

  // retry-failed opens run 2 over exactly the two failed targets.
  auto again = env.ok("POST", "distributions/" + f.dist + "/retry-failed", "", 202);
  EXPECT_EQ(num(again, "targets"), 2);
  EXPECT_EQ(num(again, "run_no"), 2);
}

TEST(fanout, waves_are_counted_per_lineage) {
  dist_env env(2);
  env.start();
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  testbed::closed_port closed;
  // 10 batches of 2: batches 1-3 have a dead port (they exhaust their waves), batches 4-10 a
  // target that fails once: each still gets its own retry.
  auto f = make_fleet_distribution(env, 20, {}, [&](json::object& b, int i) {
    auto& ssh = b["ssh"].as_object();
    if (i % 2 == 1 && i < 6) ssh["port"] = closed.port();
    if (i % 2 == 1 && i >= 6) {
      auto marker = env.target_dir(fmt::format("host{:03}", i)) / "flaky-once";
      ssh["post_command"] = fmt::format("test -f {0} || {{ touch {0}; exit 1; }}", marker.string());
    }
  });
  env.execute(f.dist);
  auto d = env.wait_done(f.dist, 240s);
  EXPECT_EQ(str(d, "status"), "partial");
  auto r = by_target(env.results(f.dist));
  for (int i = 1; i < 20; i += 2) {
    if (i < 6) {
      EXPECT_EQ(r[f.targets[i]].at("status"), "failed");
      EXPECT_EQ(r[f.targets[i]].at("retry_attempt").as_int64(), 3);
    } else {
      EXPECT_EQ(r[f.targets[i]].at("status"), "succeeded") << i;
      EXPECT_GE(r[f.targets[i]].at("retry_attempt").as_int64(), 1) << i;
    }
  }
}

// Every target's result, for a failure message: which target failed and why.
static std::string results_text(const std::vector<json::object>& results) {
  std::string out;
  for (auto& r : results) out += json::serialize(r) + "\n";
  return out;
}

TEST(fanout, canary_failure_cancels_the_held_batches_and_success_releases_them) {
  dist_env env(2);
  env.start();
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  testbed::closed_port closed;
  // Sorted ids: the first batch holds the first two targets created.
  auto bad = make_fleet_distribution(env, 6, {{"canary", true}}, [&](json::object& b, int i) {
    if (i == 0) b["ssh"].as_object()["port"] = closed.port();
  });
  auto run = env.execute(bad.dist);
  ASSERT_EQ(run.at("job_ids").as_array().size(), 3u);
  auto held = env.ok("GET", "jobs/" + std::string(run.at("job_ids").as_array().at(1).as_string()));
  auto d = env.wait_done(bad.dist, 120s);
  EXPECT_EQ(str(d, "status"), "partial") << json::serialize(d) << "\n" << results_text(env.results(bad.dist));
  EXPECT_NE(str(d, "error").find("canary"), std::string::npos) << json::serialize(d);
  EXPECT_EQ(num(d.at("fan_out"), "cancelled"), 2);
  auto r = by_target(env.results(bad.dist));
  for (int i = 2; i < 6; ++i) EXPECT_EQ(r[bad.targets[i]].at("status"), "cancelled");
  for (int i = 2; i < 6; ++i) EXPECT_TRUE(slurp(env.target_dir(fmt::format("host{:03}", i)) / "cert.pem").empty());

  // A good canary releases the rest.
  json::array ids;
  for (int i = 2; i < 6; ++i) ids.emplace_back(bad.targets[i]);
  auto good = str(env.ok("POST", "distributions",
                         json::serialize(json::object{{"name", "good"}, {"certificate_id", bad.cert}, {"target_ids", ids},
                                                      {"canary", true}}),
                         201),
                  "id");
  env.execute(good);
  d = env.wait_done(good, 120s);
  EXPECT_EQ(str(d, "status"), "success") << json::serialize(d) << "\n" << results_text(env.results(good));
}

TEST(fanout, fail_fast_stops_the_run_once_the_budget_is_exceeded) {
  dist_env env(2);
  // One dist job at a time, so the later batches are still pending when the budget runs out.
  env.start("all", {"worker_dist_concurrency=1"});
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  testbed::closed_port closed;
  auto f = make_fleet_distribution(env, 8, {{"fail_fast", true}, {"failure_tolerance", 0.1}},
                                   [&](json::object& b, int i) {
                                     if (i < 2) b["ssh"].as_object()["port"] = closed.port();
                                   });
  env.execute(f.dist);
  auto d = env.wait_done(f.dist, 120s);
  EXPECT_EQ(str(d, "status"), "failed");
  EXPECT_NE(str(d, "error").find("stopped: failure budget exceeded"), std::string::npos) << json::serialize(d);
  EXPECT_TRUE(d.at("fan_out").at("fail_fast_fired").as_bool());
  EXPECT_GE(num(d.at("fan_out"), "cancelled"), 1);
}

TEST(fanout, cancel_ends_the_run_cancelled_and_nothing_is_redriven) {
  dist_env env(2);
  env.start("all", {"worker_dist_concurrency=2"});
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"},
                    {"distribution_ssh_max_concurrency", "1"}});
  auto f = make_fleet_distribution(env, 8, {}, [&](json::object& b, int) { b["ssh"].as_object()["post_command"] = "sleep 2"; });
  env.execute(f.dist);
  std::this_thread::sleep_for(1s);
  auto c = env.ok("POST", "distributions/" + f.dist + "/cancel", "", 202);
  EXPECT_GE(num(c, "cancelled_jobs"), 1);
  auto d = env.wait_done(f.dist, 60s);
  EXPECT_EQ(str(d, "status"), "cancelled") << json::serialize(d);
  auto jobs_after = env.ok("GET", "jobs?type=distribution_execute&page_size=200");
  std::this_thread::sleep_for(2s);
  auto later = env.ok("GET", "jobs?type=distribution_execute&page_size=200");
  EXPECT_EQ(num(jobs_after, "total"), num(later, "total"));
  EXPECT_EQ(num(later, "total"), 4) << "no retry child after a cancel";
}

// Issue 31: an operator re-drives one child's failed targets, then one named target, in the run
// that ended; each re-drive reopens the run, is counted like a retry wave, and its end is told.
TEST(fanout, a_finished_run_is_redriven_by_child_and_by_target_and_counted_once) {
  dist_env env(2);
  env.start();
  testbed::webhook_sink sink;
  wire_notifications(env, sink, {{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  // host001 and host003 write under a plain file (io_permanent: no automatic wave) until the
  // operator replaces the file with a directory.
  std::vector<fs::path> blockers;
  auto f = make_fleet_distribution(env, 4, {}, [&](json::object& b, int i) {
    if (i % 2 == 0) return;
    auto blocker = env.dir.path() / fmt::format("blocker{}", i);
    write_file(blocker, "x");
    blockers.push_back(blocker);
    auto& ssh = b["ssh"].as_object();
    ssh["cert_path"] = (blocker / "cert.pem").string();
    ssh["key_path"] = (blocker / "key.pem").string();
  });
  env.execute(f.dist);
  auto d = env.wait_done(f.dist, 120s);
  ASSERT_EQ(str(d, "status"), "partial") << json::serialize(d);
  auto r = by_target(env.results(f.dist));
  ASSERT_EQ(r[f.targets[1]].at("status"), "failed");
  ASSERT_EQ(str(r[f.targets[1]], "error_class"), "io_permanent");
  const std::string child = str(r[f.targets[1]], "job_id");
  const std::string path = "distributions/" + f.dist + "/retry-targets";

  // Refused, changing nothing: a target that succeeded, one outside the run, a job with no result
  // in it, a bad body.
  auto refused = [&](const std::string& body, int status, const std::string& field) {
    auto a = env.call("POST", path, body);
    EXPECT_EQ(a.status, status) << body << " " << a.body;
    EXPECT_EQ(str(a.json().at("error"), "field"), field) << a.body;
  };
  refused(json::serialize(json::object{{"target_ids", json::array{f.targets[0].c_str()}}}), 409, "target_ids[0]");
  refused(R"({"target_ids":["65f0c0ffee0000000000000a"]})", 400, "target_ids[0]");
  refused(R"({"job_id":"65f0c0ffee0000000000000b"})", 404, "job_id");
  refused(R"({"job_id":"65f0c0ffee0000000000000b","target_ids":[]})", 400, "body");
  refused("{}", 400, "body");
  EXPECT_EQ(str(env.ok("GET", "distributions/" + f.dist), "status"), "partial");

  // The child of host000 and host001: only host001 runs again, in run 1, as wave 1.
  fs::remove(blockers[0]);
  fs::create_directories(blockers[0]);
  auto a = env.ok("POST", path, json::serialize(json::object{{"job_id", child}}), 202);
  EXPECT_EQ(num(a, "run_no"), 1);
  EXPECT_EQ(num(a, "retry_attempt"), 1);
  EXPECT_EQ(num(a, "redrive"), 1);
  EXPECT_EQ(a.at("target_ids"), (json::array{f.targets[1].c_str()}));
  // A second click is refused: the run is running again (or, once it ended, the child has no
  // failed target left).
  auto twice = env.call("POST", path, json::serialize(json::object{{"job_id", child}}));
  EXPECT_EQ(twice.status, 409) << twice.body;
  d = env.wait_done(f.dist, 120s);
  EXPECT_EQ(str(d, "status"), "partial") << json::serialize(d);
  EXPECT_EQ(num(d, "run_no"), 1);
  r = by_target(env.results(f.dist));
  EXPECT_EQ(r[f.targets[1]].at("status"), "succeeded") << json::serialize(r[f.targets[1]]);
  EXPECT_EQ(r[f.targets[1]].at("retry_attempt").as_int64(), 1);
  EXPECT_EQ(str(r[f.targets[1]], "job_id"), str(a, "job_id"));
  EXPECT_EQ(d.at("summary").at("succeeded").as_int64(), 3);
  EXPECT_EQ(d.at("summary").at("failed").as_int64(), 1);
  auto& fo = d.at("fan_out");
  auto finalized = static_cast<std::int64_t>(fo.at("finalized_jobs").as_array().size());
  EXPECT_EQ(finalized, 3);  // two batches and the re-drive, each counted once
  EXPECT_EQ(num(fo, "succeeded") + num(fo, "failed") + num(fo, "partial") + num(fo, "cancelled"), finalized);
  EXPECT_EQ(num(fo, "retrying"), 0);
  auto redriven = env.ok("GET", "jobs/" + str(a, "job_id"));
  EXPECT_EQ(str(redriven, "parent_job_id"), child);
  EXPECT_EQ(str(redriven, "idempotency_key"), fmt::format("dist:{}:1:redrive:1", f.dist));

  // One named target: host003, after its fix; the run ends success.
  fs::remove(blockers[1]);
  fs::create_directories(blockers[1]);
  auto b = env.ok("POST", path, json::serialize(json::object{{"target_ids", json::array{f.targets[3].c_str()}}}), 202);
  EXPECT_EQ(num(b, "redrive"), 2);
  d = env.wait_done(f.dist, 120s);
  EXPECT_EQ(str(d, "status"), "success") << json::serialize(d);
  EXPECT_EQ(str(d, "error"), "");
  EXPECT_EQ(d.at("summary").at("succeeded").as_int64(), 4);
  EXPECT_EQ(num(d, "run_redrives"), 2) << json::serialize(d);

  // Each end of run 1 is told once: the first, then one per re-drive (event ids apart).
  ASSERT_TRUE(sink.wait_for(3, 30s));
  std::this_thread::sleep_for(1500ms);
  std::set<std::string> events;
  std::vector<std::string> statuses;
  for (const auto& q : sink.requests()) {
    auto body = json::parse(q.body);
    if (str(body.at("data"), "distribution_id") != f.dist) continue;
    events.insert(str(body, "event_id"));
    statuses.push_back(str(body.at("data"), "status"));
  }
  EXPECT_EQ(events.size(), 3u);
  EXPECT_EQ(statuses.size(), 3u);
  EXPECT_TRUE(events.count(fmt::format("distribution.finished:{}:1:redrive:2", f.dist))) << *events.begin();
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), "success"), 1);
}

TEST(fanout, settings_out_of_range_are_refused_with_the_range) {
  dist_env env(0);
  env.start();
  for (auto [name, value] : std::vector<std::pair<const char*, const char*>>{
           {"distribution_fanout_threshold", "501"}, {"distribution_fanout_batch_size", "201"},
           {"distribution_ssh_max_concurrency", "51"}, {"distribution_fanout_threshold", "-1"},
           {"egress_allow_list", "10.0.0.1/8"}, {"certificate_expiry_thresholds_days", "30,0"}}) {
    auto r = env.http->put("/api/v1/settings", json::serialize(json::object{{name, value}}), env.token);
    EXPECT_EQ(r.status, 400) << name << "=" << value << ": " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), name) << r.body;
  }
  auto s = env.http->get("/api/v1/settings", env.token).json();
  EXPECT_EQ(num(s, "distribution_fanout_threshold"), 0) << json::serialize(s);
}

// Crash points: a worker SIGKILLed at each; a new worker and the reaper recover; every target
// ends with a result, the status matches, one notification.
struct crash_case {
  const char* point;
  const char* after;
};

class fanout_crash : public ::testing::TestWithParam<crash_case> {};

TEST_P(fanout_crash, a_worker_killed_at_the_point_loses_nothing_and_counts_nothing_twice) {
  dist_env env(2);
  env.start("api");
  testbed::webhook_sink sink;
  wire_notifications(env, sink, {{"distribution_fanout_threshold", "4"}, {"distribution_fanout_batch_size", "4"}});
  auto f = make_fleet_distribution(env, 12);
  std::vector<std::string> fast{"lease_ms=2000", "worker_dist_concurrency=4"};
  auto& doomed = env.start("worker", fast, {{"CERTFLEET_CRASH_AT", GetParam().point}, {"CERTFLEET_CRASH_AFTER", GetParam().after}});
  env.execute(f.dist);
  EXPECT_NE(doomed.wait(60s), -1) << "the worker did not reach " << GetParam().point;
  env.start("worker", fast);
  auto d = env.wait_done(f.dist, 120s);
  // The reconciliation pass finds nothing left to do (or completes a run left open).
  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"distributions", "reconcile"}));
  EXPECT_EQ(rc, 0) << out;
  d = env.wait_done(f.dist, 10s);
  EXPECT_EQ(str(d, "status"), "success") << GetParam().point << ": " << json::serialize(d) << "\njobs: "
                                          << env.call("GET", "jobs?type=distribution_execute&page_size=50").body;
  auto results = env.results(f.dist);
  ASSERT_EQ(results.size(), 12u);
  for (auto& r : results) EXPECT_EQ(r.at("status"), "succeeded") << json::serialize(r);
  auto& fo = d.at("fan_out");
  EXPECT_EQ(num(fo, "total"), 3);
  EXPECT_EQ(static_cast<std::int64_t>(fo.at("finalized_jobs").as_array().size()),
            num(fo, "succeeded") + num(fo, "failed") + num(fo, "partial") + num(fo, "cancelled"));
  expect_one_notification(sink, f.dist, 1);
}

INSTANTIATE_TEST_SUITE_P(points, fanout_crash,
                         ::testing::Values(crash_case{"target_recorded", "2"},          // mid-batch
                                           crash_case{"child_results_recorded", "1"},   // results in, counter not
                                           crash_case{"child_counted", "1"},            // inside the report transaction
                                           crash_case{"distribution_before_final", "1"}),  // last counter, no final status
                         [](const auto& info) { return std::string(info.param.point); });

// Opt-in (CERTFLEET_STRESS=1; CERTFLEET_STRESS_ROUNDS, default 50): a worker killed at a random
// crash point after a random number of hits, again and again; every run ends success with every
// target delivered and one notification.
TEST(fanout_stress, random_kills) {
  if (!std::getenv("CERTFLEET_STRESS")) GTEST_SKIP() << "set CERTFLEET_STRESS=1 to run";
  int rounds = std::getenv("CERTFLEET_STRESS_ROUNDS") ? std::atoi(std::getenv("CERTFLEET_STRESS_ROUNDS")) : 50;
  const char* points[] = {"job_started", "target_recorded", "child_results_recorded", "before_finish", "child_counted",
                          "distribution_before_final"};
  std::mt19937 rng(std::random_device{}());
  dist_env env(2);
  env.start("api");
  testbed::webhook_sink sink;
  wire_notifications(env, sink, {{"distribution_fanout_threshold", "4"}, {"distribution_fanout_batch_size", "4"}});
  auto f = make_fleet_distribution(env, 12);
  std::vector<std::string> fast{"lease_ms=2000", "worker_dist_concurrency=4"};
  for (int round = 1; round <= rounds; ++round) {
    std::string point = points[rng() % std::size(points)];
    std::string after = std::to_string(1 + rng() % 6);
    SCOPED_TRACE(fmt::format("round {}: {} after {}", round, point, after));
    auto& doomed = env.start("worker", fast, {{"CERTFLEET_CRASH_AT", point}, {"CERTFLEET_CRASH_AFTER", after}});
    env.execute(f.dist);
    // Dead at the point, or done without reaching it that often.
    for (int i = 0; i < 300 && doomed.running(); ++i) {
      if (str(env.ok("GET", "distributions/" + f.dist), "status") != "running") break;
      std::this_thread::sleep_for(100ms);
    }
    auto& healthy = env.start("worker", fast);
    auto d = env.wait_done(f.dist, 120s);
    ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
    auto results = env.results(f.dist);
    ASSERT_EQ(results.size(), 12u);
    for (auto& r : results) ASSERT_EQ(r.at("status"), "succeeded");
    EXPECT_TRUE(sink.wait_for(static_cast<std::size_t>(round), 30s));
    expect_one_notification(sink, f.dist, round);
    doomed.signal(SIGKILL);
    healthy.signal(SIGTERM);
    healthy.wait(10s);
  }
}

TEST(fanout_crash_enqueue, a_crash_between_enqueue_and_total_leaves_no_child) {
  dist_env env(1);
  auto& api = env.start("api", {}, {{"CERTFLEET_CRASH_AT", "fanout_first_child_enqueued"}});
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  auto f = make_fleet_distribution(env, 6);
  auto r = env.call("POST", "distributions/" + f.dist + "/execute");
  EXPECT_EQ(r.status, 0) << "the API process should have died inside the transaction";
  EXPECT_NE(api.wait(10s), -1);
  env.http.reset();
  env.start("all");
  auto d = env.ok("GET", "distributions/" + f.dist);
  EXPECT_EQ(str(d, "status"), "idle") << json::serialize(d);
  EXPECT_EQ(num(env.ok("GET", "jobs?type=distribution_execute"), "total"), 0);
  env.execute(f.dist);
  EXPECT_EQ(str(env.wait_done(f.dist), "status"), "success");
}

TEST(fanout_stuck, a_run_left_open_by_a_failed_final_write_is_completed_by_reconciliation) {
  dist_env env(1);
  env.start("all", {}, {{"CERTFLEET_FAIL_AT", "distribution_final"}});
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  auto f = make_fleet_distribution(env, 4);
  env.execute(f.dist);
  // Both children finish; the final write "fails": the run stays running with all reported.
  for (int i = 0; i < 200; ++i) {
    auto d = env.ok("GET", "distributions/" + f.dist);
    if (d.at("fan_out").at("finalized_jobs").as_array().size() == 2) break;
    std::this_thread::sleep_for(100ms);
  }
  auto d = env.ok("GET", "distributions/" + f.dist);
  EXPECT_EQ(str(d, "status"), "running");
  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"distributions", "reconcile"}));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"reconciled\":1"), std::string::npos) << out;
  EXPECT_EQ(str(env.ok("GET", "distributions/" + f.dist), "status"), "success");
}

TEST(fanout_stuck, the_scheduler_sweep_completes_a_run_left_open) {
  dist_env env(1);
  env.start("api");
  env.set_settings({{"distribution_fanout_threshold", "2"}, {"distribution_fanout_batch_size", "2"}});
  auto f = make_fleet_distribution(env, 4);
  // This worker's final write "fails": its children all report, the run stays open.
  auto& broken = env.start("worker", {}, {{"CERTFLEET_FAIL_AT", "distribution_final"}});
  env.execute(f.dist);
  for (int i = 0; i < 200; ++i) {
    auto d = env.ok("GET", "distributions/" + f.dist);
    if (d.at("fan_out").at("finalized_jobs").as_array().size() == 2) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(str(env.ok("GET", "distributions/" + f.dist), "status"), "running");
  broken.signal(SIGTERM);
  EXPECT_EQ(broken.wait(10s), 0);
  // A healthy process with a scheduler: its next cycle's fanout_reconcile sweep closes the run.
  env.start("all", {"scheduler_interval_ms=1000", "scheduler_lease_ms=1500"});
  auto d = env.wait_done(f.dist, 30s);
  EXPECT_EQ(str(d, "status"), "success") << json::serialize(d);
  // The sweep closes the run inside its job; the job itself completes a moment later.
  bool logged = false;
  for (int i = 0; i < 100 && !logged; ++i) {
    auto sweeps = env.ok("GET", "jobs?type=maintenance_sweep&page_size=100");
    for (auto& j : sweeps.at("items").as_array()) {
      if (str(j.at("payload"), "name") != "fanout_reconcile" || str(j, "status") != "completed") continue;
      auto logs = env.ok("GET", "jobs/" + str(j, "id") + "/logs");
      for (auto& l : logs.at("lines").as_array())
        if (str(l, "message").find("fanout_reconcile: 1 distribution") != std::string::npos) logged = true;
    }
    if (!logged) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(logged) << "the sweep's job log says what it did";
}

// An execute aborted between opening the run and storing its jobs (injected: the API process
// opens the run and enqueues nothing) leaves the run `running` with no job. The distribution
// sweep re-triggers it: every target delivered once, one notification.
class retrigger : public ::testing::TestWithParam<int> {};

TEST_P(retrigger, a_run_whose_jobs_were_never_stored_is_retriggered_by_the_sweep) {
  const int threshold = GetParam();  // 0: one normal job; 2: fan-out in batches of 2
  dist_env env(1);
  env.start("api", {}, {{"CERTFLEET_FAIL_AT", "distribution_enqueue"}});
  testbed::webhook_sink sink;
  wire_notifications(env, sink, {{"distribution_fanout_threshold", std::to_string(threshold)},
                                 {"distribution_fanout_batch_size", "2"}});
  auto f = make_fleet_distribution(env, 5);
  auto r = env.ok("POST", "distributions/" + f.dist + "/execute");
  EXPECT_TRUE(r.at("job_ids").as_array().empty()) << json::serialize(r);
  EXPECT_EQ(str(env.ok("GET", "distributions/" + f.dist), "status"), "running");
  EXPECT_EQ(num(env.ok("GET", "jobs?type=distribution_execute"), "total"), 0);
  // A healthy process with a scheduler: its next cycle's `distributions` sweep re-enqueues.
  env.start("all", {"scheduler_interval_ms=1000", "scheduler_lease_ms=1500"});
  auto d = env.wait_done(f.dist, 60s);
  EXPECT_EQ(str(d, "status"), "success") << json::serialize(d);
  auto results = env.results(f.dist);
  ASSERT_EQ(results.size(), 5u);
  for (auto& res : results) EXPECT_EQ(res.at("status"), "succeeded") << json::serialize(res);
  auto jobs = env.ok("GET", "jobs?type=distribution_execute&page_size=50");
  EXPECT_EQ(num(jobs, "total"), 1) << "one re-triggered job, whatever the number of sweeps: " << json::serialize(jobs);
  EXPECT_EQ(str(jobs.at("items").as_array().at(0), "triggered_by"), "distribution_sweep") << json::serialize(jobs);
  expect_one_notification(sink, f.dist, 1);
  // Later cycles (and the CLI pass) find nothing more to do.
  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"distributions", "reconcile"}));
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("\"retriggered\":0"), std::string::npos) << out;
  EXPECT_EQ(num(env.ok("GET", "jobs?type=distribution_execute&page_size=50"), "total"), 1);
}

INSTANTIATE_TEST_SUITE_P(modes, retrigger, ::testing::Values(0, 2),
                         [](const auto& info) { return info.param ? std::string("fan_out") : std::string("normal"); });

// A duplicate report of the same child changes nothing (in-process, on a real SQLite store).
TEST(fanout_report, a_duplicate_report_changes_nothing) {
  using namespace certfleet;
  testbed::temp_dir dir;
  auto st = store::open_sqlite({dir.file("r.db"), 1, 5000, false});
  ASSERT_TRUE(st);
  auto& s = **st;
  auto project = testbed::run_sync(s.projects().ensure("default", 1))->first.id;
  auto dist = std::make_shared<store::distribution_record>();
  dist->project_id = project;
  dist->name = "d";
  dist->certificate_id = "c";
  dist->target_ids = {"t1", "t2"};
  store::tx_fn setup = [dist](store::catalog_tx& tx) -> result<void> {
    auto d = tx.insert_distribution(*dist);
    if (!d) return std::move(d).error();
    *dist = *d;
    dist->status = "running";
    dist->run_no = 1;
    dist->mode = "fan_out";
    dist->run_target_ids = dist->target_ids;
    dist->fan_out_total = 2;
    return tx.update_distribution(*dist);
  };
  ASSERT_TRUE(testbed::run_sync(s.catalog().transact(std::move(setup))));
  store::job_record child;
  child.id = "child1";
  child.type = "distribution_execute";
  child.status = store::job_status::completed;
  child.fence = 1;
  child.payload = distribution::to_payload({dist->id, 1, distribution::job_mode::batch, {"t1"}, 1, 0, 0});
  auto report = [&] {
    store::tx_fn fn = [child](store::catalog_tx& tx) -> result<void> { return distribution::report_child(tx, child, 10); };
    ASSERT_TRUE(testbed::run_sync(s.catalog().transact(std::move(fn))));
  };
  auto counters = [&] {
    auto out = std::make_shared<store::distribution_record>();
    store::read_fn fn = [out, id = dist->id](store::catalog_read& rd) -> result<void> {
      auto d = rd.get_distribution("", id);
      if (!d) return std::move(d).error();
      *out = *d;
      return {};
    };
    EXPECT_TRUE(testbed::run_sync(s.catalog().read(std::move(fn))));
    return *out;
  };
  report();
  auto once = counters();
  report();
  report();
  auto thrice = counters();
  EXPECT_EQ(once.fan_out_failed + once.fan_out_succeeded + once.fan_out_partial, 1);
  EXPECT_EQ(thrice.fan_out_failed, once.fan_out_failed);
  EXPECT_EQ(thrice.fan_out_succeeded, once.fan_out_succeeded);
  EXPECT_EQ(thrice.fan_out_retrying, once.fan_out_retrying);
  EXPECT_EQ(thrice.status, "running");  // one of two batches reported
  // A child stored before the contract's names (`target_ids`) is still read and reported (a
  // payload that does not parse fails the report's transaction).
  child.id = "child-old-format";
  child.fence = 1;
  child.payload = json::serialize(json::object{{"distribution_id", dist->id}, {"run_no", 1}, {"mode", "batch"},
                                               {"target_ids", json::array{"t2"}}, {"batch_no", 2}});
  report();
  auto both = counters();
  EXPECT_EQ(both.fan_out_failed + both.fan_out_succeeded + both.fan_out_partial, 2);
  s.close();
}

}  // namespace
}  // namespace dist_test
