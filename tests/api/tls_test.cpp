// TLS on the listener (issue 19), against the real binary: curl and `openssl s_client` as the
// TLS clients, the live log WebSocket over TLS, the Secure session cookie, the plain metrics
// listener, bad certificate/key files refused at start naming the setting, SIGHUP re-reading
// the files, a managed certificate (tls_certificate) swapped under load with no failed request,
// and systemd's notifications (READY, WATCHDOG, STOPPING) on a NOTIFY_SOCKET the test reads.
#include "certfleet/api/alpn.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"
#include "certs.hpp"
#include "http_client.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"
#include "tls_client.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <fstream>
#include <regex>
#include <thread>

using namespace std::chrono_literals;

namespace {

const std::string server_name = "cf.test";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}
std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// The server logs (spdlog) to stderr: waits until a line there contains `needle`.
bool wait_for_log(testbed::process& p, const std::string& needle, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (p.stderr_text().find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

unsigned short port_after(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(" " + key + R"(=127\.0\.0\.1:(\d+))"))) return 0;
  return static_cast<unsigned short>(std::stoi(m[1]));
}

// A CA and two leaves for cf.test issued by it, as files in `dir`.
struct test_pki {
  testbed::pem_cert ca, leaf1, leaf2, stranger;
  std::string ca_file, cert_file, key_file;
  explicit test_pki(const testbed::temp_dir& dir) {
    testbed::cert_spec ca_spec;
    ca_spec.common_name = "certfleet test CA";
    ca_spec.is_ca = true;
    ca = testbed::make_certificate(ca_spec);
    testbed::cert_spec leaf;
    leaf.common_name = server_name;
    leaf.dns_sans = {server_name};
    leaf.issuer = &ca;
    leaf1 = testbed::make_certificate(leaf);
    leaf2 = testbed::make_certificate(leaf);
    testbed::cert_spec other;
    other.common_name = "stranger.test";
    stranger = testbed::make_certificate(other);
    ca_file = dir.file("ca.pem");
    cert_file = dir.file("tls.pem");
    key_file = dir.file("tls.key");
    write_file(ca_file, ca.cert_pem);
    write_file(cert_file, leaf1.cert_pem + ca.cert_pem);
    write_file(key_file, leaf1.key_pem);
  }
};

std::string curl_https(unsigned short port, const std::string& ca_file, const std::vector<std::string>& extra) {
  std::vector<std::string> argv{"/usr/bin/curl", "-sS", "--max-time", "20", "--cacert", ca_file, "--resolve",
                                server_name + ":" + std::to_string(port) + ":127.0.0.1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return testbed::run_command(argv, {}, 30s).second;
}

std::pair<int, std::string> s_client(unsigned short port, const std::string& ca_file, std::vector<std::string> extra) {
  // s_client reads the request from stdin: a shell gives it none (and ends the session).
  std::string cmd = "openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " -servername " + server_name +
                    " -CAfile " + ca_file + " -verify_hostname " + server_name + " -verify_return_error";
  for (const auto& e : extra) cmd += " " + e;
  return testbed::run_command({"/bin/sh", "-c", cmd + " < /dev/null"}, {}, 30s);
}

TEST(tls_alpn, finds_http11_at_a_name_boundary_and_stops_at_a_broken_list) {
  using certfleet::api::find_alpn_protocol;
  auto bytes = [](std::string_view s) {
    return std::vector<unsigned char>(s.begin(), s.end());
  };
  auto h2_then = bytes(std::string_view("\x02h2\x08http/1.1", 12));
  EXPECT_EQ(find_alpn_protocol(h2_then, "http/1.1"), std::optional<std::size_t>(4));
  EXPECT_EQ(find_alpn_protocol(bytes(std::string_view("\x02h2", 3)), "http/1.1"), std::nullopt);
  // "http/1.1" inside another name is not offered.
  EXPECT_EQ(find_alpn_protocol(bytes(std::string_view("\x0axhttp/1.1x", 11)), "http/1.1"), std::nullopt);
  // A length past the end, or an empty name, ends the walk.
  EXPECT_EQ(find_alpn_protocol(bytes(std::string_view("\x02h2\x09http/1.1", 12)), "http/1.1"), std::nullopt);
  EXPECT_EQ(find_alpn_protocol(bytes(std::string_view("\x00\x08http/1.1", 10)), "http/1.1"), std::nullopt);
  EXPECT_EQ(find_alpn_protocol({}, "http/1.1"), std::nullopt);
}

TEST(tls_listener, curl_s_client_websocket_cookie_metrics_listener_and_sighup) {
  testbed::temp_dir dir("certfleet-tls");
  test_pki pki(dir);
  const auto data = dir.file("var");
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0", "--set",
                      "tls_cert_file=" + pki.cert_file, "--set", "tls_key_file=" + pki.key_file, "--set",
                      "metrics_listen=127.0.0.1:0"},
                     {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 30s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  EXPECT_NE(line.find(" tls=on"), std::string::npos) << line;
  const auto port = port_after(line, "listen");
  const auto metrics_port = port_after(line, "metrics_listen");
  ASSERT_NE(port, 0) << line;
  ASSERT_NE(metrics_port, 0) << line;
  const auto token = read_file(data + "/owner-token");
  const auto base = "https://" + server_name + ":" + std::to_string(port);

  // curl verifies the chain against the test CA and the name.
  auto out = curl_https(port, pki.ca_file, {"-o", "/dev/null", "-w", "%{http_code} %{ssl_verify_result} %{http_version}",
                                            base + "/healthz"});
  EXPECT_EQ(out, "200 0 1.1");
  out = curl_https(port, pki.ca_file, {"-H", "Authorization: Bearer " + token, base + "/api/v1/projects"});
  EXPECT_NE(out.find("\"default\""), std::string::npos) << out;
  // Even a client that prefers HTTP/2 gets HTTP/1.1 (ALPN).
  out = curl_https(port, pki.ca_file, {"--http2", "-o", "/dev/null", "-w", "%{http_version}", base + "/healthz"});
  EXPECT_EQ(out, "1.1");
  // Plain HTTP to the TLS port gets no answer; it is HTTPS only.
  testbed::http_client plain("127.0.0.1", port, 5s);
  EXPECT_EQ(plain.get("/healthz").status, 0);

  // openssl s_client: TLS 1.3 by default, TLS 1.2 with a forward-secret AEAD cipher, nothing older
  // and no cipher without forward secrecy.
  auto [rc13, out13] = s_client(port, pki.ca_file, {});
  EXPECT_EQ(rc13, 0) << out13;
  EXPECT_NE(out13.find("Verify return code: 0 (ok)"), std::string::npos) << out13;
  EXPECT_NE(out13.find("New, TLSv1.3"), std::string::npos) << out13;
  auto [rc12, out12] = s_client(port, pki.ca_file, {"-tls1_2"});
  EXPECT_EQ(rc12, 0) << out12;
  EXPECT_TRUE(std::regex_search(out12, std::regex(R"(Cipher is ECDHE-ECDSA-(AES\d+-GCM-SHA\d+|CHACHA20-POLY1305))")))
      << out12;
  auto [rc11, out11] = s_client(port, pki.ca_file, {"-tls1_1"});
  EXPECT_NE(rc11, 0) << out11;
  auto [rcs, outs] = s_client(port, pki.ca_file, {"-tls1_2", "-cipher", "AES128-SHA"});
  EXPECT_NE(rcs, 0) << outs;
  EXPECT_EQ(outs.find("Cipher is AES128-SHA"), std::string::npos) << outs;

  // The browser's session cookie is Secure over TLS.
  out = curl_https(port, pki.ca_file, {"-i", "-X", "POST", "-H", "Content-Type: application/json", "--data",
                                       "{\"token\":\"" + token + "\"}", base + "/api/v1/session"});
  std::smatch cookie;
  ASSERT_TRUE(std::regex_search(out, cookie, std::regex(R"(set-cookie: (certfleet_session=[^\r\n]*))", std::regex::icase)))
      << out;
  EXPECT_NE(cookie[1].str().find("; Secure"), std::string::npos) << cookie[1];
  EXPECT_NE(cookie[1].str().find("HttpOnly"), std::string::npos) << cookie[1];

  // The live log stream over TLS (wss://) sends the job's lines and its end.
  testbed::https_client c(port, pki.ca.cert_pem, server_name);
  auto job = c.request("POST", "/api/v1/projects/default/jobs", R"({"type":"noop","payload":{"log":true}})", token);
  ASSERT_EQ(job.status, 201) << job.body << job.error;
  const auto id = std::string(job.json().at("id").as_string());
  testbed::wss_client ws(port, pki.ca.cert_pem, server_name);
  ASSERT_EQ(ws.connect("/api/v1/projects/default/jobs/" + id + "/logs/stream", token), 101);
  std::string end;
  int lines = 0;
  for (int i = 0; i < 20 && end.empty(); ++i) {
    auto m = ws.read(20s);
    if (m.closed) break;
    auto v = boost::json::parse(m.text);
    if (v.at("type") == "end") end = std::string(v.at("status").as_string());
    else lines += static_cast<int>(v.at("lines").as_array().size());
  }
  EXPECT_EQ(end, "completed");
  EXPECT_EQ(lines, 2);

  // The metrics listener: plain HTTP, health and metrics only.
  testbed::http_client m("127.0.0.1", metrics_port);
  EXPECT_EQ(m.get("/healthz").status, 200);
  auto metrics = m.get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("certfleet_tls_certificate_not_after_seconds "), std::string::npos);
  EXPECT_EQ(m.get("/api/v1/projects", token).status, 404);
  EXPECT_EQ(m.get("/jobs").status, 404);  // no UI either

  // SIGHUP reads the files again: new connections get the new certificate; a bad pair is refused
  // and the current one kept.
  const auto fp1 = testbed::pem_fingerprint(pki.leaf1.cert_pem);
  const auto fp2 = testbed::pem_fingerprint(pki.leaf2.cert_pem);
  testbed::https_client kept(port, pki.ca.cert_pem, server_name);
  ASSERT_EQ(kept.get("/healthz").status, 200);
  EXPECT_EQ(kept.peer_fingerprint(), fp1);
  write_file(pki.key_file, pki.stranger.key_pem);  // does not belong to the certificate
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(p, "does not belong to the certificate", 20s)) << p.stderr_text();
  {
    testbed::https_client fresh(port, pki.ca.cert_pem, server_name);
    EXPECT_EQ(fresh.get("/healthz").status, 200);
    EXPECT_EQ(fresh.peer_fingerprint(), fp1);
  }
  write_file(pki.cert_file, pki.leaf2.cert_pem + pki.ca.cert_pem);
  write_file(pki.key_file, pki.leaf2.key_pem);
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(p, "from now on", 20s)) << p.stderr_text();
  testbed::https_client fresh(port, pki.ca.cert_pem, server_name);
  EXPECT_EQ(fresh.get("/healthz").status, 200);
  EXPECT_EQ(fresh.peer_fingerprint(), fp2);
  // The connection opened before keeps its certificate and goes on working.
  EXPECT_EQ(kept.get("/healthz").status, 200);
  EXPECT_EQ(kept.peer_fingerprint(), fp1);
  EXPECT_EQ(kept.connections_opened(), 1);

  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
}

// The value of one sample line of a Prometheus text ("" when absent).
std::string metric_value(const std::string& metrics, const std::string& series) {
  auto p = metrics.find("\n" + series + " ");
  if (p == std::string::npos) return {};
  auto e = metrics.find('\n', p + 1);
  return metrics.substr(p + 2 + series.size(), e - p - 2 - series.size());
}

// Starts `certfleet serve` over TLS (pki's files) with a plain metrics listener and `sets`;
// returns the HTTPS and metrics ports (0 on failure).
std::pair<unsigned short, unsigned short> start_tls_server(testbed::process& p) {
  auto line = p.wait_for_stdout("serving:", 30s);
  return {port_after(line, "listen"), port_after(line, "metrics_listen")};
}

// Issue 28: Strict-Transport-Security (http_hsts_max_age_s) on every response over TLS —
// answers, errors, UI — and never over plain HTTP (the metrics listener); 0 turns it off.
TEST(tls_listener, hsts_on_every_tls_response_and_never_over_plain_http) {
  testbed::temp_dir dir("certfleet-tls-hsts");
  test_pki pki(dir);
  const std::regex hsts(R"(\r\nstrict-transport-security: max-age=31536000\r\n)", std::regex::icase);
  {
    testbed::process p({CERTFLEET_BINARY, "serve", "--data", dir.file("var"), "--listen", "127.0.0.1:0", "--set",
                        "tls_cert_file=" + pki.cert_file, "--set", "tls_key_file=" + pki.key_file, "--set",
                        "metrics_listen=127.0.0.1:0"},
                       {}, dir.file("serve"));
    auto [port, metrics_port] = start_tls_server(p);
    ASSERT_NE(port, 0) << p.stderr_text();
    const auto base = "https://" + server_name + ":" + std::to_string(port);
    for (const auto& extra : std::vector<std::vector<std::string>>{{base + "/healthz"},
                                                                   {base + "/jobs"},
                                                                   {base + "/api/v1/projects"},  // 401
                                                                   {base + "/api/v1/nope"},      // 404
                                                                   {"-X", "OPTIONS", base + "/jobs"},  // 405
                                                                   {"-I", base + "/healthz"}}) {      // HEAD
      std::vector<std::string> args{"-i"};
      args.insert(args.end(), extra.begin(), extra.end());
      auto out = curl_https(port, pki.ca_file, args);
      EXPECT_TRUE(std::regex_search(out, hsts)) << fmt::format("{}", fmt::join(extra, " ")) << ":\n" << out;
    }
    testbed::http_client plain("127.0.0.1", metrics_port);
    auto r = plain.get("/healthz");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("strict-transport-security"), "");
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  }
  {
    testbed::process p({CERTFLEET_BINARY, "serve", "--data", dir.file("var"), "--listen", "127.0.0.1:0", "--set",
                        "tls_cert_file=" + pki.cert_file, "--set", "tls_key_file=" + pki.key_file, "--set",
                        "metrics_listen=127.0.0.1:0", "--set", "http_hsts_max_age_s=0"},
                       {}, dir.file("serve-off"));
    auto [port, metrics_port] = start_tls_server(p);
    ASSERT_NE(port, 0) << p.stderr_text();
    auto out = curl_https(port, pki.ca_file, {"-i", "https://" + server_name + ":" + std::to_string(port) + "/healthz"});
    EXPECT_NE(out.find("200"), std::string::npos) << out;
    EXPECT_FALSE(std::regex_search(out, std::regex("strict-transport-security", std::regex::icase))) << out;
    p.signal(SIGTERM);
    EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  }
}

// Issue 28: every failed reload of the listener's certificate is counted in
// certfleet_tls_certificate_reloads_total{outcome="failed"} — also a SIGHUP whose file cannot
// be read at all (removed, or mid-rename by the tool that renews it), which was only logged.
TEST(tls_listener, a_failed_certificate_reload_is_counted_whatever_failed) {
  testbed::temp_dir dir("certfleet-tls-reload");
  test_pki pki(dir);
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", dir.file("var"), "--listen", "127.0.0.1:0", "--set",
                      "tls_cert_file=" + pki.cert_file, "--set", "tls_key_file=" + pki.key_file, "--set",
                      "metrics_listen=127.0.0.1:0"},
                     {}, dir.file("serve"));
  auto [port, metrics_port] = start_tls_server(p);
  ASSERT_NE(port, 0) << p.stderr_text();
  testbed::http_client m("127.0.0.1", metrics_port);
  auto reloads = [&](const char* outcome) {
    return metric_value(m.get("/metrics").body,
                        fmt::format("certfleet_tls_certificate_reloads_total{{outcome=\"{}\"}}", outcome));
  };
  EXPECT_EQ(reloads("failed"), "0");
  EXPECT_EQ(reloads("ok"), "0");

  // The key file is gone (a renewal tool between its unlink and its rename).
  ASSERT_EQ(::rename(pki.key_file.c_str(), (pki.key_file + ".away").c_str()), 0);
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(p, "tls_key_file: cannot read", 20s)) << p.stderr_text();
  EXPECT_EQ(reloads("failed"), "1");
  ASSERT_EQ(::rename((pki.key_file + ".away").c_str(), pki.key_file.c_str()), 0);
  // A half-written certificate file.
  write_file(pki.cert_file, "-----BEGIN CERTIFICATE-----\nMIIB");
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(p, "tls_cert_file: the first PEM block", 20s)) << p.stderr_text();
  EXPECT_EQ(reloads("failed"), "2");
  // The same missing file again: counted again (each SIGHUP is a reload that failed).
  ASSERT_EQ(::rename(pki.key_file.c_str(), (pki.key_file + ".away").c_str()), 0);
  p.signal(SIGHUP);
  for (int i = 0; i < 100 && reloads("failed") != "3"; ++i) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(reloads("failed"), "3");
  ASSERT_EQ(::rename((pki.key_file + ".away").c_str(), pki.key_file.c_str()), 0);
  // A good pair again: ok, and the failures stay counted.
  write_file(pki.cert_file, pki.leaf2.cert_pem + pki.ca.cert_pem);
  write_file(pki.key_file, pki.leaf2.key_pem);
  p.signal(SIGHUP);
  ASSERT_TRUE(wait_for_log(p, "from now on", 20s)) << p.stderr_text();
  EXPECT_EQ(reloads("ok"), "1");
  EXPECT_EQ(reloads("failed"), "3");
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
}

// Each bad TLS configuration stops `certfleet serve` with exit code 2 and names the setting.
TEST(tls_listener, bad_certificate_and_key_files_are_refused_at_start_naming_the_setting) {
  testbed::temp_dir dir("certfleet-tls-bad");
  test_pki pki(dir);
  write_file(dir.file("garbage.pem"), "this is not PEM\n");
  write_file(dir.file("stranger.key"), pki.stranger.key_pem);
  write_file(dir.file("cert-only.pem"), pki.leaf1.cert_pem);
  write_file(dir.file("unreadable.pem"), pki.leaf1.cert_pem);
  ::chmod(dir.file("unreadable.pem").c_str(), 0);
  struct bad_case {
    std::vector<std::string> sets;
    std::string expect;  // in the message
  };
  const bool root = ::geteuid() == 0;  // root reads a mode-0 file anyway
  std::vector<bad_case> cases{
      {{"tls_cert_file=" + dir.file("missing.pem"), "tls_key_file=" + pki.key_file}, "tls_cert_file: cannot read"},
      {{"tls_cert_file=" + pki.cert_file, "tls_key_file=" + dir.file("missing.key")}, "tls_key_file: cannot read"},
      {{"tls_cert_file=" + dir.file("garbage.pem"), "tls_key_file=" + pki.key_file}, "tls_cert_file: "},
      {{"tls_cert_file=" + pki.cert_file, "tls_key_file=" + dir.file("garbage.pem")}, "tls_key_file: "},
      {{"tls_cert_file=" + pki.cert_file, "tls_key_file=" + dir.file("cert-only.pem")}, "tls_key_file: "},
      {{"tls_cert_file=" + pki.cert_file, "tls_key_file=" + dir.file("stranger.key")},
       "tls_key_file: the private key in"},
      {{"tls_cert_file=" + pki.cert_file}, "tls_key_file: tls_cert_file is set but tls_key_file is not"},
      {{"tls_key_file=" + pki.key_file}, "tls_cert_file: tls_key_file is set but tls_cert_file is not"},
      {{"tls_cert_file=" + pki.cert_file, "tls_key_file=" + pki.key_file, "tls_certificate=default/0123456789abcdef01234567"},
       "tls_certificate: set either"},
      {{"tls_certificate=default/0123456789abcdef01234567"}, "tls_certificate default/0123456789abcdef01234567: project default has no certificate"},
      {{"tls_certificate=nosuch/0123456789abcdef01234567"}, "there is no project named nosuch"},
      {{"tls_certificate=default"}, "tls_certificate must be PROJECT/ID"},
      {{"metrics_listen=nowhere"}, "metrics_listen must be ADDR:PORT"},
  };
  if (!root) cases.push_back({{"tls_cert_file=" + dir.file("unreadable.pem"), "tls_key_file=" + pki.key_file}, "tls_cert_file: cannot read"});
  for (const auto& c : cases) {
    std::vector<std::string> argv{CERTFLEET_BINARY, "serve", "--data", dir.file("var"), "--listen", "127.0.0.1:0"};
    for (const auto& s : c.sets) {
      argv.push_back("--set");
      argv.push_back(s);
    }
    auto [status, out] = testbed::run_command(argv, {}, 60s);
    EXPECT_EQ(status, 2) << c.expect << "\n" << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << "expected \"" << c.expect << "\" in:\n" << out;
    EXPECT_EQ(out.find("serving:"), std::string::npos) << out;
  }
}

// A managed certificate: the listener serves it and, when a new version is stored (here by the
// test writing the store file, as another certfleet process would), new handshakes get the new
// certificate within the poll interval while requests on new and kept-alive connections go on
// without a single failure; kept-alive connections keep the certificate they began with.
TEST(tls_listener, managed_certificate_swaps_under_load_without_a_failed_request) {
  testbed::temp_dir dir("certfleet-tls-swap");
  test_pki pki(dir);
  const auto data = dir.file("var");
  const auto fp1 = testbed::pem_fingerprint(pki.leaf1.cert_pem);
  const auto fp2 = testbed::pem_fingerprint(pki.leaf2.cert_pem);
  auto cert_body = [&](const testbed::pem_cert& leaf) {
    return boost::json::serialize(boost::json::object{
        {"name", "listener"}, {"cert_pem", leaf.cert_pem}, {"chain_pem", pki.ca.cert_pem}, {"key_pem", leaf.key_pem}});
  };

  // The certificate enters the catalog through the API of a first, plain start.
  std::string cert_id;
  {
    testbed::process first({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0"}, {}, dir.file("first"));
    auto line = first.wait_for_stdout("serving:", 30s);
    ASSERT_FALSE(line.empty()) << first.stderr_text();
    testbed::http_client c("127.0.0.1", port_after(line, "listen"));
    auto r = c.post("/api/v1/projects/default/certificates", cert_body(pki.leaf1), read_file(data + "/owner-token"));
    ASSERT_EQ(r.status, 201) << r.body;
    cert_id = std::string(r.json().at("id").as_string());
    first.signal(SIGTERM);
    ASSERT_EQ(first.wait(30s), 0);
  }
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0", "--set",
                      "tls_certificate=default/" + cert_id, "--set", "tls_certificate_poll_ms=1000"},
                     {}, dir.file("serve"));
  auto line = p.wait_for_stdout("serving:", 30s);
  ASSERT_FALSE(line.empty()) << p.stderr_text();
  const auto port = port_after(line, "listen");
  const auto token = read_file(data + "/owner-token");

  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, kept_requests{0}, new_requests{0};
  std::atomic<bool> saw_new{false};
  std::mutex mu;
  std::vector<std::string> failure_text;
  std::string kept_fp_first, kept_fp_last;
  int kept_connections = 0;
  std::vector<std::vector<std::string>> new_fps(2);  // per thread: what each new connection saw, in order
  auto note_failure = [&](const testbed::http_response& r, const char* who) {
    ++failures;
    std::lock_guard lk(mu);
    failure_text.push_back(fmt::format("{}: status {} {} {}", who, r.status, r.error, r.body.substr(0, 200)));
  };
  std::thread kept([&] {
    testbed::https_client c(port, pki.ca.cert_pem, server_name, 20s);
    while (!stop) {
      auto r = c.get("/api/v1/projects", token);
      if (r.status != 200) note_failure(r, "kept-alive");
      ++kept_requests;
      std::lock_guard lk(mu);
      if (kept_fp_first.empty()) kept_fp_first = c.peer_fingerprint();
      kept_fp_last = c.peer_fingerprint();
      kept_connections = c.connections_opened();
    }
  });
  std::vector<std::thread> fresh;
  for (int t = 0; t < 2; ++t)
    fresh.emplace_back([&, t] {
      while (!stop) {
        testbed::https_client c(port, pki.ca.cert_pem, server_name, 20s);
        auto r = c.get("/healthz");
        if (r.status != 200) note_failure(r, "new connection");
        ++new_requests;
        auto fp = c.peer_fingerprint();
        if (fp == fp2) saw_new = true;
        std::lock_guard lk(mu);
        new_fps[t].push_back(fp);
      }
    });
  auto wait_until = [](auto pred, std::chrono::seconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!pred() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
    return pred();
  };
  ASSERT_TRUE(wait_until([&] { return new_requests > 20 && kept_requests > 20; }, 60s));

  // A new version, written straight into the store file (another process's write).
  {
    auto st = certfleet::store::open_sqlite({data + "/certfleet.db", 1, 10000, false});
    ASSERT_TRUE(st) << st.error().message;
    auto key = certfleet::load_key_file(data + "/certfleet.key");
    ASSERT_TRUE(key) << key.error().message;
    auto nc = certfleet::catalog::parse_certificate_request(cert_body(pki.leaf2), testbed::unix_now_ms());
    ASSERT_TRUE(nc) << nc.error().message;
    auto project = testbed::run_sync((*st)->projects().find_by_name("default"));
    ASSERT_TRUE(project);
    auto obj = certfleet::catalog::make_certificate_object(*nc, *key, cert_id, project->id, testbed::unix_now_ms());
    ASSERT_TRUE(obj) << obj.error().message;
    certfleet::store::tx_fn write = [&](certfleet::store::catalog_tx& tx) -> certfleet::result<void> {
      if (auto d = tx.delete_object(project->id, certfleet::store::kind_certificate, cert_id); !d) return d;
      auto ins = tx.insert_object(*obj);
      if (!ins) return std::move(ins).error();
      return {};
    };
    auto w = testbed::run_sync((*st)->catalog().transact(write));
    ASSERT_TRUE(w) << w.error().message;
    (*st)->close();
  }
  const auto swapped_at = new_requests.load();
  EXPECT_TRUE(wait_until([&] { return saw_new.load(); }, 30s)) << "no new connection got the new certificate";
  // More load on the new certificate, then stop.
  const auto after = new_requests.load();
  wait_until([&] { return new_requests > after + 20; }, 60s);
  stop = true;
  kept.join();
  for (auto& t : fresh) t.join();

  std::lock_guard lk(mu);
  EXPECT_EQ(failures.load(), 0) << fmt::format("{}", fmt::join(failure_text, "\n"));
  EXPECT_GT(swapped_at, 0);
  // New handshakes (each thread's in order): the old certificate, then the new one, never the
  // old one again.
  for (const auto& seen : new_fps) {
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.front(), fp1);
    auto first_new = std::find(seen.begin(), seen.end(), fp2);
    ASSERT_NE(first_new, seen.end());
    EXPECT_EQ(std::count(first_new, seen.end(), fp1), 0);
    EXPECT_EQ(std::count(seen.begin(), first_new, fp2), 0);
  }
  // The kept-alive connection was never dropped and kept its certificate.
  EXPECT_EQ(kept_connections, 1);
  EXPECT_EQ(kept_fp_first, fp1);
  EXPECT_EQ(kept_fp_last, fp1);
  EXPECT_TRUE(wait_for_log(p, fp2, 5s)) << "the swap is logged with the new fingerprint";

  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
}

// Type=notify: READY=1 once it listens, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 on
// SIGTERM, each a datagram on the unix socket NOTIFY_SOCKET names (here one the test binds).
TEST(tls_listener, sd_notify_ready_watchdog_and_stopping_on_notify_socket) {
  testbed::temp_dir dir("certfleet-notify");
  const auto sock_path = dir.file("notify.sock");
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, sock_path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::vector<std::string> got;
  auto receive_until = [&](const std::string& needle, std::chrono::seconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      char buf[4096];
      auto n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        got.emplace_back(buf, static_cast<std::size_t>(n));
        if (got.back().find(needle) != std::string::npos) return true;
      }
    }
    return false;
  };
  testbed::process p({CERTFLEET_BINARY, "serve", "--data", dir.file("var"), "--listen", "127.0.0.1:0"},
                     {{"NOTIFY_SOCKET", sock_path}, {"WATCHDOG_USEC", "400000"}}, dir.file("serve"));
  ASSERT_TRUE(receive_until("READY=1", 30s)) << p.stderr_text();
  EXPECT_NE(got.back().find("MAINPID=" + std::to_string(p.pid())), std::string::npos) << got.back();
  // Already listening when READY=1 arrives.
  EXPECT_FALSE(p.wait_for_stdout("serving:", 1s).empty());
  int pings = 0;
  for (int i = 0; i < 3; ++i) pings += receive_until("WATCHDOG=1", 5s);
  EXPECT_EQ(pings, 3);
  p.signal(SIGTERM);
  EXPECT_TRUE(receive_until("STOPPING=1", 30s));
  EXPECT_EQ(p.wait(30s), 0) << p.stderr_text();
  ::close(fd);
}

}  // namespace
