// The events table and fire_event: data checked against the table, one notification.send job per
// channel with a rule, keyed notify:<base>:<channel> in the caller's transaction, nothing twice,
// and docs/notifications.md carrying the table.
#include "certfleet/core/object_id.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/store/catalog.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

namespace certfleet::notify {
namespace {

namespace json = boost::json;

TEST(events_table, names_are_unique_and_links_name_fields_of_their_event) {
  std::set<std::string_view> names;
  for (const auto& e : all_events()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_FALSE(e.fields.empty()) << e.name;
    EXPECT_FALSE(e.subject.empty()) << e.name;
    EXPECT_FALSE(e.body.empty()) << e.name;
    std::set<std::string_view> fields;
    for (const auto& f : e.fields) EXPECT_TRUE(fields.insert(f.name).second) << e.name << " " << f.name;
    // "{field}" in the link path is a text field of the event.
    for (auto at = e.ui_path.find('{'); at != std::string_view::npos; at = e.ui_path.find('{', at + 1)) {
      auto close = e.ui_path.find('}', at);
      ASSERT_NE(close, std::string_view::npos) << e.name;
      auto f = e.ui_path.substr(at + 1, close - at - 1);
      EXPECT_TRUE(fields.count(f)) << e.name << " links with {" << f << "}";
    }
  }
  for (auto want : {event_names::distribution_finished, event_names::certificate_expiring,
                    event_names::certificate_expired, event_names::certificate_issued, event_names::certificate_renewed,
                    event_names::certificate_renewal_failed, event_names::certificate_revoked,
                    event_names::certificate_approval_requested, event_names::certificate_approved,
                    event_names::certificate_rejected, event_names::domain_expiring, event_names::job_dead})
    EXPECT_NE(find_event(want), nullptr) << want;
  EXPECT_EQ(find_event("certificate.exploded"), nullptr);
  EXPECT_EQ(event_choices().rfind("distribution.finished, certificate.expiring, ", 0), 0u) << event_choices();
}

TEST(events_table, data_is_checked_against_the_event_fields) {
  const auto& e = *find_event(event_names::distribution_finished);
  EXPECT_TRUE(check_event_data(e, json::object{{"distribution_id", "d1"},
                                               {"run_no", 3},
                                               {"summary", json::object{{"targets", 4}, {"failed", 1}}}}));
  EXPECT_TRUE(check_event_data(e, json::object{}));  // missing fields show as empty
  auto wrong_type = check_event_data(e, json::object{{"run_no", "3"}});
  ASSERT_FALSE(wrong_type);
  EXPECT_EQ(wrong_type.error().field, "data.run_no");
  auto unknown = check_event_data(e, json::object{{"colour", "red"}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().field, "data.colour");
  auto nested = check_event_data(e, json::object{{"summary", json::object{{"exploded", 1}}}});
  ASSERT_FALSE(nested);
  EXPECT_EQ(nested.error().field, "data.summary.exploded");
  const auto& issued = *find_event(event_names::certificate_issued);
  EXPECT_TRUE(check_event_data(issued, json::object{{"domains", json::array{"a.example", "b.example"}}}));
  EXPECT_FALSE(check_event_data(issued, json::object{{"domains", json::array{"a.example", 7}}}));
}

TEST(events_table, docs_notifications_md_carries_the_events_table) {
  std::ifstream f(std::string(CERTFLEET_SOURCE_DIR) + "/docs/notifications.md");
  std::stringstream ss;
  ss << f.rdbuf();
  auto expected = events_reference_markdown();
  EXPECT_NE(ss.str().find(expected), std::string::npos)
      << "docs/notifications.md is out of date; its events section must read exactly:\n"
      << expected;
}

// A real store file with a project, two channels and rules.
class fire_event_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = store::open_sqlite({dir.file("x.db"), 1, 5000, false});
    ASSERT_TRUE(s);
    st = std::move(*s);
    project = testbed::run_sync(st->projects().ensure("default", 1))->first.id;
    other_project = testbed::run_sync(st->projects().ensure("other", 1))->first.id;
    c1 = add(project, store::kind_channel, "c1", R"({"kind":"webhook","url":"http://127.0.0.1:9/"})", "");
    c2 = add(project, store::kind_channel, "c2", R"({"kind":"webhook","url":"http://127.0.0.1:9/"})", "");
    rule(c1, event_names::distribution_finished);
    rule(c2, event_names::distribution_finished);
    rule(c2, event_names::certificate_expiring);
  }
  void TearDown() override {
    if (st) st->close();
  }

  std::string add(const std::string& proj, std::string_view kind, const std::string& name, const std::string& doc,
                  const std::string& ref) {
    auto o = std::make_shared<store::catalog_object>();
    o->id = new_object_id();
    o->project_id = proj;
    o->kind = std::string(kind);
    o->name = name;
    o->doc = doc;
    o->ref_id = ref;
    store::tx_fn fn = [o](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_object(*o);
      if (!r) return std::move(r).error();
      return {};
    };
    EXPECT_TRUE(testbed::run_sync(st->catalog().transact(std::move(fn))));
    return o->id;
  }
  void rule(const std::string& channel, std::string_view event) {
    add(project, store::kind_rule, std::string(event) + "->" + channel,
        json::serialize(json::object{{"event", event}, {"channel_id", channel}}), channel);
  }

  result<int> fire(const fired_event& e) {
    auto n = std::make_shared<int>(0);
    store::tx_fn fn = [e, n](store::catalog_tx& tx) -> result<void> {
      auto r = fire_event(tx, e, 1'700'000'000'000);
      if (!r) return std::move(r).error();
      *n = *r;
      return {};
    };
    auto w = testbed::run_sync(st->catalog().transact(std::move(fn)));
    if (!w) return std::move(w).error();
    return *n;
  }

  std::vector<store::job_record> notification_jobs(const std::string& proj) {
    store::job_filter f;
    f.project_id = proj;
    f.type = std::string(queue::job_names::notification_send);
    f.page_size = 50;
    auto page = testbed::run_sync(st->jobs().list(f));
    EXPECT_TRUE(page);
    return page ? page->items : std::vector<store::job_record>{};
  }

  fired_event finished(const std::string& proj) {
    fired_event e;
    e.project_id = proj;
    e.event = event_names::distribution_finished;
    e.event_id = "distribution.finished:d1:3";
    e.data = json::object{{"distribution_id", "d1"}, {"run_no", 3}, {"status", "partial"}};
    e.key_base = distribution::run_notification_base("d1", 3);
    e.source.distribution_id = "d1";
    e.source.triggered_by = "distribution";
    return e;
  }

  testbed::temp_dir dir;
  std::unique_ptr<store::store> st;
  std::string project, other_project, c1, c2;
};

TEST_F(fire_event_test, one_job_per_channel_with_a_rule_keyed_by_base_and_channel) {
  auto n = fire(finished(project));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2);
  auto jobs = notification_jobs(project);
  ASSERT_EQ(jobs.size(), 2u);
  std::set<std::string> keys, channels;
  for (const auto& j : jobs) {
    keys.insert(j.idempotency_key);
    EXPECT_EQ(j.distribution_id, "d1");
    EXPECT_EQ(j.triggered_by, "distribution");
    EXPECT_EQ(j.max_attempts, queue::find_job_type(queue::job_names::notification_send)->max_attempts);
    auto p = json::parse(j.payload).as_object();
    EXPECT_EQ(p.at("event_id"), "distribution.finished:d1:3");
    EXPECT_EQ(p.at("event"), "distribution.finished");
    EXPECT_EQ(p.at("data").at("status"), "partial");
    EXPECT_FALSE(p.contains("template"));
    channels.insert(std::string(p.at("channel_id").as_string()));
  }
  // DESIGN §4's key, unchanged by the move onto fire_event.
  EXPECT_EQ(keys, (std::set<std::string>{"notify:d1:3:" + c1, "notify:d1:3:" + c2}));
  EXPECT_EQ(keys, (std::set<std::string>{distribution::run_notification_key("d1", 3, c1), distribution::run_notification_key("d1", 3, c2)}));
  EXPECT_EQ(channels, (std::set<std::string>{c1, c2}));
}

TEST_F(fire_event_test, firing_again_creates_nothing_and_other_events_or_projects_have_their_own_rules) {
  ASSERT_EQ(*fire(finished(project)), 2);
  EXPECT_EQ(*fire(finished(project)), 0);  // a replayed transaction
  EXPECT_EQ(notification_jobs(project).size(), 2u);
  EXPECT_EQ(*fire(finished(other_project)), 0);  // no rule there
  EXPECT_TRUE(notification_jobs(other_project).empty());

  fired_event exp;
  exp.project_id = project;
  exp.event = event_names::certificate_expiring;
  exp.event_id = "certificate.expiring:cert1:7";
  exp.data = json::object{{"certificate_id", "cert1"}, {"days_threshold", 7}};
  exp.key_base = distribution::expiry_notification_base("cert1", 7);
  EXPECT_EQ(*fire(exp), 1);  // only c2 asked for it
  bool found = false;
  for (const auto& j : notification_jobs(project)) found = found || j.idempotency_key == "notify:cert:cert1:7:" + c2;
  EXPECT_TRUE(found);
}

TEST_F(fire_event_test, an_unknown_event_or_bad_data_rolls_back_and_enqueues_nothing) {
  auto e = finished(project);
  e.event = "distribution.exploded";
  auto r = fire(e);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "event");
  auto bad = finished(project);
  bad.data["run_no"] = "three";
  auto r2 = fire(bad);
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().field, "data.run_no");
  EXPECT_TRUE(notification_jobs(project).empty());
}

}  // namespace
}  // namespace certfleet::notify
