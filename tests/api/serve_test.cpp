// The real binary: `certfleet serve` on port 0 prints where it listens, writes the first owner
// token once (0600), serves the API with it, streams lines another process writes, and ends with
// exit 0 on SIGTERM; `certfleet token create|list|revoke`; worker mode serves only health/metrics.
#include "certfleet/core/object_id.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace std::chrono_literals;

namespace {

std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

unsigned short port_of(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

std::vector<std::string> cli(const std::string& data, std::vector<std::string> args) {
  std::vector<std::string> argv{CERTFLEET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--data");
  argv.push_back(data);
  return argv;
}

// Issue 36: a process that holds the key-encryption key is not dumpable (no core file, no ptrace
// by its own user), unless core_dumps = on. Run as an unprivileged user, its /proc entries then
// belong to root (proc(5)); with core_dumps = on, to that user.
TEST(api_serve, the_server_is_not_dumpable_unless_core_dumps_is_on) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to start certfleet as another user";
  constexpr unsigned nobody = 65534;
  for (std::string setting : {"off", "on"}) {
    testbed::temp_dir dir("certfleet-dump");
    ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
    auto data = dir.file("var");
    std::filesystem::create_directory(data);
    ASSERT_EQ(::chown(data.c_str(), nobody, nobody), 0);
    testbed::process p({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CERTFLEET_BINARY,
                        "serve", "--listen", "127.0.0.1:0", "--data", data, "--set", "core_dumps=" + setting},
                       {}, dir.file("serve"));
    auto line = p.wait_for_stdout("serving:", 20s);
    ASSERT_FALSE(line.empty()) << p.stderr_text();
    struct stat sb {};
    ASSERT_EQ(::stat(("/proc/" + std::to_string(p.pid()) + "/environ").c_str(), &sb), 0);
    EXPECT_EQ(sb.st_uid, setting == "off" ? 0u : nobody) << "core_dumps=" << setting;
    // /proc/self/fd is root's then: the open-descriptor count comes from the table instead.
    testbed::http_client c("127.0.0.1", port_of(line));
    auto m = c.get("/metrics").body;
    std::smatch fds;
    ASSERT_TRUE(std::regex_search(m, fds, std::regex("\nprocess_open_fds ([0-9]+)\n"))) << m;
    EXPECT_GT(std::stoi(fds[1]), 5) << m;
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  }
}

// Issue 36: the audit log's file copy. Each entry the API records is one JSON line in a 0600
// file; at audit_log_max_bytes the file becomes FILE.1 and a new one begins; a file that cannot
// be opened refuses the start, naming the setting.
TEST(api_serve, audit_entries_go_to_a_0600_json_lines_file_rotated_by_size) {
  testbed::temp_dir dir("certfleet-audit");
  auto data = dir.file("var");
  auto file = dir.file("audit.jsonl");
  ::umask(022);
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--set",
                      "audit_log_file=" + file, "--set", "audit_log_max_bytes=4096"},
                     {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  auto token = read_file(data + "/owner-token");
  testbed::http_client c("127.0.0.1", port_of(line));
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    auto r = c.post("/api/v1/projects/default/jobs", R"({"type":"noop","idempotency_key":"k)" + std::to_string(i) + R"("})", token);
    ASSERT_EQ(r.status, 201) << r.body;
    ids.push_back(std::string(boost::json::parse(r.body).at("id").as_string()));
  }
  EXPECT_EQ(c.post("/api/v1/projects/default/jobs", R"({"type":"nope"})", token).status, 400);
  p.signal(SIGTERM);
  ASSERT_EQ(p.wait(30s), 0) << p.stderr_text();

  struct stat sb {};
  ASSERT_EQ(::stat(file.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((file + ".1").c_str(), &sb), 0) << "30 entries of ~250 bytes pass 4096: rotated";
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  EXPECT_LE(sb.st_size, 4096);
  // The newest lines are in FILE: the last enqueue and the refused one, in order.
  std::vector<boost::json::object> lines;
  std::istringstream in(read_file(file));
  for (std::string l; std::getline(in, l);) lines.push_back(boost::json::parse(l).as_object());
  ASSERT_GE(lines.size(), 2u);
  const auto& last = lines.back();
  EXPECT_EQ(last.at("action"), "job.enqueue");
  EXPECT_EQ(last.at("outcome"), "unknown_job_type");
  EXPECT_TRUE(last.at("actor").as_string().starts_with("token:"));
  EXPECT_TRUE(certfleet::is_object_id(last.at("project_id").as_string()));
  const auto& ok = lines[lines.size() - 2];
  EXPECT_EQ(ok.at("object").as_string(), "job/" + ids.back());
  EXPECT_EQ(ok.at("outcome"), "ok");
  EXPECT_TRUE(ok.contains("at") && ok.contains("detail"));

  // Not a regular file: refused at start, naming the setting.
  testbed::process bad({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--set",
                        "audit_log_file=" + dir.path().string()},
                       {}, dir.file("bad"));
  EXPECT_EQ(bad.wait(30s), 2);
  EXPECT_NE(bad.stderr_text().find("audit_log_file"), std::string::npos) << bad.stderr_text();
}

TEST(api_serve, first_start_token_api_and_sigterm) {
  testbed::temp_dir dir("certfleet-serve");
  auto data = dir.file("var");
  testbed::process p({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data}, {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  EXPECT_NE(line.find("mode=all"), std::string::npos) << line;
  auto port = port_of(line);
  ASSERT_NE(port, 0) << line;
  EXPECT_NE(p.stdout_text().find(data + "/owner-token"), std::string::npos) << p.stdout_text();
  struct stat sb {};
  ASSERT_EQ(::stat((data + "/owner-token").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);
  auto token = read_file(data + "/owner-token");
  ASSERT_EQ(token.rfind("cf_", 0), 0u);

  testbed::http_client c("127.0.0.1", port);
  EXPECT_EQ(c.get("/healthz").status, 200);
  auto r = c.post("/api/v1/projects/default/jobs", R"({"type":"noop","payload":{"log":true}})", token);
  ASSERT_EQ(r.status, 201) << r.body;
  auto id = std::string(r.json().at("id").as_string());
  // The owner token is a system admin.
  EXPECT_EQ(c.get("/api/v1/settings", token).status, 200);
  // The job runs in this process's worker; its log stream ends with the end message.
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect("/api/v1/projects/default/jobs/" + id + "/logs/stream", token), 101);
  std::string end;
  int lines = 0;
  for (int i = 0; i < 20 && end.empty(); ++i) {
    auto m = ws.read(10s);
    if (m.closed) break;
    auto v = boost::json::parse(m.text);
    if (v.at("type") == "end") end = std::string(v.at("status").as_string());
    else lines += static_cast<int>(v.at("lines").as_array().size());
  }
  EXPECT_EQ(end, "completed");
  EXPECT_EQ(lines, 2);

  // A viewer token made by the CLI works against the running server; revoked, it does not.
  auto [st, out] = testbed::run_command(cli(data, {"token", "create", "--role", "viewer", "--name", "ci"}));
  ASSERT_EQ(st, 0) << out;
  auto created = boost::json::parse(out);
  auto viewer = std::string(created.at("token").as_string());
  auto viewer_id = std::string(created.at("id").as_string());
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", viewer).status, 200);
  EXPECT_EQ(c.post("/api/v1/projects/default/jobs", R"({"type":"noop"})", viewer).status, 403);
  auto [lst, lout] = testbed::run_command(cli(data, {"token", "list", "--json"}));
  ASSERT_EQ(lst, 0) << lout;
  EXPECT_EQ(lout.find(viewer), std::string::npos);  // never the token text
  EXPECT_EQ(boost::json::parse(lout).at("items").as_array().size(), 2u);
  auto [rst, rout] = testbed::run_command(cli(data, {"token", "revoke", viewer_id}));
  ASSERT_EQ(rst, 0) << rout;
  std::this_thread::sleep_for(2100ms);  // the server's token cache
  EXPECT_EQ(c.get("/api/v1/projects/default/jobs", viewer).status, 401);
  EXPECT_NE(testbed::run_command(cli(data, {"token", "revoke", viewer_id})).first, 0);
  EXPECT_NE(testbed::run_command(cli(data, {"token", "create", "--role", "boss"})).first, 0);
  EXPECT_NE(testbed::run_command(cli(data, {"token", "create", "--role", "viewer", "--system"})).first, 0);

  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();

  // A second start neither makes nor prints another owner token.
  testbed::process again({CERTFLEET_BINARY, "serve", "--listen", "127.0.0.1:0", "--data", data, "--mode", "worker"}, {},
                         dir.file("serve2"));
  line = again.wait_for_stdout("serving:", 20s);
  ASSERT_FALSE(line.empty()) << again.stderr_text();
  EXPECT_EQ(again.stdout_text().find("owner-token"), std::string::npos);
  EXPECT_EQ(read_file(data + "/owner-token"), token);
  testbed::http_client w("127.0.0.1", port_of(line));
  EXPECT_EQ(w.get("/metrics").status, 200);
  EXPECT_EQ(w.get("/api/v1/projects", token).status, 404);  // worker mode: no API
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait(30s), 0);
}

// `certfleet project create|list|delete` on the store: the name grammar, 409 as exit 4 for a
// duplicate or a project that still holds something, a token for the new project.
// "serving:" (and systemd's READY=1) means SIGTERM is handled: a stop sent the moment the line
// appears shuts the process down gracefully (exit 0), never by the signal's default action. The
// line is read from a pipe as it comes (testbed::process polls every 20 ms, which hid the window):
// before the fix the line came before the signal handlers, and 22 of 30 such stops killed it.
TEST(api_serve, sigterm_right_after_serving_is_a_graceful_stop) {
  testbed::temp_dir dir("certfleet-ready-term");
  const std::string data = dir.file("data");
  for (int i = 0; i < 20; ++i) {
    int out[2];
    ASSERT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 2);
      ::execl(CERTFLEET_BINARY, CERTFLEET_BINARY, "serve", "--mode", "worker", "--listen", "127.0.0.1:0", "--data",
              data.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string seen;
    char buf[512];
    while (seen.find("serving:") == std::string::npos) {
      const auto n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      seen.append(buf, static_cast<std::size_t>(n));
    }
    ::kill(pid, SIGTERM);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ::close(out[0]);  // after the exit: closed earlier, a last log line would end the child by SIGPIPE
    ASSERT_NE(seen.find("serving:"), std::string::npos) << seen;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "start " << i << ": " << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                                         : "exit " + std::to_string(WEXITSTATUS(status)));
  }
}

TEST(api_serve, project_cli_create_list_delete) {
  testbed::temp_dir dir("certfleet-project-cli");
  const std::string data = dir.file("data");
  ASSERT_EQ(testbed::run_command(cli(data, {"store", "init"})).first, 0);
  auto [cst, cout] = testbed::run_command(cli(data, {"project", "create", "team-b"}));
  ASSERT_EQ(cst, 0) << cout;
  EXPECT_EQ(boost::json::parse(cout.substr(0, cout.find('\n'))).at("name"), "team-b");
  EXPECT_EQ(testbed::run_command(cli(data, {"project", "create", "team-b"})).first, 4);
  EXPECT_EQ(testbed::run_command(cli(data, {"project", "create", "Team B"})).first, 2);
  auto [lst, lout] = testbed::run_command(cli(data, {"project", "list", "--json"}));
  ASSERT_EQ(lst, 0) << lout;
  EXPECT_NE(lout.find("\"team-b\""), std::string::npos) << lout;
  ASSERT_EQ(testbed::run_command(cli(data, {"token", "create", "--project", "team-b", "--role", "owner"})).first, 0);
  ASSERT_EQ(testbed::run_command(cli(data, {"jobs", "enqueue", "--project", "team-b", "--type", "noop"})).first, 0);
  auto [bst, bout] = testbed::run_command(cli(data, {"project", "delete", "team-b"}));
  EXPECT_EQ(bst, 4) << bout;  // a pending job
  EXPECT_NE(bout.find("not finished"), std::string::npos) << bout;
  auto [jst, jout] = testbed::run_command(cli(data, {"jobs", "list", "--project", "team-b", "--json"}));
  auto id = std::string(boost::json::parse(jout.substr(0, jout.find('\n'))).at("items").at(0).at("id").as_string());
  ASSERT_EQ(testbed::run_command(cli(data, {"jobs", "cancel", "--project", "team-b", id})).first, 0);
  auto [dst, dout] = testbed::run_command(cli(data, {"project", "delete", "team-b"}));
  ASSERT_EQ(dst, 0) << dout;
  EXPECT_EQ(testbed::run_command(cli(data, {"project", "delete", "team-b"})).first, 3);
  auto [tst, tout] = testbed::run_command(cli(data, {"token", "list", "--all", "--json"}));
  EXPECT_EQ(tout.find("\"revoked_at\":null"), std::string::npos) << tout;  // team-b's one token: revoked
}

}  // namespace
