#pragma once
// A Kerberos realm for tests: MIT krb5kdc (Debian krb5-kdc) on 127.0.0.1 with its database, stash
// and configuration in a test directory, nothing under /etc touched (KRB5_CONFIG and
// KRB5_KDC_PROFILE point at the files here). Principals and keytabs are made with kadmin.local.
// The KDC listens on UDP and TCP on one free port; stopped by its PID (SIGTERM, then SIGKILL).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "process.hpp"

namespace testbed {

class kdc {
 public:
  // `realm`: upper case, e.g. "CERTFLEET.TEST".
  explicit kdc(const std::filesystem::path& dir, std::string realm = "CERTFLEET.TEST");
  ~kdc();
  kdc(const kdc&) = delete;
  kdc& operator=(const kdc&) = delete;

  const std::string& realm() const { return realm_; }
  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int pid() const { return proc_ ? proc_->pid() : -1; }
  // krb5.conf naming this KDC for the realm (for the clients: KRB5_CONFIG).
  std::filesystem::path krb5_conf() const { return dir_ / "krb5.conf"; }
  // The environment a client of this realm runs with.
  std::map<std::string, std::string> client_env() const { return {{"KRB5_CONFIG", krb5_conf().string()}}; }

  // A user principal with a password ("alice" → alice@REALM). Throws on failure.
  void add_user(const std::string& name, const std::string& password) const;
  // A principal with a random key, exported to a new keytab file; returns the file's path
  // ("HTTP/127.0.0.1" → DIR/<sanitised>.keytab). Throws on failure.
  std::filesystem::path add_keytab(const std::string& principal) const;
  // The keytab file's bytes.
  static std::string read_file(const std::filesystem::path& p);
  // Changes a principal's password (old keytabs and passwords stop working).
  void set_password(const std::string& name, const std::string& password) const;
  // Gives a principal a new random key: tickets the KDC issues from now on are sealed with it,
  // so a service holding the old keytab can no longer read them.
  void rekey(const std::string& principal) const;

 private:
  void kadmin(const std::string& query) const;
  std::filesystem::path dir_;
  std::string realm_;
  std::uint16_t port_ = 0;
  std::unique_ptr<process> proc_;
};

}  // namespace testbed
