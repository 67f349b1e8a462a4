#include "knot.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "sshd.hpp"  // free_port

namespace testbed {
namespace {

std::string random_base64(std::size_t n) {
  std::string raw(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(n)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(raw.data()),
                            static_cast<int>(n));
  out.resize(static_cast<std::size_t>(len));
  return out;
}

std::string random_token() {
  std::string t;
  for (char c : random_base64(12))
    if (std::isalnum(static_cast<unsigned char>(c))) t += c;
  return t;
}

std::string absolute(std::string name) { return name.ends_with(".") ? name : name + "."; }

// A raw DNS query (RFC 1035), written here by hand so the testbed does not lean on the codec
// it helps to test.
std::string raw_query(std::uint16_t id, const std::string& name, std::uint16_t type) {
  std::string q;
  q += static_cast<char>(id >> 8);
  q += static_cast<char>(id & 0xff);
  q += std::string("\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00", 10);
  std::stringstream ss(name);
  for (std::string label; std::getline(ss, label, '.');) {
    if (label.empty()) continue;
    q += static_cast<char>(label.size());
    q += label;
  }
  q += '\0';
  q += static_cast<char>(type >> 8);
  q += static_cast<char>(type & 0xff);
  q += std::string("\x00\x01", 2);
  return q;
}

// Sends one UDP query to 127.0.0.1:port and returns the answer ("" after `timeout`).
std::string udp_ask(std::uint16_t port, const std::string& query, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::send(fd, query.data(), query.size(), 0) > 0) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) == 1) {
      char buf[4096];
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) out.assign(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

knot::knot(const std::filesystem::path& dir, knot_options o) : dir_(dir), opts_(std::move(o)) {
  if (opts_.zones.empty()) throw std::invalid_argument("knot: at least one zone");
  secret_ = random_base64(32);
  other_secret_ = random_base64(32);
  std::filesystem::create_directories(dir_ / "run");
  std::filesystem::create_directories(dir_ / "db");
  std::filesystem::create_directories(dir_ / "zones");
  std::string err;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (start()) return;
    err = log();
    if (proc_) {
      proc_->signal(SIGKILL);
      proc_->wait(std::chrono::seconds(5));
    }
    proc_.reset();
  }
  throw std::runtime_error("knotd did not start: " + err);
}

bool knot::start() {
  port_ = free_port();
  // A token only this instance serves: the readiness check must not be answered by another
  // test's server that took the port between free_port() and knotd's bind.
  const std::string token = random_token();
  const std::string key = absolute(opts_.key_name);
  {
    std::ofstream c(dir_ / "knot.conf");
    c << "server:\n"
      << "    rundir: " << (dir_ / "run").string() << "\n"
      << "    listen: 127.0.0.1@" << port_ << "\n";
    // As root knotd would switch to the `knot` user and lose access to the test directory.
    if (::geteuid() == 0) c << "    user: root:root\n";
    c << "log:\n  - target: stderr\n    any: info\n"
      << "database:\n    storage: " << (dir_ / "db").string() << "\n"
      << "key:\n"
      << "  - id: " << key << "\n    algorithm: hmac-sha256\n    secret: " << secret_ << "\n"
      << "  - id: testbed-other-key.\n    algorithm: hmac-sha256\n    secret: " << other_secret_ << "\n"
      << "acl:\n"
      << "  - id: update_with_key\n    key: " << key << "\n    action: update\n"
      << "  - id: update_with_other_key\n    key: testbed-other-key.\n    action: update\n"
      << "template:\n  - id: default\n    storage: " << (dir_ / "zones").string() << "\n"
      << "    zonefile-sync: -1\n    journal-content: changes\n"
      << "zone:\n";
    for (const auto& z : opts_.zones) c << "  - domain: " << absolute(z) << "\n    acl: update_with_key\n";
    for (const auto& z : opts_.zones_without_key) c << "  - domain: " << absolute(z) << "\n    acl: update_with_other_key\n";
  }
  auto write_zone = [&](const std::string& z) {
    std::ofstream f(dir_ / "zones" / (absolute(z) + "zone"));
    f << "$ORIGIN " << absolute(z) << "\n$TTL 300\n"
      << "@ SOA ns1 hostmaster 1 3600 600 86400 300\n"
      << "@ NS ns1\n"
      << "ns1 A 127.0.0.1\n"
      << "_testbed TXT \"" << token << "\"\n";
    for (const auto& [zone, line] : opts_.extra_records)
      if (absolute(zone) == absolute(z)) f << line << "\n";
  };
  for (const auto& z : opts_.zones) write_zone(z);
  for (const auto& z : opts_.zones_without_key) write_zone(z);
  // Journals from an earlier start (another port) would replay into the zones.
  std::error_code ec;
  std::filesystem::remove_all(dir_ / "db", ec);
  std::filesystem::create_directories(dir_ / "db");

  proc_ = std::make_unique<process>(std::vector<std::string>{"/usr/sbin/knotd", "-c", (dir_ / "knot.conf").string()},
                                    std::map<std::string, std::string>{}, (dir_ / "knotd").string());
  // Every zone must answer with our token before a test talks to it (knotd loads zones after
  // it starts listening).
  std::vector<std::string> all = opts_.zones;
  all.insert(all.end(), opts_.zones_without_key.begin(), opts_.zones_without_key.end());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::size_t ready = 0;
  std::uint16_t id = 1;
  while (ready < all.size() && std::chrono::steady_clock::now() < deadline) {
    if (!proc_->running()) return false;
    auto answer = udp_ask(port_, raw_query(id++, "_testbed." + absolute(all[ready]), 16), 500);
    // RCODE NOERROR and our token in the answer.
    if (answer.size() > 12 && (answer[3] & 0x0f) == 0 && answer.find(token) != std::string::npos) {
      ++ready;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ready == all.size();
}

knot::~knot() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(10)) == -1) {
    proc_->signal(SIGKILL);
    proc_->wait(std::chrono::seconds(5));
  }
}

std::string knot::tsig_arg() const { return "hmac-sha256:" + absolute(opts_.key_name) + ":" + secret_; }

std::pair<int, std::string> knot::nsupdate(const std::vector<std::string>& commands, const std::string& zone,
                                           const std::string& tsig) const {
  static int counter = 0;
  auto file = dir_ / ("nsupdate-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".txt");
  {
    std::ofstream f(file);
    f << "server 127.0.0.1 " << port_ << "\n";
    if (!zone.empty()) f << "zone " << zone << "\n";
    for (const auto& c : commands) f << c << "\n";
    f << "send\n";
  }
  std::vector<std::string> argv{"/usr/bin/nsupdate", "-t", "10"};
  if (tsig != "-") {
    argv.push_back("-y");
    argv.push_back(tsig.empty() ? tsig_arg() : tsig);
  }
  argv.push_back(file.string());
  auto r = run_command(argv);
  std::filesystem::remove(file);
  return r;
}

std::pair<int, std::string> knot::dig(const std::vector<std::string>& args) const { return dig_at(port_, args); }

std::vector<std::string> knot::dig_txt(const std::string& name) const { return dig_txt_at(port_, name); }

silent_dns_server::silent_dns_server() {
  for (int attempt = 0; attempt < 20 && tcp_ < 0; ++attempt) {
    udp_ = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (udp_ < 0 || ::bind(udp_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("silent_dns_server: UDP bind failed");
    socklen_t len = sizeof a;
    ::getsockname(udp_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    // The same port over TCP; another test may hold it, then try another port.
    tcp_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (tcp_ >= 0 && ::bind(tcp_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(tcp_, 16) == 0) break;
    if (tcp_ >= 0) ::close(tcp_);
    tcp_ = -1;
    ::close(udp_);
    udp_ = -1;
  }
  if (tcp_ < 0) throw std::runtime_error("silent_dns_server: no port free for both UDP and TCP");
}

silent_dns_server::~silent_dns_server() {
  ::close(udp_);
  ::close(tcp_);
}

std::string silent_dns_server::receive(std::chrono::milliseconds timeout) {
  pollfd p{udp_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return {};
  char buf[65536];
  auto n = ::recv(udp_, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string{};
}

}  // namespace testbed
