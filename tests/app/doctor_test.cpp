// `certfleet doctor` against real parts: a data directory a real `certfleet serve` made, its key
// file given a bad mode, its SQLite file corrupted, a port held by another program and one served
// by certfleet itself, TLS files that do not match, a bad setting, and SSH targets checked against
// real sshd instances (a pinned key that matches, one that does not, a closed port).
#include "certs.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "sshd.hpp"
#include "temp_dir.hpp"

#include <arpa/inet.h>
#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

using namespace std::chrono_literals;

namespace {

struct doctor_run {
  int status = -1;
  std::string out;
  struct row {
    std::string status, detail, fix;
  };
  std::map<std::string, row> rows;  // by check name
  const row& at(const std::string& check) const {
    static const row none{"(missing)", "", ""};
    auto it = rows.find(check);
    return it == rows.end() ? none : it->second;
  }
};

doctor_run doctor(const std::string& data, std::vector<std::string> extra) {
  std::vector<std::string> argv{CERTFLEET_BINARY, "doctor", "--data", data};
  argv.insert(argv.end(), extra.begin(), extra.end());
  doctor_run r;
  std::tie(r.status, r.out) = testbed::run_command(argv, {}, 120s);
  std::istringstream in(r.out);
  std::string line, last;
  const std::regex row_re(R"(^(\S(?:.*\S)?)\s{2,}(OK|WARN|FAIL)\s{2,}(.*)$)");
  const std::regex fix_re(R"(^\s+fix: (.*)$)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, row_re)) {
      last = m[1];
      r.rows[last] = {m[2], m[3], ""};
    } else if (std::regex_match(line, m, fix_re) && !last.empty()) {
      r.rows[last].fix = m[1];
    }
  }
  return r;
}

std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}
void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

unsigned short port_of(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

// A plain TCP listener that is not certfleet (accepts, never answers).
struct foreign_listener {
  int fd = -1;
  unsigned short port = 0;
  foreign_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~foreign_listener() { ::close(fd); }
};

// A data directory made by a real start and stop of `certfleet serve`.
void make_data_dir(const testbed::temp_dir& dir, const std::string& data) {
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0"}, {}, dir.file("init"));
  ASSERT_FALSE(p.wait_for_stdout("serving:", 30s).empty()) << p.stderr_text();
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait(30s), 0);
}

TEST(doctor, each_check_ok_on_a_served_data_dir_and_fail_when_broken) {
  testbed::temp_dir dir("certfleet-doctor");
  const auto data = dir.file("var");
  make_data_dir(dir, data);
  foreign_listener foreign;

  // Everything as a fresh start left it: no FAIL. The empty egress allow-list is a warning
  // (notifications cannot go anywhere), so the exit code is 1.
  auto r = doctor(data, {"--set", "listen=127.0.0.1:0"});
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.at("config").status, "OK") << r.out;
  EXPECT_EQ(r.at("data directory").status, "OK") << r.out;
  EXPECT_EQ(r.at("store").status, "OK") << r.out;
  EXPECT_NE(r.at("store").detail.find("integrity ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.at("key file").status, "OK") << r.out;
  EXPECT_EQ(r.at("tls").status, "OK") << r.out;  // plain HTTP on loopback
  EXPECT_EQ(r.at("listen").status, "OK") << r.out;
  EXPECT_NE(r.at("clock").status, "FAIL") << r.out;
  EXPECT_EQ(r.at("egress").status, "WARN") << r.out;
  EXPECT_NE(r.at("egress").fix.find("egress_allow_list"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checks:"), std::string::npos);
  for (const auto& [name, row] : r.rows) EXPECT_NE(row.status, "FAIL") << name << ": " << row.detail;

  // A bad setting: FAIL naming it, exit 2.
  r = doctor(data, {"--set", "lease_ms=5"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("config").status, "FAIL") << r.out;
  EXPECT_NE(r.at("config").detail.find("lease_ms"), std::string::npos) << r.out;

  // A port another program holds: FAIL with how to find it; one certfleet serves: OK.
  r = doctor(data, {"--set", "listen=127.0.0.1:" + std::to_string(foreign.port)});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("listen").status, "FAIL") << r.out;
  EXPECT_NE(r.at("listen").detail.find("in use by another program"), std::string::npos) << r.out;
  EXPECT_NE(r.at("listen").fix.find("ss -ltnp"), std::string::npos) << r.out;
  {
    testbed::process running({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0"}, {}, dir.file("run"));
    auto line = running.wait_for_stdout("serving:", 30s);
    ASSERT_FALSE(line.empty()) << running.stderr_text();
    r = doctor(data, {"--set", "listen=127.0.0.1:" + std::to_string(port_of(line))});
    EXPECT_EQ(r.at("listen").status, "OK") << r.out;
    EXPECT_NE(r.at("listen").detail.find("running certfleet"), std::string::npos) << r.out;
    running.signal(SIGTERM);
    EXPECT_EQ(running.wait(30s), 0);
  }

  // TLS files: a matching pair is OK (with the subject and expiry), a key of another certificate
  // FAILs naming tls_key_file.
  testbed::cert_spec spec;
  spec.common_name = "doctor.test";
  spec.dns_sans = {"doctor.test"};
  auto leaf = testbed::make_certificate(spec);
  auto other = testbed::make_certificate(spec);
  write_file(dir.file("tls.pem"), leaf.cert_pem);
  write_file(dir.file("tls.key"), leaf.key_pem);
  write_file(dir.file("other.key"), other.key_pem);
  ::chmod(dir.file("tls.key").c_str(), 0600);
  r = doctor(data, {"--set", "listen=127.0.0.1:0", "--set", "tls_cert_file=" + dir.file("tls.pem"), "--set",
                    "tls_key_file=" + dir.file("tls.key")});
  EXPECT_EQ(r.at("tls").status, "OK") << r.out;
  EXPECT_NE(r.at("tls").detail.find("CN=doctor.test"), std::string::npos) << r.out;
  r = doctor(data, {"--set", "listen=127.0.0.1:0", "--set", "tls_cert_file=" + dir.file("tls.pem"), "--set",
                    "tls_key_file=" + dir.file("other.key")});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("tls").status, "FAIL") << r.out;
  EXPECT_NE(r.at("tls").detail.find("tls_key_file"), std::string::npos) << r.out;

  // The key file readable by others: FAIL, and the fix is the chmod.
  const auto key = data + "/certfleet.key";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  r = doctor(data, {"--set", "listen=127.0.0.1:0"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("key file").status, "FAIL") << r.out;
  EXPECT_NE(r.at("key file").detail.find("0644"), std::string::npos) << r.out;
  EXPECT_NE(r.at("key file").fix.find("chmod 600 " + key), std::string::npos) << r.out;
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);

  // doctor changes nothing: a store file left 0644 in rollback-journal mode (as a restore by hand
  // can leave it) gets a WARN with the chmod, and keeps both its mode and its journal mode (file
  // header bytes 18 and 19: 1 rollback, 2 WAL). The -wal file holds nothing after a clean stop
  // (a read-only open may leave an empty one); without it the file reads in rollback mode.
  const auto db = data + "/certfleet.db";
  if (std::filesystem::exists(db + "-wal")) ASSERT_EQ(std::filesystem::file_size(db + "-wal"), 0u);
  std::filesystem::remove(db + "-wal");
  std::filesystem::remove(db + "-shm");
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(18);
    f.put(1).put(1);
  }
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  r = doctor(data, {"--set", "listen=127.0.0.1:0"});
  EXPECT_EQ(r.at("store").status, "WARN") << r.out;
  EXPECT_NE(r.at("store").detail.find("integrity ok"), std::string::npos) << r.out;
  EXPECT_NE(r.at("store").detail.find("mode 0644"), std::string::npos) << r.out;
  EXPECT_NE(r.at("store").fix.find("chmod 600 " + db), std::string::npos) << r.out;
  EXPECT_EQ(r.at("key file").status, "OK") << r.out;  // the store was read: its key fingerprint matched
  struct stat sb {};
  ASSERT_EQ(::stat(db.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0644u);
  EXPECT_EQ(read_file(db).substr(18, 2), std::string("\x01\x01", 2));
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  ASSERT_EQ(::chmod(db.c_str(), 0600), 0);

  // A corrupt store file: FAIL with the restore as the fix; nothing is repaired or migrated.
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f << std::string(100, 'x');
  }
  r = doctor(data, {"--set", "listen=127.0.0.1:0"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("store").status, "FAIL") << r.out;
  EXPECT_NE(r.at("store").fix.find("certfleet restore"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(db).substr(0, 100), std::string(100, 'x'));
}

TEST(doctor, targets_reachability_and_host_key_match_against_real_sshd) {
  testbed::temp_dir dir("certfleet-doctor-ssh");
  auto login = testbed::make_ssh_key(dir.path(), "login");
  auto stranger = testbed::make_ssh_key(dir.path(), "stranger");
  testbed::sshd server(dir.path() / "sshd", {login.public_line});
  testbed::closed_port closed;
  const auto data = dir.file("var");
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0"}, {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 30s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  const auto token = read_file(data + "/owner-token");
  testbed::http_client c("127.0.0.1", port_of(line));
  // The sshd fleet is on this host: ssh_allow_list admits loopback only when listed.
  ASSERT_EQ(c.put("/api/v1/settings", R"({"ssh_allow_list":"127.0.0.0/8"})", token).status, 200);
  auto cred = c.post("/api/v1/projects/default/credentials",
                     boost::json::serialize(boost::json::object{
                         {"name", "login"}, {"kind", "ssh_key"}, {"private_key_pem", login.private_key}}),
                     token);
  ASSERT_EQ(cred.status, 201) << cred.body;
  const auto cred_id = std::string(cred.json().at("id").as_string());
  auto target = [&](const std::string& name, int port, const std::string& host_key) {
    auto r = c.post("/api/v1/projects/default/targets",
                    boost::json::serialize(boost::json::object{
                        {"name", name},
                        {"module", "ssh"},
                        {"ssh", boost::json::object{{"host", "127.0.0.1"},
                                                    {"port", port},
                                                    {"user", testbed::current_user()},
                                                    {"credential_id", cred_id},
                                                    {"host_key", host_key},
                                                    {"cert_path", "/tmp/doctor-cert.pem"},
                                                    {"key_path", "/tmp/doctor-key.pem"}}}}),
                    token);
    ASSERT_EQ(r.status, 201) << r.body;
  };
  target("pinned-right", server.port(), server.ed25519_host_key());
  target("pinned-wrong", server.port(), stranger.public_line);
  target("closed", closed.port(), server.ed25519_host_key());
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait(30s), 0);

  auto r = doctor(data, {"--set", "listen=127.0.0.1:0", "--targets"});
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.at("target default/pinned-right").status, "OK") << r.out;
  EXPECT_NE(r.at("target default/pinned-right").detail.find("offers the pinned host key SHA256:"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.at("target default/pinned-wrong").status, "FAIL") << r.out;
  EXPECT_NE(r.at("target default/pinned-wrong").detail.find("not the pinned"), std::string::npos) << r.out;
  EXPECT_NE(r.at("target default/pinned-wrong").fix.find("out of band"), std::string::npos) << r.out;
  EXPECT_EQ(r.at("target default/closed").status, "FAIL") << r.out;
  // Without --targets nothing connects to them.
  r = doctor(data, {"--set", "listen=127.0.0.1:0"});
  EXPECT_EQ(r.rows.count("target default/pinned-wrong"), 0u) << r.out;
}

}  // namespace
