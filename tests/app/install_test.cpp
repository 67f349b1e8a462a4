// scripts/install.sh into a scratch root: the stripped binary with its debug info split off (and
// linked), the MongoDB backend's module where the binary finds it, the generated config, the
// data directory 0700, the unit; `systemd-analyze verify` on the installed unit is clean; a
// second run keeps an edited config.
#include "process.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

unsigned mode_of(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 ? (sb.st_mode & 07777) : 0xffff;
}

std::string sections(const std::string& file) {
  return testbed::run_command({"/usr/bin/readelf", "-S", "-W", file}, {}, 60s).second;
}

TEST(install, layout_stripped_binary_with_split_debug_info_and_a_unit_systemd_accepts) {
  testbed::temp_dir dir("certfleet-install");
  const auto root = dir.file("root");
  const std::string src = CERTFLEET_SOURCE_DIR;
  auto [rc, out] = testbed::run_command({src + "/scripts/install.sh", "--root", root, "--binary", CERTFLEET_BINARY}, {},
                                        300s);
  ASSERT_EQ(rc, 0) << out;
  const auto bin = root + "/usr/local/bin/certfleet";
  const auto debug = root + "/usr/lib/debug/usr/local/bin/certfleet.debug";
  std::cout << out;  // the sizes, for the record

  // The binary: stripped, linked to its debug file, and it runs.
  ASSERT_EQ(mode_of(bin), 0755u);
  auto bin_sections = sections(bin);
  EXPECT_EQ(bin_sections.find(".debug_info"), std::string::npos) << bin_sections;
  EXPECT_NE(bin_sections.find(".gnu_debuglink"), std::string::npos) << bin_sections;
  EXPECT_NE(sections(debug).find(".debug_info"), std::string::npos);
  // Smaller by the debug info, which moved to the debug file rather than being lost: the two
  // together hold about what the build had. (RelWithDebInfo: 125 MB -> 6.4 MB + the rest; a
  // sanitizer build's code is most of it, 440 MB -> 350 MB + 90 MB. Debug sections are
  // compressed, -gz, so the debug file's share of the build varies with the build type.)
  EXPECT_LT(fs::file_size(bin), fs::file_size(CERTFLEET_BINARY));
  EXPECT_GT(fs::file_size(bin) + fs::file_size(debug), fs::file_size(CERTFLEET_BINARY) / 10 * 9);
  auto link = testbed::run_command({"/usr/bin/readelf", "--string-dump=.gnu_debuglink", bin}, {}, 60s).second;
  EXPECT_NE(link.find("certfleet.debug"), std::string::npos) << link;
  auto [vrc, vout] = testbed::run_command({bin, "--version"}, {}, 60s);
  EXPECT_EQ(vrc, 0) << vout;
  EXPECT_NE(vout.find("certfleet "), std::string::npos);
  // Version, commit with its date, compiler (issue 35).
  EXPECT_TRUE(std::regex_search(vout, std::regex(R"(^certfleet \d+\.\d+\.\d+\ncommit \S+ \(\S+\)\ncompiler (gcc|clang) )"))) << vout;

  // The MongoDB backend in bin/../lib/certfleet/, stripped like the binary, and the installed
  // binary loads it from there: the backend itself reports the unreachable cluster.
  const auto mongo_module = root + "/usr/local/lib/certfleet/certfleet_store_mongo.so";
  ASSERT_EQ(mode_of(mongo_module), 0644u);
  EXPECT_EQ(sections(mongo_module).find(".debug_info"), std::string::npos);
  EXPECT_NE(sections(root + "/usr/lib/debug/usr/local/lib/certfleet/certfleet_store_mongo.so.debug").find(".debug_info"),
            std::string::npos);
  auto [mrc, mout] = testbed::run_command(
      {"/bin/sh", "-c", "\"$0\" jobs list --data \"$1\" --store 'mongodb://127.0.0.1:1/certfleet?replicaSet=rs0' "
                        "--set store_timeout_ms=300 2>&1",
       bin, dir.file("var")},
      {}, 60s);
  EXPECT_NE(mrc, 0) << mout;
  EXPECT_NE(mout.find("no MongoDB primary answered within 300 ms"), std::string::npos) << mout;

  // Config, data, unit.
  const auto config = root + "/etc/certfleet/certfleet.toml";
  EXPECT_EQ(read_all(config), read_all(src + "/packaging/certfleet.toml"));
  EXPECT_EQ(mode_of(config), 0640u);
  EXPECT_EQ(mode_of(root + "/var/lib/certfleet"), 0700u);
  const auto unit = root + "/etc/systemd/system/certfleet.service";
  const auto unit_text = read_all(unit);
  EXPECT_EQ(unit_text, read_all(src + "/packaging/certfleet.service"));
  for (const char* line : {"Type=notify", "WatchdogSec=", "User=certfleet", "ProtectSystem=strict", "ProtectHome=yes",
                           "NoNewPrivileges=yes", "PrivateTmp=yes", "ReadWritePaths=/var/lib/certfleet",
                           "CapabilityBoundingSet=\n", "ExecStart=/usr/local/bin/certfleet serve --config "
                                                       "/etc/certfleet/certfleet.toml"})
    EXPECT_NE(unit_text.find(line), std::string::npos) << line;

  // systemd-analyze verify checks the unit's syntax, every key, and that ExecStart's binary is
  // executable: verify the installed unit with its ExecStart pointing into the scratch root.
  const auto check_unit = dir.file("certfleet.service");
  {
    std::ofstream f(check_unit);
    f << std::regex_replace(unit_text, std::regex("ExecStart=/usr/local/bin/certfleet"), "ExecStart=" + bin);
  }
  auto [arc, aout] = testbed::run_command({"/usr/bin/systemd-analyze", "verify", check_unit}, {}, 120s);
  EXPECT_EQ(arc, 0) << aout;
  EXPECT_EQ(aout, "") << "systemd-analyze verify is not clean";
  // The check can fail: a misspelt key is reported.
  {
    std::ofstream f(check_unit, std::ios::app);
    f << "ProtectSystm=strict\n";
  }
  EXPECT_NE(testbed::run_command({"/usr/bin/systemd-analyze", "verify", check_unit}, {}, 120s).second.find("ProtectSystm"),
            std::string::npos);

  // Again, over an edited config: the config stays, the binary is replaced.
  {
    std::ofstream f(config, std::ios::app);
    f << "listen = \"0.0.0.0:8443\"\n";
  }
  auto [rc2, out2] = testbed::run_command({src + "/scripts/install.sh", "--root", root, "--binary", CERTFLEET_BINARY}, {},
                                          300s);
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_NE(read_all(config).find("listen = \"0.0.0.0:8443\""), std::string::npos);
  EXPECT_NE(out2.find("kept"), std::string::npos) << out2;
}

}  // namespace
