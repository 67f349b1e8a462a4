#pragma once
// A child process a test starts (a certfleet worker, sshd, a sink…), with its output captured to
// files, stopped by its PID when the test ends.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace testbed {

class process {
 public:
  // argv[0] is the program path; `env` entries are added to (or replace) the inherited ones.
  process(std::vector<std::string> argv, std::map<std::string, std::string> env, const std::string& log_prefix);
  ~process();  // SIGKILL if still running
  process(const process&) = delete;
  process& operator=(const process&) = delete;

  int pid() const { return pid_; }
  // Waits until stdout has a line containing `needle`; returns that line, or "" on timeout/exit.
  std::string wait_for_stdout(const std::string& needle, std::chrono::milliseconds timeout);
  std::string stdout_text() const;
  std::string stderr_text() const;
  void signal(int sig);
  // Waits for exit; returns the exit status (128+signal when killed), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  bool running();

 private:
  int pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  std::string out_path_, err_path_;
};

// `certfleet ARGS… --data DATA`: the binary this build made, on a test's data directory.
// With CERTFLEET_TEST_MONGODB_URI set, the MongoDB URI of the data directory's scratch database
// (certfleet_t_<hash>), which certfleet_command passes as --store so every process of a test
// shares one store; empty otherwise (the SQLite file in the data directory).
std::string test_store_uri(const std::string& data_dir);
std::vector<std::string> certfleet_command(const std::string& data_dir, std::vector<std::string> args);

// Runs a command to completion; returns {exit status, stdout}.
std::pair<int, std::string> run_command(std::vector<std::string> argv,
                                        std::map<std::string, std::string> env = {},
                                        std::chrono::milliseconds timeout = std::chrono::seconds(60));

// `dig @127.0.0.1 -p <port> +norec +time=5 +tries=2 ARGS…` against a test's DNS server (knot,
// pdns): {exit status, output}.
std::pair<int, std::string> dig_at(std::uint16_t port, const std::vector<std::string>& args);
// The TXT values that server answers at `name` (+short; each record's strings joined, quotes
// removed). Throws when dig fails.
std::vector<std::string> dig_txt_at(std::uint16_t port, const std::string& name);

}  // namespace testbed
