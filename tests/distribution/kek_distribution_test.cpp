// KEK rotation while distributions run (DESIGN §11, issue 17): a server started before
// `certfleet kek rotate` keeps delivering a certificate whose key is sealed, while its worker
// re-seals the store's envelopes under the new version, and after; the key written to disk is the
// certificate's own each time.
#include "dist_fixture.hpp"

#include <fstream>
#include <sstream>

namespace dist_test {
namespace {

using namespace certfleet;

json::object kek_status(dist_env& env) {
  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"kek", "status", "--json"}));
  EXPECT_EQ(rc, 0) << out;
  boost::system::error_code ec;
  auto v = json::parse(out, ec);
  return !ec && v.is_object() ? v.as_object() : json::object{};
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(kek_rotation_live, distributions_keep_delivering_sealed_keys_while_a_rotation_runs_and_after) {
  dist_env env(0);
  env.start();
  auto base = env.dir.path() / "local";
  fs::create_directories(base / "a");
  // Small batches: the rotation spans many jobs while the distribution runs beside them.
  env.set_settings(json::object{{"file_target_base_dirs", base.string()}, {"kek_rotation_batch", 10}});
  auto leaf = testbed::make_certificate({});
  auto cert = env.create_certificate("c", leaf);
  for (int i = 0; i < 150; ++i)
    env.ok("POST", "credentials",
           json::serialize(json::object{{"name", "pw-" + std::to_string(i)}, {"kind", "password"}, {"password", "s3cret"}}),
           201);
  json::object target{{"name", "local"}, {"module", "file"},
                      {"file", json::object{{"cert_path", (base / "a" / "cert.pem").string()},
                                            {"key_path", (base / "a" / "key.pem").string()}}}};
  auto t = str(env.ok("POST", "targets", json::serialize(target), 201), "id");
  auto dist = env.create_distribution("local", cert, {t});

  auto [rc, out] = testbed::run_command(testbed::certfleet_command(env.data(), {"kek", "rotate"}));
  ASSERT_EQ(rc, 0) << out;
  int during = 0, runs = 0;
  for (; runs < 30; ++runs) {
    const bool running = kek_status(env).at("running").as_bool();
    fs::remove(base / "a" / "key.pem");
    env.execute(dist);
    auto d = env.wait_done(dist);
    ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
    EXPECT_EQ(read_file(base / "a" / "key.pem"), leaf.key_pem);
    if (!running) break;
    ++during;
  }
  EXPECT_GE(during, 1) << "no delivery ran while the rotation did";
  // Done: every envelope (the certificate's key among them) is at version 2, and a delivery now
  // opens the re-sealed key.
  json::object s;
  for (int i = 0; i < 300; ++i) {
    s = kek_status(env);
    if (!s.at("running").as_bool() && s.at("left").as_int64() == 0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(s.at("primary").as_int64(), 2) << json::serialize(s);
  EXPECT_EQ(s.at("left").as_int64(), 0) << json::serialize(s);
  fs::remove(base / "a" / "key.pem");
  env.execute(dist);
  auto d = env.wait_done(dist);
  ASSERT_EQ(str(d, "status"), "success") << json::serialize(d);
  EXPECT_EQ(read_file(base / "a" / "key.pem"), leaf.key_pem);
  auto [rrc, rout] = testbed::run_command(testbed::certfleet_command(env.data(), {"kek", "retire", "1"}));
  EXPECT_EQ(rrc, 0) << rout;
}

}  // namespace
}  // namespace dist_test
