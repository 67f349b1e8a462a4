// The dashboard's catalog part (overview.hpp), pure: the expiry window's edges, the soonest
// first, unissued certificates apart, runs by state, domain states and discovery findings.
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/service/overview.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

using namespace certfleet;

namespace {

constexpr time_ms day = 86'400'000, now = 1'800'000'000'000;

store::catalog_object object(std::string_view kind, std::string id, time_ms not_after, std::string doc) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = "p";
  o.kind = std::string(kind);
  o.name = "n-" + o.id;
  o.not_after = not_after;
  o.doc = std::move(doc);
  return o;
}

store::catalog_object certificate(std::string id, time_ms not_after) {
  catalog::certificate_doc d;
  d.not_before = not_after - 90 * day;
  d.not_after = not_after;
  d.version = not_after ? 1 : 0;
  return object(store::kind_certificate, std::move(id), not_after, catalog::certificate_doc_json(d));
}

TEST(overview, the_window_is_exclusive_expired_is_at_or_before_now_and_the_soonest_come_first) {
  service::overview_input in;
  in.certificates = {certificate("a", now + 30 * day),        // exactly at the window's end: not soon
                     certificate("b", now + 30 * day - 1),    // just inside
                     certificate("c", now),                   // expires now: expired
                     certificate("d", now - 5 * day),
                     certificate("e", 0)};                    // not issued
  for (int i = 0; i < 20; ++i) in.certificates.push_back(certificate("z" + std::to_string(i), now + (100 + i) * day));
  auto o = service::overview_json(in, now, 30 * day);
  const auto& c = o.at("certificates").as_object();
  EXPECT_EQ(c.at("total"), 25);
  EXPECT_EQ(c.at("expired"), 2);
  EXPECT_EQ(c.at("expiring_soon"), 1);
  EXPECT_EQ(c.at("not_issued"), 1);
  EXPECT_EQ(c.at("window_days"), 30);
  const auto& soonest = c.at("soonest").as_array();
  ASSERT_EQ(soonest.size(), service::overview_list_max);
  EXPECT_EQ(soonest[0].at("id"), "d");
  EXPECT_EQ(soonest[1].at("id"), "c");
  EXPECT_EQ(soonest[2].at("id"), "b");
  EXPECT_EQ(soonest[3].at("id"), "a");
  EXPECT_EQ(soonest[9].at("id"), "z5");
}

TEST(overview, runs_by_state_domains_by_state_and_findings_counted_by_name) {
  service::overview_input in;
  auto run = [](std::string name, std::string status, time_ms started, time_ms finished) {
    store::distribution_record d;
    d.id = name;
    d.name = name;
    d.status = std::move(status);
    d.run_started_at = started;
    d.run_finished_at = finished;
    return d;
  };
  in.distributions = {run("r-new", "running", now - 10, 0), run("r-old", "running", now - 1000, 0),
                      run("f-old", "failed", now - 900, now - 800), run("p-new", "partial", now - 50, now - 20),
                      run("ok", "success", now - 50, now - 40), run("idle", "idle", 0, 0)};
  checks::domain_doc ok;
  ok.expires_at = now + 300 * day;
  checks::domain_doc expiring = ok;
  expiring.notified_days = {30};
  checks::domain_doc failing;
  failing.last_error = "RDAP answered 503";
  in.domains = {object(store::kind_domain, "d1", 0, checks::domain_doc_json(ok)), object(store::kind_domain, "d2", 0, checks::domain_doc_json(expiring)),
                object(store::kind_domain, "d3", 0, checks::domain_doc_json(failing)), object(store::kind_domain, "d4", 0, checks::domain_doc_json({}))};
  in.discovered = {object(store::kind_discovered_certificate, "x1", 0, R"({"findings":["expired","self_signed"]})"),
                   object(store::kind_discovered_certificate, "x2", 0, R"({"findings":["self_signed"]})"),
                   object(store::kind_discovered_certificate, "x3", 0, R"({"findings":[]})")};
  auto o = service::overview_json(in, now, 30 * day);
  const auto& d = o.at("distributions").as_object();
  EXPECT_EQ(d.at("total"), 6);
  EXPECT_EQ(d.at("running"), 2);
  EXPECT_EQ(d.at("failed"), 2);
  EXPECT_EQ(d.at("running_list").as_array()[0].at("name"), "r-old");  // the longest running first
  EXPECT_EQ(d.at("failed_list").as_array()[0].at("name"), "p-new");   // the latest failure first
  const auto& checks = o.at("checks").as_object();
  EXPECT_EQ(boost::json::serialize(checks.at("domains")), R"({"total":4,"error":1,"expiring":1,"ok":1,"unknown":1})");
  EXPECT_EQ(checks.at("discovered").at("with_findings"), 2);
  const auto& f = checks.at("findings").as_array();
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].at("name"), "expired");
  EXPECT_EQ(f[0].at("count"), 1);
  EXPECT_EQ(f[0].at("severity"), "critical");
  EXPECT_EQ(f[1].at("name"), "self_signed");
  EXPECT_EQ(f[1].at("count"), 2);
}

}  // namespace
