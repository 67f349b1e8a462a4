// bench/ssh_fanout: the SSH delivery benchmark (issue 4), driven by bench/run_ssh_bench.sh.
//
//   ssh_fanout fleet --dir D --instances K
//     Starts K real sshd instances on 127.0.0.1 (tests/testbed/sshd: internal-sftp, ed25519 +
//     ECDSA host keys, MaxStartups 1000), makes the client key D/client_ed25519, writes
//     D/fleet.tsv ("index<TAB>port<TAB>ssh-ed25519 AAAA…") and D/known_hosts, prints
//     "ready K sshd PID…", and keeps the fleet up until SIGTERM/SIGINT (then stops every sshd by
//     its PID). It is a child subreaper: sshd's post-auth session processes end up orphaned (their
//     monitor does not wait for them), so this process reaps them and their CPU time shows in its
//     cutime/cstime; the server-side CPU of the fleet = every listener's utime + stime + cutime +
//     cstime + this process's cutime + cstime (bench/ssh_bench.py reads them from /proc).
//
//   ssh_fanout deliver --dir D --targets N --concurrency C --user U --cert F --key F --run-id R
//     certfleet's delivery, as a distribution job runs it: deliver_ssh() for every target (the
//     full recipe: connect, pinned host-key check, auth, hash check, upload cert + key, one exec
//     for backup + mv + mode; no validation) under a semaphore of C, on one io_context in this
//     process. Target i is instance i % K, files D/targets/tNNNN/{cert,key}.pem. Prints one JSON
//     line: wall time, targets/s, this process's CPU (getrusage RUSAGE_SELF, the delivery only),
//     peak RSS, failures and per-phase timings (p50 / p90 / max, ms).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "certfleet/delivery/ssh.hpp"
#include "sshd.hpp"

namespace fs = std::filesystem;
namespace asio = boost::asio;
using namespace certfleet::delivery;
using namespace certfleet::net;
using steady = std::chrono::steady_clock;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct cpu_sample {
  double user = 0, sys = 0;
  long maxrss_kb = 0;
};
cpu_sample cpu_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_maxrss};
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += fmt::format("\\u{:04x}", c);
    else o += c;
  }
  return o;
}

int usage() {
  std::cerr << "usage: ssh_fanout fleet --dir D --instances K\n"
               "       ssh_fanout deliver --dir D --targets N --concurrency C --user U --cert F --key F --run-id R\n";
  return 2;
}

int run_fleet(const fs::path& dir, int instances) {
  fs::create_directories(dir);
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  auto client = testbed::make_ssh_key(dir, "client_ed25519", "ed25519");
  testbed::sshd_options o;
  o.internal_sftp = true;  // no login shell per SFTP session
  auto fleet = testbed::start_fleet(dir / "fleet", instances, {client.public_line}, o);
  {
    std::ofstream tsv(dir / "fleet.tsv"), kh(dir / "known_hosts");
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      tsv << i << "\t" << fleet[i]->port() << "\t" << fleet[i]->ed25519_host_key() << "\n";
      kh << "[127.0.0.1]:" << fleet[i]->port() << " " << fleet[i]->ed25519_host_key() << "\n";
      if (!fleet[i]->ecdsa_host_key().empty())
        kh << "[127.0.0.1]:" << fleet[i]->port() << " " << fleet[i]->ecdsa_host_key() << "\n";
    }
  }
  // Blocked only now: a signal mask is inherited through fork and exec, and the sshd children
  // must stay stoppable by SIGTERM. sigwait picks the stop signal up below.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::cout << "ready " << fleet.size() << " sshd";
  for (auto& s : fleet) std::cout << " " << s->pid();
  std::cout << std::endl;
  std::vector<int> listeners;
  for (auto& s : fleet) listeners.push_back(s->pid());
  for (;;) {
    timespec tick{0, 200'000'000};
    int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) break;
    // Reap the orphans that were handed to us; a listener's exit is left to its testbed::sshd.
    for (;;) {
      siginfo_t info{};
      if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) break;
      if (std::find(listeners.begin(), listeners.end(), info.si_pid) != listeners.end()) break;
      waitpid(info.si_pid, nullptr, 0);
    }
  }
  fleet.clear();  // SIGTERM each sshd, then SIGKILL
  return 0;
}

struct phase_stats {
  std::vector<std::int64_t> ms;
};

double pct(std::vector<std::int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return static_cast<double>(v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))]);
}

int run_deliver(const fs::path& dir, int n, int concurrency, const std::string& user, const fs::path& cert_file,
                const fs::path& key_file, const std::string& run_id) {
  struct instance {
    std::uint16_t port;
    host_key pinned;
  };
  std::vector<instance> fleet;
  {
    std::ifstream tsv(dir / "fleet.tsv");
    for (std::string line; std::getline(tsv, line);) {
      std::istringstream in(line);
      std::string idx, port, rest;
      std::getline(in, idx, '\t');
      std::getline(in, port, '\t');
      std::getline(in, rest);
      auto k = parse_host_key(rest);
      if (!k) throw std::runtime_error("bad host key in fleet.tsv: " + rest);
      fleet.push_back({static_cast<std::uint16_t>(std::stoi(port)), *k});
    }
  }
  if (fleet.empty()) throw std::runtime_error("no fleet in " + (dir / "fleet.tsv").string() + " (run `ssh_fanout fleet` first)");
  ssh_credential cred;
  cred.private_key_pem = slurp(dir / "client_ed25519");
  cert_bundle bundle;
  bundle.cert_pem = slurp(cert_file);
  bundle.key_pem = slurp(key_file);

  std::vector<ssh_target> targets;
  for (int i = 0; i < n; ++i) {
    const auto& inst = fleet[static_cast<std::size_t>(i) % fleet.size()];
    ssh_target t;
    t.host = "127.0.0.1";
    t.port = inst.port;
    t.user = user;
    t.pinned = inst.pinned;
    auto tdir = dir / "targets" / fmt::format("t{:04d}", i);
    t.cert_path = (tdir / "cert.pem").string();
    t.key_path = (tdir / "key.pem").string();
    targets.push_back(std::move(t));
  }

  asio::io_context ioc(1);
  std::vector<delivery_result> results(targets.size());
  std::size_t next = 0;
  // A semaphore of `concurrency`: that many workers, each taking the next target when it is done.
  // The fleet listens on 127.1.x.y: ssh_allow_list's default admits no loopback address.
  const auto loopback = *parse_egress_allow_list("127.0.0.0/8", "ssh_allow_list");
  ssh_options opts;
  opts.allow = &loopback;
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < targets.size()) {
      std::size_t i = next++;
      results[i] = co_await deliver_ssh(targets[i], cred, bundle, run_id, opts);
    }
  };
  auto cpu0 = cpu_now();
  auto t0 = steady::now();
  for (int w = 0; w < concurrency; ++w) asio::co_spawn(ioc, worker(), asio::detached);
  ioc.run();
  double wall = std::chrono::duration<double>(steady::now() - t0).count();
  auto cpu1 = cpu_now();

  int ok = 0, skipped = 0, failed = 0;
  std::string first_error;
  std::map<std::string, phase_stats> phases;
  std::vector<std::string> order;
  std::vector<std::int64_t> total_ms;
  for (auto& r : results) {
    if (r.status == delivery_status::succeeded) ++ok;
    else if (r.status == delivery_status::skipped_by_hash) ++skipped;
    else {
      ++failed;
      if (first_error.empty()) first_error = r.error;
    }
    std::int64_t sum = 0;
    for (auto& t : r.timings) {
      if (!phases.count(t.phase)) order.push_back(t.phase);
      phases[t.phase].ms.push_back(t.ms);
      sum += t.ms;
    }
    total_ms.push_back(sum);
  }
  double cpu = (cpu1.user - cpu0.user) + (cpu1.sys - cpu0.sys);
  std::string ph;
  for (auto& name : order) {
    auto& v = phases[name].ms;
    ph += fmt::format("{}\"{}\":[{:.0f},{:.0f},{:.0f}]", ph.empty() ? "" : ",", name, pct(v, 0.5), pct(v, 0.9), pct(v, 1.0));
  }
  std::cout << fmt::format(
                   "{{\"tool\":\"certfleet\",\"n\":{},\"concurrency\":{},\"instances\":{},\"wall_s\":{:.3f},"
                   "\"targets_per_s\":{:.2f},\"cpu_user_s\":{:.3f},\"cpu_sys_s\":{:.3f},\"cpu_s\":{:.3f},"
                   "\"cpu_ms_per_target\":{:.3f},\"peak_rss_mib\":{:.1f},\"ok\":{},\"skipped\":{},\"failed\":{},"
                   "\"first_error\":\"{}\",\"target_ms_p50\":{:.0f},\"target_ms_p90\":{:.0f},"
                   "\"phases_ms_p50_p90_max\":{{{}}}}}",
                   n, concurrency, fleet.size(), wall, n / wall, cpu1.user - cpu0.user, cpu1.sys - cpu0.sys, cpu,
                   1000.0 * cpu / n, cpu1.maxrss_kb / 1024.0, ok, skipped, failed, json_escape(first_error),
                   pct(total_ms, 0.5), pct(total_ms, 0.9), ph)
            << std::endl;
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string mode = argv[1];
  std::map<std::string, std::string> a;
  for (int i = 2; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  auto get = [&](const std::string& k) -> std::string {
    auto it = a.find(k);
    if (it == a.end()) throw std::runtime_error("missing " + k);
    return it->second;
  };
  try {
    if (mode == "fleet") return run_fleet(get("--dir"), std::stoi(get("--instances")));
    if (mode == "deliver")
      return run_deliver(get("--dir"), std::stoi(get("--targets")), std::stoi(get("--concurrency")), get("--user"),
                         get("--cert"), get("--key"), get("--run-id"));
  } catch (const std::exception& e) {
    std::cerr << "ssh_fanout: " << e.what() << "\n";
    return 2;
  }
  return usage();
}
