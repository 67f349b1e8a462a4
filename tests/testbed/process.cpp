#include "process.hpp"

#include <cstdio>
#include <cstdlib>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace testbed {

namespace {
std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::atomic<int> counter{0};
}  // namespace

process::process(std::vector<std::string> argv, std::map<std::string, std::string> env, const std::string& log_prefix) {
  int n = counter.fetch_add(1);
  out_path_ = log_prefix + "." + std::to_string(n) + ".out";
  err_path_ = log_prefix + "." + std::to_string(n) + ".err";
  std::map<std::string, std::string> full;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) full[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : env) full[k] = v;
  std::vector<std::string> envs;
  for (auto& [k, v] : full) envs.push_back(k + "=" + v);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    setpgid(0, 0);
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    for (auto& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
}

process::~process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
  }
  if (!std::getenv("CERTFLEET_KEEP_TEST_DIRS")) {
    std::remove(out_path_.c_str());
    std::remove(err_path_.c_str());
  }
}

std::string process::stdout_text() const { return read_file(out_path_); }
std::string process::stderr_text() const { return read_file(err_path_); }

std::string process::wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream in(stdout_text());
    for (std::string line; std::getline(in, line);)
      if (line.find(needle) != std::string::npos) return line;
    if (!running()) return {};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

void process::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

bool process::running() {
  if (reaped_) return false;
  int st = 0;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int process::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

std::string test_store_uri(const std::string& data_dir) {
  const char* base = std::getenv("CERTFLEET_TEST_MONGODB_URI");
  if (!base || !*base) return {};
  // The database is the data directory's (FNV-1a of its path): every process of one test shares
  // it, no two tests do.
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : data_dir) h = (h ^ ch) * 1099511628211ull;
  char db[40];
  std::snprintf(db, sizeof db, "certfleet_t_%016llx", static_cast<unsigned long long>(h));
  std::string uri = base;
  const auto hosts = uri.find("://") + 3;
  const auto query = uri.find('?', hosts);
  const auto slash = uri.find('/', hosts);
  const auto hosts_end = std::min(slash, query);
  std::string rest = query == std::string::npos ? std::string() : uri.substr(query);
  return uri.substr(0, hosts_end) + "/" + db + rest;
}

std::vector<std::string> certfleet_command(const std::string& data_dir, std::vector<std::string> args) {
  std::vector<std::string> argv{CERTFLEET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--data");
  argv.push_back(data_dir);
  if (auto uri = test_store_uri(data_dir); !uri.empty()) {
    argv.push_back("--store");
    argv.push_back(uri);
  }
  return argv;
}

std::pair<int, std::string> run_command(std::vector<std::string> argv, std::map<std::string, std::string> env,
                                        std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/certfleet-cmd-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  std::string prefix = tmpl;
  int status;
  std::string out;
  {
    process p(std::move(argv), std::move(env), prefix);
    status = p.wait(timeout);
    if (status == -1) {
      p.signal(SIGKILL);
      p.wait(std::chrono::seconds(5));
    }
    out = p.stdout_text() + p.stderr_text();
  }
  std::remove(tmpl);
  return {status, out};
}

std::pair<int, std::string> dig_at(std::uint16_t port, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/usr/bin/dig", "@127.0.0.1", "-p", std::to_string(port), "+norec", "+time=5", "+tries=2"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv);
}

std::vector<std::string> dig_txt_at(std::uint16_t port, const std::string& name) {
  auto [rc, out] = dig_at(port, {name, "TXT", "+short"});
  if (rc != 0) throw std::runtime_error("dig failed: " + out);
  std::vector<std::string> values;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    // "\"part one\" \"part two\"": the strings joined, as a TXT value is read.
    std::string value;
    bool inside = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      char c = line[i];
      if (c == '"') inside = !inside;
      else if (inside && c == '\\' && i + 1 < line.size()) value += line[++i];
      else if (inside) value += c;
    }
    if (!line.empty()) values.push_back(value);
  }
  return values;
}

}  // namespace testbed
