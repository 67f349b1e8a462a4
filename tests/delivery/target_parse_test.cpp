// The target/host-key parsers and the bundle checks: pure functions, tested exhaustively.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <set>

#include "certfleet/delivery/ssh.hpp"
#include "certfleet/delivery/ssh_target.hpp"

using namespace certfleet::delivery;

namespace {
// A real ed25519 public key line (any valid one will do for parsing).
const std::string ed_line =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl certfleet-test";
}  // namespace

TEST(delivery_parse, host_key_lines) {
  auto k = parse_host_key(ed_line);
  ASSERT_TRUE(k) << k.error().message;
  EXPECT_EQ(k->type, "ssh-ed25519");
  EXPECT_EQ(k->to_line(), ed_line.substr(0, ed_line.rfind(' ')));
  EXPECT_EQ(k->fingerprint().rfind("SHA256:", 0), 0u);
  EXPECT_EQ(k->fingerprint().size(), 7u + 43u);
  EXPECT_TRUE(parse_host_key("  " + ed_line.substr(0, ed_line.rfind(' ')) + "\n"));
  EXPECT_FALSE(parse_host_key(""));
  EXPECT_FALSE(parse_host_key("ssh-ed25519"));
  EXPECT_FALSE(parse_host_key("ssh-dss AAAAB3NzaC1kc3MAAACBAP"));
  EXPECT_FALSE(parse_host_key("ssh-ed25519 not-base64!"));
  // A blob of one type pasted after another type's name.
  auto swapped = parse_host_key("ecdsa-sha2-nistp256 " + ed_line.substr(12, ed_line.rfind(' ') - 12));
  ASSERT_FALSE(swapped);
  EXPECT_EQ(swapped.error().field, "host_key");
  EXPECT_FALSE(parse_host_key("ssh-ed25519 AAAA"));
  // known_hosts lines pin the same key; markers are refused.
  auto kh = parse_host_key("web1.example.com,10.0.0.5 " + ed_line.substr(0, ed_line.rfind(' ')));
  ASSERT_TRUE(kh) << kh.error().message;
  EXPECT_EQ(kh->blob, k->blob);
  EXPECT_TRUE(parse_host_key("|1|abc=|def= " + ed_line));
  EXPECT_FALSE(parse_host_key("@revoked * " + ed_line));
  EXPECT_FALSE(parse_host_key("web1 ssh-dss AAAA"));
}

TEST(delivery_parse, modes_paths_hosts_owners_run_ids) {
  EXPECT_EQ(parse_mode("0644"), 0644u);
  EXPECT_EQ(parse_mode("600"), 0600u);
  EXPECT_EQ(parse_mode("7777"), 07777u);
  EXPECT_FALSE(parse_mode("0800"));
  EXPECT_FALSE(parse_mode(""));
  EXPECT_FALSE(parse_mode("017777"));
  EXPECT_FALSE(parse_mode("-644"));
  EXPECT_TRUE(check_remote_path("/etc/ssl/a.pem", "f"));
  EXPECT_FALSE(check_remote_path("etc/ssl/a.pem", "f"));
  EXPECT_FALSE(check_remote_path("", "f"));
  EXPECT_FALSE(check_remote_path("/etc/ssl/", "f"));
  EXPECT_FALSE(check_remote_path("/etc/../a.pem", "f"));
  EXPECT_FALSE(check_remote_path("/etc/./a.pem", "f"));
  EXPECT_FALSE(check_remote_path(std::string("/etc/a\n.pem"), "f"));
  EXPECT_TRUE(check_remote_path("/etc/it's a file.pem", "f"));  // quoted, not refused
  EXPECT_TRUE(valid_host_name("web-1.example.com"));
  EXPECT_TRUE(valid_host_name("127.0.0.1"));
  EXPECT_TRUE(valid_host_name("::1"));
  EXPECT_FALSE(valid_host_name("-oProxyCommand=x"));
  EXPECT_FALSE(valid_host_name("a b"));
  EXPECT_FALSE(valid_host_name(""));
  EXPECT_TRUE(valid_owner("www-data:www-data"));
  EXPECT_FALSE(valid_owner("a:b:c"));
  EXPECT_FALSE(valid_owner("a;rm"));
  EXPECT_TRUE(valid_run_id("run-1.2_x"));
  EXPECT_FALSE(valid_run_id(".."));
  EXPECT_FALSE(valid_run_id("a/b"));
  EXPECT_FALSE(valid_run_id(std::string(65, 'a')));
}

TEST(delivery_parse, target_spec_json) {
  auto ssh = boost::json::parse(R"({"host":"10.0.0.5","port":2222,"user":"deploy","host_key":")" + ed_line +
                                R"(","cert_path":"/etc/ssl/c.pem","key_path":"/etc/ssl/k.pem","owner":"www-data",
                                   "sudo":true,"post_command":"systemctl reload nginx"})");
  auto val = boost::json::parse(R"({"tls":{"host":"10.0.0.5","port":443,"sni":"www.example.com"}})");
  auto t = parse_ssh_target(ssh, &val);
  ASSERT_TRUE(t) << t.error().field << ": " << t.error().message;
  EXPECT_EQ(t->port, 2222);
  EXPECT_EQ(t->cert_mode, 0644u);
  EXPECT_EQ(t->key_mode, 0600u);
  EXPECT_TRUE(t->sudo);
  ASSERT_TRUE(t->validate_tls);
  EXPECT_EQ(t->validate_tls->sni, "www.example.com");

  auto field_of = [&](const std::string& patch_key, boost::json::value v, const boost::json::value* validate = nullptr) {
    auto o = ssh.as_object();
    if (v.is_null()) o.erase(patch_key);
    else o[patch_key] = v;
    auto r = parse_ssh_target(o, validate);
    return r ? std::string("ok") : r.error().field;
  };
  EXPECT_EQ(field_of("cert_path", "relative/c.pem"), "ssh.cert_path");
  EXPECT_EQ(field_of("key_path", nullptr), "ssh.key_path");
  EXPECT_EQ(field_of("port", 0), "ssh.port");
  EXPECT_EQ(field_of("port", 70000), "ssh.port");
  EXPECT_EQ(field_of("port", "22"), "ssh.port");
  EXPECT_EQ(field_of("host_key", "ssh-ed25519 garbage"), "ssh.host_key");
  EXPECT_EQ(field_of("host", "a;b"), "ssh.host");
  EXPECT_EQ(field_of("key_mode", "0644"), "ssh.key_mode");  // others could read the key
  EXPECT_EQ(field_of("cert_mode", "rw-r--r--"), "ssh.cert_mode");
  EXPECT_EQ(field_of("owner", "a b"), "ssh.owner");
  EXPECT_EQ(field_of("sudo", "yes"), "ssh.sudo");
  EXPECT_EQ(field_of("key_path", "/etc/ssl/c.pem"), "ssh.key_path");
  auto bad_tls = boost::json::parse(R"({"tls":{"host":"x","port":0}})");
  EXPECT_EQ(field_of("user", "deploy", &bad_tls), "validate.tls.port");
  auto both = boost::json::parse(R"({"tls":{"host":"x","port":443},"remote_hash":true})");
  EXPECT_EQ(field_of("user", "deploy", &both), "validate");
  // Members the document does not list are refused by name (issue 36: nested sections closed).
  auto extra = boost::json::parse(R"({"tls":{"host":"x","port":443},"ocsp":true})");
  EXPECT_EQ(field_of("user", "deploy", &extra), "validate.ocsp");
  auto extra_tls = boost::json::parse(R"({"tls":{"host":"x","port":443,"verify":false}})");
  EXPECT_EQ(field_of("user", "deploy", &extra_tls), "validate.tls.verify");
  EXPECT_FALSE(parse_ssh_target(boost::json::value(42)));
}

TEST(delivery_parse, bundle_checks_need_no_network) {
  cert_bundle b{"not a pem", "x", ""};
  auto r = check_bundle(b);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "cert_pem");
}
