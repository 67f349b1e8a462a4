#pragma once
// One program run on the worker host, never through a shell: the file module's post command and
// the `exec` DNS-01 provider. The program is an absolute path executed directly (posix_spawn) in
// its own process group, stdin /dev/null, stdout and stderr captured together, with exactly the
// environment given (certfleet's own may hold secrets), and killed with its whole group at the
// deadline. Only the last `max_output` bytes of what it printed are kept. Blocking: callers run
// it on a thread pool, never on the event loop.
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace certfleet::delivery {

// The fixed PATH a bare program name is looked up in, and the one a command's environment gets.
inline constexpr const char* local_command_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct local_command {
  std::string program;             // absolute path
  std::vector<std::string> argv;   // argv[0] first
  std::vector<std::string> env;    // "NAME=value", the whole environment
  std::chrono::milliseconds timeout{60000};
  std::size_t max_output = 4096;
};

struct local_command_result {
  int exit_status = -1;   // -1: killed by a signal (or not started)
  bool timed_out = false;
  int spawn_errno = 0;    // why it could not be started (ENOENT, EACCES, …); 0 when it ran
  std::string output;     // the tail of stdout and stderr, interleaved as written
};

local_command_result run_local_command(const local_command& c);

// A bare name looked up in local_command_path (a name with a '/' is returned as it is); "" when
// no executable regular file has that name.
std::string find_local_program(const std::string& word);

}  // namespace certfleet::delivery
