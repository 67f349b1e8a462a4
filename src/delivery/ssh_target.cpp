#include "certfleet/delivery/ssh_target.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <boost/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>

#include "delivery/codec.hpp"
#include "delivery/json_fields.hpp"

namespace certfleet::delivery {
namespace {

std::string sha256_raw(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(md.data()), len);
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::uint32_t be32(std::string_view s, std::size_t at) {
  return (std::uint32_t(std::uint8_t(s[at])) << 24) | (std::uint32_t(std::uint8_t(s[at + 1])) << 16) |
         (std::uint32_t(std::uint8_t(s[at + 2])) << 8) | std::uint32_t(std::uint8_t(s[at + 3]));
}

}  // namespace

const char* ssh_auth_name(ssh_auth a) noexcept {
  switch (a) {
    case ssh_auth::key: return "key";
    case ssh_auth::password: return "password";
    case ssh_auth::derived: return "";
  }
  return "";
}

const std::vector<std::string>& supported_host_key_types() {
  static const std::vector<std::string> types{"ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                                              "ecdsa-sha2-nistp521", "ssh-rsa"};
  return types;
}

std::string host_key::to_line() const { return type + " " + base64_encode(blob); }

std::string ssh_destination(const ssh_target& t) {
  std::string h = t.host;
  for (auto& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return h + ":" + std::to_string(t.port);
}

std::string host_key::fingerprint() const {
  std::string b64 = base64_encode(sha256_raw(blob));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();  // ssh-keygen prints it unpadded
  return "SHA256:" + b64;
}

result<host_key> parse_host_key(std::string_view line) {
  const std::string field = "host_key";
  auto bad = [&](std::string msg) { return make_error(errc::invalid_argument, std::move(msg), field); };
  if (line.size() > 16384) return bad("host key is too long");
  std::size_t i = 0;
  auto next_word = [&]() {
    while (i < line.size() && is_space(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    return line.substr(start, i - start);
  };
  std::string_view type = next_word();
  const auto& types = supported_host_key_types();
  if (!type.empty() && type.front() == '@')
    return bad("known_hosts markers (@cert-authority, @revoked) are not supported: pin the host's own key");
  // A known_hosts line ("host[,host…] type key"): the target names the host, so the pattern is
  // skipped and only the key is pinned.
  if (!type.empty() && std::find(types.begin(), types.end(), type) == types.end()) {
    std::size_t save = i;
    std::string_view second = next_word();
    if (std::find(types.begin(), types.end(), second) != types.end()) type = second;
    else i = save;
  }
  std::string_view b64 = next_word();
  while (!b64.empty() && (b64.back() == '\n' || b64.back() == '\r')) b64.remove_suffix(1);
  if (type.empty() || b64.empty())
    return bad("host key must look like \"ssh-ed25519 AAAA…\" (the server's .pub line)");
  if (std::find(types.begin(), types.end(), type) == types.end())
    return bad("unsupported host key type \"" + std::string(type.substr(0, 40)) +
               "\" (use ssh-ed25519 or ecdsa-sha2-nistp256/384/521)");
  auto blob = base64_decode(b64);
  if (!blob) return bad("host key is not valid base64");
  // The blob starts with its own type string: a pasted key whose two halves disagree is refused.
  if (blob->size() < 4 + type.size() + 4) return bad("host key blob is too short");
  if (be32(*blob, 0) != type.size() || std::string_view(*blob).substr(4, type.size()) != type)
    return bad("host key blob does not match its type \"" + std::string(type) + "\"");
  return host_key{std::string(type), std::move(*blob)};
}

namespace {

// OpenSSH's match_pattern: * any run, ? one character; case-insensitive as host names are.
bool glob_match(std::string_view pattern, std::string_view name) {
  std::size_t p = 0, n = 0, star = std::string_view::npos, mark = 0;
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || lower(pattern[p]) == lower(name[n]))) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// "|1|salt|hash": HMAC-SHA1 of the name keyed by the salt (ssh-keygen -H, HashKnownHosts yes).
bool hashed_match(std::string_view entry, std::string_view name) {
  entry.remove_prefix(3);
  const auto bar = entry.find('|');
  if (bar == std::string_view::npos) return false;
  auto salt = base64_decode(entry.substr(0, bar));
  auto want = base64_decode(entry.substr(bar + 1));
  if (!salt || !want || want->size() != 20) return false;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha1(), salt->data(), static_cast<int>(salt->size()), reinterpret_cast<const unsigned char*>(name.data()),
            name.size(), mac, &len) || len != 20)
    return false;
  return std::equal(want->begin(), want->end(), reinterpret_cast<const char*>(mac));
}

bool names_match(std::string_view names, std::string_view name) {
  if (names.starts_with("|1|")) return hashed_match(names, name);
  bool matched = false;
  while (!names.empty()) {
    const auto comma = names.find(',');
    auto pattern = names.substr(0, comma);
    names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    const bool negated = !pattern.empty() && pattern.front() == '!';
    if (negated) pattern.remove_prefix(1);
    if (glob_match(pattern, name)) {
      if (negated) return false;  // a negation wins over every other pattern of the line
      matched = true;
    }
  }
  return matched;
}

}  // namespace

std::optional<std::string> known_hosts_key(std::string_view known_hosts, std::string_view host, std::uint16_t port) {
  const std::string name = port == 22 ? std::string(host) : "[" + std::string(host) + "]:" + std::to_string(port);
  const auto& types = supported_host_key_types();
  std::optional<std::string> best;
  std::size_t best_rank = types.size();
  while (!known_hosts.empty()) {
    const auto nl = known_hosts.find('\n');
    std::string_view line = known_hosts.substr(0, nl);
    known_hosts = nl == std::string_view::npos ? std::string_view() : known_hosts.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::size_t i = 0;
    auto word = [&]() {
      while (i < line.size() && is_space(line[i])) ++i;
      const std::size_t start = i;
      while (i < line.size() && !is_space(line[i])) ++i;
      return line.substr(start, i - start);
    };
    const auto names = word();
    if (names.empty() || names.front() == '#' || names.front() == '@') continue;
    const auto type = word();
    const auto key = word();
    const auto rank = static_cast<std::size_t>(std::find(types.begin(), types.end(), type) - types.begin());
    if (key.empty() || rank >= best_rank || !names_match(names, name)) continue;
    std::string candidate = std::string(type) + " " + std::string(key);
    if (!parse_host_key(candidate)) continue;
    best = std::move(candidate);
    best_rank = rank;
  }
  return best;
}

std::optional<unsigned> parse_mode(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '7') return std::nullopt;
    v = v * 8 + unsigned(c - '0');
  }
  if (v > 07777) return std::nullopt;
  return v;
}

bool valid_host_name(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  // A host name or an IPv4/IPv6 literal; nothing a shell or a URL would read differently.
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == ':' || c == '_';
  }) && h.front() != '-';
}

bool valid_owner(std::string_view o) {
  if (o.empty() || o.size() > 65) return false;
  int colons = 0;
  for (char c : o) {
    if (c == ':') { ++colons; continue; }
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return colons <= 1 && o.front() != ':' && o.back() != ':' && o.front() != '-';
}

bool valid_run_id(std::string_view r) {
  if (r.empty() || r.size() > 64 || r == "." || r == "..") return false;
  return std::all_of(r.begin(), r.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

result<void> check_remote_path(std::string_view p, std::string_view field) {
  auto bad = [&](std::string msg) { return make_error(errc::invalid_argument, std::move(msg), std::string(field)); };
  if (p.empty()) return bad("remote path is empty");
  if (p.size() > 1024) return bad("remote path is longer than 1024 characters");
  if (p.front() != '/') return bad("remote path must be absolute (start with /)");
  if (p.back() == '/') return bad("remote path names a directory, not a file");
  for (char c : p)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("remote path contains a control character");
  // No "." or ".." segments: the backup and temp names are derived from the path's directory.
  std::size_t i = 0;
  while (i < p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    auto seg = p.substr(i, j - i);
    if (seg == "." || seg == "..") return bad("remote path must not contain . or .. segments");
    i = j + 1;
  }
  return {};
}

result<void> check_install_files(std::string_view prefix, std::string_view cert_path, std::string_view key_path,
                                 std::string_view chain_path, unsigned cert_mode, unsigned key_mode) {
  const auto field = [&](std::string_view name) { return std::string(prefix) + "." + std::string(name); };
  if (auto r = check_remote_path(cert_path, field("cert_path")); !r) return r;
  if (auto r = check_remote_path(key_path, field("key_path")); !r) return r;
  if (!chain_path.empty())
    if (auto r = check_remote_path(chain_path, field("chain_path")); !r) return r;
  // Compared as the file system reads them ("/srv//a" and "/srv/a" are one file).
  const auto cert = normal_path(cert_path), key = normal_path(key_path);
  const auto chain = chain_path.empty() ? std::string() : normal_path(chain_path);
  if (cert == key) return make_error(errc::invalid_argument, "key_path names the same file as cert_path", field("key_path"));
  if (!chain.empty() && (chain == cert || chain == key))
    return make_error(errc::invalid_argument, "chain_path names the same file as cert_path or key_path", field("chain_path"));
  if (auto r = check_file_mode(cert_mode, field("cert_mode")); !r) return r;
  if (auto r = check_file_mode(key_mode, field("key_mode")); !r) return r;
  if (key_mode & 0007) return make_error(errc::invalid_argument, "key_mode must not give others access", field("key_mode"));
  return {};
}

result<void> check_file_mode(unsigned mode, std::string_view field) {
  auto bad = [&](std::string why) {
    char shown[8];
    std::snprintf(shown, sizeof shown, "%04o", mode & 077777);
    return make_error(errc::invalid_argument, std::string(field.substr(field.rfind('.') + 1)) + " " + why + " (got " + shown + ")",
                      std::string(field));
  };
  if (mode > 07777) return bad("is not a file mode");
  if (mode & 07000) return bad("must not set the setuid, setgid or sticky bit");
  if (mode & 0002) return bad("must not make the file writable by others");
  return {};
}

std::string normal_path(std::string_view p) {
  std::string out;
  std::size_t i = 0;
  while (i < p.size()) {
    std::size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    auto seg = p.substr(i, j - i);
    if (!seg.empty() && seg != ".") out.append("/").append(seg);
    i = j + 1;
  }
  return out.empty() ? "/" : out;
}

result<void> check_ssh_target(const ssh_target& t) {
  if (!valid_host_name(t.host)) return make_error(errc::invalid_argument, "invalid host name", "ssh.host");
  if (t.port == 0) return make_error(errc::invalid_argument, "port must be 1-65535", "ssh.port");
  if (t.user.empty() || t.user.size() > 64 || !valid_owner(t.user) || t.user.find(':') != std::string::npos)
    return make_error(errc::invalid_argument, "invalid user name", "ssh.user");
  if (t.pinned.blob.empty()) return make_error(errc::invalid_argument, "a pinned host key is required", "ssh.host_key");
  if (auto r = check_install_files("ssh", t.cert_path, t.key_path, t.chain_path, t.cert_mode, t.key_mode); !r) return r;
  if (!t.owner.empty() && !valid_owner(t.owner))
    return make_error(errc::invalid_argument, "owner must be user or user:group", "ssh.owner");
  if (t.post_command.size() > 4096)
    return make_error(errc::invalid_argument, "post_command is longer than 4096 characters", "ssh.post_command");
  if (t.post_command.find('\0') != std::string::npos)
    return make_error(errc::invalid_argument, "post_command contains a NUL byte", "ssh.post_command");
  if (t.validate_tls) {
    if (!valid_host_name(t.validate_tls->host))
      return make_error(errc::invalid_argument, "invalid host name", "validate.tls.host");
    if (t.validate_tls->port == 0) return make_error(errc::invalid_argument, "port must be 1-65535", "validate.tls.port");
    if (!t.validate_tls->sni.empty() && !valid_host_name(t.validate_tls->sni))
      return make_error(errc::invalid_argument, "invalid SNI name", "validate.tls.sni");
  }
  return {};
}

result<ssh_target> parse_ssh_target(const boost::json::value& v, const boost::json::value* validate) {
  namespace json = boost::json;
  if (!v.is_object()) return make_error(errc::invalid_argument, "ssh must be an object", "ssh");
  const auto& o = v.as_object();
  ssh_target t;
  auto str = [&](const char* key, std::string& out, bool required) {
    return string_member(o, "ssh", key, out, required);
  };
  auto port_of = [](const json::value* p, std::uint16_t& out, const std::string& field) -> result<void> {
    if (!p || p->is_null()) return {};
    if (!p->is_int64() && !p->is_uint64()) return make_error(errc::invalid_argument, "port must be an integer", field);
    auto n = p->is_int64() ? p->as_int64() : static_cast<std::int64_t>(std::min<std::uint64_t>(p->as_uint64(), 1u << 20));
    if (n < 1 || n > 65535) return make_error(errc::invalid_argument, "port must be 1-65535", field);
    out = static_cast<std::uint16_t>(n);
    return {};
  };
  std::string host_key_line, cert_mode = "0644", key_mode = "0600", auth;
  for (auto r : {str("host", t.host, true), str("user", t.user, true), str("host_key", host_key_line, true),
                 str("auth", auth, false),
                 str("cert_path", t.cert_path, true), str("key_path", t.key_path, true),
                 str("chain_path", t.chain_path, false), str("cert_mode", cert_mode, false),
                 str("key_mode", key_mode, false), str("owner", t.owner, false),
                 str("post_command", t.post_command, false)})
    if (!r) return std::move(r).error();
  if (auto r = port_of(o.if_contains("port"), t.port, "ssh.port"); !r) return std::move(r).error();
  if (auto* p = o.if_contains("sudo"); p && !p->is_null()) {
    if (!p->is_bool()) return make_error(errc::invalid_argument, "must be true or false", "ssh.sudo");
    t.sudo = p->as_bool();
  }
  if (auth == "key") t.auth = ssh_auth::key;
  else if (auth == "password") t.auth = ssh_auth::password;
  else if (auto* ap = o.if_contains("auth"); ap && !ap->is_null()) return make_error(errc::invalid_argument, "auth must be \"key\" or \"password\"", "ssh.auth");
  auto hk = parse_host_key(host_key_line);
  if (!hk) return make_error(errc::invalid_argument, hk.error().message, "ssh.host_key");
  t.pinned = std::move(*hk);
  auto cm = parse_mode(cert_mode);
  if (!cm) return make_error(errc::invalid_argument, "mode must be octal like \"0644\"", "ssh.cert_mode");
  auto km = parse_mode(key_mode);
  if (!km) return make_error(errc::invalid_argument, "mode must be octal like \"0600\"", "ssh.key_mode");
  t.cert_mode = *cm;
  t.key_mode = *km;
  if (validate && !validate->is_null()) {
    if (!validate->is_object()) return make_error(errc::invalid_argument, "validate must be an object", "validate");
    const auto& vo = validate->as_object();
    for (const auto& kv : vo)
      if (kv.key() != "tls" && kv.key() != "remote_hash")
        return make_error(errc::invalid_argument, "unknown field; validate takes tls or remote_hash",
                          "validate." + std::string(kv.key().substr(0, 64)));
    if (auto* tls = vo.if_contains("tls"); tls && !tls->is_null()) {
      if (!tls->is_object()) return make_error(errc::invalid_argument, "must be an object", "validate.tls");
      const auto& to = tls->as_object();
      for (const auto& kv : to)
        if (kv.key() != "host" && kv.key() != "port" && kv.key() != "sni")
          return make_error(errc::invalid_argument, "unknown field; validate.tls takes host, port and sni",
                            "validate.tls." + std::string(kv.key().substr(0, 64)));
      tls_validation tv;
      auto* h = to.if_contains("host");
      if (!h || !h->is_string()) return make_error(errc::invalid_argument, "missing", "validate.tls.host");
      tv.host = std::string(h->as_string());
      if (!to.if_contains("port")) return make_error(errc::invalid_argument, "missing", "validate.tls.port");
      if (auto r = port_of(to.if_contains("port"), tv.port, "validate.tls.port"); !r) return std::move(r).error();
      if (auto* s = to.if_contains("sni"); s && !s->is_null()) {
        if (!s->is_string()) return make_error(errc::invalid_argument, "must be a string", "validate.tls.sni");
        tv.sni = std::string(s->as_string());
      }
      t.validate_tls = std::move(tv);
    }
    if (auto* rh = vo.if_contains("remote_hash"); rh && !rh->is_null()) {
      if (!rh->is_bool()) return make_error(errc::invalid_argument, "must be true or false", "validate.remote_hash");
      t.validate_remote_hash = rh->as_bool();
    }
    if (t.validate_tls && t.validate_remote_hash)
      return make_error(errc::invalid_argument, "choose one of tls or remote_hash", "validate");
  }
  if (auto r = check_ssh_target(t); !r) return std::move(r).error();
  return t;
}

}  // namespace certfleet::delivery
