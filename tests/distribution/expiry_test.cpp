// certificate_expiration_check: which certificates are marked, the expiring-soon gauge, one
// notification per certificate per threshold, and the scheduler's hour-bucket key.
#include "certfleet/core/object_id.hpp"
#include "certfleet/distribution/catalog.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/store/catalog.hpp"
#include "dist_fixture.hpp"
#include "run_sync.hpp"

namespace dist_test {
namespace {

using namespace certfleet;
constexpr std::int64_t day = 86'400'000;

TEST(expiry_plan, thresholds_are_crossed_once_and_the_tightest_is_notified) {
  distribution::certificate_doc d;
  const std::int64_t now = 1'000'000'000'000;
  std::vector<std::int64_t> th{30, 14, 7, 1};
  d.not_after = now + 5 * day;
  auto s = distribution::plan_expiry(d, now, th);
  EXPECT_TRUE(s.expiring_soon);
  EXPECT_EQ(s.newly_crossed, (std::vector<std::int64_t>{30, 14, 7}));
  EXPECT_EQ(s.notify_days, 7);
  d.notified_days = s.newly_crossed;
  EXPECT_FALSE(distribution::plan_expiry(d, now, th).notify_days);  // never twice
  auto later = distribution::plan_expiry(d, now + 4 * day + 1, th);
  EXPECT_EQ(later.notify_days, 1);
  auto expired = distribution::plan_expiry(d, now + 6 * day, th);
  EXPECT_TRUE(expired.mark_expired);
  EXPECT_EQ(expired.notify_days, 0);
  d.not_after = now + 40 * day;
  EXPECT_FALSE(distribution::plan_expiry(d, now, th).expiring_soon);
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
    distribution::new_certificate c;
    auto parsed = distribution::parse_certificate_request(
        json::serialize(json::object{{"name", name}, {"cert_pem", pem.cert_pem}, {"key_pem", pem.key_pem}}), now);
    EXPECT_TRUE(parsed) << parsed.error().message;
    auto obj = std::make_shared<store::catalog_object>(
        *distribution::make_certificate_object(*parsed, key, new_object_id(), project, now));
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
    rule.name = distribution::rule_object_name("certificate.expired", channel->id);  // as the API names it
    rule.ref_id = channel->id;
    rule.doc = R"({"event":"certificate.expired","channel_id":")" + channel->id + "\"}";
    if (auto r = tx.insert_object(rule); !r) return std::move(r).error();
    return {};
  };
  ASSERT_TRUE(testbed::run_sync(s.catalog().transact(std::move(rules))));

  auto later = now + 3 * day;  // "soon" is past its not_after by then
  auto r1 = testbed::run_sync(distribution::check_expirations(s, later));
  ASSERT_TRUE(r1) << r1.error().message;
  EXPECT_EQ(r1->expired_marked, 1);
  EXPECT_EQ(r1->notifications, 1);
  auto r2 = testbed::run_sync(distribution::check_expirations(s, later + 3600'000));
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
