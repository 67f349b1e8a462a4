// A certificate's versions (DESIGN §9): a new version is stored with the previous one kept, and
// every distribution of the certificate with auto_execute delivers it by itself — at once when it
// is idle, through the distributions sweep when it was running — exactly once per version.
#include "dist_fixture.hpp"

namespace dist_test {
namespace {



std::string version_body(const testbed::pem_cert& c) {
  return json::serialize(json::object{{"cert_pem", c.cert_pem}, {"key_pem", c.key_pem}});
}

TEST(certificate_versions, a_new_version_reaches_auto_execute_distributions_and_the_old_one_is_kept) {
  dist_env env(1);
  env.start();
  auto v1 = testbed::make_certificate({.common_name = "www.v1.test", .dns_sans = {"www.v1.test"}});
  auto cert = env.create_certificate("www", v1);
  auto cred = env.create_credential();
  auto t_auto = env.create_target(env.ssh_target_body("auto", 0, cred));
  auto t_manual = env.create_target(env.ssh_target_body("manual", 0, cred));
  // An uploaded certificate's distributions do not execute by themselves unless asked.
  auto d_auto = env.create_distribution("auto", cert, {t_auto}, {{"auto_execute", true}});
  auto d_manual = env.create_distribution("manual", cert, {t_manual});
  EXPECT_EQ(env.ok("GET", "distributions/" + d_manual).at("auto_execute"), false);
  EXPECT_EQ(env.ok("GET", "distributions/" + d_auto).at("auto_execute"), true);

  // The first execute is a person's.
  env.execute(d_auto);
  env.execute(d_manual);
  EXPECT_EQ(str(env.wait_done(d_auto), "status"), "success");
  EXPECT_EQ(str(env.wait_done(d_manual), "status"), "success");
  EXPECT_EQ(slurp(env.target_dir("auto") / "cert.pem"), v1.cert_pem);

  auto v2 = testbed::make_certificate({.common_name = "www.v2.test", .dns_sans = {"www.v2.test"}});
  auto stored = env.ok("POST", "certificates/" + cert + "/versions", version_body(v2), 201);
  EXPECT_EQ(num(stored, "version"), 2);
  ASSERT_EQ(stored.at("versions").as_array().size(), 2u);
  EXPECT_EQ(stored.at("versions").as_array()[0].at("version").as_int64(), 1);
  EXPECT_EQ(str(stored, "subject"), "CN=www.v2.test");
  EXPECT_EQ(stored.at("auto_execute").at("runs_opened"), json::array{json::value(d_auto)});
  EXPECT_TRUE(stored.at("auto_execute").at("runs_deferred").as_array().empty());

  auto done = env.wait_done(d_auto);
  EXPECT_EQ(str(done, "status"), "success") << json::serialize(done);
  EXPECT_EQ(num(done, "run_no"), 2);
  EXPECT_EQ(num(done, "run_certificate_version"), 2);
  EXPECT_EQ(str(done, "run_trigger"), fmt::format("dist-renew:{}:2", d_auto));
  EXPECT_EQ(slurp(env.target_dir("auto") / "cert.pem"), v2.cert_pem);
  // The other distribution was left alone: its target still has version 1.
  auto manual = env.ok("GET", "distributions/" + d_manual);
  EXPECT_EQ(num(manual, "run_no"), 1);
  EXPECT_EQ(slurp(env.target_dir("manual") / "cert.pem"), v1.cert_pem);

  // The certificate's view: version 2 current, both listed, the key never shown.
  auto view = env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(view, "version"), 2);
  EXPECT_EQ(str(view, "fingerprint_sha256"), str(view.at("versions").as_array()[1], "fingerprint_sha256"));
  EXPECT_NE(str(view.at("versions").as_array()[0], "serial"), str(view.at("versions").as_array()[1], "serial"));
  EXPECT_EQ(json::serialize(view).find("PRIVATE KEY"), std::string::npos);

  // A rollback of the auto run puts version 1 back on its target.
  env.ok("POST", "distributions/" + d_auto + "/rollback", "", 202);
  EXPECT_EQ(str(env.wait_done(d_auto), "status"), "success");
  EXPECT_EQ(slurp(env.target_dir("auto") / "cert.pem"), v1.cert_pem);

  // Deleting the certificate (after its distributions) takes its earlier versions with it.
  env.ok("DELETE", "distributions/" + d_auto);
  env.ok("DELETE", "distributions/" + d_manual);
  env.ok("DELETE", "certificates/" + cert);
  EXPECT_EQ(env.call("GET", "certificates/" + cert).status, 404);
}

TEST(certificate_versions, bad_bodies_change_nothing) {
  dist_env env(0);
  env.start();
  auto v1 = testbed::make_certificate({.common_name = "a.test"});
  auto cert = env.create_certificate("a", v1);
  auto other = testbed::make_certificate({.common_name = "b.test"});
  struct bad_case {
    std::string body;
    std::string field;
  };
  std::vector<bad_case> cases{
      {json::serialize(json::object{{"cert_pem", other.cert_pem}, {"key_pem", v1.key_pem}}), "key_pem"},
      {json::serialize(json::object{{"key_pem", other.key_pem}}), "cert_pem"},
      {json::serialize(json::object{{"name", "x"}, {"cert_pem", other.cert_pem}, {"key_pem", other.key_pem}}), "name"},
      {"not json", "body"},
  };
  for (const auto& c : cases) {
    auto r = env.call("POST", "certificates/" + cert + "/versions", c.body);
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), c.field) << r.body;
  }
  EXPECT_EQ(env.call("POST", "certificates/0123456789abcdef01234567/versions", version_body(other)).status, 404);
  auto view = env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(view, "version"), 1);
  EXPECT_EQ(view.at("versions").as_array().size(), 1u);
}

// A distribution in the middle of a run when the version is stored gets its run from the
// distributions sweep after that run ends — once.
TEST(certificate_versions, a_running_distribution_gets_its_run_from_the_sweep_once) {
  // A login shell that takes a while, so the first run is still going when the version arrives.
  testbed::temp_dir shell_dir;
  auto shell = shell_dir.path() / "slow-sh";
  write_file(shell, "#!/bin/sh\nsleep 2\nexec /bin/sh \"$@\"\n");
  fs::permissions(shell, fs::perms::owner_all);
  auto so = dist_env::internal_sftp();
  so.login_shell = shell.string();
  dist_env env(1, so);
  env.start("all", {"scheduler_interval_ms=1000", "scheduler_lease_ms=1500"});
  auto v1 = testbed::make_certificate({.common_name = "r.v1.test"});
  auto cert = env.create_certificate("r", v1);
  auto cred = env.create_credential();
  auto t = env.create_target(env.ssh_target_body("slow", 0, cred));
  auto d = env.create_distribution("slow", cert, {t}, {{"auto_execute", true}});
  env.execute(d);
  ASSERT_EQ(str(env.ok("GET", "distributions/" + d), "status"), "running");
  auto v2 = testbed::make_certificate({.common_name = "r.v2.test"});
  auto stored = env.ok("POST", "certificates/" + cert + "/versions", version_body(v2), 201);
  EXPECT_TRUE(stored.at("auto_execute").at("runs_opened").as_array().empty()) << json::serialize(stored);
  EXPECT_EQ(stored.at("auto_execute").at("runs_deferred"), json::array{json::value(d)});

  // Run 1 ends; the sweep opens run 2 for version 2, and nothing after it.
  auto until = std::chrono::steady_clock::now() + 120s;
  json::value v;
  while (std::chrono::steady_clock::now() < until) {
    v = env.ok("GET", "distributions/" + d);
    if (num(v, "run_no") >= 2 && str(v, "status") != "running") break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(num(v, "run_no"), 2) << json::serialize(v);
  EXPECT_EQ(str(v, "status"), "success") << json::serialize(v);
  EXPECT_EQ(str(v, "run_trigger"), fmt::format("dist-renew:{}:2", d));
  EXPECT_EQ(slurp(env.target_dir("slow") / "cert.pem"), v2.cert_pem);
  std::this_thread::sleep_for(3s);  // three more sweep cycles: no third run
  EXPECT_EQ(num(env.ok("GET", "distributions/" + d), "run_no"), 2);
}

}  // namespace
}  // namespace dist_test
