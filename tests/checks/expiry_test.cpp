// certificate_expiration_check: which certificates are marked, the expiring-soon gauge, one
// notification per certificate per threshold, and the scheduler's hour-bucket key.
#include "certfleet/core/object_id.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/notify/channel.hpp"
#include "certfleet/checks/expiry.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/store/catalog.hpp"
#include "dist_fixture.hpp"
#include "run_sync.hpp"

#include <fstream>
#include <optional>
#include <sstream>

namespace dist_test {
namespace {

using namespace certfleet;
constexpr std::int64_t day = 86'400'000;

TEST(expiry_plan, thresholds_are_crossed_once_and_the_tightest_is_notified) {
  catalog::certificate_doc d;
  const std::int64_t now = 1'000'000'000'000;
  std::vector<std::int64_t> th{30, 14, 7, 1};
  d.not_after = now + 5 * day;
  auto s = catalog::plan_expiry(d, now, th);
  EXPECT_TRUE(s.expiring_soon);
  EXPECT_EQ(s.newly_crossed, (std::vector<std::int64_t>{30, 14, 7}));
  EXPECT_EQ(s.notify_days, 7);
  d.notified_days = s.newly_crossed;
  EXPECT_FALSE(catalog::plan_expiry(d, now, th).notify_days);  // never twice
  auto later = catalog::plan_expiry(d, now + 4 * day + 1, th);
  EXPECT_EQ(later.notify_days, 1);
  auto expired = catalog::plan_expiry(d, now + 6 * day, th);
  EXPECT_TRUE(expired.mark_expired);
  EXPECT_EQ(expired.notify_days, 0);
  d.not_after = now + 40 * day;
  EXPECT_FALSE(catalog::plan_expiry(d, now, th).expiring_soon);
}

TEST(expiration_check, marks_the_right_certificates_counts_the_gauge_and_notifies_once_each) {
  dist_env env(0);
  env.start();
  testbed::webhook_sink sink;
  env.set_settings({{"egress_allow_list", "127.0.0.1/32"}});
  auto channel = str(env.ok("POST", "notification-channels",
                            json::serialize(json::object{{"name", "ops"}, {"kind", "webhook"}, {"url", sink.url()}}), 201),
                     "id");
  for (const char* ev : {"certificate.expiring", "certificate.expired"})
    env.ok("POST", "notification-rules", json::serialize(json::object{{"event", ev}, {"channel_id", channel}}), 201);
  auto now = testbed::unix_now_ms();
  std::map<std::string, std::string> ids;
  for (auto [name, days] : std::vector<std::pair<std::string, std::int64_t>>{{"in5", 5}, {"in20", 20}, {"in60", 60}}) {
    auto c = testbed::make_certificate({.common_name = name, .not_after_ms = now + days * day});
    ids[name] = env.create_certificate(name, c);
  }
  // The gauge: two within the 30-day window, none expired.
  auto metrics = env.http->get("/metrics").body;
  EXPECT_NE(metrics.find("certfleet_certificates_expiring_soon 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("certfleet_certificates_expired 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("certfleet_scheduler_leader 1\n"), std::string::npos);

  // The check, run as a job: in5 crosses 30/14/7 (one notification, days 7), in20 crosses 30.
  auto run_check = [&](const std::string& key) {
    auto j = env.ok("POST", "jobs",
                    json::serialize(json::object{{"type", "certificate_expiration_check"}, {"idempotency_key", key}}), 201);
    auto id = str(j, "id");
    for (int i = 0; i < 200; ++i) {
      if (str(env.ok("GET", "jobs/" + id), "status") == "completed") return;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "check did not complete";
  };
  run_check("check-1");
  ASSERT_TRUE(sink.wait_for(2, 30s));
  run_check("check-2");  // nothing new crossed: nothing sent again
  std::this_thread::sleep_for(1500ms);
  std::map<std::string, std::int64_t> got;
  for (auto& r : sink.requests()) {
    auto b = json::parse(r.body);
    EXPECT_EQ(str(b, "event"), "certificate.expiring");
    got[str(b.at("data"), "name")] = num(b.at("data"), "days_threshold");
  }
  EXPECT_EQ(sink.count(), 2u);
  EXPECT_EQ(got["in5"], 7);
  EXPECT_EQ(got["in20"], 30);
  EXPECT_EQ(got.count("in60"), 0u);
}

TEST(expiration_check, expired_certificates_are_marked_and_notified_once) {
  // Time moves forward by running the check with a later `now` against a real store file.
  testbed::temp_dir dir;
  auto st = store::open_sqlite({dir.file("x.db"), 1, 5000, false});
  ASSERT_TRUE(st);
  auto& s = **st;
  auto project = testbed::run_sync(s.projects().ensure("default", 1))->first.id;
  auto key = *kek::generate();
  auto now = testbed::unix_now_ms();
  auto add = [&](const std::string& name, std::int64_t days) {
    auto pem = testbed::make_certificate({.common_name = name, .not_after_ms = now + days * day});
    catalog::new_certificate c;
    auto parsed = catalog::parse_certificate_request(
        json::serialize(json::object{{"name", name}, {"cert_pem", pem.cert_pem}, {"key_pem", pem.key_pem}}), now);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto obj = std::make_shared<store::catalog_object>(
        *catalog::make_certificate_object(*parsed, key, new_object_id(), project, now));
    store::tx_fn fn = [obj](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_object(*obj);
      if (!r) return std::move(r).error();
      return {};
    };
    EXPECT_TRUE(testbed::run_sync(s.catalog().transact(std::move(fn))));
    return obj->id;
  };
  auto soon = add("soon", 2);
  auto far = add("far", 100);
  auto channel = std::make_shared<store::catalog_object>();
  channel->id = new_object_id();
  channel->project_id = project;
  channel->kind = std::string(store::kind_channel);
  channel->name = "ops";
  channel->doc = R"({"kind":"webhook","url":"http://127.0.0.1:9/"})";
  store::tx_fn rules = [channel, project](store::catalog_tx& tx) -> result<void> {
    if (auto r = tx.insert_object(*channel); !r) return std::move(r).error();
    store::catalog_object rule;
    rule.id = new_object_id();
    rule.project_id = project;
    rule.kind = std::string(store::kind_rule);
    rule.name = notify::rule_object_name("certificate.expired", channel->id);  // as the API names it
    rule.ref_id = channel->id;
    rule.doc = R"({"event":"certificate.expired","channel_id":")" + channel->id + "\"}";
    if (auto r = tx.insert_object(rule); !r) return std::move(r).error();
    return {};
  };
  ASSERT_TRUE(testbed::run_sync(s.catalog().transact(std::move(rules))));

  auto later = now + 3 * day;  // "soon" is past its not_after by then
  auto r1 = testbed::run_sync(checks::check_expirations(s, later));
  ASSERT_TRUE(r1) << r1.error().message;
  EXPECT_EQ(r1->expired_marked, 1);
  EXPECT_EQ(r1->notifications, 1);
  auto r2 = testbed::run_sync(checks::check_expirations(s, later + 3600'000));
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->expired_marked, 0);
  EXPECT_EQ(r2->notifications, 0);
  auto doc = std::make_shared<std::string>();
  store::read_fn read = [doc, project, soon](store::catalog_read& rd) -> result<void> {
    auto o = rd.get_object(project, store::kind_certificate, soon);
    if (!o) return std::move(o).error();
    *doc = o->doc;
    return {};
  };
  ASSERT_TRUE(testbed::run_sync(s.catalog().read(std::move(read))));
  EXPECT_NE(doc->find(R"("expired":true)"), std::string::npos) << *doc;
  auto jobs = testbed::run_sync(s.jobs().list({project, std::nullopt, "notification.send", 1, 50}));
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->total, 1);
  (void)far;
  s.close();
}

// The value of the one series of /metrics whose line starts with `series` (name and labels up to
// where the caller stops), or nullopt.
std::optional<double> series_value(const std::string& metrics, const std::string& series) {
  std::optional<double> found;
  std::istringstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series, 0) != 0) continue;
    if (found) return std::nullopt;  // more than one: the caller's prefix is not one series
    found = std::stod(line.substr(line.rfind(' ') + 1));
  }
  return found;
}

// Issue 36: per-certificate, per-distribution and per-target series, as cert-manager and
// x509-certificate-exporter publish them, with names (not ids) in the labels.
TEST(metrics_series, each_certificate_distribution_and_target_has_its_series_with_its_values) {
  dist_env env(0);
  env.start();
  const auto now = testbed::unix_now_ms();
  const auto in5_not_after = now + 5 * day;
  const auto in5 = testbed::make_certificate({.common_name = "in5", .not_after_ms = in5_not_after});
  const auto in60 = testbed::make_certificate({.common_name = "in60", .not_after_ms = now + 60 * day});
  auto c5 = env.create_certificate("web \"edge\"", in5);
  env.create_certificate("in60", in60);
  const auto base = env.dir.path() / "files";
  fs::create_directories(base / "a");
  env.set_settings(json::object{{"file_target_base_dirs", base.string()}});
  json::object target{{"name", "local-a"}, {"module", "file"},
                      {"file", json::object{{"cert_path", (base / "a" / "cert.pem").string()},
                                            {"key_path", (base / "a" / "key.pem").string()}}}};
  auto t = str(env.ok("POST", "targets", json::serialize(target), 201), "id");
  json::object never{{"name", "never-delivered"}, {"module", "file"},
                     {"file", json::object{{"cert_path", (base / "b" / "cert.pem").string()},
                                           {"key_path", (base / "b" / "key.pem").string()}}}};
  env.ok("POST", "targets", json::serialize(never), 201);
  auto dist = env.create_distribution("edge", c5, {t});
  env.create_distribution("idle-one", c5, {t});

  auto before = env.http->get("/metrics").body;
  EXPECT_EQ(series_value(before, "certfleet_distribution_last_run_status{project=\"default\",distribution=\"edge\",status=\"idle\"}"), 1.0)
      << before;
  EXPECT_EQ(before.find("certfleet_target_last_success_timestamp_seconds{"), std::string::npos) << before;

  const auto started = testbed::unix_now_ms();
  env.execute(dist);
  EXPECT_EQ(str(env.wait_done(dist), "status"), "success");
  const auto finished = testbed::unix_now_ms();
  auto m = env.http->get("/metrics").body;

  // The certificate's name is a label value: its quotes are escaped.
  const std::string edge_labels = "{project=\"default\",certificate=\"web \\\"edge\\\"\",issuer=\"";
  auto not_after = series_value(m, "certfleet_certificate_not_after_timestamp_seconds" + edge_labels);
  ASSERT_TRUE(not_after) << m;
  EXPECT_NEAR(*not_after, static_cast<double>(in5_not_after) / 1000, 1) << m;
  auto not_before = series_value(m, "certfleet_certificate_not_before_timestamp_seconds" + edge_labels);
  ASSERT_TRUE(not_before) << m;
  EXPECT_LT(*not_before, *not_after);
  EXPECT_TRUE(series_value(m, "certfleet_certificate_not_after_timestamp_seconds{project=\"default\",certificate=\"in60\""))
      << m;
  // Uploaded certificates are renewed by a person: no renewal-due series.
  EXPECT_EQ(m.find("certfleet_certificate_renewal_due_timestamp_seconds{"), std::string::npos) << m;

  for (std::string status : {"idle", "running", "success", "partial", "failed", "cancelled"})
    EXPECT_EQ(series_value(m, "certfleet_distribution_last_run_status{project=\"default\",distribution=\"edge\",status=\"" +
                                  status + "\"}"),
              status == "success" ? 1.0 : 0.0)
        << status << "\n" << m;
  auto run_end = series_value(m, "certfleet_distribution_last_run_finished_timestamp_seconds{project=\"default\",distribution=\"edge\"}");
  ASSERT_TRUE(run_end) << m;
  EXPECT_GE(*run_end, static_cast<double>(started) / 1000 - 1);
  EXPECT_LE(*run_end, static_cast<double>(finished) / 1000 + 1);
  EXPECT_EQ(series_value(m, "certfleet_distribution_last_run_finished_timestamp_seconds{project=\"default\",distribution=\"idle-one\"}"),
            0.0);
  auto delivered = series_value(m, "certfleet_target_last_success_timestamp_seconds{project=\"default\",target=\"local-a\"}");
  ASSERT_TRUE(delivered) << m;
  EXPECT_GE(*delivered, static_cast<double>(started) / 1000 - 1);
  EXPECT_LE(*delivered, static_cast<double>(finished) / 1000 + 1);
  EXPECT_EQ(m.find("target=\"never-delivered\""), std::string::npos) << m;

  auto rss = series_value(m, "process_resident_memory_bytes ");
  ASSERT_TRUE(rss) << m;
  EXPECT_GT(*rss, 1e6);
  auto start_time = series_value(m, "process_start_time_seconds ");
  ASSERT_TRUE(start_time) << m;
  EXPECT_NEAR(*start_time, static_cast<double>(now) / 1000, 120);
  EXPECT_TRUE(series_value(m, "process_open_fds ")) << m;
  EXPECT_NE(m.find("certfleet_build_info{version=\""), std::string::npos) << m;
  EXPECT_NE(m.find(",date=\""), std::string::npos) << m;
  // With every family holding series, the exposition is still clean for Prometheus's own linter.
  const auto file = (env.dir.path() / "metrics.txt").string();
  std::ofstream(file) << m;
  auto [rc, out] = testbed::run_command({"/bin/sh", "-c", "promtool check metrics < " + file + " 2>&1"});
  EXPECT_EQ(rc, 0) << out;
}

TEST(scheduler_expiry, one_expiration_check_per_hour_however_many_cycles) {
  dist_env env(0);
  auto& sched = env.start("scheduler", {"scheduler_interval_ms=1000", "scheduler_lease_ms=1500"});
  std::this_thread::sleep_for(4500ms);
  sched.signal(SIGTERM);
  EXPECT_EQ(sched.wait(10s), 0);
  auto [rc, out] = testbed::run_command(
      testbed::certfleet_command(env.data(), {"jobs", "list", "--type", "certificate_expiration_check", "--json"}));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(json::parse(out).at("total").as_int64(), 1) << out;
  std::tie(rc, out) = testbed::run_command(testbed::certfleet_command(env.data(), {"jobs", "list", "--type", "maintenance_sweep", "--json"}));
  EXPECT_GE(json::parse(out).at("total").as_int64(), 6) << out;  // 3 sweeps × at least 2 cycles
}

}  // namespace
}  // namespace dist_test
