// discovery_execute as a job of a real certfleet process: sources validated against
// discovery_allow_list, a scan of `openssl s_server` endpoints and a closed port, the discovered
// certificates with their findings and filters, and an import as a managed certificate.
#include "certfleet/checks/discovery.hpp"
#include "certfleet/net/tls_probe.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/core/object_id.hpp"
#include "dist_fixture.hpp"
#include "s_server.hpp"

namespace dist_test {
namespace {

using namespace certfleet;
constexpr std::int64_t day = 86'400'000;

json::value wait_terminal(dist_env& env, const std::string& id) {
  json::value j;
  for (int i = 0; i < 600; ++i) {
    j = env.ok("GET", "jobs/" + id);
    auto st = str(j, "status");
    if (st == "completed" || st == "dead" || st == "cancelled" || st == "failed") return j;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "job " << id << " did not finish: " << json::serialize(j);
  return j;
}

std::uint16_t closed_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();  // released when `a` closes: nothing listens there
}

TEST(discovery, sources_stay_inside_the_allow_list_and_a_scan_records_certificates_with_their_findings) {
  testbed::temp_dir dir;
  auto ca = testbed::make_certificate({.common_name = "Discovery CA", .is_ca = true});
  auto good = testbed::make_certificate({.common_name = "app.test", .dns_sans = {"app.test"}, .issuer = &ca});
  auto expiring = testbed::make_certificate({.common_name = "soon.test", .dns_sans = {"soon.test"},
                                             .not_after_ms = testbed::unix_now_ms() + 3 * day, .issuer = &ca});
  auto s_good = testbed::start_s_server(dir, "good", good, ca.cert_pem);
  auto s_soon = testbed::start_s_server(dir, "soon", expiring, "");  // no chain sent: incomplete
  const auto closed = closed_port();

  dist_env env(0);
  env.start();
  const auto ep = [](std::uint16_t port) { return fmt::format("127.0.0.1:{}", port); };
  json::object body{{"name", "lab"},
                    {"endpoints", json::array{ep(s_good.port), ep(s_soon.port), ep(closed)}},
                    {"sni", json::array{"app.test"}}};
  // The allow-list is empty: nothing may be scanned, and the refusal names the entry.
  auto refused = env.call("POST", "discovery-sources", json::serialize(body));
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("endpoints[0]"), std::string::npos) << refused.body;
  env.set_settings({{"discovery_allow_list", "127.0.0.1/32"}, {"discovery_endpoint_timeout_ms", 2000}});
  // A range reaching outside it is refused whole; bad shapes name their field.
  auto outside = env.call("POST", "discovery-sources",
                          R"({"name":"wide","cidrs":["127.0.0.1/32","10.0.0.0/30"],"ports":[443]})");
  EXPECT_EQ(outside.status, 400);
  EXPECT_NE(outside.body.find("cidrs[1]"), std::string::npos) << outside.body;
  EXPECT_NE(outside.body.find("outside discovery_allow_list"), std::string::npos) << outside.body;  // the setting in force
  EXPECT_NE(env.call("POST", "discovery-sources", R"({"name":"p","cidrs":["127.0.0.1/32"],"ports":[70000]})").body.find("ports[0]"),
            std::string::npos);
  EXPECT_NE(env.call("POST", "discovery-sources", R"({"name":"s","endpoints":["127.0.0.1:443"],"schedule_s":5})").body.find("schedule_s"),
            std::string::npos);
  EXPECT_EQ(env.call("POST", "discovery-sources", R"({"name":"none"})").status, 400);
  auto source = env.ok("POST", "discovery-sources", json::serialize(body), 201);
  const auto source_id = str(source, "id");
  EXPECT_EQ(num(source, "targets"), 3);
  EXPECT_TRUE(source.at("last_run").is_null());

  auto run = env.ok("POST", "discovery-sources/" + source_id + "/run", "", 202);
  auto job = wait_terminal(env, str(run, "job_id"));
  // One endpoint refused the connection: partial, not failed.
  EXPECT_EQ(str(job, "status"), "completed") << json::serialize(job);
  EXPECT_EQ(str(job, "result_status"), "partial");
  auto src = env.ok("GET", "discovery-sources/" + source_id);
  EXPECT_EQ(num(src.at("last_run"), "ok"), 2) << json::serialize(src);
  EXPECT_EQ(num(src.at("last_run"), "failed"), 1);
  EXPECT_EQ(num(src.at("last_run"), "certificates"), 2);
  EXPECT_GT(time_of(src.at("last_run"), "finished_at"), 0);

  auto list = env.ok("GET", "discovered-certificates");
  ASSERT_EQ(num(list, "total"), 2) << json::serialize(list);
  std::map<std::string, json::object> by_subject;
  for (const auto& it : list.at("items").as_array()) by_subject[str(it, "subject")] = it.as_object();
  auto names = [](const json::object& c) {
    std::set<std::string> out;
    for (const auto& f : c.at("findings").as_array()) out.insert(str(f, "name"));
    return out;
  };
  ASSERT_TRUE(by_subject.count("CN=app.test") && by_subject.count("CN=soon.test")) << json::serialize(list);
  EXPECT_TRUE(names(by_subject["CN=app.test"]).empty()) << json::serialize(by_subject["CN=app.test"]);
  // Reached with SNI app.test, sent without its intermediate, expiring in 3 days.
  EXPECT_EQ(names(by_subject["CN=soon.test"]),
            (std::set<std::string>{"expiring", "name_mismatch", "incomplete_chain"}));
  const auto& seen = by_subject["CN=app.test"].at("endpoints").as_array();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(str(seen[0], "source_id"), source_id);
  EXPECT_EQ(str(seen[0], "endpoint"), ep(s_good.port));
  EXPECT_EQ(str(seen[0], "sni"), "app.test");

  // The page carries the finding table a filter may name (the UI's filter reads it): the one table,
  // in its order, each with its severity and text.
  const auto listed = env.ok("GET", "discovered-certificates");
  const auto& table = listed.at("finding_table").as_array();
  ASSERT_EQ(table.size(), net::finding_table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(str(table[i], "name"), net::finding_table[i].name);
    EXPECT_EQ(str(table[i], "severity"), net::finding_table[i].severity);
    EXPECT_FALSE(str(table[i], "text").empty());
  }

  // Filters: by finding (validated) and by source.
  EXPECT_EQ(num(env.ok("GET", "discovered-certificates?finding=expiring"), "total"), 1);
  EXPECT_EQ(num(env.ok("GET", "discovered-certificates?finding=expired"), "total"), 0);
  EXPECT_EQ(num(env.ok("GET", "discovered-certificates?source=" + source_id), "total"), 2);
  EXPECT_EQ(num(env.ok("GET", "discovered-certificates?source=" + new_object_id()), "total"), 0);
  auto bad_filter = env.call("GET", "discovered-certificates?finding=scary");
  EXPECT_EQ(bad_filter.status, 400);
  EXPECT_NE(bad_filter.body.find("\"finding\""), std::string::npos) << bad_filter.body;

  // A second scan finds the same leaves: upserted, not duplicated.
  // (Through POST …/jobs with its own key: "Run now" answers the same job within a minute.)
  auto again = env.ok("POST", "jobs",
                      json::serialize(json::object{{"type", "discovery_execute"},
                                                   {"idempotency_key", "scan-2"},
                                                   {"payload", json::object{{"source_id", source_id}}}}),
                      201);
  again.as_object()["job_id"] = again.at("id");
  wait_terminal(env, str(again, "job_id"));
  EXPECT_EQ(num(env.ok("GET", "discovered-certificates"), "total"), 2);

  // Import: the key must belong to the leaf (the upload's checks), then it is a managed certificate.
  const auto found_id = str(by_subject["CN=app.test"], "id");
  auto wrong = env.call("POST", "discovered-certificates/" + found_id + "/import",
                        json::serialize(json::object{{"name", "app"}, {"key_pem", expiring.key_pem}}));
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_NE(wrong.body.find("key_pem"), std::string::npos) << wrong.body;
  auto made = env.ok("POST", "discovered-certificates/" + found_id + "/import",
                     json::serialize(json::object{{"name", "app"}, {"key_pem", good.key_pem}}), 201);
  EXPECT_EQ(str(made, "subject"), "CN=app.test");
  auto after = env.ok("GET", "discovered-certificates/" + found_id);
  EXPECT_EQ(str(after, "managed_certificate_id"), str(made, "id"));
  EXPECT_EQ(env.call("POST", "discovered-certificates/" + found_id + "/import",
                     json::serialize(json::object{{"name", "app2"}, {"key_pem", good.key_pem}}))
                .status,
            409);
}

TEST(discovery, a_stalled_handshake_times_out_within_the_deadline_and_a_source_where_nothing_answers_fails) {
  dist_env env(0);
  env.start();
  env.set_settings({{"discovery_allow_list", "127.0.0.1/32"}, {"discovery_endpoint_timeout_ms", 500}});
  // A listener that accepts and never speaks TLS.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor silent(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  silent.listen();
  json::object body{{"name", "silent"}, {"endpoints", json::array{fmt::format("127.0.0.1:{}", silent.local_endpoint().port())}}};
  auto id = str(env.ok("POST", "discovery-sources", json::serialize(body), 201), "id");
  const auto t0 = std::chrono::steady_clock::now();
  auto run = env.ok("POST", "discovery-sources/" + id + "/run", "", 202);
  auto job = wait_terminal(env, str(run, "job_id"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // discovery_execute has one attempt: nothing answered, so it ends dead with the reason.
  EXPECT_EQ(str(job, "status"), "dead") << json::serialize(job);
  EXPECT_NE(str(job, "error").find("no endpoint"), std::string::npos) << json::serialize(job);
  std::string log;
  const auto page = env.ok("GET", "jobs/" + str(run, "job_id") + "/logs?after=0&limit=100");
  for (const auto& l : page.at("lines").as_array()) log += str(l, "message") + "\n";
  EXPECT_NE(log.find("timeout"), std::string::npos) << log;
}

}  // namespace
}  // namespace dist_test

// The scheduler's rule for scheduled scans: a whole period since the last run ended, or since the
// source was created — not at once for a new source, nor again right after a run by hand.
TEST(discovery_schedule, a_scan_is_due_a_whole_period_after_the_last_run_or_the_creation) {
  certfleet::store::catalog_object src;
  src.created_at = 1'000'000;
  src.doc = R"({"endpoints":["127.0.0.1:443"],"schedule_s":3600})";
  const std::int64_t hour = 3'600'000;
  EXPECT_FALSE(certfleet::checks::discovery_scan_due(src, 3600, src.created_at + 1000));
  EXPECT_FALSE(certfleet::checks::discovery_scan_due(src, 3600, src.created_at + hour - 1));
  EXPECT_TRUE(certfleet::checks::discovery_scan_due(src, 3600, src.created_at + hour));
  EXPECT_FALSE(certfleet::checks::discovery_scan_due(src, 0, src.created_at + 100 * hour));  // by hand only
  src.doc = R"({"schedule_s":3600,"last_run":{"job_id":"j","finished_at":)" + std::to_string(src.created_at + 5 * hour) + "}}";
  EXPECT_FALSE(certfleet::checks::discovery_scan_due(src, 3600, src.created_at + 5 * hour + 10));
  EXPECT_TRUE(certfleet::checks::discovery_scan_due(src, 3600, src.created_at + 6 * hour));
}
