#pragma once
// What an SSH delivery needs to know about one target, and the parsers for the parts that come
// from users (the target's JSON spec, a pinned host key line). Pure: no I/O.
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet::delivery {

// A pinned SSH host key: "ssh-ed25519 AAAA… [comment]" (the .pub / known_hosts key format).
struct host_key {
  std::string type;   // "ssh-ed25519", "ecdsa-sha2-nistp256", …
  std::string blob;   // the decoded key blob (SSH wire format, starts with the type string)

  std::string to_line() const;        // "type base64"
  std::string fingerprint() const;    // "SHA256:…" as `ssh-keygen -l` prints it
};

// Key types libssh2 1.10 can verify as host keys, in our preference order.
const std::vector<std::string>& supported_host_key_types();
result<host_key> parse_host_key(std::string_view line);

// The host key an OpenSSH known_hosts file holds for host:port (port 22: the name as it is,
// otherwise "[host]:port"), as a "type base64" line: plain and hashed (|1|salt|hash) names,
// * and ? wildcards, !negations. Of several keys the first supported type in our preference
// order; lines with a marker (@cert-authority, @revoked) are skipped. nullopt: none.
std::optional<std::string> known_hosts_key(std::string_view known_hosts, std::string_view host, std::uint16_t port);

struct tls_validation {
  std::string host;
  std::uint16_t port = 443;
  std::string sni;  // empty: host
};

// How an SSH target logs in (`ssh.auth`). `derived`: a target stored before the field existed:
// the credential's kind decides (a private key if it has one, else its password).
enum class ssh_auth { derived, key, password };
const char* ssh_auth_name(ssh_auth a) noexcept;  // "key", "password", "" for derived

struct ssh_target {
  std::string host;
  std::uint16_t port = 22;
  std::string user;
  ssh_auth auth = ssh_auth::derived;  // key: public-key auth only; password: password auth only
  host_key pinned;                 // strict check, no trust-on-first-use
  std::string cert_path, key_path;
  std::string chain_path;          // empty: no chain file
  unsigned cert_mode = 0644, key_mode = 0600;
  std::string owner;               // "user" or "user:group"; empty: leave as is
  bool sudo = false;               // run the install script under `sudo -n`
  std::string post_command;        // run after the files are in place; empty: none
  std::optional<tls_validation> validate_tls;
  bool validate_remote_hash = false;
};

// Where the target's sessions go, as the per-destination session limit counts them: "host:port"
// with the host in lower case ("[v6]:port" for an IPv6 literal). Names are not resolved: a host
// reached by name and by address counts as two destinations.
std::string ssh_destination(const ssh_target& t);

// Parses the `ssh` object of a target (DESIGN §6) plus an optional `validate` object:
// {host, port=22, user, auth?: "key"|"password", host_key, cert_path, key_path, chain_path?, cert_mode="0644",
//  key_mode="0600", owner?, sudo=false, post_command?}, validate {tls:{host,port,sni?}} |
// {remote_hash:true}. Errors name the field ("ssh.cert_path").
result<ssh_target> parse_ssh_target(const boost::json::value& ssh, const boost::json::value* validate = nullptr);
// The same checks for a target built in code.
result<void> check_ssh_target(const ssh_target& t);

// Checks used by the parsers, exposed for tests.
result<void> check_remote_path(std::string_view path, std::string_view field);
std::optional<unsigned> parse_mode(std::string_view octal);  // "0644" / "644" -> 0644; <= 07777
// A delivered file's mode (ssh and file targets, cert_mode and key_mode): at most 07777, no
// setuid/setgid/sticky bit and not writable by others (a certificate anyone may replace is no
// certificate). invalid_argument naming `field` and the mode found.
result<void> check_file_mode(unsigned mode, std::string_view field);
// A path as the file system resolves it lexically: runs of '/' are one, "." segments nothing,
// no trailing '/'. Two target paths that normalise alike are the same file.
std::string normal_path(std::string_view path);
// The files one delivery installs (ssh and file targets): each path valid, three different files
// (the key written over the certificate would leave a world-readable file holding the key), the
// modes as check_file_mode says and the key's closed to others. `prefix` names the fields
// ("ssh" → "ssh.key_path"). chain_path may be empty.
result<void> check_install_files(std::string_view prefix, std::string_view cert_path, std::string_view key_path,
                                 std::string_view chain_path, unsigned cert_mode, unsigned key_mode);
bool valid_host_name(std::string_view host);
bool valid_owner(std::string_view owner);
// A run id safe to use in a remote file name: [A-Za-z0-9._-], 1..64 characters, not "."/"..".
bool valid_run_id(std::string_view run_id);

}  // namespace certfleet::delivery
