// The MongoDB backend is a module the binary loads only for a mongodb:// store: a process on
// SQLite never maps the MongoDB C driver (which would initialise itself when loaded and create
// /dev/shm/mongoc-<pid>), and a process on MongoDB removes a stale driver file left under its
// pid by a SIGKILLed process before the driver loads, so its stderr stays clean.
#include "process.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace std::chrono_literals;

namespace {

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string driver_file(pid_t pid) { return "/dev/shm/mongoc-" + std::to_string(pid); }

struct exec_result {
  pid_t pid = -1;
  int status = -1;
  std::string err;
};

// Forks; the child writes a stale driver file for its own pid, then becomes certfleet with
// `args` (exec keeps the pid). Returns the child's pid, exit status and stderr.
exec_result exec_with_stale_driver_file(std::vector<std::string> args) {
  exec_result r;
  int err_pipe[2];
  if (::pipe(err_pipe) != 0) return r;
  args.insert(args.begin(), CERTFLEET_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  r.pid = ::fork();
  if (r.pid < 0) return r;
  if (r.pid == 0) {
    const int fd = ::open(driver_file(::getpid()).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    if (fd < 0 || ::write(fd, "stale", 5) != 5) ::_exit(120);
    ::close(fd);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::close(err_pipe[0]);
    ::close(err_pipe[1]);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    ::execv(CERTFLEET_BINARY, argv.data());
    ::_exit(121);
  }
  ::close(err_pipe[1]);
  char buf[512];
  for (ssize_t n; (n = ::read(err_pipe[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<std::size_t>(n));
  ::close(err_pipe[0]);
  int status = 0;
  if (::waitpid(r.pid, &status, 0) == r.pid && WIFEXITED(status)) r.status = WEXITSTATUS(status);
  return r;
}

}  // namespace

// A stale driver file under its pid is left alone by a process on SQLite: the driver is not
// there to trip over it (it would print "Falling back to malloc for counters"), nor to remove it.
TEST(store_module, a_cli_command_on_sqlite_leaves_the_driver_alone) {
  testbed::temp_dir dir("certfleet-store-module");
  // `store init` makes the store (a missing one is refused); then a command reads it.
  ASSERT_EQ(testbed::run_command({CERTFLEET_BINARY, "store", "init", "--data", dir.file("var")}).first, 0);
  for (std::vector<std::string> args : {std::vector<std::string>{"--version"}, {"jobs", "list", "--data", dir.file("var")}}) {
    auto r = exec_with_stale_driver_file(args);
    ASSERT_GT(r.pid, 0);
    EXPECT_EQ(r.status, 0) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "") << args[0];
    EXPECT_EQ(read_all(driver_file(r.pid)), "stale") << args[0] << ": the driver's file was touched";
    std::filesystem::remove(driver_file(r.pid));
  }
}

// A running server on SQLite has the SQLite library mapped and nothing of MongoDB's, and no
// driver file for its pid.
TEST(store_module, a_server_on_sqlite_maps_no_mongodb_driver) {
  testbed::temp_dir dir("certfleet-store-module");
  testbed::process server({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", dir.file("var")}, {},
                          dir.file("serve"));
  ASSERT_FALSE(server.wait_for_stdout("serving:", 20s).empty()) << server.stderr_text();
  const auto maps = read_all("/proc/" + std::to_string(server.pid()) + "/maps");
  ASSERT_NE(maps.find("libsqlite3"), std::string::npos) << "the maps are readable and list the libraries:\n" << maps;
  for (const char* lib : {"libmongoc", "libbson", "certfleet_store_mongo"})
    EXPECT_EQ(maps.find(lib), std::string::npos) << lib << " is mapped:\n" << maps;
  EXPECT_FALSE(std::filesystem::exists(driver_file(server.pid())));
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(30s), 0);
}

// On MongoDB the module (and so the driver) is loaded; a stale driver file under the pid is
// removed first, so the driver makes its own and stderr carries only the store's error.
TEST(store_module, a_process_on_mongodb_loads_the_backend_and_removes_a_stale_driver_file_first) {
  testbed::temp_dir dir("certfleet-store-module");
  auto r = exec_with_stale_driver_file({"jobs", "list", "--data", dir.file("var"), "--store",
                                        "mongodb://127.0.0.1:1/certfleet?replicaSet=rs0", "--set",
                                        "store_timeout_ms=300"});
  ASSERT_GT(r.pid, 0);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no MongoDB primary answered within 300 ms"), std::string::npos)
      << "the backend was loaded and ran: " << r.err;
  EXPECT_EQ(r.err.find("Falling back"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(driver_file(r.pid))) << "the driver removes its own file at exit";
}
