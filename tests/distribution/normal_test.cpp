// Normal (single-job) distributions end to end: a real certfleet process, real sshd instances,
// everything through the HTTP API.
#include "dist_fixture.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"
#include "run_sync.hpp"

#include <sys/stat.h>

#include <sstream>

namespace dist_test {
namespace {

TEST(normal_distribution, delivers_hash_skips_and_rolls_back_exactly) {
  dist_env env(3);
  env.start();
  auto leaf = testbed::make_certificate({.common_name = "www.example.test", .dns_sans = {"www.example.test"}});
  auto cert = env.create_certificate("www", leaf);
  auto cred = env.create_credential();
  std::vector<std::string> targets;
  for (int i = 0; i < 6; ++i) {
    auto name = fmt::format("web{}", i);
    auto t = env.ssh_target_body(name, static_cast<std::size_t>(i), cred);
    targets.push_back(env.create_target(t));
    // What was there before: rollback must put exactly these bytes back.
    write_file(env.target_dir(name) / "cert.pem", fmt::format("old certificate {}\n", i));
    write_file(env.target_dir(name) / "key.pem", fmt::format("old key {}\n", i));
  }
  auto dist = env.create_distribution("web-fleet", cert, targets);

  auto run1 = env.execute(dist);
  EXPECT_EQ(str(run1, "mode"), "normal");
  EXPECT_EQ(num(run1, "run_no"), 1);
  auto d = env.wait_done(dist);
  ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
  EXPECT_EQ(num(d.at("summary"), "succeeded"), 6);
  for (int i = 0; i < 6; ++i) {
    auto base = env.target_dir(fmt::format("web{}", i));
    EXPECT_EQ(slurp(base / "cert.pem"), leaf.cert_pem);
    EXPECT_EQ(slurp(base / "key.pem"), leaf.key_pem);
    struct stat st {};
    ASSERT_EQ(::stat((base / "key.pem").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
  }
  auto r1 = env.results(dist);
  ASSERT_EQ(r1.size(), 6u);
  for (auto& r : r1) {
    EXPECT_EQ(r.at("status"), "succeeded");
    EXPECT_FALSE(r.at("hash_skipped").as_bool());
    EXPECT_EQ(r.at("retry_attempt").as_int64(), 0);
    EXPECT_FALSE(str(r, "fingerprint_sha256").empty());
  }
  // The job is completed/ok and its log has one line per target step.
  auto job_id = std::string(run1.at("job_ids").as_array().at(0).as_string());
  auto job = env.ok("GET", "jobs/" + job_id);
  EXPECT_EQ(str(job, "status"), "completed");
  EXPECT_EQ(str(job, "result_status"), "ok");

  // Run 2 changes nothing on the targets: every one is hash-skipped.
  auto run2 = env.execute(dist);
  EXPECT_EQ(num(run2, "run_no"), 2);
  d = env.wait_done(dist);
  ASSERT_EQ(str(d, "status"), "success");
  for (auto& r : env.results(dist)) EXPECT_TRUE(r.at("hash_skipped").as_bool()) << json::serialize(r);

  // Rolling back run 2 (which only hash-skipped) restores what was there before the certificate
  // arrived in run 1: the run whose files are on the targets.
  auto rb = env.ok("POST", "distributions/" + dist + "/rollback", R"({"run_no": 2})", 202);
  EXPECT_EQ(str(rb, "mode"), "rollback");
  d = env.wait_done(dist);
  ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
  for (int i = 0; i < 6; ++i) {
    auto base = env.target_dir(fmt::format("web{}", i));
    EXPECT_EQ(slurp(base / "cert.pem"), fmt::format("old certificate {}\n", i));
    EXPECT_EQ(slurp(base / "key.pem"), fmt::format("old key {}\n", i));
  }

  // A job retry of a distribution job points at retry-failed.
  auto retry = env.call("POST", "jobs/" + job_id + "/retry");
  EXPECT_EQ(retry.status, 409) << retry.body;
  EXPECT_NE(retry.body.find("retry-failed"), std::string::npos);

  // No private key bytes anywhere an operator or attacker reads: API, job logs, the store file.
  auto key_body = leaf.key_pem.substr(leaf.key_pem.find('\n') + 1, 40);
  auto cred_body = env.client.private_key.substr(env.client.private_key.find('\n') + 1, 40);
  for (const auto& path : {std::string("certificates/") + cert, std::string("credentials/") + cred,
                           std::string("certificates"), std::string("jobs/") + job_id + "/logs?limit=1000",
                           std::string("distributions/") + dist, std::string("distributions/") + dist + "/results"}) {
    auto r = env.call("GET", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body.find(key_body), std::string::npos) << path;
    EXPECT_EQ(r.body.find(cred_body), std::string::npos) << path;
    EXPECT_EQ(r.body.find("PRIVATE KEY"), std::string::npos) << path;
  }
  for (const auto& f : fs::directory_iterator(env.data())) {
    auto bytes = slurp(f.path());
    EXPECT_EQ(bytes.find(key_body), std::string::npos) << f.path();
    EXPECT_EQ(bytes.find(cred_body), std::string::npos) << f.path();
  }
}

TEST(normal_distribution, failures_are_classified_and_the_job_is_dead_when_none_succeeded) {
  dist_env env(1);
  env.start();
  auto cert = env.create_certificate("c", testbed::make_certificate({}));
  auto cred = env.create_credential();
  testbed::closed_port closed;
  auto t1 = env.create_target(env.ssh_target_body("closed", 0, cred, closed.port()));
  auto body = env.ssh_target_body("relative-denied", 0, cred);
  // A directory nobody may write into: root ignores permissions, so use a path under a file.
  write_file(env.dir.path() / "not-a-dir", "x");
  body["ssh"].as_object()["cert_path"] = (env.dir.path() / "not-a-dir" / "cert.pem").string();
  body["ssh"].as_object()["key_path"] = (env.dir.path() / "not-a-dir" / "key.pem").string();
  auto t2 = env.create_target(body);
  auto dist = env.create_distribution("broken", cert, {t1, t2});
  auto run = env.execute(dist);
  auto d = env.wait_done(dist);
  EXPECT_EQ(str(d, "status"), "failed");
  EXPECT_NE(str(d, "error").find("all 2 targets failed"), std::string::npos) << json::serialize(d);
  std::map<std::string, std::string> cls;
  for (auto& r : env.results(dist)) cls[str(r, "target_id")] = str(r, "error_class");
  EXPECT_EQ(cls[t1], "network");
  EXPECT_EQ(cls[t2], "io_permanent");
  auto job = env.ok("GET", "jobs/" + std::string(run.at("job_ids").as_array().at(0).as_string()));
  EXPECT_EQ(str(job, "status"), "dead");
  EXPECT_NE(str(job, "error").find("all 2 targets failed"), std::string::npos);

  // retry-failed opens run 2 over both; a deleted target is skipped, not an error.
  ASSERT_EQ(env.call("DELETE", "targets/" + t1).status, 200);
  auto again = env.ok("POST", "distributions/" + dist + "/retry-failed", "", 202);
  EXPECT_EQ(num(again, "targets"), 2);
  d = env.wait_done(dist);
  std::map<std::string, std::string> st;
  for (auto& r : env.results(dist)) st[str(r, "target_id")] = str(r, "status");
  EXPECT_EQ(st[t1], "skipped");
  EXPECT_EQ(st[t2], "failed");
}

// Local delivery end to end: a system admin's file target under file_target_base_dirs delivers
// and runs its command without a shell; after the setting moves elsewhere, the same stored
// target is refused at delivery and nothing is written; a file target stored without a system
// admin's grant (as any project admin could before) never runs.
TEST(file_distribution, base_dirs_and_grant_are_checked_at_delivery) {
  dist_env env(0);
  env.start();
  auto base = env.dir.path() / "local";
  fs::create_directories(base / "a");
  env.set_settings(json::object{{"file_target_base_dirs", base.string()}});
  auto cert = env.create_certificate("c", testbed::make_certificate({}));
  auto file_body = [&](const std::string& name, const fs::path& d) {
    return json::object{{"name", name}, {"module", "file"},
                        {"file", json::object{{"cert_path", (d / "cert.pem").string()}, {"key_path", (d / "key.pem").string()},
                                              {"post_command", "/usr/bin/touch '" + (d / "ran;id").string() + "'"}}}};
  };
  auto t = str(env.ok("POST", "targets", json::serialize(file_body("local", base / "a")), 201), "id");
  auto dist = env.create_distribution("local", cert, {t});
  env.execute(dist);
  auto d = env.wait_done(dist);
  ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
  EXPECT_TRUE(fs::exists(base / "a" / "cert.pem"));
  EXPECT_TRUE(fs::exists(base / "a" / "ran;id"));  // one literal argument: no shell split it

  // The setting now names another directory: the stored target is refused, nothing changes.
  fs::remove(base / "a" / "cert.pem");
  env.set_settings(json::object{{"file_target_base_dirs", (env.dir.path() / "elsewhere").string()}});
  env.execute(dist);
  d = env.wait_done(dist);
  EXPECT_EQ(str(d, "status"), "failed");
  auto r = env.results(dist);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(str(r[0], "error_class"), "validation");
  EXPECT_NE(str(r[0], "error").find("file.cert_path"), std::string::npos) << str(r[0], "error");
  EXPECT_FALSE(fs::exists(base / "a" / "cert.pem"));

  // A file target stored before the rule (no created_by_system_admin): refused at delivery even
  // inside the base dirs. Written into the store the way an old version wrote it.
  env.set_settings(json::object{{"file_target_base_dirs", base.string()}});
  fs::create_directories(base / "old");
  auto old_doc = file_body("old", base / "old");
  old_doc.erase("name");
  {
    auto s = certfleet::store::open_sqlite({(fs::path(env.data()) / "certfleet.db").string(), 1, 5000, false});
    ASSERT_TRUE(s) << s.error().message;
    auto project = testbed::run_sync((*s)->projects().find_by_name("default"));
    ASSERT_TRUE(project);
    auto o = std::make_shared<certfleet::store::catalog_object>();
    o->id = certfleet::new_object_id();
    o->project_id = project->id;
    o->kind = std::string(certfleet::store::kind_target);
    o->name = "old";
    o->doc = json::serialize(old_doc);
    o->created_at = 1;
    certfleet::store::tx_fn fn = [o](certfleet::store::catalog_tx& tx) -> certfleet::result<void> {
      auto ins = tx.insert_object(*o);
      if (!ins) return std::move(ins).error();
      return {};
    };
    ASSERT_TRUE(testbed::run_sync((*s)->catalog().transact(std::move(fn))));
    (*s)->close();
    auto dist2 = env.create_distribution("old", cert, {o->id});
    env.execute(dist2);
    d = env.wait_done(dist2);
    EXPECT_EQ(str(d, "status"), "failed");
    auto r2 = env.results(dist2);
    ASSERT_EQ(r2.size(), 1u);
    EXPECT_NE(str(r2[0], "error").find("not created by a system admin"), std::string::npos) << str(r2[0], "error");
  }
  EXPECT_FALSE(fs::exists(base / "old" / "cert.pem"));
  EXPECT_FALSE(fs::exists(base / "old" / "ran;id"));
}

TEST(catalog, bad_input_is_refused_naming_the_field_and_stores_nothing) {
  dist_env env(1);
  env.start();
  auto good = testbed::make_certificate({});
  auto other = testbed::make_certificate({});
  auto ca = testbed::make_certificate({.common_name = "Test Root", .is_ca = true});
  auto inter = testbed::make_certificate({.common_name = "Test Intermediate", .issuer = &ca, .is_ca = true});
  auto leaf = testbed::make_certificate({.common_name = "leaf.test", .issuer = &inter});
  auto expired = testbed::make_certificate({.not_before_ms = testbed::unix_now_ms() - 10 * 86400'000LL,
                                            .not_after_ms = testbed::unix_now_ms() - 86400'000LL});
  auto post_cert = [&](json::object b) { return env.call("POST", "certificates", json::serialize(b)); };
  struct bad_case {
    const char* what;
    json::object body;
    const char* field;
  };
  std::vector<bad_case> cases{
      {"unparsable PEM", {{"name", "a"}, {"cert_pem", "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"}, {"key_pem", good.key_pem}}, "cert_pem"},
      {"key of another certificate", {{"name", "a"}, {"cert_pem", good.cert_pem}, {"key_pem", other.key_pem}}, "key_pem"},
      {"expired", {{"name", "a"}, {"cert_pem", expired.cert_pem}, {"key_pem", expired.key_pem}}, "cert_pem"},
      {"chain out of order", {{"name", "a"}, {"cert_pem", leaf.cert_pem}, {"chain_pem", ca.cert_pem + inter.cert_pem}, {"key_pem", leaf.key_pem}}, "chain_pem"},
      {"missing key", {{"name", "a"}, {"cert_pem", good.cert_pem}}, "key_pem"},
      {"unknown field", {{"name", "a"}, {"cert_pem", good.cert_pem}, {"key_pem", good.key_pem}, {"pkey", "x"}}, "pkey"},
  };
  for (auto& c : cases) {
    auto r = post_cert(c.body);
    EXPECT_EQ(r.status, 400) << c.what << ": " << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), c.field) << c.what << ": " << r.body;
  }
  // The chain in order is accepted.
  EXPECT_EQ(post_cert({{"name", "chained"}, {"cert_pem", leaf.cert_pem}, {"chain_pem", inter.cert_pem + ca.cert_pem},
                       {"key_pem", leaf.key_pem}}).status, 201);
  EXPECT_EQ(num(env.ok("GET", "certificates"), "total"), 1);

  auto cred = env.create_credential();
  auto bad_port = env.ssh_target_body("t", 0, cred);
  bad_port["ssh"].as_object()["port"] = 70000;
  auto unknown_cred = env.ssh_target_body("t", 0, "0123456789abcdef01234567");
  auto relative = env.ssh_target_body("t", 0, cred);
  relative["ssh"].as_object()["cert_path"] = "certs/cert.pem";
  auto bad_key = env.ssh_target_body("t", 0, cred);
  bad_key["ssh"].as_object()["host_key"] = "ssh-ed25519 notbase64!";
  for (auto& [body, field] : std::vector<std::pair<json::object, std::string>>{
           {bad_port, "ssh.port"}, {unknown_cred, "ssh.credential_id"}, {relative, "ssh.cert_path"},
           {bad_key, "ssh.host_key"}}) {
    auto r = env.call("POST", "targets", json::serialize(body));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(str(r.json().at("error"), "field"), field) << r.body;
  }
  // A key given twice inside a target document: the delivery module would read one host, the
  // stored text hold both. Refused naming the path, nothing stored.
  auto twice = json::serialize(env.ssh_target_body("t", 0, cred));
  auto at = twice.find("\"ssh\":{");
  ASSERT_NE(at, std::string::npos) << twice;
  twice.insert(at + 7, "\"host\":\"other.example\",");
  auto dup = env.call("POST", "targets", twice);
  EXPECT_EQ(dup.status, 400) << twice << " -> " << dup.body;
  EXPECT_EQ(str(dup.json().at("error"), "field"), "ssh.host") << dup.body;
  EXPECT_EQ(num(env.ok("GET", "targets"), "total"), 0);
  auto rsa = env.call("POST", "credentials",
                      json::serialize(json::object{{"name", "rsa"}, {"kind", "ssh_key"},
                                                   {"private_key_pem", testbed::make_ssh_key(env.dir.path() / "k", "rsa", "rsa").private_key}}));
  EXPECT_EQ(rsa.status, 400) << rsa.body;
  EXPECT_EQ(str(rsa.json().at("error"), "field"), "private_key_pem");

  auto d = env.call("POST", "distributions",
                    json::serialize(json::object{{"name", "d"}, {"certificate_id", "0123456789abcdef01234567"},
                                                 {"target_ids", json::array{}}}));
  EXPECT_EQ(d.status, 400);
  EXPECT_EQ(num(env.ok("GET", "distributions"), "total"), 0);
  // A credential a target uses cannot be deleted; another project's token sees none of it.
  auto t = env.create_target(env.ssh_target_body("t", 0, cred));
  EXPECT_EQ(env.call("DELETE", "credentials/" + cred).status, 409);
  EXPECT_EQ(env.call("GET", "targets/" + t).status, 200);
}

TEST(key_file, a_store_with_sealed_secrets_refuses_a_missing_or_wrong_key) {
  dist_env env(0);
  env.start();
  env.create_credential();
  env.servers.back()->signal(SIGTERM);
  ASSERT_EQ(env.servers.back()->wait(10s), 0);
  auto key = fs::path(env.data()) / "certfleet.key";
  auto saved = slurp(key);
  ASSERT_FALSE(saved.empty());

  fs::remove(key);
  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"serve", "--listen", "127.0.0.1:0"}));
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("missing"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(key)) << "a new key must never be generated over existing secrets";

  // Another valid key file (from another store) is refused too.
  dist_env other(0);
  other.start();
  other.servers.back()->signal(SIGTERM);
  other.servers.back()->wait(10s);
  fs::copy_file(fs::path(other.data()) / "certfleet.key", key);
  std::tie(rc, out) = testbed::run_command(testbed::certfleet_command(env.data(), {"serve", "--listen", "127.0.0.1:0"}));
  EXPECT_NE(rc, 0);
  EXPECT_NE(out.find("key"), std::string::npos) << out;

  // The right key starts again and opens the secret.
  fs::remove(key);
  write_file(key, saved);
  fs::permissions(key, fs::perms::owner_read | fs::perms::owner_write);
  env.http.reset();
  env.start();
  EXPECT_EQ(num(env.ok("GET", "credentials"), "total"), 1);
}

// Issue 28, end to end: a file target whose post command prints the delivered key (and fails,
// so its output lands in the result's error and the job log's detail). No byte of the key is in
// the stored result, the job's log lines or anywhere in the database files.
TEST(file_distribution, post_command_output_never_stores_the_private_key) {
  dist_env env(0);
  env.start();
  auto base = env.dir.path() / "local";
  fs::create_directories(base / "k");
  env.set_settings(json::object{{"file_target_base_dirs", base.string()}});
  const auto pem = testbed::make_certificate({});
  auto cert = env.create_certificate("c", pem);
  const auto key_path = (base / "k" / "key.pem").string();
  // No shell: /bin/cat with the key's path (and a missing file, so it exits 1).
  auto t = str(env.ok("POST", "targets",
                      json::serialize(json::object{
                          {"name", "cat-key"}, {"module", "file"},
                          {"file", json::object{{"cert_path", (base / "k" / "cert.pem").string()}, {"key_path", key_path},
                                                {"post_command", "/bin/cat " + key_path + " /nonexistent-certfleet"}}}}),
                      201),
               "id");
  auto dist = env.create_distribution("cat-key", cert, {t});
  env.execute(dist);
  auto d = env.wait_done(dist);
  EXPECT_EQ(str(d, "status"), "failed") << json::serialize(d);
  // The key's body, in pieces a leak would show. A PKCS#8 EC key carries its public key, which
  // the certificate (stored as PEM, public) carries too: when the two encodings line up, a piece
  // of the key's text is also in the certificate's (about 1 key in 40), so those are left out.
  std::vector<std::string> pieces;
  {
    std::istringstream in(pem.key_pem);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("-----", 0) != 0)
        for (std::size_t i = 0; i + 16 <= l.size(); i += 16)
          if (pem.cert_pem.find(l.substr(i, 16)) == std::string::npos) pieces.push_back(l.substr(i, 16));
  }
  ASSERT_GE(pieces.size(), 5u);  // the private scalar's text is always among them
  auto results = env.results(dist);
  ASSERT_EQ(results.size(), 1u);
  const auto result_text = json::serialize(results[0]);
  EXPECT_NE(result_text.find("exited 1"), std::string::npos) << result_text;
  EXPECT_NE(result_text.find("[private key redacted]"), std::string::npos) << result_text;
  const auto logs = json::serialize(env.ok("GET", "jobs/" + str(results[0], "job_id") + "/logs?after=0&limit=500"));
  EXPECT_NE(logs.find("cat-key"), std::string::npos) << logs;
  std::string db;
  for (const char* f : {"certfleet.db", "certfleet.db-wal"})
    if (fs::exists(fs::path(env.data()) / f)) db += slurp(fs::path(env.data()) / f);
  for (const auto& p : pieces) {
    EXPECT_EQ(result_text.find(p), std::string::npos) << p << " in " << result_text;
    EXPECT_EQ(logs.find(p), std::string::npos) << p << " in " << logs;
    EXPECT_EQ(db.find(p), std::string::npos) << p << " in the database files";
  }
  EXPECT_EQ(logs.find("PRIVATE KEY-----"), std::string::npos) << logs;
}

}  // namespace
}  // namespace dist_test
