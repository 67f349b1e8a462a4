// AD CS enrollment with its worker SIGKILLed at the start of each workflow step (crash points
// msca_step_<step>, DESIGN §13), through a real certfleet process and the testbed's CEP/CES
// server (tests/testbed/msca_server.py): after a restart on the same data the job's next attempt
// finishes the enrollment, exactly one version is stored and the certificate is active. What the
// CA holds afterwards depends on where the worker died:
//   fetching_policy, generating_key, submitting  nothing was sent yet: one request at the CA
//   storing            the CA issued, the version was not stored: the certificate and its key were
//                      kept (an msca_request "issued") before the step, so the next attempt stores
//                      that certificate and sends nothing: one request at the CA
//   completed          the version is stored: the next attempt enrolls nothing, one request
//   pending_approval   (WebServerApproval, approved through the side channel) the request, its
//                      key and the first poll are recorded in one transaction before the step:
//                      the next attempt finds the request held and leaves it to its poll chain,
//                      so the CA holds one request
// and, for the pending path, one poll chain (one request id, no poll number twice).
#include "msca_env.hpp"

#include <set>

namespace dist_test {
namespace {

struct crash_case {
  const char* step;
  const char* tmpl;          // WebServer issues at once, WebServerApproval waits for a manager
  std::size_t ca_requests;   // requests the CA holds at the end
  const char* extra_status;  // the status at the CA of the request(s) the certificate does not use
};

std::ostream& operator<<(std::ostream& o, const crash_case& c) { return o << c.step; }

class msca_crash : public ::testing::TestWithParam<crash_case> {};

TEST_P(msca_crash, a_worker_killed_at_the_step_stores_one_version_and_the_certificate_is_active) {
  const auto c = GetParam();
  const std::string step = c.step;
  const bool approval = std::string(c.tmpl) == "WebServerApproval";
  // A killed worker's lease runs out in 2 s, then the restarted one takes the job again.
  const std::vector<std::string> sets{"lease_ms=2000", "scheduler_interval_ms=1000", "scheduler_lease_ms=3000"};
  msca_env m({}, sets, {{"CERTFLEET_CRASH_AT", "msca_step_" + step}});
  const auto ca_id = str(m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("corp")), 201), "id");
  std::string host = step + ".corp.test";
  std::replace(host.begin(), host.end(), '_', '-');
  // The worker of this same process may reach the step, and die, before the API has answered the
  // request that enqueued the job: then the job is looked up after the restart.
  auto enrolled = m.env.call("POST", "certificates/enroll",
                             json::serialize(json::object{{"name", "crash"},
                                                          {"msca_ca_id", ca_id},
                                                          {"template", c.tmpl},
                                                          {"subject", "CN=" + host},
                                                          {"sans", json::array{json::value(host)}}}));
  ASSERT_TRUE(enrolled.status == 202 || enrolled.status == 0) << enrolled.status << " " << enrolled.body;
  ASSERT_TRUE(m.restart_after_crash(sets)) << "the worker did not reach step " << step;
  std::string cert, job;
  if (enrolled.status == 202) {
    cert = str(enrolled.json(), "certificate_id");
    job = str(enrolled.json(), "job_id");
  } else {
    auto jobs = m.env.ok("GET", "jobs?type=msca_issue_certificate");
    ASSERT_EQ(num(jobs, "total"), 1) << json::serialize(jobs);
    job = str(jobs.at("items").as_array()[0], "id");
    cert = str(jobs.at("items").as_array()[0], "certificate_id");
  }
  auto done = m.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << json::serialize(done) << "\n" << m.log_text(job);
  EXPECT_EQ(num(done, "attempts"), 2) << m.log_text(job);

  if (approval) {
    // The enrollment ends at the wait; the certificate shows the request it waits for.
    EXPECT_EQ(str(done.at("workflow"), "step"), "pending_approval") << json::serialize(done);
    auto pending = m.env.ok("GET", "certificates/" + cert);
    EXPECT_EQ(str(pending, "status"), "pending");
    EXPECT_EQ(str(pending.at("msca"), "disposition"), "pending");
    const auto request_id = str(pending.at("msca"), "request_id");
    ASSERT_FALSE(request_id.empty()) << json::serialize(pending);
    ASSERT_TRUE(m.ca->approve(std::stoll(request_id)));
    auto issued = m.wait_certificate(cert, [](const json::value& v) { return num(v, "version") >= 1; });
    EXPECT_EQ(str(issued.at("msca"), "request_id"), request_id);
  } else {
    EXPECT_EQ(str(done.at("workflow"), "step"), "completed") << json::serialize(done);
  }

  auto v = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v, "version"), 1) << json::serialize(v);
  EXPECT_EQ(v.at("versions").as_array().size(), 1u) << json::serialize(v);
  EXPECT_EQ(str(v, "status"), "active") << json::serialize(v);
  EXPECT_EQ(str(v.at("msca"), "disposition"), "issued");
  // Nothing held any more: a kept issued request (or the pending one) went with the store.
  EXPECT_EQ(sql(m.env, "SELECT count(*) FROM objects WHERE kind = 'msca_request'"), "0");

  auto reqs = m.ca->requests();
  std::string seen;
  for (const auto& r : reqs) seen += fmt::format(" #{} {} {} {}", r.id, r.tmpl, r.status, r.serial);
  EXPECT_EQ(reqs.size(), c.ca_requests) << "requests at the CA:" << seen << "\n" << m.log_text(job);
  // Whatever else the CA holds, the stored version is the certificate of one of its requests
  // (serials compared as numbers: certfleet writes an even number of hex digits, "0b22…", the test
  // server Python's hex of the integer, "b22…").
  std::size_t matching = 0;
  for (const auto& r : reqs) matching += hex_number(r.serial) == hex_number(str(v, "serial"));
  EXPECT_EQ(matching, 1u) << "serial " << str(v, "serial") << "; requests at the CA:" << seen;
  for (const auto& r : reqs) {
    if (std::to_string(r.id) != str(v.at("msca"), "request_id")) {
      EXPECT_EQ(r.status, c.extra_status) << "request " << r.id << "; requests at the CA:" << seen;
    }
  }

  if (approval) {
    // One poll chain: every poll for the request the certificate holds, no poll number twice,
    // none left waiting once the certificate is in (the last poll may still be finishing).
    std::this_thread::sleep_for(3s);
    auto polls = m.jobs_of("msca_poll_pending");
    ASSERT_FALSE(polls.empty());
    std::set<std::string> request_ids, keys;
    std::multiset<std::int64_t> numbers;
    for (const auto& p : polls) {
      const auto& payload = p.at("payload");
      request_ids.insert(str(payload, "request_id"));
      numbers.insert(num(payload, "n"));
      keys.insert(str(p, "idempotency_key"));
      EXPECT_NE(str(p, "status"), "pending") << json::serialize(p);
    }
    EXPECT_EQ(request_ids, (std::set<std::string>{str(v.at("msca"), "request_id")})) << json::serialize(polls);
    EXPECT_EQ(std::set<std::int64_t>(numbers.begin(), numbers.end()).size(), numbers.size()) << json::serialize(polls);
    EXPECT_EQ(keys.size(), polls.size()) << json::serialize(polls);
  }
}

INSTANTIATE_TEST_SUITE_P(
    msca_jobs, msca_crash,
    ::testing::Values(crash_case{"fetching_policy", "WebServer", 1, ""}, crash_case{"generating_key", "WebServer", 1, ""},
                      crash_case{"submitting", "WebServer", 1, ""},
                      // Killed after the CA issued, before the version was stored: the certificate
                      // and its key were kept first, so the next attempt stores that one and asks
                      // the CA for nothing; one request at the CA.
                      crash_case{"storing", "WebServer", 1, ""}, crash_case{"completed", "WebServer", 1, ""},
                      // Killed after the pending request was recorded: the next attempt leaves it to
                      // its poll chain; one request at the CA.
                      crash_case{"pending_approval", "WebServerApproval", 1, ""}),
    [](const ::testing::TestParamInfo<crash_case>& i) { return std::string(i.param.step); });

}  // namespace
}  // namespace dist_test
