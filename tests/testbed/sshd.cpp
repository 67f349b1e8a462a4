#include "sshd.hpp"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace testbed {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string first_two_words(std::string line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  auto a = line.find(' ');
  if (a == std::string::npos) return line;
  auto b = line.find(' ', a + 1);
  return b == std::string::npos ? line : line.substr(0, b);
}

// A copy of /etc/passwd in `dir` in which the current user's login shell is `shell`, for sshd's
// private mount namespace; empty when that cannot be done (not root, no unshare): sshd then runs
// commands with the user's real shell.
std::filesystem::path passwd_with_shell(const std::filesystem::path& dir, const std::string& shell) {
  if (shell.empty() || ::geteuid() != 0 || ::access("/usr/bin/unshare", X_OK) != 0) return {};
  std::ifstream in("/etc/passwd");
  auto out_path = dir / "passwd";
  std::ofstream out(out_path);
  const std::string uid = std::to_string(::geteuid());
  for (std::string line; std::getline(in, line);) {
    // name:password:uid:gid:gecos:home:shell
    std::vector<std::string> f;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i)
      if (i == line.size() || line[i] == ':') {
        f.push_back(line.substr(start, i - start));
        start = i + 1;
      }
    if (f.size() == 7 && f[2] == uid) {
      f[6] = shell;
      line.clear();
      for (std::size_t i = 0; i < f.size(); ++i) line += (i ? ":" : "") + f[i];
    }
    out << line << "\n";
  }
  return out ? out_path : std::filesystem::path{};
}

}  // namespace

namespace {

// ESTABLISHED IPv4 TCP sockets whose local port is `port`: their remote ports. One sock_diag dump.
std::vector<std::uint16_t> established_on(int nl, std::uint16_t port) {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
    rtattr bc_attr;
    inet_diag_bc_op bc[2];
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = AF_INET;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = 1u << 1;  // TCP_ESTABLISHED
  msg.bc_attr.rta_type = INET_DIAG_REQ_BYTECODE;
  msg.bc_attr.rta_len = RTA_LENGTH(sizeof msg.bc);
  // "source port == port": true runs past the end (accept), false jumps 4 beyond it (reject),
  // as ss encodes it.
  msg.bc[0] = inet_diag_bc_op{INET_DIAG_BC_S_EQ, sizeof msg.bc, sizeof msg.bc + 4};
  msg.bc[1] = inet_diag_bc_op{0, 0, port};
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::vector<std::uint16_t> remote;
  if (::sendto(nl, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    throw std::runtime_error(std::string("sock_diag request failed: ") + std::strerror(errno));
  alignas(nlmsghdr) char buf[32768];
  for (;;) {
    auto n = ::recv(nl, buf, sizeof buf, 0);
    if (n < 0) throw std::runtime_error(std::string("sock_diag answer failed: ") + std::strerror(errno));
    const auto got = static_cast<std::size_t>(n);
    for (std::size_t off = 0; off + sizeof(nlmsghdr) <= got;) {
      auto* h = reinterpret_cast<nlmsghdr*>(buf + off);
      if (h->nlmsg_len < sizeof(nlmsghdr) || off + h->nlmsg_len > got) break;
      if (h->nlmsg_type == NLMSG_DONE) return remote;
      if (h->nlmsg_type == NLMSG_ERROR) throw std::runtime_error("sock_diag answered an error");
      auto* d = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
      if (ntohs(d->id.idiag_sport) == port) remote.push_back(ntohs(d->id.idiag_dport));
      off += NLMSG_ALIGN(h->nlmsg_len);
    }
  }
}

}  // namespace

struct sshd_session_sampler::impl {
  std::vector<std::uint16_t> ports;
  std::chrono::microseconds every;
  mutable std::mutex m;
  std::map<std::uint16_t, int> peak;
  std::map<std::uint16_t, std::set<std::uint16_t>> clients;
  std::uint64_t samples = 0;
  std::string error;
  std::atomic<bool> stopping{false};
  std::thread thread;
  int nl = -1;

  void sample() {
    for (auto port : ports) {
      auto first = established_on(nl, port);
      auto second = established_on(nl, port);
      int confirmed = static_cast<int>(std::min(first.size(), second.size()));
      std::lock_guard<std::mutex> l(m);
      peak[port] = std::max(peak[port], confirmed);
      clients[port].insert(first.begin(), first.end());
      clients[port].insert(second.begin(), second.end());
    }
    std::lock_guard<std::mutex> l(m);
    ++samples;
  }
};

sshd_session_sampler::sshd_session_sampler(std::vector<std::uint16_t> ports, std::chrono::microseconds every)
    : p_(std::make_unique<impl>()) {
  p_->ports = std::move(ports);
  p_->every = every;
  p_->nl = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (p_->nl < 0) throw std::runtime_error(std::string("sock_diag socket: ") + std::strerror(errno));
  p_->thread = std::thread([p = p_.get()] {
    try {
      while (!p->stopping) {
        p->sample();
        std::this_thread::sleep_for(p->every);
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(p->m);
      p->error = e.what();
    }
  });
}

sshd_session_sampler::~sshd_session_sampler() { stop(); }

void sshd_session_sampler::stop() {
  p_->stopping = true;
  if (p_->thread.joinable()) p_->thread.join();
  if (p_->nl >= 0) ::close(p_->nl);
  p_->nl = -1;
}

int sshd_session_sampler::peak(std::uint16_t port) const {
  std::lock_guard<std::mutex> l(p_->m);
  auto it = p_->peak.find(port);
  return it == p_->peak.end() ? 0 : it->second;
}

std::size_t sshd_session_sampler::connections(std::uint16_t port) const {
  std::lock_guard<std::mutex> l(p_->m);
  auto it = p_->clients.find(port);
  return it == p_->clients.end() ? 0 : it->second.size();
}

std::string sshd_session_sampler::error() const {
  std::lock_guard<std::mutex> l(p_->m);
  return p_->error;
}

std::uint64_t sshd_session_sampler::samples() const {
  std::lock_guard<std::mutex> l(p_->m);
  return p_->samples;
}

std::string current_user() {
  passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "root";
}

std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("bind failed");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

closed_port::closed_port() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("closed_port: bind failed");
  }
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

closed_port::~closed_port() { ::close(fd_); }

bool wait_for_banner(std::uint16_t port, const std::string& banner, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      pollfd p{fd, POLLIN, 0};
      char buf[256] = {};
      if (::poll(&p, 1, 2000) == 1) {
        auto n = ::recv(fd, buf, sizeof buf - 1, 0);
        ::close(fd);
        if (n > 0 && std::string(buf, static_cast<std::size_t>(n)).rfind(banner, 0) == 0) return true;
      } else {
        ::close(fd);
      }
    } else {
      ::close(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

ssh_key_pair make_ssh_key(const std::filesystem::path& dir, const std::string& name, const std::string& type) {
  std::filesystem::create_directories(dir);
  auto path = (dir / name).string();
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".pub");
  std::vector<std::string> argv{"/usr/bin/ssh-keygen", "-q", "-t", type, "-N", "", "-C", "certfleet-test", "-f", path};
  if (type == "ecdsa") argv.insert(argv.begin() + 4, {"-b", "256"});
  auto [rc, out] = run_command(argv);
  if (rc != 0) throw std::runtime_error("ssh-keygen failed: " + out);
  return {slurp(path), first_two_words(slurp(path + ".pub"))};
}

sshd::sshd(const std::filesystem::path& dir, const std::vector<std::string>& authorized, sshd_options o) : dir_(dir) {
  std::filesystem::create_directories(dir_);
  // sshd as root insists on its privilege-separation directory.
  std::error_code ec;
  std::filesystem::create_directories("/run/sshd", ec);
  auto ed = make_ssh_key(dir_, "host_ed25519", "ed25519");
  ed25519_ = ed.public_line;
  if (o.ecdsa_host_key) ecdsa_ = make_ssh_key(dir_, "host_ecdsa", "ecdsa").public_line;
  {
    std::ofstream ak(dir_ / "authorized_keys");
    for (auto& l : authorized) ak << l << "\n";
  }
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    auto cfg = dir_ / "sshd_config";
    {
      std::ofstream c(cfg);
      c << "ListenAddress 127.0.0.1:" << port_ << "\n"
        << "HostKey " << (dir_ / "host_ed25519").string() << "\n";
      if (o.ecdsa_host_key) c << "HostKey " << (dir_ / "host_ecdsa").string() << "\n";
      c << "PidFile " << (dir_ / "sshd.pid").string() << "\n"
        << "AuthorizedKeysFile " << (dir_ / "authorized_keys").string() << "\n"
        << "UsePAM no\nStrictModes no\nUseDNS no\nLogLevel ERROR\n"
        << "PermitRootLogin yes\n"
        << "PasswordAuthentication " << (o.password_auth ? "yes" : "no") << "\n"
        << "KbdInteractiveAuthentication no\n"
        << "MaxStartups 1000:30:1000\nMaxSessions 100\n"
        << "Subsystem sftp "
        << (o.readonly_sftp ? "internal-sftp -R" : o.internal_sftp ? "internal-sftp" : "/usr/lib/openssh/sftp-server")
        << "\n";
    }
    std::filesystem::remove(dir_ / "sshd.pid", ec);
    std::vector<std::string> argv{"/usr/sbin/sshd", "-D", "-e", "-f", cfg.string()};
    if (auto pw = passwd_with_shell(dir_, o.login_shell); !pw.empty()) {
      // unshare execs (no fork) and so does the shell: the pid we hold is sshd's own.
      argv.insert(argv.begin(), {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                                 "mount --bind \"$1\" /etc/passwd && shift && exec \"$@\"", "sh", pw.string()});
    }
    proc_ = std::make_unique<process>(argv, std::map<std::string, std::string>{}, (dir_ / "sshd").string());
    // The banner alone could come from another test's server that took the port between
    // free_port() and sshd's bind (sshd then exits "Cannot bind"): ours writes its pid file only
    // once it listens.
    if (wait_for_banner(port_, "SSH-2.0-", 10000) && owns_port()) return;
    std::string err = proc_->stderr_text();
    proc_.reset();
    if (attempt == 4) throw std::runtime_error("sshd did not start: " + err);
  }
}

bool sshd::owns_port() {
  const auto want = std::to_string(proc_->pid());
  for (int i = 0; i < 500 && proc_->running(); ++i) {
    auto pid = slurp(dir_ / "sshd.pid");
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (pid == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::unique_ptr<sshd>> start_fleet(const std::filesystem::path& dir, int n,
                                               const std::vector<std::string>& authorized, sshd_options o) {
  std::vector<std::unique_ptr<sshd>> fleet;
  for (int i = 0; i < n; ++i)
    fleet.push_back(std::make_unique<sshd>(dir / ("sshd" + std::to_string(i)), authorized, o));
  return fleet;
}

sshd::~sshd() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(5)) == -1) proc_->signal(SIGKILL);
}

}  // namespace testbed
