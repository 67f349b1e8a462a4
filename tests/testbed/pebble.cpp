#include "pebble.hpp"

#include <signal.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "certs.hpp"
#include "http_client.hpp"
#include "sshd.hpp"  // free_port

namespace testbed {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// A blocking HTTPS GET to 127.0.0.1 that verifies the server against `ca_pem` (pebble's
// management interface): {status, body}; status 0 with the reason in body when it failed.
std::pair<int, std::string> https_get(std::uint16_t port, const std::string& target, const std::string& ca_pem) {
  try {
    asio::io_context ioc;
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.add_certificate_authority(asio::buffer(ca_pem));
    ctx.set_verify_mode(asio::ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream.native_handle()), "127.0.0.1");
    beast::get_lowest_layer(stream).expires_after(15s);
    beast::get_lowest_layer(stream).connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    stream.handshake(asio::ssl::stream_base::client);
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
    req.set(http::field::connection, "close");
    http::write(stream, req);
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(stream, buf, res);
    beast::error_code ignored;
    beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
    return {static_cast<int>(res.result_int()), res.body()};
  } catch (const std::exception& e) {
    return {0, e.what()};
  }
}

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

bool port_accepts(std::uint16_t port) {
  try {
    asio::io_context ioc;
    tcp::socket s(ioc);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    return !ec;
  } catch (...) {
    return false;
  }
}

void stop(std::unique_ptr<process>& p) {
  if (!p) return;
  if (p->running()) {
    p->signal(SIGTERM);
    if (p->wait(5000ms) < 0) p->signal(SIGKILL);
  }
  p.reset();
}

}  // namespace

pebble::pebble(const std::filesystem::path& dir, pebble_options o) : dir_(dir) {
  std::filesystem::create_directories(dir_);
  // pebble's own HTTPS identity: a test CA and a leaf for localhost and 127.0.0.1.
  auto ca = make_certificate({.common_name = "certfleet test pebble TLS CA", .is_ca = true});
  auto leaf = make_certificate(
      {.common_name = "localhost", .dns_sans = {"localhost"}, .ip_sans = {"127.0.0.1"}, .issuer = &ca});
  tls_ca_pem_ = ca.cert_pem;
  write_file(dir_ / "pebble-tls.crt", leaf.cert_pem + ca.cert_pem);
  write_file(dir_ / "pebble-tls.key", leaf.key_pem);

  std::map<std::string, std::string> env{{"PEBBLE_VA_NOSLEEP", "1"}};
  if (o.nonce_reject_percent) env["PEBBLE_WFE_NONCEREJECT"] = std::to_string(*o.nonce_reject_percent);
  if (o.authz_reuse_percent) env["PEBBLE_AUTHZREUSE"] = std::to_string(*o.authz_reuse_percent);

  std::string last_log;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    management_port_ = free_port();
    if (management_port_ == port_) continue;
    boost::json::object p;
    p["listenAddress"] = "127.0.0.1:" + std::to_string(port_);
    p["managementListenAddress"] = "127.0.0.1:" + std::to_string(management_port_);
    p["certificate"] = (dir_ / "pebble-tls.crt").string();
    p["privateKey"] = (dir_ / "pebble-tls.key").string();
    // Challenge ports for http-01/tls-alpn-01, which these tests never use.
    p["httpPort"] = 5002;
    p["tlsPort"] = 5001;
    p["ocspResponderURL"] = "";
    p["externalAccountBindingRequired"] = !o.eab_keys.empty();
    if (!o.eab_keys.empty()) {
      boost::json::object keys;
      for (const auto& [kid, key] : o.eab_keys) keys[kid] = key;
      p["externalAccountMACKeys"] = std::move(keys);
    }
    if (o.validity_s) p["certificateValidityPeriod"] = o.validity_s;
    if (!o.domain_blocklist.empty()) {
      boost::json::array blocked;
      for (const auto& d : o.domain_blocklist) blocked.emplace_back(d);
      p["domainBlocklist"] = std::move(blocked);
    }
    write_file(dir_ / "pebble-config.json", boost::json::serialize(boost::json::object{{"pebble", p}}));

    std::vector<std::string> argv{"/usr/bin/pebble", "-config", (dir_ / "pebble-config.json").string()};
    if (!o.dns_server.empty()) argv.insert(argv.end(), {"-dnsserver", o.dns_server});
    proc_ = std::make_unique<process>(argv, env, (dir_ / "pebble").string());
    // The last line pebble prints before it serves; the port may still have been taken by
    // someone else between free_port() and pebble's bind, so check it is ours and alive.
    auto line = proc_->wait_for_stdout("ACME directory available at", 30s);
    if (!line.empty()) {
      // Both listeners answer (the management one starts in its own goroutine).
      for (int i = 0; i < 100 && !(port_accepts(port_) && port_accepts(management_port_)); ++i)
        std::this_thread::sleep_for(50ms);
      if (proc_->running() && https_get(management_port_, "/roots/0", tls_ca_pem_).first == 200) return;
    }
    last_log = proc_->stdout_text() + proc_->stderr_text();
    stop(proc_);
  }
  throw std::runtime_error("pebble did not start: " + last_log);
}

pebble::~pebble() { stop(proc_); }

std::string pebble::directory_url() const { return "https://127.0.0.1:" + std::to_string(port_) + "/dir"; }

std::string pebble::root_pem() const {
  auto [status, body] = https_get(management_port_, "/roots/0", tls_ca_pem_);
  if (status != 200) throw std::runtime_error("pebble /roots/0 answered " + std::to_string(status) + ": " + body);
  return body;
}

pebble_cert_status pebble::certificate_status(const std::string& serial_hex) const {
  pebble_cert_status out;
  auto [status, body] = https_get(management_port_, "/cert-status-by-serial/" + serial_hex, tls_ca_pem_);
  out.http_status = status;
  out.body = body;
  if (status != 200) return out;
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return out;
  if (auto* s = v.as_object().if_contains("Status"); s && s->is_string()) out.status = std::string(s->as_string());
  if (auto* r = v.as_object().if_contains("Reason"); r && r->is_int64()) out.reason = static_cast<int>(r->as_int64());
  return out;
}

// ---- pebble-challtestsrv ---------------------------------------------------------------------

challtestsrv::challtestsrv(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::string last_log;
  for (int attempt = 0; attempt < 5; ++attempt) {
    dns_port_ = free_port();
    management_port_ = free_port();
    if (dns_port_ == management_port_) continue;
    std::string dns = "127.0.0.1:" + std::to_string(dns_port_);
    std::string mgmt = "127.0.0.1:" + std::to_string(management_port_);
    proc_ = std::make_unique<process>(
        std::vector<std::string>{"/usr/bin/pebble-challtestsrv", "-defaultIPv6", "", "-defaultIPv4", "127.0.0.1", "-dns01",
                                 dns, "-http01", "", "-https01", "", "-tlsalpn01", "", "-management", mgmt},
        std::map<std::string, std::string>{}, (dir / "challtestsrv").string());
    for (int i = 0; i < 200 && proc_->running(); ++i) {
      // Ready when the management API answers and the DNS server has said it listens.
      if (port_accepts(management_port_) && port_accepts(dns_port_) && clear_txt("certfleet-probe.test")) return;
      std::this_thread::sleep_for(50ms);
    }
    last_log = proc_->stdout_text() + proc_->stderr_text();
    stop(proc_);
  }
  throw std::runtime_error("pebble-challtestsrv did not start: " + last_log);
}

challtestsrv::~challtestsrv() { stop(proc_); }

bool challtestsrv::post(const std::string& path, const std::string& body) {
  http_client c("127.0.0.1", management_port_, 10s);
  auto r = c.post(path, body);
  return r.status == 200;
}

bool challtestsrv::set_txt(const std::string& host, const std::string& value) {
  std::string fqdn = host.empty() || host.back() != '.' ? host + "." : host;
  return post("/set-txt", boost::json::serialize(boost::json::object{{"host", fqdn}, {"value", value}}));
}

bool challtestsrv::clear_txt(const std::string& host) {
  std::string fqdn = host.empty() || host.back() != '.' ? host + "." : host;
  return post("/clear-txt", boost::json::serialize(boost::json::object{{"host", fqdn}}));
}

}  // namespace testbed
