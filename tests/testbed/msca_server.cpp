#include "msca_server.hpp"

#include <boost/json.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "http_client.hpp"

namespace testbed {

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string str(const boost::json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

int num(const boost::json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_int64() ? static_cast<int>(v->as_int64()) : 0;
}

}  // namespace

msca_server::msca_server(const std::filesystem::path& dir, msca_server_options o) : dir_(dir / "msca") {
  std::filesystem::create_directories(dir_);
  std::vector<std::string> argv{"/usr/bin/python3",
                                std::string(CERTFLEET_SOURCE_DIR) + "/tests/testbed/msca_server.py", "--dir",
                                dir_.string()};
  for (const auto& [user, password] : o.users) argv.insert(argv.end(), {"--user", user + ":" + password});
  if (o.validity_s > 0) argv.insert(argv.end(), {"--validity-s", std::to_string(o.validity_s)});
  std::map<std::string, std::string> env{{"PYTHONDONTWRITEBYTECODE", "1"}};
  if (!o.kerberos_keytab.empty()) {
    argv.insert(argv.end(), {"--kerberos-keytab", o.kerberos_keytab.string()});
    env["KRB5_CONFIG"] = o.krb5_conf.string();
  }
  proc_ = std::make_unique<process>(argv, env, (dir_ / "server").string());
  // ports.json is written last, atomically (tmp + rename): once it exists, every port listens.
  const auto ports_path = dir_ / "ports.json";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!std::filesystem::exists(ports_path)) {
    if (std::chrono::steady_clock::now() > deadline || !proc_->running())
      throw std::runtime_error("msca_server did not start: " + proc_->stderr_text());
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  auto ports = boost::json::parse(slurp(ports_path)).as_object();
  https_port_ = static_cast<std::uint16_t>(ports.at("https").as_int64());
  client_cert_port_ = static_cast<std::uint16_t>(ports.at("client_cert").as_int64());
  admin_port_ = static_cast<std::uint16_t>(ports.at("admin").as_int64());
  if (auto* k = ports.if_contains("kerberos")) kerberos_port_ = static_cast<std::uint16_t>(k->as_int64());
  ca_pem_ = slurp(dir_ / "ca.pem");
}

msca_server::~msca_server() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(5)) == -1) proc_->signal(SIGKILL);
}

std::string msca_server::cep_url() const {
  return "https://127.0.0.1:" + std::to_string(https_port_) + "/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP";
}
std::string msca_server::ces_url() const {
  return "https://127.0.0.1:" + std::to_string(https_port_) + "/TestCA_CES_UsernamePassword/service.svc/CES";
}
std::string msca_server::cep_cert_url() const {
  return "https://127.0.0.1:" + std::to_string(client_cert_port_) + "/ADPolicyProvider_CEP_Certificate/service.svc/CEP";
}
std::string msca_server::ces_cert_url() const {
  return "https://127.0.0.1:" + std::to_string(client_cert_port_) + "/TestCA_CES_Certificate/service.svc/CES";
}

std::string msca_server::cep_kerberos_url() const {
  return "https://127.0.0.1:" + std::to_string(kerberos_port_) + "/ADPolicyProvider_CEP_Kerberos/service.svc/CEP";
}
std::string msca_server::ces_kerberos_url() const {
  return "https://127.0.0.1:" + std::to_string(kerberos_port_) + "/TestCA_CES_Kerberos/service.svc/CES";
}

boost::json::value msca_server::admin(const std::string& method, const std::string& target,
                                      const std::string& body) const {
  http_client c("127.0.0.1", admin_port_);
  auto r = c.request(method, target, body, {}, {{"Content-Type", "application/json"}});
  if (r.status == 0) throw std::runtime_error("msca_server side channel: " + r.error);
  if (r.status == 409) return nullptr;
  if (r.status != 200)
    throw std::runtime_error("msca_server side channel " + method + " " + target + ": " + std::to_string(r.status) +
                             " " + r.body);
  return boost::json::parse(r.body);
}

msca_client_certificate msca_server::issue_client_certificate(const std::string& user, bool expired) const {
  auto v = admin("POST", "/client-certs", boost::json::serialize(boost::json::object{{"user", user}, {"expired", expired}}));
  const auto& o = v.as_object();
  return {str(o, "cert_pem"), str(o, "key_pem")};
}

std::vector<msca_request> msca_server::requests() const {
  std::vector<msca_request> out;
  // Held here: a range-for over a member of a temporary would read freed memory.
  const auto list = admin("GET", "/requests");
  for (const auto& item : list.as_array()) {
    const auto& o = item.as_object();
    msca_request r;
    r.id = o.at("id").as_int64();
    r.tmpl = str(o, "template");
    r.user = str(o, "user");
    r.status = str(o, "status");
    r.subject = str(o, "subject");
    for (const auto& s : o.at("sans").as_array()) r.sans.emplace_back(s.as_string());
    r.renewal = o.at("renewal").as_bool();
    r.serial = str(o, "serial");
    r.reason = str(o, "reason");
    r.hresult = str(o, "hresult");
    out.push_back(std::move(r));
  }
  return out;
}

bool msca_server::approve(std::int64_t id) const {
  return !admin("POST", "/requests/" + std::to_string(id) + "/approve", "{}").is_null();
}

bool msca_server::deny(std::int64_t id, const std::string& reason) const {
  return !admin("POST", "/requests/" + std::to_string(id) + "/deny",
                boost::json::serialize(boost::json::object{{"reason", reason}}))
              .is_null();
}

void msca_server::set_faults(const msca_faults& f) const {
  boost::json::object o{{"unavailable", f.unavailable}, {"delay_ms", f.delay_ms}};
  if (f.http_status)
    o["http_status"] = *f.http_status;
  else
    o["http_status"] = nullptr;
  admin("POST", "/faults", boost::json::serialize(o));
}

msca_stats msca_server::stats() const {
  auto v = admin("GET", "/stats");
  const auto& o = v.as_object();
  return {num(o, "issued"), num(o, "pending"), num(o, "denied"), num(o, "cep_calls"), num(o, "ces_calls"),
          num(o, "faults"), num(o, "negotiate_refused")};
}

boost::json::value msca_server::raw_log() const { return admin("GET", "/log"); }

}  // namespace testbed
