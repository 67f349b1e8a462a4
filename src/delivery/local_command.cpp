// One program run without a shell (local_command.hpp).
#include "certfleet/delivery/local_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <thread>

namespace certfleet::delivery {

namespace {

using steady = std::chrono::steady_clock;

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string find_local_program(const std::string& word) {
  if (word.find('/') != std::string::npos) return word;
  std::string_view dirs = local_command_path;
  while (!dirs.empty()) {
    auto colon = dirs.find(':');
    std::string candidate = std::string(dirs.substr(0, colon)) + "/" + word;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
  }
  return {};
}

local_command_result run_local_command(const local_command& c) {
  local_command_result r;
  if (c.program.empty() || c.program.front() != '/' || c.argv.empty()) {
    r.spawn_errno = EINVAL;
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_errno = errno;
    return r;
  }
  fd_guard rd{fds[0]}, wr{fds[1]};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, wr.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, wr.fd, 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // sockets, the database: not the program's business
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);  // a server ignores SIGPIPE; the program should not inherit that
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<std::string> env = c.env, args = c.argv;
  std::vector<char*> envp, argv;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  // posix_spawn, not posix_spawnp: the program is an absolute path.
  int rc = ::posix_spawn(&pid, c.program.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(wr.fd);
  wr.fd = -1;
  if (rc != 0) {
    r.spawn_errno = rc;
    return r;
  }
  (void)::fcntl(rd.fd, F_SETFL, O_NONBLOCK);
  const auto deadline = steady::now() + c.timeout;
  bool eof = false;
  auto drain = [&] {
    char buf[4096];
    for (;;) {
      ssize_t n = ::read(rd.fd, buf, sizeof buf);
      if (n > 0) {
        r.output.append(buf, static_cast<std::size_t>(n));
        if (r.output.size() > 2 * c.max_output) r.output.erase(0, r.output.size() - c.max_output);
        continue;
      }
      if (n == 0) eof = true;
      break;  // EAGAIN, EOF or an error: nothing more now
    }
  };
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      drain();
      r.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (steady::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      drain();
      r.timed_out = true;
      r.exit_status = -1;
      break;
    }
    // A program whose children keep the pipe open must not keep us after it exits: poll in
    // short slices and check the exit each time.
    if (eof) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      pollfd p{rd.fd, POLLIN, 0};
      (void)::poll(&p, 1, 50);
      drain();
    }
  }
  if (r.output.size() > c.max_output) r.output.erase(0, r.output.size() - c.max_output);
  return r;
}

}  // namespace certfleet::delivery
