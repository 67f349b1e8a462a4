// The real binary and its data directory: created private (0700, the store's files 0600), and a
// full disk under the store answered 507 store_disk_full with /readyz not ready until space is
// freed, losing no acknowledged job.
#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace std::chrono_literals;

namespace {

unsigned mode_of(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return 0xffff;  // missing: never equal to a mode
  return sb.st_mode & 07777;
}

unsigned short port_of(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

std::string owner_token(const std::string& data) {
  std::ifstream f(data + "/owner-token");
  std::string s;
  std::getline(f, s);
  return s;
}

std::string error_code_of(const testbed::http_response& r) {
  auto v = r.json();
  if (!v.is_object() || !v.as_object().contains("error")) return {};
  return std::string(v.at("error").at("code").as_string());
}

std::int64_t metric(const std::string& body, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(body, m, std::regex("\n" + name + " (\\d+)"))) return -1;
  return std::stoll(m[1]);
}

TEST(data_dir, created_0700_and_the_store_files_0600_and_old_files_are_tightened) {
  testbed::temp_dir dir("certfleet-datadir");
  auto data = dir.file("var");
  {
    testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve"));
    ASSERT_FALSE(p.wait_for_stdout("serving:", 20s).empty()) << p.stderr_text();
    EXPECT_EQ(mode_of(data), 0700u);
    // While the store is open all three exist (WAL mode): SQLite gives -wal and -shm the
    // database file's mode.
    for (const char* f : {"/certfleet.db", "/certfleet.db-wal", "/certfleet.db-shm", "/owner-token", "/certfleet.key"})
      EXPECT_EQ(mode_of(data + f), 0600u) << f;
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  }
  // Files left group/world-readable (by an older version, a copy, a restore) are tightened at
  // start; an existing directory is left as the operator set it, with a warning.
  ASSERT_EQ(::chmod((data + "/certfleet.db").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(data.c_str(), 0755), 0);
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve2"));
  ASSERT_FALSE(p.wait_for_stdout("serving:", 20s).empty()) << p.stderr_text();
  EXPECT_EQ(mode_of(data + "/certfleet.db"), 0600u);
  EXPECT_EQ(mode_of(data + "/certfleet.db-wal"), 0600u);
  EXPECT_EQ(mode_of(data + "/certfleet.db-shm"), 0600u);
  EXPECT_EQ(mode_of(data), 0755u);
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("had mode 0644"), std::string::npos) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("has mode 0755"), std::string::npos) << p.stderr_text();
}

// A small tmpfs mounted for the test, unmounted (lazily, so a crash cannot wedge it) at the end.
struct tmpfs_mount {
  std::string path;
  bool mounted = false;
  std::string why;
  tmpfs_mount(std::string p, const char* options) : path(std::move(p)) {
    std::filesystem::create_directories(path);
    mounted = ::mount("tmpfs", path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options) == 0;
    if (!mounted) why = std::strerror(errno);
  }
  ~tmpfs_mount() {
    if (mounted) ::umount2(path.c_str(), MNT_DETACH);
  }
};

// Writes `path` until the file system refuses (ENOSPC); returns the bytes written.
std::size_t fill(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  std::string chunk(64 * 1024, 'x');
  std::size_t total = 0;
  for (;;) {
    auto n = ::write(fd, chunk.data(), chunk.size());
    if (n <= 0) break;
    total += static_cast<std::size_t>(n);
  }
  // The last few bytes a 64 KiB write could not take.
  while (::write(fd, "x", 1) == 1) ++total;
  ::close(fd);
  return total;
}

TEST(data_dir, a_full_disk_answers_507_makes_readyz_not_ready_and_recovers_without_losing_a_job) {
  testbed::temp_dir dir("certfleet-diskfull");
  tmpfs_mount small(dir.file("small"), "size=16m,mode=0700");
  if (!small.mounted)
    GTEST_SKIP() << "cannot mount a tmpfs at " << small.path << " (" << small.why
                 << "): this test needs root or CAP_SYS_ADMIN to fill a file system of its own";
  auto data = small.path + "/var";
  auto start = [&](const std::string& log) {
    // api mode: no worker writing behind the test's back; the jobs stay pending.
    auto p = std::make_unique<testbed::process>(
        std::vector<std::string>{CERTFLEET_BINARY, "serve", "--mode", "api", "--listen", "127.0.0.1:0", "--data", data},
        std::map<std::string, std::string>{}, dir.file(log));
    return p;
  };
  auto p = start("serve");
  auto line = p->wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p->stderr_text();
  auto token = owner_token(data);
  ASSERT_FALSE(token.empty());
  testbed::http_client c("127.0.0.1", port_of(line));
  const std::string jobs = "/api/v1/projects/default/jobs";
  std::vector<std::string> acknowledged;
  auto enqueue = [&](int i) {
    auto r = c.post(jobs, fmt::format(R"({{"type":"noop","payload":{{"ms":{}}}}})", i), token);
    if (r.status == 201) acknowledged.emplace_back(r.json().at("id").as_string());
    return r;
  };
  for (int i = 0; i < 20; ++i) ASSERT_EQ(enqueue(i).status, 201);
  ASSERT_EQ(c.get("/readyz").status, 200);

  auto filler = small.path + "/fill";
  ASSERT_GT(fill(filler), 0u);
  // The WAL's last page may still take a commit or two; every further write needs a new page.
  testbed::http_response full;
  for (int i = 0; i < 50 && full.status != 507; ++i) {
    full = enqueue(100 + i);
    ASSERT_TRUE(full.status == 201 || full.status == 507) << full.status << " " << full.body;
  }
  ASSERT_EQ(full.status, 507) << full.body;
  EXPECT_EQ(error_code_of(full), "store_disk_full") << full.body;
  EXPECT_NE(full.body.find("disk is full"), std::string::npos) << full.body;
  EXPECT_EQ(full.body.find("INSERT"), std::string::npos) << "no SQL in the answer: " << full.body;

  auto ready = c.get("/readyz");
  EXPECT_EQ(ready.status, 503) << ready.body;
  EXPECT_EQ(error_code_of(ready), "store_disk_full") << ready.body;
  EXPECT_EQ(c.get("/readyz").status, 503) << "still full: still not ready";
  auto m = c.get("/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(metric(m.body, "certfleet_store_disk_full"), 1) << m.body;
  EXPECT_GE(metric(m.body, "certfleet_store_disk_full_refusals_total"), 1) << m.body;
  // Reads still work while writes are refused.
  EXPECT_EQ(c.get(jobs + "/" + acknowledged.front(), token).status, 200);

  ASSERT_EQ(::unlink(filler.c_str()), 0);
  ready = c.get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  auto again = enqueue(1000);
  ASSERT_EQ(again.status, 201) << again.body;
  m = c.get("/metrics");
  EXPECT_EQ(metric(m.body, "certfleet_store_disk_full"), 0) << m.body;

  // Every job answered 201 is there, also after a restart (nothing lived only in a cache).
  p->signal(SIGTERM);
  ASSERT_EQ(p->wait(30s), 0) << p->stderr_text();
  EXPECT_NE(p->stderr_text().find("the disk is full"), std::string::npos) << "the log says why writes failed";
  p = start("serve2");
  line = p->wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p->stderr_text();
  testbed::http_client c2("127.0.0.1", port_of(line));
  auto list = c2.get(jobs + "?page_size=200", token);
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json().at("total").as_int64(), static_cast<std::int64_t>(acknowledged.size()));
  for (const auto& id : acknowledged) EXPECT_EQ(c2.get(jobs + "/" + id, token).status, 200) << id;
  p->signal(SIGTERM);
  EXPECT_EQ(p->wait(30s), 0) << p->stderr_text();
}

}  // namespace
