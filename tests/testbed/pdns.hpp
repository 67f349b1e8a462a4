#pragma once
// A real PowerDNS Authoritative server with its HTTP API, for the DNS-01 providers that talk to
// one (lego's `pdns`): Debian `pdns-server` 4.7 with the gsqlite3 backend (TESTBED.md), started
// as `/usr/sbin/pdns_server --config-dir=DIR` in the foreground, so it reads DIR/pdns.conf and
// never /etc/powerdns. DNS on 127.0.0.1:<free port>, the API on 127.0.0.1:<another free port>
// with a random X-API-Key. Each zone is created through the API itself (kind Native, NS
// ns1.<zone>, and an A record ns1.<zone> → 127.0.0.1), so the server holds exactly what an
// operator's API calls made. Caches are off: a record the API changed is what dig reads next.
// Stopped by its PID (SIGTERM, then SIGKILL).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"

namespace testbed {

struct pdns_options {
  // Zones created at start; the first is zone(). Given without the trailing dot.
  std::vector<std::string> zones{"pdns.test"};
  std::string api_key;  // empty: a random one
};

class pdns {
 public:
  // Creates DIR (if needed), DIR/pdns.sqlite3 from the backend's schema and DIR/pdns.conf, starts
  // pdns_server, waits until the API answers with our key, then creates the zones and waits until
  // each answers over DNS. Throws (with the server's log) when any of that fails.
  explicit pdns(const std::filesystem::path& dir, pdns_options o = {});
  ~pdns();
  pdns(const pdns&) = delete;
  pdns& operator=(const pdns&) = delete;

  std::uint16_t port() const { return port_; }  // DNS, UDP and TCP
  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }  // "host:port"
  std::uint16_t api_port() const { return api_port_; }
  // "http://127.0.0.1:<port>", no trailing slash: lego's PDNS_API_URL.
  std::string api_url() const { return "http://127.0.0.1:" + std::to_string(api_port_); }
  const std::string& api_key() const { return opts_.api_key; }
  const std::string& zone() const { return opts_.zones.front(); }
  const std::vector<std::string>& zones() const { return opts_.zones; }
  int pid() const { return proc_ ? proc_->pid() : -1; }
  std::string log() const { return proc_ ? proc_->stdout_text() + proc_->stderr_text() : ""; }

  // One API request with this server's X-API-Key (and Content-Type: application/json when there
  // is a body); `path` is the target, e.g. "/api/v1/servers/localhost/zones/pdns.test.".
  // Returns {HTTP status, body}; {0, why} when no response came.
  std::pair<int, std::string> api(const std::string& method, const std::string& path,
                                  const std::string& body = {}) const;
  // `dig @127.0.0.1 -p <port> +norec +time=5 +tries=2 ARGS…`: {exit status, output}.
  std::pair<int, std::string> dig(const std::vector<std::string>& args) const;
  // The TXT values dig reads at `name` (+short; each record's strings joined, quotes removed).
  std::vector<std::string> dig_txt(const std::string& name) const;

 private:
  bool start();
  void create_zone(const std::string& zone);

  std::filesystem::path dir_;
  pdns_options opts_;
  std::uint16_t port_ = 0, api_port_ = 0;
  std::unique_ptr<process> proc_;
};

}  // namespace testbed
