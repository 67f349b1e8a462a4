#include "smtp_server.hpp"

#include <boost/json.hpp>

#include <signal.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "certs.hpp"

namespace testbed {

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string text_of(const boost::json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}

}  // namespace

std::string received_mail::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (lower(k) == lower(name)) return v;
  return {};
}

const received_mail::part* received_mail::part_of(std::string_view content_type) const {
  for (const auto& p : parts)
    if (p.content_type == content_type) return &p;
  return nullptr;
}

smtp_server::smtp_server(const std::filesystem::path& dir, smtp_server_options o)
    : dir_(dir), mail_dir_(dir / "mail") {
  std::filesystem::create_directories(mail_dir_);
  std::vector<std::string> argv{"/usr/bin/python3", std::string(CERTFLEET_SOURCE_DIR) + "/tests/testbed/smtp_server.py",
                                "--dir", mail_dir_.string()};
  if (o.starttls) {
    auto ca = make_certificate({.common_name = "certfleet testbed SMTP CA", .is_ca = true});
    auto leaf = make_certificate(
        {.common_name = "localhost", .dns_sans = {"localhost"}, .ip_sans = {"127.0.0.1"}, .issuer = &ca});
    write_file(dir_ / "smtp.crt", leaf.cert_pem);
    write_file(dir_ / "smtp.key", leaf.key_pem);
    ca_pem_ = ca.cert_pem;
    argv.insert(argv.end(), {"--cert", (dir_ / "smtp.crt").string(), "--key", (dir_ / "smtp.key").string()});
  }
  if (!o.user.empty()) argv.insert(argv.end(), {"--auth", o.user + ":" + o.password});
  for (const auto& m : o.auth_exclude) argv.insert(argv.end(), {"--auth-exclude", m});
  if (o.plain_auth) argv.push_back("--plain-auth");
  if (!o.refuse_rcpt_suffix.empty()) argv.insert(argv.end(), {"--refuse-rcpt", o.refuse_rcpt_suffix});
  if (!o.defer_rcpt_suffix.empty()) argv.insert(argv.end(), {"--defer-rcpt", o.defer_rcpt_suffix});
  if (o.drop_data) argv.push_back("--drop-data");
  // The script binds port 0 and says which port it got: no race with other tests for a port.
  proc_ = std::make_unique<process>(argv, std::map<std::string, std::string>{{"PYTHONDONTWRITEBYTECODE", "1"}},
                                    (dir_ / "smtp").string());
  auto line = proc_->wait_for_stdout("listening 127.0.0.1:", std::chrono::seconds(30));
  if (line.empty()) throw std::runtime_error("smtp_server did not start: " + proc_->stderr_text());
  port_ = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
}

smtp_server::~smtp_server() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(5)) == -1) proc_->signal(SIGKILL);
}

std::vector<received_mail> smtp_server::messages() const {
  std::vector<received_mail> out;
  for (int n = 1;; ++n) {
    auto json_path = mail_dir_ / ("msg-" + std::to_string(n) + ".json");
    if (!std::filesystem::exists(json_path)) break;
    auto v = boost::json::parse(slurp(json_path)).as_object();
    received_mail m;
    m.mail_from = text_of(v, "mail_from");
    for (const auto& r : v.at("rcpt_tos").as_array()) m.rcpt_tos.emplace_back(r.as_string());
    m.tls = v.at("tls").as_bool();
    m.authenticated = v.at("authenticated").as_bool();
    m.auth_login = text_of(v, "auth_login");
    m.content_type = text_of(v, "content_type");
    for (const auto& h : v.at("headers").as_array())
      m.headers.emplace_back(std::string(h.as_array()[0].as_string()), std::string(h.as_array()[1].as_string()));
    for (const auto& p : v.at("parts").as_array()) {
      const auto& po = p.as_object();
      m.parts.push_back({text_of(po, "content_type"), text_of(po, "charset"), text_of(po, "transfer_encoding"),
                         text_of(po, "text")});
    }
    m.raw = slurp(mail_dir_ / ("msg-" + std::to_string(n) + ".eml"));
    out.push_back(std::move(m));
  }
  return out;
}

std::size_t smtp_server::count() const {
  std::size_t n = 0;
  while (std::filesystem::exists(mail_dir_ / ("msg-" + std::to_string(n + 1) + ".json"))) ++n;
  return n;
}

bool smtp_server::wait_for(std::size_t n, std::chrono::milliseconds timeout) const {
  auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (count() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return count() >= n;
}

}  // namespace testbed
