#pragma once
// Real OpenSSH servers on 127.0.0.1 for delivery tests and benchmarks (TESTBED.md): each has its
// own ed25519 + ECDSA host keys, a config in the test directory, and is stopped by its PID.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "process.hpp"

namespace testbed {

// An ed25519 (or ECDSA) key pair made with ssh-keygen: private key text (OpenSSH format) and
// the public line for authorized_keys / pinning.
struct ssh_key_pair {
  std::string private_key;
  std::string public_line;
};
ssh_key_pair make_ssh_key(const std::filesystem::path& dir, const std::string& name, const std::string& type = "ed25519");

struct sshd_options {
  bool password_auth = false;
  std::string password;          // set on nothing: sshd checks the real user; only for docs
  bool readonly_sftp = false;    // `Subsystem sftp internal-sftp -R`: every write is refused
  // `Subsystem sftp internal-sftp`: no login shell per SFTP session (a shell whose rc files are
  // slow, like root's with pyenv here, costs 200+ ms per session otherwise).
  bool internal_sftp = false;
  bool ecdsa_host_key = true;
  // The login shell sshd runs every remote command with (`SHELL -c COMMAND`). As root, sshd runs
  // in a private mount namespace whose /etc/passwd gives the login user this shell, so a command
  // never goes through the machine's own rc files: root's ~/.bashrc here runs `pyenv init`,
  // whose `pyenv rehash` waits up to 60 s for a global lock file that a hundred concurrent test
  // shells contend for (and that a killed shell leaves behind) — that wait was the "install took
  // longer than 60000 ms" flake. A test may point this at a script to model a slow shell.
  std::string login_shell = "/bin/sh";
};

class sshd {
 public:
  // Starts /usr/sbin/sshd -D -e -f CONFIG in `dir` (created), accepting `authorized_public_lines`.
  sshd(const std::filesystem::path& dir, const std::vector<std::string>& authorized_public_lines, sshd_options o = {});
  ~sshd();  // SIGTERM, then SIGKILL
  sshd(const sshd&) = delete;
  sshd& operator=(const sshd&) = delete;

  std::uint16_t port() const { return port_; }
  const std::string& ed25519_host_key() const { return ed25519_; }  // "ssh-ed25519 AAAA…"
  const std::string& ecdsa_host_key() const { return ecdsa_; }      // "ecdsa-sha2-nistp256 AAAA…" or ""
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stderr_text() : ""; }

 private:
  bool owns_port();

  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  std::string ed25519_, ecdsa_;
  std::unique_ptr<process> proc_;
};

// N servers (dir/sshd0 … dir/sshdN-1) accepting the same keys: a fleet for tests and benchmarks.
// The listen backlog is 128 per sshd, so spread big fleets over several instances.
std::vector<std::unique_ptr<sshd>> start_fleet(const std::filesystem::path& dir, int n,
                                               const std::vector<std::string>& authorized_public_lines,
                                               sshd_options o = {});

// Counts, on the server's side, the TCP connections an sshd holds, whoever opened them and
// independent of MaxSessions/MaxStartups: a thread asks the kernel (sock_diag netlink, filtered on
// the local port) for the ESTABLISHED sockets whose local port is one of `ports` — sshd's ends of
// its connections — every `every`. A connection leaves ESTABLISHED on sshd's side the moment its
// client's FIN arrives. A dump is not one atomic snapshot (the kernel walks its socket table), so
// a connection closed during a dump and its successor opened during the same dump could both be
// in it: each sample is two dumps back to back, and a count holds only when both show it (a real
// extra session lasts at least an SSH handshake, many milliseconds; the artifact of one dump is
// gone from the next).
class sshd_session_sampler {
 public:
  sshd_session_sampler(std::vector<std::uint16_t> ports, std::chrono::microseconds every = std::chrono::microseconds(1000));
  ~sshd_session_sampler();  // stops the thread
  sshd_session_sampler(const sshd_session_sampler&) = delete;
  sshd_session_sampler& operator=(const sshd_session_sampler&) = delete;

  // The most connections seen at once on `port` so far.
  int peak(std::uint16_t port) const;
  // Distinct connections (client ports) seen on `port` so far.
  std::size_t connections(std::uint16_t port) const;
  std::uint64_t samples() const;
  // Why sampling stopped early ("" while it works).
  std::string error() const;
  void stop();

 private:
  struct impl;
  std::unique_ptr<impl> p_;
};

// The user the servers log in (the current one: root in CI).
std::string current_user();
// A TCP port on 127.0.0.1 that nothing listens on right now.
std::uint16_t free_port();
// A port on 127.0.0.1 that refuses connections for as long as this object lives: the socket is
// bound but never listens, so no server started meanwhile (by this test or one running beside it)
// can take the port — a `free_port()` picked for "nothing listens here" could be reused.
class closed_port {
 public:
  closed_port();
  ~closed_port();
  closed_port(const closed_port&) = delete;
  closed_port& operator=(const closed_port&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};
// Waits until something on 127.0.0.1:port accepts and sends a line starting with `banner`.
bool wait_for_banner(std::uint16_t port, const std::string& banner, int timeout_ms);

}  // namespace testbed
