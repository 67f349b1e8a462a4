#pragma once
// Real parts for distribution tests: a fleet of sshd on 127.0.0.1, real `certfleet serve`
// processes on one data directory (API, workers — killable), a webhook sink, and helpers that
// drive everything through the HTTP API as an operator would.
#include "certfleet/core/time_text.hpp"
#include "certs.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "sshd.hpp"
#include "temp_dir.hpp"
#include "webhook_sink.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

namespace dist_test {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string str(const json::value& v, std::string_view key) {
  if (!v.is_object()) return {};
  auto* p = v.as_object().if_contains(key);
  return p && p->is_string() ? std::string(p->as_string()) : std::string();
}

// A time member of an answer (RFC 3339 with milliseconds) as unix ms; -1 when absent or not one.
inline std::int64_t time_of(const json::value& v, std::string_view key) {
  auto t = certfleet::parse_rfc3339(str(v, key));
  return t ? *t : -1;
}

inline std::int64_t num(const json::value& v, std::string_view key) {
  if (!v.is_object()) return -1;
  auto* p = v.as_object().if_contains(key);
  return p && p->is_int64() ? p->as_int64() : -1;
}

class dist_env {
 public:
  explicit dist_env(int sshd_count = 2, testbed::sshd_options so = internal_sftp()) {
    client = testbed::make_ssh_key(dir.path() / "client", "id_ed25519");
    if (sshd_count > 0) fleet = testbed::start_fleet(dir.path() / "fleet", sshd_count, {client.public_line}, so);
    fs::create_directories(data());
  }
  ~dist_env() {
    for (auto& p : servers) p->signal(SIGKILL);
  }

  static testbed::sshd_options internal_sftp() {
    testbed::sshd_options o;
    o.internal_sftp = true;
    return o;
  }

  std::string data() const { return (dir.path() / "data").string(); }

  // Starts `certfleet serve` and waits for its "serving" line; the first one also opens the
  // HTTP client with the owner token.
  testbed::process& start(std::string mode = "all", std::vector<std::string> sets = {},
                          std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args{"serve", "--mode", mode, "--listen", "127.0.0.1:0", "--set", "worker_poll_ms=20",
                                  "--set", "log_level=warn"};
    for (auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    // Logs inside this test's directory: tests run in parallel from one working directory.
    auto log_prefix = (dir.path() / fmt::format("certfleet-{}", servers.size())).string();
    servers.push_back(std::make_unique<testbed::process>(testbed::certfleet_command(data(), args), env, log_prefix));
    auto& p = *servers.back();
    auto line = p.wait_for_stdout(" serving: ", 20s);
    if (line.empty()) throw std::runtime_error("certfleet did not start: " + p.stderr_text() + p.stdout_text());
    auto at = line.find("listen=");
    auto port = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
    (void)at;
    if (!http && (mode == "all" || mode == "api")) {
      token = slurp(fs::path(data()) / "owner-token");
      while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
      http = std::make_unique<testbed::http_client>("127.0.0.1", port, 30s);
      api_port = port;
      // The sshd fleet is on this host: ssh_allow_list admits loopback only when listed.
      set_settings({{"ssh_allow_list", "127.0.0.0/8"}});
    }
    return p;
  }

  testbed::http_response call(std::string_view method, const std::string& path, const std::string& body = {}) {
    return http->request(method, "/api/v1/projects/default/" + path, body, token);
  }
  json::value ok(std::string_view method, const std::string& path, const std::string& body = {}, int want = 0) {
    auto r = call(method, path, body);
    if (want ? r.status != want : (r.status < 200 || r.status >= 300)) {
      std::string why;
      // No answer at all: say what became of the server processes.
      if (r.status == 0)
        for (auto& p : servers)
          why += fmt::format("\n[server pid {} running={}] {}", p->pid(), p->running(), p->stderr_text().substr(0, 2000));
      ADD_FAILURE() << method << " " << path << " -> " << r.status << " " << r.body << r.error << why;
    }
    return r.json();
  }

  void set_settings(const json::object& values) {
    auto r = http->put("/api/v1/settings", json::serialize(values), token);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  std::string create_certificate(const std::string& name, const testbed::pem_cert& c, const std::string& chain = {}) {
    json::object b{{"name", name}, {"cert_pem", c.cert_pem}, {"key_pem", c.key_pem}};
    if (!chain.empty()) b["chain_pem"] = chain;
    return str(ok("POST", "certificates", json::serialize(b), 201), "id");
  }
  std::string create_credential(const std::string& name = "fleet-key") {
    json::object b{{"name", name}, {"kind", "ssh_key"}, {"private_key_pem", client.private_key}};
    return str(ok("POST", "credentials", json::serialize(b), 201), "id");
  }

  // An ssh target on fleet[i % n] writing into its own directory.
  json::object ssh_target_body(const std::string& name, std::size_t i, const std::string& credential_id,
                               std::uint16_t port_override = 0) {
    auto& s = *fleet[i % fleet.size()];
    auto base = target_dir(name);
    json::object ssh{{"host", "127.0.0.1"},
                     {"port", port_override ? port_override : s.port()},
                     {"user", testbed::current_user()},
                     {"credential_id", credential_id},
                     {"host_key", s.ed25519_host_key()},
                     {"cert_path", (base / "cert.pem").string()},
                     {"key_path", (base / "key.pem").string()}};
    return json::object{{"name", name}, {"module", "ssh"}, {"ssh", std::move(ssh)}};
  }
  fs::path target_dir(const std::string& name) const { return dir.path() / "remote" / name; }

  std::string create_target(const json::object& body) {
    fs::create_directories(target_dir(std::string(body.at("name").as_string())));
    return str(ok("POST", "targets", json::serialize(body), 201), "id");
  }

  std::string create_distribution(const std::string& name, const std::string& cert_id,
                                  const std::vector<std::string>& targets, json::object extra = {}) {
    json::array ids;
    for (auto& t : targets) ids.emplace_back(t);
    json::object b{{"name", name}, {"certificate_id", cert_id}, {"target_ids", std::move(ids)}};
    for (auto& [k, v] : extra) b[k] = v;
    return str(ok("POST", "distributions", json::serialize(b), 201), "id");
  }

  json::value execute(const std::string& id) { return ok("POST", "distributions/" + id + "/execute", "", 202); }

  // Polls the distribution until its status is terminal.
  json::value wait_done(const std::string& id, std::chrono::seconds timeout = 120s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    json::value d;
    while (std::chrono::steady_clock::now() < until) {
      d = call("GET", "distributions/" + id).json();
      auto s = str(d, "status");
      if (s == "success" || s == "partial" || s == "failed" || s == "cancelled") return d;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "distribution " << id << " did not finish: " << json::serialize(d);
    return d;
  }

  // Every per-target result of a run, all pages.
  std::vector<json::object> results(const std::string& id, std::int64_t run = 0) {
    std::vector<json::object> out;
    for (int page = 1;; ++page) {
      auto q = fmt::format("distributions/{}/results?page={}&page_size=200{}", id, page,
                           run ? fmt::format("&run={}", run) : std::string());
      auto r = ok("GET", q);
      if (!r.is_object()) break;
      auto& items = r.as_object().at("items").as_array();
      for (auto& i : items) out.push_back(i.as_object());
      if (items.size() < 200) break;
    }
    return out;
  }

  testbed::temp_dir dir;
  testbed::ssh_key_pair client;
  std::vector<std::unique_ptr<testbed::sshd>> fleet;
  std::vector<std::unique_ptr<testbed::process>> servers;
  std::unique_ptr<testbed::http_client> http;
  std::string token;
  std::uint16_t api_port = 0;
};

// The worker id a `certfleet serve` printed on its serving line.
inline std::string worker_id_of(testbed::process& p) {
  auto out = p.stdout_text();
  auto at = out.find(" worker=");
  if (at == std::string::npos) return {};
  at += 8;
  return out.substr(at, out.find_first_of(" \n", at) - at);
}

// One SQL answer from the store file (the sqlite3 shell; the store is in WAL mode, so reading it
// beside the running processes is fine).
inline std::string sql(dist_env& env, const std::string& query) {
  auto [rc, out] = testbed::run_command({"/usr/bin/sqlite3", (fs::path(env.data()) / "certfleet.db").string(), query});
  EXPECT_EQ(rc, 0) << query << ": " << out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

}  // namespace dist_test
