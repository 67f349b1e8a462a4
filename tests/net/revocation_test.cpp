// Revocation checks (revocation.hpp) against real peers: a CA run by the `openssl ca` CLI (index,
// revocation, CRLs), `openssl ocsp` as responder (offline with -reqin/-respout, and live in its
// own network namespace behind a relay), python's http.server for CRL downloads. Everything
// listens on 127.0.0.1 (or inside the responder's private namespace) and is stopped by PID.
#include "certfleet/net/revocation.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "certfleet/net/http.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "tcp_proxy.hpp"
#include "temp_dir.hpp"

namespace {

using namespace certfleet;
using namespace certfleet::net;
using namespace std::chrono_literals;

constexpr std::int64_t day_ms = 86'400'000;

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// The set-up is not under test: a failing openssl command stops the suite with its output.
std::string must_run(std::vector<std::string> argv) {
  std::string line;
  for (auto& a : argv) line += a + " ";
  auto [status, out] = testbed::run_command(std::move(argv), {}, 30s);
  if (status != 0) throw std::runtime_error("`" + line + "` exited " + std::to_string(status) + ": " + out);
  return out;
}

// A port nothing listens on right now (the kernel's pick, released for the peer to take).
std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Polls until `open()` says yes or the peer process died; false after `limit`.
template <class F>
bool wait_until(F open, testbed::process& peer, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (open()) return true;
    if (!peer.running()) return false;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// A TCP relay from 127.0.0.1:<port()> in our namespace to 127.0.0.1:<target_port> inside the
// network namespace of process `pid`: the upstream socket is made by a short-lived thread that
// joined that namespace (a socket stays in the namespace it was created in).
class netns_relay {
 public:
  netns_relay(int pid, std::uint16_t target_port, std::uint16_t listen_port)
      : pid_(pid), target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(listen_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int one = 1;  // a relay of an earlier test may have left connections in TIME_WAIT on this port
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("relay: cannot listen");
    port_ = ntohs(a.sin_port);
    if (::pipe2(stop_, O_CLOEXEC) != 0) throw std::runtime_error("relay: pipe");
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~netns_relay() {
    char c = 1;
    (void)!::write(stop_[1], &c, 1);
    acceptor_.join();
    for (auto& t : pumps_) t.join();
    ::close(listen_fd_);
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  std::uint16_t port() const { return port_; }

  // A connection to the target inside the namespace; -1 when it fails. `why` says which step.
  int connect_inside(std::string* why = nullptr) {
    int fd = -1;
    std::string failure;
    std::thread t([&] {
      int ns = ::open(("/proc/" + std::to_string(pid_) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
      if (ns < 0) { failure = "open ns"; return; }
      int rc = ::setns(ns, CLONE_NEWNET);
      ::close(ns);
      if (rc != 0) { failure = std::string("setns: ") + std::strerror(errno); return; }
      fd = connect_loopback(target_port_);
      if (fd < 0) failure = "connect";
    });
    t.join();
    if (why) *why = failure;
    return fd;
  }

 private:
  void accept_loop() {
    for (;;) {
      pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents) return;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      int upstream = connect_inside();
      if (upstream < 0) {
        ::close(client);
        continue;
      }
      pumps_.emplace_back([this, client, upstream] { pump(client, upstream); });
    }
  }
  // Both directions until both have ended (a half-close is passed on) or the relay stops.
  void pump(int a, int b) {
    bool a_open = true, b_open = true;
    char buf[16384];
    while (a_open || b_open) {
      pollfd p[3] = {{a, static_cast<short>(a_open ? POLLIN : 0), 0},
                     {b, static_cast<short>(b_open ? POLLIN : 0), 0},
                     {stop_[0], POLLIN, 0}};
      if (::poll(p, 3, -1) < 0) continue;
      if (p[2].revents) break;
      for (int i = 0; i < 2; ++i) {
        int from = i == 0 ? a : b, to = i == 0 ? b : a;
        bool& open = i == 0 ? a_open : b_open;
        if (!open || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(from, buf, sizeof buf);
        if (n <= 0) {
          open = false;
          ::shutdown(to, SHUT_WR);
          continue;
        }
        for (ssize_t off = 0; off < n;) {
          ssize_t w = ::write(to, buf + off, static_cast<std::size_t>(n - off));
          if (w <= 0) { a_open = b_open = false; break; }
          off += w;
        }
      }
    }
    ::close(a);
    ::close(b);
  }

  int pid_;
  std::uint16_t target_port_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  int stop_[2] = {-1, -1};
  std::thread acceptor_;
  std::vector<std::thread> pumps_;  // only the acceptor adds, and it is joined first
};

// One CA run by `openssl ca` in its own directory.
struct cli_ca {
  std::string dir, cnf, cert, key;

  cli_ca(const std::string& directory, const std::string& subject, std::uint16_t crl_port, std::uint16_t ocsp_port)
      : dir(directory), cnf(directory + "/ca.cnf"), cert(directory + "/ca.pem"), key(directory + "/ca.key") {
    std::filesystem::create_directories(dir + "/newcerts");
    write_file(dir + "/index.txt", "");
    write_file(dir + "/serial", "1000\n");
    write_file(dir + "/crlnumber", "1000\n");
    std::string crl_url = "http://127.0.0.1:" + std::to_string(crl_port) + "/ca.crl";
    std::string ocsp_url = "http://127.0.0.1:" + std::to_string(ocsp_port) + "/";
    write_file(cnf, "[ ca ]\ndefault_ca = test_ca\n"
                    "[ test_ca ]\ndir = " + dir + "\ndatabase = $dir/index.txt\nnew_certs_dir = $dir/newcerts\n"
                    "certificate = $dir/ca.pem\nprivate_key = $dir/ca.key\nserial = $dir/serial\n"
                    "crlnumber = $dir/crlnumber\ndefault_md = sha256\ndefault_days = 30\ndefault_crl_days = 7\n"
                    "policy = policy_any\nunique_subject = no\n"
                    "[ policy_any ]\ncommonName = supplied\n"
                    "[ req ]\ndistinguished_name = req_dn\nprompt = no\n[ req_dn ]\nCN = placeholder\n"
                    "[ v3_ca ]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
                    "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid:always\n"
                    "[ leaf_ext ]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\n"
                    "subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n"
                    "crlDistributionPoints = URI:" + crl_url + "\nauthorityInfoAccess = OCSP;URI:" + ocsp_url + "\n"
                    "[ mixed_ext ]\nbasicConstraints = CA:FALSE\n"
                    "crlDistributionPoints = URI:ldap://ldap.example/cn=ca?certificateRevocationList, "
                    "URI:http://crl.example/a.crl, URI:http://crl.example/a.crl, URI:HTTPS://crl.example/b.crl\n"
                    "authorityInfoAccess = OCSP;URI:ftp://ocsp.example/, OCSP;URI:http://ocsp.example/, "
                    "caIssuers;URI:http://ca.example/ca.der\n"
                    "[ ocsp_ext ]\nbasicConstraints = CA:FALSE\nkeyUsage = critical,digitalSignature\n"
                    "extendedKeyUsage = OCSPSigning\n"
                    "[ plain_ext ]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\n");
    gen_key(key);
    must_run({"/usr/bin/openssl", "req", "-config", cnf, "-x509", "-new", "-key", key, "-subj", subject, "-days", "30",
              "-extensions", "v3_ca", "-out", cert});
  }

  static void gen_key(const std::string& path) {
    must_run({"/usr/bin/openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path});
  }

  // A certificate issued and recorded in index.txt; returns the PEM path (key next to it).
  std::string issue(const std::string& name, const std::string& extensions) {
    std::string base = dir + "/" + name;
    gen_key(base + ".key");
    must_run({"/usr/bin/openssl", "req", "-config", cnf, "-new", "-key", base + ".key", "-subj", "/CN=" + name,
              "-out", base + ".csr"});
    must_run({"/usr/bin/openssl", "ca", "-batch", "-config", cnf, "-extensions", extensions, "-notext", "-in",
              base + ".csr", "-out", base + ".pem"});
    return base + ".pem";
  }

  // Issued with `openssl x509 -req`: the CA's index never hears of it.
  std::string issue_unrecorded(const std::string& name, const std::string& extensions, const std::string& serial) {
    std::string base = dir + "/" + name;
    gen_key(base + ".key");
    must_run({"/usr/bin/openssl", "req", "-config", cnf, "-new", "-key", base + ".key", "-subj", "/CN=" + name,
              "-out", base + ".csr"});
    must_run({"/usr/bin/openssl", "x509", "-req", "-in", base + ".csr", "-CA", cert, "-CAkey", key, "-set_serial",
              serial, "-days", "30", "-extfile", cnf, "-extensions", extensions, "-out", base + ".pem"});
    return base + ".pem";
  }

  void revoke(const std::string& pem, const std::string& reason) {
    must_run({"/usr/bin/openssl", "ca", "-config", cnf, "-revoke", pem, "-crl_reason", reason});
  }

  // PEM CRL at `path`, valid for `days`.
  void gencrl(const std::string& path, const std::string& days = "7") {
    must_run({"/usr/bin/openssl", "ca", "-batch", "-config", cnf, "-gencrl", "-crldays", days, "-out", path});
  }
};

std::string to_der_crl(const std::string& pem_path, const std::string& der_path) {
  must_run({"/usr/bin/openssl", "crl", "-in", pem_path, "-outform", "DER", "-out", der_path});
  return read_file(der_path);
}

// Everything the suite shares, made once: three CAs, certificates, CRLs, the CRL web server.
struct pki {
  testbed::temp_dir tmp{"certfleet-revocation"};
  std::uint16_t crl_port = free_port();
  std::uint16_t ocsp_port = free_port();  // where the relay to the live responder listens
  std::unique_ptr<cli_ca> ca, fake, other;
  std::string ca_pem, good_pem, revoked_pem, unknown_pem, ocsp_signer_pem, plain_signer_pem, mixed_pem;
  std::string crl_pem, crl_der;
  std::int64_t revoked_after_ms = 0, revoked_before_ms = 0;
  std::string fake_crl, other_crl;
  std::string served;  // the CRL web server's directory

  pki() {
    ca = std::make_unique<cli_ca>(tmp.file("ca"), "/CN=certfleet test CA", crl_port, ocsp_port);
    // Same subject as the real CA, another key: its CRLs and signatures must not pass.
    fake = std::make_unique<cli_ca>(tmp.file("fake"), "/CN=certfleet test CA", crl_port, ocsp_port);
    other = std::make_unique<cli_ca>(tmp.file("other"), "/CN=other CA", crl_port, ocsp_port);
    ca_pem = read_file(ca->cert);
    good_pem = read_file(ca->issue("good", "leaf_ext"));
    std::string revoked_path = ca->issue("revoked", "leaf_ext");
    revoked_pem = read_file(revoked_path);
    unknown_pem = read_file(ca->issue_unrecorded("unknown", "leaf_ext", "0x7777"));
    mixed_pem = read_file(ca->issue_unrecorded("mixed", "mixed_ext", "0x7778"));
    ocsp_signer_pem = read_file(ca->issue("ocsp", "ocsp_ext"));
    plain_signer_pem = read_file(ca->issue("plain", "plain_ext"));
    // The index keeps whole seconds.
    revoked_after_ms = unix_now_ms() / 1000 * 1000;
    ca->revoke(revoked_path, "keyCompromise");
    revoked_before_ms = unix_now_ms();
    ca->gencrl(tmp.file("ca.crl.pem"));
    crl_pem = read_file(tmp.file("ca.crl.pem"));
    crl_der = to_der_crl(tmp.file("ca.crl.pem"), tmp.file("ca.crl.der"));
    fake->gencrl(tmp.file("fake.crl.pem"));
    fake_crl = read_file(tmp.file("fake.crl.pem"));
    other->gencrl(tmp.file("other.crl.pem"));
    other_crl = read_file(tmp.file("other.crl.pem"));
    served = tmp.file("www");
    std::filesystem::create_directories(served);
    write_file(served + "/ca.crl", crl_der);  // CAs publish DER
  }
};

pki* shared = nullptr;

class revocation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!shared) shared = new pki();
  }
  static void TearDownTestSuite() {
    delete shared;
    shared = nullptr;
  }
  pki& p() { return *shared; }

  // `openssl ocsp` answering `request` offline, signed by `signer` (a certificate of ca/ the
  // pki's directory by base name) unless given paths; extra args after.
  std::string offline_response(const std::string& request, const std::string& signer_cert,
                               const std::string& signer_key, std::vector<std::string> extra = {}) {
    std::string req = p().tmp.file("req.der"), resp = p().tmp.file("resp.der");
    write_file(req, request);
    std::remove(resp.c_str());
    std::vector<std::string> argv = {"/usr/bin/openssl", "ocsp", "-index", p().ca->dir + "/index.txt", "-CA",
                                     p().ca->cert, "-rsigner", signer_cert, "-rkey", signer_key, "-reqin", req,
                                     "-respout", resp, "-ndays", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    must_run(argv);
    return read_file(resp);
  }
  std::string delegated_response(const std::string& request) {
    return offline_response(request, p().ca->dir + "/ocsp.pem", p().ca->dir + "/ocsp.key");
  }
  std::string request_for(const std::string& leaf, std::string_view nonce = "nonce-0123456789") {
    auto r = ocsp_request_der(leaf, p().ca_pem, nonce);
    if (!r) throw std::runtime_error("ocsp_request_der: " + r.error().message);
    return *r;
  }
};

void expect_problem(const error& e, revocation_problem want, errc code) {
  EXPECT_EQ(e.field, revocation_problem_name(want)) << e.message;
  EXPECT_EQ(revocation_problem_of(e), want) << e.message;
  EXPECT_TRUE(e.is(code)) << errc_name(e.value()) << ": " << e.message;
}

template <class T>
void expect_refused(const result<T>& r, revocation_problem want, errc code = errc::invalid_argument) {
  ASSERT_FALSE(r.has_value()) << "expected " << revocation_problem_name(want);
  expect_problem(r.error(), want, code);
}

// ---------------------------------------------------------------------------------------------
// Where a certificate points

TEST_F(revocation, points_of_a_leaf_are_its_crl_and_ocsp_urls) {
  auto pts = revocation_points_of(p().good_pem);
  ASSERT_TRUE(pts) << pts.error().message;
  EXPECT_EQ(pts->crl_urls, std::vector<std::string>{"http://127.0.0.1:" + std::to_string(p().crl_port) + "/ca.crl"});
  EXPECT_EQ(pts->ocsp_urls, std::vector<std::string>{"http://127.0.0.1:" + std::to_string(p().ocsp_port) + "/"});
}

TEST_F(revocation, points_keep_only_http_urls_once_and_accept_der) {
  // The DER form of the same certificate.
  auto der_path = p().tmp.file("mixed.der");
  must_run({"/usr/bin/openssl", "x509", "-in", p().ca->dir + "/mixed.pem", "-outform", "DER", "-out", der_path});
  for (const std::string& text : {p().mixed_pem, read_file(der_path)}) {
    auto pts = revocation_points_of(text);
    ASSERT_TRUE(pts) << pts.error().message;
    EXPECT_EQ(pts->crl_urls, (std::vector<std::string>{"http://crl.example/a.crl", "HTTPS://crl.example/b.crl"}));
    EXPECT_EQ(pts->ocsp_urls, std::vector<std::string>{"http://ocsp.example/"});  // not ftp, not caIssuers
  }
}

TEST_F(revocation, points_of_a_certificate_without_them_are_empty_and_garbage_is_refused) {
  auto pts = revocation_points_of(p().ca_pem);
  ASSERT_TRUE(pts) << pts.error().message;
  EXPECT_TRUE(pts->crl_urls.empty());
  EXPECT_TRUE(pts->ocsp_urls.empty());
  expect_refused(revocation_points_of("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
                 revocation_problem::leaf);
  expect_refused(revocation_points_of(""), revocation_problem::leaf);
}

// ---------------------------------------------------------------------------------------------
// CRLs

TEST_F(revocation, crl_says_good_for_a_listed_issuers_unrevoked_leaf) {
  auto now = unix_now_ms();
  for (const auto& crl : {p().crl_pem, p().crl_der}) {
    auto v = check_crl(crl, p().ca_pem, p().good_pem, now);
    ASSERT_TRUE(v) << v.error().message;
    EXPECT_EQ(v->status, revocation_status::good);
    EXPECT_EQ(v->reason, "");
    EXPECT_LE(v->this_update_ms, now);
    EXPECT_GT(v->this_update_ms, now - 600'000);
    EXPECT_FALSE(v->next_update_assumed);
    EXPECT_NEAR(static_cast<double>(v->next_update_ms - v->this_update_ms), 7.0 * day_ms, 1000.0);
  }
  // Issued by the CA but never recorded: not on the CRL, so good as far as a CRL can say.
  auto v = check_crl(p().crl_der, p().ca_pem, p().unknown_pem, now);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->status, revocation_status::good);
}

TEST_F(revocation, crl_says_revoked_with_time_and_reason) {
  for (const auto& crl : {p().crl_pem, p().crl_der}) {
    auto v = check_crl(crl, p().ca_pem, p().revoked_pem, unix_now_ms());
    ASSERT_TRUE(v) << v.error().message;
    EXPECT_EQ(v->status, revocation_status::revoked);
    EXPECT_EQ(v->reason, "keyCompromise");
    EXPECT_GE(v->revoked_at_ms, p().revoked_after_ms);
    EXPECT_LE(v->revoked_at_ms, p().revoked_before_ms);
  }
}

TEST_F(revocation, crl_signed_by_another_key_under_the_same_name_is_a_bad_signature) {
  expect_refused(check_crl(p().fake_crl, p().ca_pem, p().good_pem, unix_now_ms()), revocation_problem::bad_signature);
}

TEST_F(revocation, crl_of_another_issuer_is_an_issuer_mismatch) {
  auto r = check_crl(p().other_crl, p().ca_pem, p().good_pem, unix_now_ms());
  expect_refused(r, revocation_problem::issuer_mismatch);
  EXPECT_NE(r.error().message.find("CN=other CA"), std::string::npos) << r.error().message;
}

TEST_F(revocation, crl_past_its_next_update_is_stale_and_one_from_the_future_is_refused) {
  auto now = unix_now_ms();
  auto r = check_crl(p().crl_der, p().ca_pem, p().revoked_pem, now + 8 * day_ms);
  expect_refused(r, revocation_problem::stale);
  EXPECT_NE(r.error().message.find("nextUpdate"), std::string::npos) << r.error().message;
  // Within the skew a peer's clock may run ahead; beyond it, refused.
  EXPECT_TRUE(check_crl(p().crl_der, p().ca_pem, p().good_pem, now - 60'000));
  expect_refused(check_crl(p().crl_der, p().ca_pem, p().good_pem, now - 3600'000), revocation_problem::not_yet_valid);
}

TEST_F(revocation, crl_made_with_a_short_life_is_stale_once_it_ended) {
  // A CRL whose nextUpdate is one hour after issue (`-crlhours 1`), checked two hours later.
  must_run({"/usr/bin/openssl", "ca", "-batch", "-config", p().ca->cnf, "-gencrl", "-crlhours", "1", "-out",
            p().tmp.file("short.crl.pem")});
  auto crl = read_file(p().tmp.file("short.crl.pem"));
  auto now = unix_now_ms();
  EXPECT_TRUE(check_crl(crl, p().ca_pem, p().good_pem, now));
  expect_refused(check_crl(crl, p().ca_pem, p().good_pem, now + 2 * 3600'000), revocation_problem::stale);
}

// A CRL without nextUpdate: `openssl ca` always writes one, so this one is signed here.
std::string crl_without_next_update(const std::string& ca_pem, const std::string& ca_key_path, std::int64_t this_update_ms) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> ca(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr), X509_free);
  std::string key_pem = read_file(ca_key_path);
  std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  std::unique_ptr<X509_CRL, decltype(&X509_CRL_free)> crl(X509_CRL_new(), X509_CRL_free);
  std::unique_ptr<ASN1_TIME, decltype(&ASN1_TIME_free)> t(ASN1_TIME_set(nullptr, this_update_ms / 1000), ASN1_TIME_free);
  if (!ca || !key || !crl || !t || !X509_CRL_set_version(crl.get(), 1) ||
      !X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(ca.get())) || !X509_CRL_set1_lastUpdate(crl.get(), t.get()) ||
      !X509_CRL_sign(crl.get(), key.get(), EVP_sha256()))
    throw std::runtime_error("cannot make a CRL");
  unsigned char* der = nullptr;
  int n = i2d_X509_CRL(crl.get(), &der);
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

TEST_F(revocation, crl_without_next_update_is_good_for_seven_days_then_stale) {
  auto now = unix_now_ms();
  auto crl = crl_without_next_update(p().ca_pem, p().ca->key, now - day_ms);
  auto v = check_crl(crl, p().ca_pem, p().good_pem, now);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->status, revocation_status::good);
  EXPECT_TRUE(v->next_update_assumed);
  EXPECT_EQ(v->next_update_ms, v->this_update_ms + assumed_validity_ms);
  auto stale = check_crl(crl, p().ca_pem, p().good_pem, now + 6 * day_ms + 3600'000);
  expect_refused(stale, revocation_problem::stale);
  EXPECT_NE(stale.error().message.find("no nextUpdate"), std::string::npos) << stale.error().message;
}

TEST_F(revocation, crl_over_the_bound_is_too_large_and_exactly_at_it_passes) {
  auto size = p().crl_der.size();
  expect_refused(check_crl(p().crl_der, p().ca_pem, p().good_pem, unix_now_ms(), size - 1), revocation_problem::too_large,
                 errc::payload_too_large);
  EXPECT_TRUE(check_crl(p().crl_der, p().ca_pem, p().good_pem, unix_now_ms(), size));
}

TEST_F(revocation, crl_garbage_is_malformed) {
  auto now = unix_now_ms();
  expect_refused(check_crl("this is not a CRL", p().ca_pem, p().good_pem, now), revocation_problem::malformed);
  expect_refused(check_crl("", p().ca_pem, p().good_pem, now), revocation_problem::malformed);
  expect_refused(check_crl(p().crl_der.substr(0, p().crl_der.size() - 5), p().ca_pem, p().good_pem, now),
                 revocation_problem::malformed);
  expect_refused(check_crl(p().crl_der + "x", p().ca_pem, p().good_pem, now), revocation_problem::malformed);
  expect_refused(check_crl("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n", p().ca_pem, p().good_pem, now),
                 revocation_problem::malformed);
}

TEST_F(revocation, crl_with_an_issuer_that_did_not_issue_the_leaf_is_refused) {
  auto other_ca = read_file(p().other->cert);
  expect_refused(check_crl(p().other_crl, other_ca, p().good_pem, unix_now_ms()), revocation_problem::issuer);
  // Same name as the issuer but another key: the leaf's signature tells them apart.
  expect_refused(check_crl(p().fake_crl, read_file(p().fake->cert), p().good_pem, unix_now_ms()), revocation_problem::issuer);
  expect_refused(check_crl(p().crl_der, p().ca_pem, "nonsense", unix_now_ms()), revocation_problem::leaf);
}

// ---------------------------------------------------------------------------------------------
// OCSP, offline: our request → `openssl ocsp -reqin … -respout …` → our checker

TEST_F(revocation, ocsp_request_is_what_openssl_reads) {
  auto req = request_for(p().good_pem);
  write_file(p().tmp.file("parsed.der"), req);
  auto text = must_run({"/usr/bin/openssl", "ocsp", "-reqin", p().tmp.file("parsed.der"), "-req_text"});
  EXPECT_NE(text.find("Hash Algorithm: sha1"), std::string::npos) << text;
  EXPECT_NE(text.find("OCSP Nonce"), std::string::npos) << text;
  EXPECT_NE(text.find("Serial Number: 1000"), std::string::npos) << text;
  expect_refused(ocsp_request_der(p().good_pem, p().ca_pem, std::string(33, 'n')), revocation_problem::nonce);
  expect_refused(ocsp_request_der("garbage", p().ca_pem, "n"), revocation_problem::leaf);
  expect_refused(ocsp_request_der(p().good_pem, read_file(p().other->cert), "n"), revocation_problem::issuer);
}

TEST_F(revocation, ocsp_good_revoked_and_unknown_from_a_delegated_responder) {
  auto now = unix_now_ms();
  auto good = check_ocsp_response(delegated_response(request_for(p().good_pem)), p().good_pem, p().ca_pem,
                                  "nonce-0123456789", now);
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->status, revocation_status::good);
  EXPECT_FALSE(good->next_update_assumed);
  EXPECT_NEAR(static_cast<double>(good->next_update_ms - good->this_update_ms), 1.0 * day_ms, 1000.0);

  auto revoked = check_ocsp_response(delegated_response(request_for(p().revoked_pem)), p().revoked_pem, p().ca_pem,
                                     "nonce-0123456789", now);
  ASSERT_TRUE(revoked) << revoked.error().message;
  EXPECT_EQ(revoked->status, revocation_status::revoked);
  EXPECT_EQ(revoked->reason, "keyCompromise");
  EXPECT_GE(revoked->revoked_at_ms, p().revoked_after_ms);
  EXPECT_LE(revoked->revoked_at_ms, p().revoked_before_ms);

  auto unknown = check_ocsp_response(delegated_response(request_for(p().unknown_pem)), p().unknown_pem, p().ca_pem,
                                     "nonce-0123456789", now);
  ASSERT_TRUE(unknown) << unknown.error().message;
  EXPECT_EQ(unknown->status, revocation_status::unknown);
}

TEST_F(revocation, ocsp_signed_by_the_issuer_itself_is_accepted) {
  auto v = check_ocsp_response(offline_response(request_for(p().revoked_pem), p().ca->cert, p().ca->key), p().revoked_pem,
                               p().ca_pem, "nonce-0123456789", unix_now_ms());
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->status, revocation_status::revoked);
}

TEST_F(revocation, ocsp_signed_by_an_unrelated_key_is_a_bad_signature) {
  auto now = unix_now_ms();
  auto req = request_for(p().revoked_pem);
  // A responder certificate of another CA, sent along in the response.
  auto r = check_ocsp_response(offline_response(req, p().other->cert, p().other->key), p().revoked_pem, p().ca_pem,
                               "nonce-0123456789", now);
  expect_refused(r, revocation_problem::bad_signature);
  EXPECT_NE(r.error().message.find("CN=other CA"), std::string::npos) << r.error().message;
  // The issuer's name as responder id, but another key's signature and no certificate sent.
  r = check_ocsp_response(offline_response(req, p().fake->cert, p().fake->key, {"-resp_no_certs"}), p().revoked_pem,
                          p().ca_pem, "nonce-0123456789", now);
  expect_refused(r, revocation_problem::bad_signature);
  EXPECT_NE(r.error().message.find("does not verify"), std::string::npos) << r.error().message;
  // A certificate of the issuer, but not one for OCSP signing.
  r = check_ocsp_response(offline_response(req, p().ca->dir + "/plain.pem", p().ca->dir + "/plain.key"), p().revoked_pem,
                          p().ca_pem, "nonce-0123456789", now);
  expect_refused(r, revocation_problem::bad_signature);
  EXPECT_NE(r.error().message.find("OCSPSigning"), std::string::npos) << r.error().message;
}

TEST_F(revocation, ocsp_for_another_certificate_is_a_mismatch) {
  auto resp = delegated_response(request_for(p().good_pem));
  expect_refused(check_ocsp_response(resp, p().revoked_pem, p().ca_pem, "nonce-0123456789", unix_now_ms()),
                 revocation_problem::cert_mismatch);
}

TEST_F(revocation, ocsp_nonce_must_match_when_echoed_and_may_be_absent) {
  auto now = unix_now_ms();
  auto resp = delegated_response(request_for(p().good_pem, "nonce-A"));
  expect_refused(check_ocsp_response(resp, p().good_pem, p().ca_pem, "nonce-B", now), revocation_problem::nonce_mismatch);
  EXPECT_TRUE(check_ocsp_response(resp, p().good_pem, p().ca_pem, "nonce-A", now));
  // A request without nonce gets a response without one: accepted whatever nonce we expected.
  auto bare = delegated_response(request_for(p().good_pem, ""));
  auto v = check_ocsp_response(bare, p().good_pem, p().ca_pem, "nonce-A", now);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->status, revocation_status::good);
}

// A good answer about `leaf` signed by the CA itself with chosen times (`openssl ocsp` always
// stamps now); next_update_s 0: none. No nonce.
std::string ocsp_answer_with_times(const pki& k, const std::string& leaf_pem, std::int64_t this_update_s,
                                   std::int64_t next_update_s) {
  auto read_cert = [](const std::string& pem) {
    std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
    return std::unique_ptr<X509, decltype(&X509_free)>(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), X509_free);
  };
  auto ca = read_cert(k.ca_pem), leaf = read_cert(leaf_pem);
  std::string key_pem = read_file(k.ca->key);
  std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr),
                                                          EVP_PKEY_free);
  std::unique_ptr<OCSP_BASICRESP, decltype(&OCSP_BASICRESP_free)> bs(OCSP_BASICRESP_new(), OCSP_BASICRESP_free);
  std::unique_ptr<OCSP_CERTID, decltype(&OCSP_CERTID_free)> id(OCSP_cert_to_id(nullptr, leaf.get(), ca.get()),
                                                               OCSP_CERTID_free);
  std::unique_ptr<ASN1_TIME, decltype(&ASN1_TIME_free)> tu(ASN1_TIME_set(nullptr, this_update_s), ASN1_TIME_free);
  std::unique_ptr<ASN1_TIME, decltype(&ASN1_TIME_free)> nu(next_update_s ? ASN1_TIME_set(nullptr, next_update_s) : nullptr,
                                                           ASN1_TIME_free);
  if (!ca || !leaf || !key || !bs || !id || !tu ||
      !OCSP_basic_add1_status(bs.get(), id.get(), V_OCSP_CERTSTATUS_GOOD, 0, nullptr, tu.get(), nu.get()) ||
      !OCSP_basic_sign(bs.get(), ca.get(), key.get(), EVP_sha256(), nullptr, OCSP_NOCERTS))
    throw std::runtime_error("cannot make an OCSP response");
  std::unique_ptr<OCSP_RESPONSE, decltype(&OCSP_RESPONSE_free)> resp(
      OCSP_response_create(OCSP_RESPONSE_STATUS_SUCCESSFUL, bs.get()), OCSP_RESPONSE_free);
  unsigned char* der = nullptr;
  int n = resp ? i2d_OCSP_RESPONSE(resp.get(), &der) : -1;
  if (n <= 0) throw std::runtime_error("cannot encode an OCSP response");
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

TEST_F(revocation, ocsp_freshness) {
  auto now = unix_now_ms();
  auto resp = delegated_response(request_for(p().good_pem));
  EXPECT_TRUE(check_ocsp_response(resp, p().good_pem, p().ca_pem, "nonce-0123456789", now + day_ms - 60'000));
  expect_refused(check_ocsp_response(resp, p().good_pem, p().ca_pem, "nonce-0123456789", now + 2 * day_ms),
                 revocation_problem::stale);
  std::int64_t now_s = now / 1000;
  // thisUpdate ahead of our clock: within the skew accepted, beyond it refused.
  EXPECT_TRUE(check_ocsp_response(ocsp_answer_with_times(p(), p().good_pem, now_s + 120, now_s + 3600), p().good_pem,
                                  p().ca_pem, "", now));
  expect_refused(check_ocsp_response(ocsp_answer_with_times(p(), p().good_pem, now_s + 3600, now_s + 7200), p().good_pem,
                                     p().ca_pem, "", now),
                 revocation_problem::not_yet_valid);
  // No nextUpdate: good for a week after thisUpdate, then stale.
  auto open_ended = ocsp_answer_with_times(p(), p().good_pem, now_s - 3600, 0);
  auto v = check_ocsp_response(open_ended, p().good_pem, p().ca_pem, "nonce", now);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_TRUE(v->next_update_assumed);
  EXPECT_EQ(v->next_update_ms, (now_s - 3600) * 1000 + assumed_validity_ms);
  expect_refused(check_ocsp_response(open_ended, p().good_pem, p().ca_pem, "nonce", now + 7 * day_ms),
                 revocation_problem::stale);
}

TEST_F(revocation, ocsp_unsuccessful_status_is_named) {
  std::unique_ptr<OCSP_RESPONSE, decltype(&OCSP_RESPONSE_free)> resp(
      OCSP_response_create(OCSP_RESPONSE_STATUS_TRYLATER, nullptr), OCSP_RESPONSE_free);
  unsigned char* der = nullptr;
  int n = i2d_OCSP_RESPONSE(resp.get(), &der);
  ASSERT_GT(n, 0);
  std::string bytes(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  auto r = check_ocsp_response(bytes, p().good_pem, p().ca_pem, "n", unix_now_ms());
  expect_refused(r, revocation_problem::responder_status, errc::conflict);
  EXPECT_NE(r.error().message.find("trylater"), std::string::npos) << r.error().message;
}

TEST_F(revocation, ocsp_garbage_and_oversize_are_refused) {
  auto now = unix_now_ms();
  auto resp = delegated_response(request_for(p().good_pem));
  expect_refused(check_ocsp_response("garbage", p().good_pem, p().ca_pem, "", now), revocation_problem::malformed);
  expect_refused(check_ocsp_response(resp + "x", p().good_pem, p().ca_pem, "", now), revocation_problem::malformed);
  expect_refused(check_ocsp_response(resp.substr(0, resp.size() / 2), p().good_pem, p().ca_pem, "", now),
                 revocation_problem::malformed);
  expect_refused(check_ocsp_response(std::string(max_ocsp_response_bytes + 1, '0'), p().good_pem, p().ca_pem, "", now),
                 revocation_problem::too_large, errc::payload_too_large);
}

// ---------------------------------------------------------------------------------------------
// OCSP, live: `openssl ocsp -port` in its own network namespace, reached through a relay

class live_responder {
 public:
  explicit live_responder(pki& k) {
    // Any port: nothing else lives in the responder's namespace.
    std::string cmd = "ip link set lo up && exec /usr/bin/openssl ocsp -index " + k.ca->dir + "/index.txt -port 8888 -rsigner " +
                      k.ca->dir + "/ocsp.pem -rkey " + k.ca->dir + "/ocsp.key -CA " + k.ca->cert + " -ndays 1 -ignore_err";
    proc_ = std::make_unique<testbed::process>(std::vector<std::string>{"/usr/bin/unshare", "-n", "/bin/sh", "-c", cmd},
                                               std::map<std::string, std::string>{}, k.tmp.file("ocsp-responder"));
    relay_ = std::make_unique<netns_relay>(proc_->pid(), 8888, k.ocsp_port);
    // Its "ACCEPT" line comes once it listens. No connect-and-close probe: the OpenSSL 3.0
    // responder hangs for good on a connection that ends without a request.
    ready_ = !proc_->wait_for_stdout("ACCEPT", 10s).empty();
  }
  bool ready() const { return ready_; }
  std::string why() const { return "responder stdout: " + proc_->stdout_text() + " stderr: " + proc_->stderr_text(); }
  std::uint16_t port() const { return relay_->port(); }

 private:
  std::unique_ptr<testbed::process> proc_;  // declared first: the relay stops before the responder
  std::unique_ptr<netns_relay> relay_;
  bool ready_ = false;
};

TEST_F(revocation, live_ocsp_responder_in_its_own_namespace_at_the_certificates_url) {
  live_responder responder(p());
  ASSERT_TRUE(responder.ready()) << responder.why();
  struct want_t {
    const std::string* leaf;
    revocation_status status;
  };
  for (auto [leaf, status] : {want_t{&p().good_pem, revocation_status::good}, want_t{&p().revoked_pem, revocation_status::revoked},
                              want_t{&p().unknown_pem, revocation_status::unknown}}) {
    // The URL the certificate names: the relay listens on the port the leaves were issued with.
    auto pts = revocation_points_of(*leaf);
    ASSERT_TRUE(pts) << pts.error().message;
    ASSERT_EQ(pts->ocsp_urls.size(), 1u);
    std::string nonce = "live-" + std::string(revocation_status_name(status));
    auto der = testbed::run_sync(query_ocsp(pts->ocsp_urls[0], request_for(*leaf, nonce), 5s, nullptr));
    ASSERT_TRUE(der) << der.error().message;
    auto v = check_ocsp_response(*der, *leaf, p().ca_pem, nonce, unix_now_ms());
    ASSERT_TRUE(v) << v.error().message;
    EXPECT_EQ(v->status, status) << revocation_status_name(v->status);
    if (status == revocation_status::revoked) {
      EXPECT_EQ(v->reason, "keyCompromise");
    }
  }
}

TEST_F(revocation, ocsp_responder_that_never_answers_times_out_within_the_deadline) {
  testbed::tcp_proxy hole(testbed::tcp_proxy::mode::blackhole, 0);
  auto started = std::chrono::steady_clock::now();
  auto r = testbed::run_sync(query_ocsp("http://127.0.0.1:" + std::to_string(hole.port()) + "/", request_for(p().good_pem),
                                        500ms, nullptr));
  auto took = std::chrono::steady_clock::now() - started;
  expect_refused(r, revocation_problem::timeout, errc::timeout);
  EXPECT_GE(took, 450ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(hole.connections(), 1u);
}

TEST_F(revocation, ocsp_egress_refused_and_closed_port_unreachable) {
  egress_policy none;
  auto r = testbed::run_sync(query_ocsp("http://127.0.0.1:9/", request_for(p().good_pem), 2s, &none));
  expect_refused(r, revocation_problem::egress, errc::forbidden);
  r = testbed::run_sync(query_ocsp("http://127.0.0.1:" + std::to_string(free_port()) + "/", request_for(p().good_pem), 2s, nullptr));
  expect_refused(r, revocation_problem::unreachable, errc::timeout);
  r = testbed::run_sync(query_ocsp("ldap://127.0.0.1/", request_for(p().good_pem), 2s, nullptr));
  expect_refused(r, revocation_problem::url);
}

// ---------------------------------------------------------------------------------------------
// CRL downloads from a real web server

class crl_server : public revocation {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testbed::process>(
        std::vector<std::string>{"/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1",
                                 std::to_string(p().crl_port), "--directory", p().served},
        std::map<std::string, std::string>{}, p().tmp.file("http-server"));
    bool up = wait_until(
        [&] {
          int fd = connect_loopback(p().crl_port);
          if (fd >= 0) ::close(fd);
          return fd >= 0;
        },
        *server_, 10s);
    ASSERT_TRUE(up) << server_->stderr_text();
  }
  void TearDown() override { server_.reset(); }
  std::string url(const std::string& name) { return "http://127.0.0.1:" + std::to_string(p().crl_port) + "/" + name; }

  std::unique_ptr<testbed::process> server_;
};

TEST_F(crl_server, fetch_from_the_certificates_distribution_point_then_check) {
  auto pts = revocation_points_of(p().revoked_pem);
  ASSERT_TRUE(pts);
  ASSERT_EQ(pts->crl_urls.size(), 1u);
  auto bytes = testbed::run_sync(fetch_crl(pts->crl_urls[0], 5s, default_max_crl_bytes, nullptr));
  ASSERT_TRUE(bytes) << bytes.error().message;
  EXPECT_EQ(*bytes, p().crl_der);
  auto v = check_crl(*bytes, p().ca_pem, p().revoked_pem, unix_now_ms());
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->status, revocation_status::revoked);
}

TEST_F(crl_server, fetch_of_a_missing_file_is_an_http_status) {
  auto r = testbed::run_sync(fetch_crl(url("missing.crl"), 5s, default_max_crl_bytes, nullptr));
  expect_refused(r, revocation_problem::http_status, errc::conflict);
  EXPECT_NE(r.error().message.find("HTTP 404"), std::string::npos) << r.error().message;
}

TEST_F(crl_server, fetch_over_the_bound_is_too_large) {
  auto size = p().crl_der.size();
  auto r = testbed::run_sync(fetch_crl(url("ca.crl"), 5s, size - 1, nullptr));
  expect_refused(r, revocation_problem::too_large, errc::payload_too_large);
  auto exact = testbed::run_sync(fetch_crl(url("ca.crl"), 5s, size, nullptr));
  ASSERT_TRUE(exact) << exact.error().message;
  EXPECT_EQ(exact->size(), size);
}

TEST_F(crl_server, fetch_respects_the_egress_policy) {
  auto allow = parse_egress_allow_list("127.0.0.1/32");
  ASSERT_TRUE(allow) << allow.error().message;
  auto ok = testbed::run_sync(fetch_crl(url("ca.crl"), 5s, default_max_crl_bytes, &*allow));
  ASSERT_TRUE(ok) << ok.error().message;
  auto elsewhere = parse_egress_allow_list("10.0.0.0/8");
  ASSERT_TRUE(elsewhere) << elsewhere.error().message;
  expect_refused(testbed::run_sync(fetch_crl(url("ca.crl"), 5s, default_max_crl_bytes, &*elsewhere)),
                 revocation_problem::egress, errc::forbidden);
}

}  // namespace
