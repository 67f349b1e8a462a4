#pragma once
// What the AD CS tests share (msca_jobs_test.cpp, msca_crash_test.cpp): a real certfleet process
// (dist_env, no sshd) and the testbed's CEP/CES server (msca_server.hpp), settings that let
// certfleet reach it on 127.0.0.1 and poll a pending request every 1-2 s, and the API helpers.
#include "certs.hpp"
#include "dist_fixture.hpp"
#include "msca_server.hpp"
#include "temp_dir.hpp"

#include <functional>
#include <map>

namespace dist_test {

using testbed::chains_to;

// The field an API refusal names ({"error": {code, message, field}}).
inline std::string field_of(const testbed::http_response& r) {
  auto v = r.json();
  return v.is_object() && v.as_object().contains("error") ? str(v.at("error"), "field") : std::string();
}

// A serial as a number in hex (certfleet writes whole bytes, "0b22…"; Python's hex of the
// integer has no leading zero).
inline std::string hex_number(std::string h) {
  h.erase(0, std::min(h.find_first_not_of('0'), h.size()));
  return h;
}

class msca_env {
 public:
  explicit msca_env(testbed::msca_server_options so = {}, std::vector<std::string> sets = {},
                    std::map<std::string, std::string> environment = {})
      : env(0) {
    ca = std::make_unique<testbed::msca_server>(env.dir.path() / "adcs", std::move(so));
    env.start("all", std::move(sets), std::move(environment));
    // The test CA listens on 127.0.0.1: msca_allow_list reaches loopback only when it lists it.
    env.set_settings(json::object{{"msca_allow_list", "127.0.0.1"}, {"msca_poll_first_delay_s", 1},
                                  {"msca_poll_max_delay_s", 2}});
  }
  ~msca_env() {
    if (::testing::Test::HasFailure()) {
      auto log = ca->log();
      std::cerr << "msca server log tail:\n" << (log.size() > 4000 ? log.substr(log.size() - 4000) : log) << "\n";
    }
  }

  json::object password_ca(const std::string& name, const std::string& password = "alice-password") const {
    return json::object{{"name", name},
                        {"cep_url", ca->cep_url()},
                        {"auth", json::object{{"kind", "username_password"}, {"username", "alice"}, {"password", password}}},
                        {"ca_bundle_pem", ca->ca_pem()},
                        {"default_template", "WebServer"}};
  }
  json::object enroll_body(const std::string& name, const std::string& ca_id, const std::string& tmpl,
                           const std::string& host) const {
    json::object b{{"name", name}, {"msca_ca_id", ca_id}, {"subject", "CN=" + host}, {"sans", json::array{json::value(host)}}};
    if (!tmpl.empty()) b["template"] = tmpl;
    return b;
  }
  // POST …/certificates/enroll → {certificate_id, job_id}.
  std::pair<std::string, std::string> enroll(const json::object& body) {
    auto r = env.ok("POST", "certificates/enroll", json::serialize(body), 202);
    return {str(r, "certificate_id"), str(r, "job_id")};
  }
  json::value wait_job(const std::string& id, std::chrono::seconds timeout = 90s) {
    auto until = std::chrono::steady_clock::now() + timeout;
    json::value j;
    while (std::chrono::steady_clock::now() < until) {
      j = env.call("GET", "jobs/" + id).json();
      auto s = str(j, "status");
      if (s == "completed" || s == "dead" || s == "cancelled") return j;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "job " << id << " did not end: " << json::serialize(j) << "\n" << log_text(id);
    return j;
  }
  std::string log_text(const std::string& job) {
    auto r = env.call("GET", "jobs/" + job + "/logs?limit=500").json();
    std::string out;
    if (r.is_object())
      if (auto* lines = r.as_object().if_contains("lines"); lines && lines->is_array())
        for (const auto& l : lines->as_array()) out += str(l, "level") + " " + str(l, "message") + "\n";
    return out;
  }
  // Every job of a type, newest first.
  json::array jobs_of(const std::string& type) {
    auto r = env.ok("GET", "jobs?type=" + type + "&page_size=100");
    return r.at("items").as_array();
  }
  // Waits until the certificate's view satisfies `done`.
  json::value wait_certificate(const std::string& id, const std::function<bool(const json::value&)>& done,
                               std::chrono::seconds timeout = 90s) {
    json::value c;
    for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;
         std::this_thread::sleep_for(100ms)) {
      c = env.ok("GET", "certificates/" + id);
      if (done(c)) return c;
    }
    ADD_FAILURE() << "certificate " << id << " did not get there: " << json::serialize(c);
    return c;
  }

  // A worker armed with CERTFLEET_CRASH_AT kills itself at the point; then a fresh one (without
  // it) starts on the same data. False when the worker did not get there within a minute.
  bool restart_after_crash(const std::vector<std::string>& sets) {
    auto& armed = *env.servers.back();
    for (auto until = std::chrono::steady_clock::now() + 60s; armed.running() && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(50ms);
    if (armed.running()) return false;
    env.http.reset();
    env.start("all", sets);
    return true;
  }

  dist_env env;
  std::unique_ptr<testbed::msca_server> ca;
};

}  // namespace dist_test
