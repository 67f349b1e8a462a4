// The console's own API calls (issue 31). Bulk renewal: by ids, all or nothing, or every ACME
// certificate expiring within N days, the others listed as skipped; each under the key a single
// renewal and the sweep use, so a repeat or an overlap is one job. The dashboard: its job counts
// are the Jobs list's, its catalog counts what the objects hold, one project never sees another's.
// The real server over a SQLite file.
#include "api_fixture.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/core/object_id.hpp"

using namespace api_test;

namespace {

constexpr time_ms day = 86'400'000;

class api_bulk_renew : public api_fixture {
 public:
  const std::string renew = "/api/v1/projects/default/certificates/renew";

  // An ACME certificate of `pid` that expires at `not_after` (issued when `issued`).
  std::string put_acme(const std::string& name, time_ms not_after, bool issued = true, std::string pid = "") {
    auto req = lifecycle::parse_acme_issue_request(
        R"({"name":")" + name + R"(","domains":[")" + name + R"(.example.test"],"acme_account_id":"0123456789abcdef01234567",
            "dns_provider_id":"0123456789abcdef01234568"})");
    EXPECT_TRUE(req) << req.error().message;
    auto o = lifecycle::make_unissued_acme_certificate(*req, new_object_id(), pid.empty() ? project_id : pid, clock.now_ms());
    if (issued) {
      auto d = *catalog::parse_certificate_doc(o, true);
      d.version = 1;
      d.serial = "0a";
      d.not_before = not_after - 90 * day;
      d.not_after = not_after;
      d.status = "active";
      o.doc = catalog::certificate_doc_json(d);
      o.not_after = not_after;
    }
    return put(o);
  }
  // An uploaded certificate's object (the renewal never touches its document).
  std::string put_uploaded(const std::string& name, time_ms not_after) {
    store::catalog_object o;
    o.id = new_object_id();
    o.project_id = project_id;
    o.kind = std::string(store::kind_certificate);
    o.name = name;
    catalog::certificate_doc d;
    d.subject = "CN=" + name;
    d.sans = {name + ".example.test"};
    d.serial = "0b";
    d.not_before = not_after - 90 * day;
    d.not_after = not_after;
    o.doc = catalog::certificate_doc_json(d);
    o.not_after = not_after;
    o.created_at = clock.now_ms();
    return put(o);
  }
  std::string put(store::catalog_object o) {
    auto obj = std::make_shared<store::catalog_object>(std::move(o));
    store::tx_fn fn = [obj](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_object(*obj);
      if (!r) return std::move(r).error();
      return {};
    };
    auto r = run_sync(st->catalog().transact(std::move(fn)));
    EXPECT_TRUE(r) << r.error().message;
    return obj->id;
  }
};

TEST_F(api_bulk_renew, expiring_within_days_renews_the_acme_ones_once_and_lists_the_others) {
  start();
  const auto now = clock.now_ms();
  const auto soon = put_acme("soon", now + 10 * day);
  const auto expired = put_acme("expired", now - 2 * day);
  put_acme("later", now + 200 * day);
  put_acme("unissued", 0, false);
  const auto uploaded = put_uploaded("uploaded-soon", now + 5 * day);
  auto c = client();
  const auto jobs_before = count_jobs();

  auto r = c.post(renew, R"({"expiring_within_days":30})", tok["operator"]);
  ASSERT_EQ(r.status, 202) << r.body;
  auto j = r.json().as_object();
  EXPECT_EQ(j.at("requested"), 2);
  EXPECT_EQ(j.at("created"), 2);
  std::map<std::string, std::string> job_of;
  for (const auto& x : j.at("jobs").as_array()) {
    EXPECT_EQ(x.at("created"), true);
    job_of[std::string(x.at("certificate_id").as_string())] = std::string(x.at("job_id").as_string());
  }
  ASSERT_EQ(job_of.size(), 2u);
  EXPECT_TRUE(job_of.contains(soon));
  EXPECT_TRUE(job_of.contains(expired));
  ASSERT_EQ(j.at("skipped").as_array().size(), 1u);
  EXPECT_EQ(j.at("skipped").as_array()[0].at("certificate_id"), uploaded);
  EXPECT_NE(std::string(j.at("skipped").as_array()[0].at("reason").as_string()).find("uploaded"), std::string::npos);
  EXPECT_EQ(count_jobs(), jobs_before + 2);

  // Each a renew_certificate of its certificate, triggered by the caller.
  auto job = c.get(job_path(job_of[soon]), tok["viewer"]);
  ASSERT_EQ(job.status, 200) << job.body;
  EXPECT_EQ(job.json().at("type"), "renew_certificate");
  EXPECT_NE(job.body.find(soon), std::string::npos);

  // Again, and one by itself: the same jobs, nothing new.
  auto again = c.post(renew, R"({"expiring_within_days":30})", tok["operator"]);
  ASSERT_EQ(again.status, 202) << again.body;
  EXPECT_EQ(again.json().at("created"), 0);
  auto one = c.post("/api/v1/projects/default/certificates/" + soon + "/renew", "", tok["operator"]);
  ASSERT_EQ(one.status, 202) << one.body;
  EXPECT_EQ(one.json().at("job_id"), job_of[soon]);
  EXPECT_EQ(count_jobs(), jobs_before + 2);

  // The certificate's page names its renewal job.
  auto cert = c.get("/api/v1/projects/default/certificates/" + soon, tok["viewer"]);
  EXPECT_EQ(cert.json().at("last_job_id"), job_of[soon]);
}

TEST_F(api_bulk_renew, by_ids_is_all_or_nothing_and_names_the_id_that_refused) {
  start();
  const auto now = clock.now_ms();
  const auto a = put_acme("a", now + 100 * day);
  const auto b = put_acme("b", now + 300 * day);
  const auto unissued = put_acme("c", 0, false);
  const auto uploaded = put_uploaded("u", now + 5 * day);
  const auto foreign = put_acme("f", now + 5 * day, true, other_id);
  auto c = client();
  const auto jobs_before = count_jobs();

  struct refused {
    std::string body;
    unsigned status;
    std::string field;
  };
  const std::string missing = "0123456789abcdef0123abcd";
  for (const auto& x : std::vector<refused>{
           {R"({"certificate_ids":[")" + a + R"(",")" + uploaded + R"("]})", 409, "certificate_ids[1]"},
           {R"({"certificate_ids":[")" + a + R"(",")" + unissued + R"("]})", 409, "certificate_ids[1]"},
           {R"({"certificate_ids":[")" + missing + R"(",")" + a + R"("]})", 404, "certificate_ids[0]"},
           // Another project's certificate is as missing as one that never existed.
           {R"({"certificate_ids":[")" + b + R"(",")" + foreign + R"("]})", 404, "certificate_ids[1]"}}) {
    auto r = c.post(renew, x.body, tok["operator"]);
    EXPECT_EQ(r.status, x.status) << x.body << " -> " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + x.field + "\""), std::string::npos) << r.body;
  }
  EXPECT_EQ(count_jobs(), jobs_before) << "a refused call enqueues nothing";

  auto ok = c.post(renew, R"({"certificate_ids":[")" + a + R"(",")" + b + R"("]})", tok["operator"]);
  ASSERT_EQ(ok.status, 202) << ok.body;
  EXPECT_EQ(ok.json().at("requested"), 2);
  EXPECT_EQ(ok.json().at("created"), 2);
  EXPECT_TRUE(ok.json().at("skipped").as_array().empty());
  EXPECT_EQ(count_jobs(), jobs_before + 2);
  // A viewer may not; audited as certificate.bulk_renew.
  EXPECT_EQ(c.post(renew, R"({"expiring_within_days":30})", tok["viewer"]).status, 403);
  auto audit = c.get("/api/v1/projects/default/audit", tok["owner"]);
  EXPECT_NE(audit.body.find("certificate.bulk_renew"), std::string::npos) << audit.body.substr(0, 400);
}

TEST_F(api_bulk_renew, bad_bodies_name_the_field_and_enqueue_nothing) {
  start();
  const auto a = put_acme("a", clock.now_ms() + 10 * day);
  auto c = client();
  const auto jobs_before = count_jobs();
  struct bad {
    std::string body, field;
  };
  const std::string many = [] {
    std::string s = R"({"certificate_ids":[)";
    for (int i = 0; i <= 1000; ++i) s += fmt::format(R"({}"{:024x}")", i ? "," : "", i + 1);
    return s + "]}";
  }();
  for (const auto& b : std::vector<bad>{{"{}", "body"},
                                        {R"({"expiring_within_days":30,"certificate_ids":[")" + a + R"("]})", "body"},
                                        {R"({"expiring_within_days":0})", "expiring_within_days"},
                                        {R"({"expiring_within_days":366})", "expiring_within_days"},
                                        {R"({"expiring_within_days":"30"})", "expiring_within_days"},
                                        {R"({"expiring_within_days":1.5})", "expiring_within_days"},
                                        {R"({"certificate_ids":[]})", "certificate_ids"},
                                        {R"({"certificate_ids":")" + a + R"("})", "certificate_ids"},
                                        {many, "certificate_ids"},
                                        {R"({"certificate_ids":["nope"]})", "certificate_ids[0]"},
                                        {R"({"certificate_ids":[")" + a + R"(",")" + a + R"("]})", "certificate_ids[1]"},
                                        {R"({"certificate_ids":[")" + a + R"("],"all":true})", "all"},
                                        {"[]", "body"},
                                        {"{", "body"}}) {
    auto r = c.post(renew, b.body, tok["operator"]);
    EXPECT_EQ(r.status, 400) << b.body.substr(0, 200) << " -> " << r.body;
    EXPECT_NE(r.body.find("\"field\":\"" + b.field + "\""), std::string::npos) << b.body.substr(0, 200) << " -> " << r.body;
  }
  EXPECT_EQ(count_jobs(), jobs_before);
}

class api_dashboard : public api_bulk_renew {
 public:
  std::string put_distribution(const std::string& name, std::string_view status, time_ms started, time_ms finished,
                               std::string error = "", std::string pid = "") {
    auto d = std::make_shared<store::distribution_record>();
    d->project_id = pid.empty() ? project_id : pid;
    d->name = name;
    d->certificate_id = put_uploaded(name + "-cert", clock.now_ms() + 400 * day);
    d->target_ids = {new_object_id()};
    d->status = std::string(status);
    d->run_no = 1;
    d->run_started_at = started;
    d->run_finished_at = finished;
    d->error = std::move(error);
    d->created_at = clock.now_ms();
    store::tx_fn fn = [d](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_distribution(*d);
      if (!r) return std::move(r).error();
      // The insert stores the definition; the run's state goes in as a run would write it.
      auto run = *d;
      run.id = r->id;
      run.created_at = r->created_at;
      if (auto u = tx.update_distribution(run); !u) return u;
      *d = std::move(run);
      return {};
    };
    auto r = run_sync(st->catalog().transact(std::move(fn)));
    EXPECT_TRUE(r) << r.error().message;
    return d->id;
  }
};

TEST_F(api_dashboard, job_counts_are_the_job_lists_and_the_catalog_counts_what_needs_an_operator) {
  start();
  const auto now = clock.now_ms();
  auto c = client();
  // Jobs: three noops waiting, one that will die; counts come from the store's tab counts.
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(c.post(jobs_path(), R"({"type":"noop","run_at":4102444800000})", tok["admin"]).status, 201);
  // Certificates: one expired, two within the 30-day window (one uploaded), one later, one ACME
  // not issued yet; another project's expired one is not counted.
  const auto expired = put_acme("expired", now - day);
  const auto soon = put_acme("soon", now + 5 * day);
  put_uploaded("uploaded-soon", now + 20 * day);
  put_acme("later", now + 200 * day);
  put_acme("unissued", 0, false);
  put_acme("elsewhere", now - 3 * day, true, other_id);
  // Distributions: one running, one whose last run failed, one done well.
  put_distribution("rolling", "running", now - 60'000, 0);
  put_distribution("broken", "failed", now - 120'000, now - 30'000, "2 of 2 targets failed (ssh_auth)");
  put_distribution("fine", "success", now - 90'000, now - 80'000);

  auto r = c.get("/api/v1/projects/default/dashboard", tok["viewer"]);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto d = r.json();
  auto list = c.get(jobs_path(), tok["viewer"]).json();
  EXPECT_EQ(d.at("jobs").at("counts"), list.at("counts"));
  EXPECT_EQ(d.at("jobs").at("counts").at("pending"), 3);
  bool noop = false;
  for (const auto& t : d.at("jobs").at("by_type").as_array())
    if (t.at("type") == "noop") {
      noop = true;
      EXPECT_EQ(t.at("lane"), "main");
      EXPECT_EQ(t.at("counts"), c.get(jobs_path() + "?type=noop", tok["viewer"]).json().at("counts"));
    }
  EXPECT_TRUE(noop) << r.body.substr(0, 600);

  const auto& certs = d.at("certificates");
  // Five here and the three distributions' uploaded certificates (400 days): counted in all only.
  EXPECT_EQ(certs.at("total"), 8);
  EXPECT_EQ(certs.at("expired"), 1);
  EXPECT_EQ(certs.at("expiring_soon"), 2);
  EXPECT_EQ(certs.at("window_days"), 30);
  EXPECT_EQ(certs.at("not_issued"), 1);
  const auto& soonest = certs.at("soonest").as_array();
  ASSERT_GE(soonest.size(), 3u);
  EXPECT_EQ(soonest[0].at("id"), expired);
  EXPECT_EQ(soonest[1].at("id"), soon);
  EXPECT_EQ(soonest[1].at("source"), "acme");
  EXPECT_EQ(soonest[2].at("name"), "uploaded-soon");
  EXPECT_EQ(soonest[2].at("source"), "uploaded");

  const auto& dists = d.at("distributions");
  EXPECT_EQ(dists.at("total"), 3);
  EXPECT_EQ(dists.at("running"), 1);
  EXPECT_EQ(dists.at("failed"), 1);
  EXPECT_EQ(dists.at("running_list").as_array()[0].at("name"), "rolling");
  EXPECT_EQ(dists.at("failed_list").as_array()[0].at("name"), "broken");
  EXPECT_EQ(dists.at("failed_list").as_array()[0].at("error"), "2 of 2 targets failed (ssh_auth)");
  EXPECT_EQ(d.at("checks").at("domains").at("total"), 0);
  EXPECT_EQ(d.at("truncated"), false);

  // Another project's view holds only its own certificate.
  auto foreign = c.get("/api/v1/projects/other/dashboard", tok["foreign"]);
  ASSERT_EQ(foreign.status, 200) << foreign.body;
  EXPECT_EQ(foreign.json().at("certificates").at("total"), 1);
  EXPECT_EQ(foreign.json().at("certificates").at("expired"), 1);
  EXPECT_EQ(foreign.json().at("distributions").at("total"), 0);
  EXPECT_EQ(c.get("/api/v1/projects/other/dashboard", tok["viewer"]).status, 404);
}

}  // namespace
