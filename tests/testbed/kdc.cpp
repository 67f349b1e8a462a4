#include "kdc.hpp"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "sshd.hpp"  // free_port

namespace testbed {

namespace {

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

}  // namespace

std::string kdc::read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

kdc::kdc(const std::filesystem::path& dir, std::string realm) : dir_(dir / "kdc"), realm_(std::move(realm)) {
  std::filesystem::create_directories(dir_);
  port_ = free_port();
  const auto addr = "127.0.0.1:" + std::to_string(port_);
  // The realm block spans several lines: krb5's profile parser does not read a one-line { … }.
  // No DNS: names are not canonicalised or reverse-resolved, so HTTP/127.0.0.1 stays itself.
  write_file(dir_ / "krb5.conf",
             "[libdefaults]\n default_realm = " + realm_ +
                 "\n dns_lookup_kdc = false\n dns_lookup_realm = false\n dns_canonicalize_hostname = false\n"
                 " rdns = false\n udp_preference_limit = 1\n\n[realms]\n " +
                 realm_ + " = {\n  kdc = " + addr + "\n }\n\n[domain_realm]\n 127.0.0.1 = " + realm_ + "\n");
  write_file(dir_ / "kdc.conf", "[kdcdefaults]\n kdc_listen = " + addr + "\n kdc_tcp_listen = " + addr + "\n\n[realms]\n " +
                                    realm_ + " = {\n  database_name = " + (dir_ / "principal").string() +
                                    "\n  key_stash_file = " + (dir_ / "stash").string() + "\n  acl_file = " +
                                    (dir_ / "kadm5.acl").string() + "\n  kdc_listen = " + addr +
                                    "\n  kdc_tcp_listen = " + addr + "\n }\n\n[logging]\n kdc = FILE:" +
                                    (dir_ / "kdc.log").string() + "\n");
  write_file(dir_ / "kadm5.acl", "");
  auto [rc, out] = run_command({"/usr/sbin/kdb5_util", "create", "-s", "-r", realm_, "-P", "test-master-password"},
                               {{"KRB5_CONFIG", krb5_conf().string()}, {"KRB5_KDC_PROFILE", (dir_ / "kdc.conf").string()}});
  if (rc != 0) throw std::runtime_error("kdb5_util create failed: " + out);
  proc_ = std::make_unique<process>(
      std::vector<std::string>{"/usr/sbin/krb5kdc", "-n", "-r", realm_, "-P", (dir_ / "krb5kdc.pid").string()},
      std::map<std::string, std::string>{{"KRB5_CONFIG", krb5_conf().string()},
                                         {"KRB5_KDC_PROFILE", (dir_ / "kdc.conf").string()}},
      (dir_ / "krb5kdc").string());
  // Ready once its TCP port accepts (UDP is bound in the same step).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    auto [c, o] = run_command({"/usr/bin/python3", "-c",
                               "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 1).close()",
                               std::to_string(port_)});
    if (c == 0) break;
    if (std::chrono::steady_clock::now() > deadline || !proc_->running())
      throw std::runtime_error("krb5kdc did not start: " + proc_->stderr_text() + read_file(dir_ / "kdc.log"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

kdc::~kdc() {
  if (!proc_) return;
  proc_->signal(SIGTERM);
  if (proc_->wait(std::chrono::seconds(5)) == -1) proc_->signal(SIGKILL);
}

void kdc::kadmin(const std::string& query) const {
  auto [rc, out] = run_command({"/usr/sbin/kadmin.local", "-r", realm_, "-q", query},
                               {{"KRB5_CONFIG", krb5_conf().string()}, {"KRB5_KDC_PROFILE", (dir_ / "kdc.conf").string()}});
  // kadmin.local exits 0 even when the query fails; its complaints start with "add_principal:" etc.
  if (rc != 0 || out.find("while ") != std::string::npos)
    throw std::runtime_error("kadmin.local -q \"" + query + "\": " + out);
}

void kdc::add_user(const std::string& name, const std::string& password) const {
  kadmin("addprinc -pw " + password + " " + name);
}

void kdc::set_password(const std::string& name, const std::string& password) const {
  kadmin("cpw -pw " + password + " " + name);
}

void kdc::rekey(const std::string& principal) const { kadmin("cpw -randkey " + principal); }

std::filesystem::path kdc::add_keytab(const std::string& principal) const {
  std::string file;
  for (char c : principal) file += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const auto path = dir_ / (file + ".keytab");
  kadmin("addprinc -randkey " + principal);
  kadmin("ktadd -k " + path.string() + " " + principal);
  return path;
}

}  // namespace testbed
