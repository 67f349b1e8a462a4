#pragma once
// A real authoritative DNS server for DNS-01 tests: Knot DNS (`knotd -c CONFIG`, Debian `knot`
// 3.2) on 127.0.0.1:<free port>, with its rundir, database and zone files in the test directory
// (TESTBED.md). Each zone has SOA, NS ns1.<zone> and an A record for ns1 (127.0.0.1), and
// accepts RFC 2136 updates signed with one TSIG key (hmac-sha256, random secret) — except the
// zones listed in `zones_without_key`, whose update ACL names another key (knot then answers
// NOTAUTH, TSIG error BADKEY). Stopped by its PID (SIGTERM, then SIGKILL).
//
// Others use it too: pebble's `-dnsserver 127.0.0.1:<port>` validates DNS-01 against it, and the
// manual-DNS tests create records with nsupdate() as an operator would.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"

namespace testbed {

struct knot_options {
  // Zones the key may update; the first is zone().
  std::vector<std::string> zones{"example.test"};
  // Zones served whose update ACL lacks the key.
  std::vector<std::string> zones_without_key;
  std::string key_name = "certfleet-key.";
  // Extra zone-file lines per zone (relative names allowed: $ORIGIN is the zone), e.g.
  // {"example.test", "www 300 A 127.0.0.1"}.
  std::vector<std::pair<std::string, std::string>> extra_records;
};

class knot {
 public:
  // Writes the config and zone files under `dir` (created) and starts knotd; returns once every
  // zone answers its SOA over UDP. Throws (with knotd's log) when it does not start.
  explicit knot(const std::filesystem::path& dir, knot_options o = {});
  ~knot();
  knot(const knot&) = delete;
  knot& operator=(const knot&) = delete;

  std::uint16_t port() const { return port_; }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }  // "host:port"
  const std::string& zone() const { return opts_.zones.front(); }
  const std::vector<std::string>& zones() const { return opts_.zones; }
  const std::vector<std::string>& zones_without_key() const { return opts_.zones_without_key; }
  const std::string& key_name() const { return opts_.key_name; }
  const std::string& secret_base64() const { return secret_; }
  // "hmac-sha256:<key name>:<secret>": nsupdate -y / dig -y.
  std::string tsig_arg() const;
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stderr_text() : ""; }

  // nsupdate against this server as an operator runs it: `server 127.0.0.1 <port>` and, when
  // `zone` is not empty, `zone <zone>` come first, then `commands` ("update add … TXT \"v\""),
  // then `send`. Signed with this server's key unless `tsig_arg` says otherwise ("" = the key;
  // "-" = unsigned). Returns {exit status, stdout + stderr}.
  std::pair<int, std::string> nsupdate(const std::vector<std::string>& commands, const std::string& zone = {},
                                       const std::string& tsig_arg = {}) const;
  // `dig @127.0.0.1 -p <port> +norec +time=5 +tries=2 ARGS…`: {exit status, output}.
  std::pair<int, std::string> dig(const std::vector<std::string>& args) const;
  // The TXT values dig reads at `name` (+short; each record's strings joined, quotes removed).
  std::vector<std::string> dig_txt(const std::string& name) const;

 private:
  bool start();

  std::filesystem::path dir_;
  knot_options opts_;
  std::uint16_t port_ = 0;
  std::string secret_, other_secret_;
  std::unique_ptr<process> proc_;
};

// A DNS server that is down without saying so: a UDP socket on 127.0.0.1 that receives and
// never answers (no ICMP "port unreachable"), and a TCP socket on the same port that listens but
// never accepts (the kernel completes the handshake; no byte ever comes back). It keeps what it
// received over UDP, so a test can also read the exact bytes a tool (dig, nsupdate) sends.
class silent_dns_server {
 public:
  silent_dns_server();
  ~silent_dns_server();
  silent_dns_server(const silent_dns_server&) = delete;
  silent_dns_server& operator=(const silent_dns_server&) = delete;
  std::uint16_t port() const { return port_; }
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  // The next UDP datagram that arrives within `timeout` ("" when none does).
  std::string receive(std::chrono::milliseconds timeout);

 private:
  int udp_ = -1, tcp_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace testbed
