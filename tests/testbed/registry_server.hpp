#pragma once
// The RDAP and WHOIS servers of tests/testbed/registry_server.py (one RDAP listener, named WHOIS
// listeners, all on 127.0.0.1 on ports the kernel picks), for the domain_registry tests and the
// domain_expiration_check job tests.
#include "process.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>

#include <chrono>
#include <csignal>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace testbed {

// tests/testbed/registry_server.py with one JSON config; stopped by PID (SIGTERM, then the
// process object's SIGKILL) whatever the test's outcome.
class registry_server {
 public:
  registry_server(const testbed::temp_dir& dir, const boost::json::object& config) {
    const auto config_path = dir.file("registry.json");
    {
      std::ofstream f(config_path);
      f << boost::json::serialize(config);
    }
    proc_ = std::make_unique<testbed::process>(
        std::vector<std::string>{"/usr/bin/python3", std::string(CERTFLEET_SOURCE_DIR) + "/tests/testbed/registry_server.py",
                                 "--config", config_path},
        std::map<std::string, std::string>{{"PYTHONDONTWRITEBYTECODE", "1"}}, dir.file("registry"));
    // It prints its ports once every listener is bound: no guessing, no sleeping.
    if (proc_->wait_for_stdout("ready", std::chrono::seconds(20)).empty())
      throw std::runtime_error("registry_server.py did not start: " + proc_->stderr_text());
    std::istringstream in(proc_->stdout_text());
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string w1, w2, name;
      words >> w1 >> w2;
      if (w1 != "listening") continue;
      int port = 0;
      if (w2 == "rdap") {
        words >> port;
        rdap_port_ = static_cast<std::uint16_t>(port);
      } else {
        words >> name >> port;
        whois_ports_[name] = static_cast<std::uint16_t>(port);
      }
    }
  }
  ~registry_server() {
    proc_->signal(SIGTERM);
    proc_->wait(std::chrono::seconds(5));
  }
  registry_server(const registry_server&) = delete;
  registry_server& operator=(const registry_server&) = delete;

  std::string rdap_base() const { return "http://127.0.0.1:" + std::to_string(rdap_port_) + "/rdap/"; }
  std::uint16_t whois_port(const std::string& name) const { return whois_ports_.at(name); }
  // How many lines of its log start with `prefix` ("query whois registry", "connect rdap").
  int count(const std::string& prefix) const {
    std::istringstream in(proc_->stdout_text());
    int n = 0;
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0) ++n;
    return n;
  }
  std::string log() const { return proc_->stdout_text() + proc_->stderr_text(); }

 private:
  std::unique_ptr<testbed::process> proc_;
  std::uint16_t rdap_port_ = 0;
  std::map<std::string, std::uint16_t> whois_ports_;
};

}  // namespace testbed
