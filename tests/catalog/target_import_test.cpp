// The bulk target import's formats (catalog/target_import.hpp) and the Ansible inventory's
// conversion to import rows: pure, no store.
#include "certfleet/catalog/target_import.hpp"
#include "certfleet/delivery/ssh_target.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace {

using namespace certfleet;
using namespace certfleet::catalog;

// A syntactically valid ed25519 host key line: the blob is its type string and 32 key bytes.
std::string host_key_line(char fill = 'k') {
  std::string blob;
  auto be32 = [&](std::uint32_t n) {
    for (int s = 24; s >= 0; s -= 8) blob.push_back(static_cast<char>((n >> s) & 0xff));
  };
  be32(11);
  blob += "ssh-ed25519";
  be32(32);
  blob.append(32, fill);
  std::string b64(4 * ((blob.size() + 2) / 3), '\0');
  b64.resize(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                             reinterpret_cast<const unsigned char*>(blob.data()), static_cast<int>(blob.size())));
  return "ssh-ed25519 " + b64;
}

const std::string cred = "0123456789abcdef01234567";

std::string ssh_line(const std::string& name, const std::string& extra = "") {
  return fmt::format(R"({{"name":"{}","module":"ssh","ssh":{{"host":"10.0.0.1","user":"deploy","credential_id":"{}",)"
                     R"("host_key":"{}","cert_path":"/srv/c.pem","key_path":"/srv/k.pem"{}}}}})",
                     name, cred, host_key_line(), extra);
}

TEST(target_import, json_lines_keep_every_row_in_order) {
  auto t = parse_target_import(ssh_line("a") + "\n\n" + ssh_line("b") + "\r\n" + ssh_line("c"), import_format::json_lines);
  ASSERT_EQ(t.problem_count, 0u) << describe_import_problems(t);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.rows[0].target.name, "a");
  EXPECT_EQ(t.rows[1].line, 3u);  // the blank line 2 is skipped, not renumbered
  EXPECT_EQ(t.rows[2].target.name, "c");
  EXPECT_EQ(t.rows[2].line, 4u);
}

TEST(target_import, every_bad_row_is_named_by_its_line_and_nothing_is_kept) {
  const std::string body = ssh_line("a") + "\n" + ssh_line("b", R"(,"port":0)") + "\n" + "not json\n" + ssh_line("a") +
                           "\n" + ssh_line("d", R"(,"colour":"red")") + "\n";
  auto t = parse_target_import(body, import_format::json_lines);
  EXPECT_TRUE(t.rows.empty());
  ASSERT_EQ(t.problem_count, 4u);
  ASSERT_EQ(t.problems.size(), 4u);
  EXPECT_EQ(t.problems[0].line, 2u);
  EXPECT_EQ(t.problems[0].field, "ssh.port");
  EXPECT_EQ(t.problems[1].line, 3u);
  EXPECT_EQ(t.problems[2].line, 4u);
  EXPECT_EQ(t.problems[2].field, "name");
  EXPECT_NE(t.problems[2].message.find("already on line 1"), std::string::npos) << t.problems[2].message;
  EXPECT_EQ(t.problems[3].field, "ssh.colour");
  const auto text = describe_import_problems(t);
  EXPECT_NE(text.find("4 rows are invalid; nothing was imported. line 2: ssh.port:"), std::string::npos) << text;
}

TEST(target_import, an_empty_body_and_too_many_rows_are_refused) {
  for (const char* empty : {"", "\n\n", "\xEF\xBB\xBF"}) {
    auto t = parse_target_import(empty, import_format::json_lines);
    ASSERT_EQ(t.problem_count, 1u);
    EXPECT_EQ(t.problems[0].field, "body");
  }
  std::string many;
  const auto line = ssh_line("x") + "\n";  // the same name: cheap rows, every one after the first a problem
  for (std::size_t i = 0; i <= max_import_rows; ++i) many += line;
  auto t = parse_target_import(many, import_format::json_lines);
  EXPECT_TRUE(t.rows.empty());
  EXPECT_EQ(t.problems.size(), max_import_problems);  // named up to the cap, counted past it
  EXPECT_EQ(t.problem_count, max_import_rows);          // the 100,000 duplicates, then "more than …"
  EXPECT_EQ(t.problems.back().field, "name");
}

TEST(target_import, csv_cells_become_the_same_body) {
  const std::string body = "\xEF\xBB\xBFname,module,ssh.host,ssh.port,ssh.user,ssh.credential_id,ssh.host_key,ssh.cert_path,"
                           "ssh.key_path,ssh.sudo,ssh.post_command\r\n" +
                           fmt::format("web-1,ssh,10.0.0.1,2222,deploy,{},{},/srv/c.pem,/srv/k.pem,true,"
                                       "\"nginx -t, then \"\"reload\"\"\"\r\n",
                                       cred, host_key_line()) +
                           fmt::format("web-2,ssh,10.0.0.2,,deploy,{},{},/srv/c.pem,/srv/k.pem,,\r\n", cred, host_key_line());
  auto t = parse_target_import(body, import_format::csv);
  ASSERT_EQ(t.problem_count, 0u) << describe_import_problems(t);
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(t.rows[0].line, 2u);
  EXPECT_EQ(t.rows[0].target.spec.ssh.port, 2222);
  EXPECT_TRUE(t.rows[0].target.spec.ssh.sudo);
  EXPECT_EQ(t.rows[0].target.spec.ssh.post_command, "nginx -t, then \"reload\"");
  EXPECT_EQ(t.rows[1].target.spec.ssh.port, 22);  // an empty cell leaves the member out
  EXPECT_FALSE(t.rows[1].target.spec.ssh.sudo);
  auto doc = boost::json::parse(t.rows[0].target.doc);
  EXPECT_EQ(doc.at("ssh").at("port").as_int64(), 2222);
}

TEST(target_import, csv_problems_name_the_line_and_the_cell) {
  const std::string head = "name,module,ssh.host,ssh.port,ssh.user,ssh.credential_id,ssh.host_key,ssh.cert_path,ssh.key_path\n";
  const auto row = [&](const char* name, const char* port) {
    return fmt::format("{},ssh,10.0.0.1,{},deploy,{},{},/srv/c.pem,/srv/k.pem\n", name, port, cred, host_key_line());
  };
  struct bad_case {
    std::string body;
    std::size_t line;
    std::string field;
  };
  for (const auto& c : {bad_case{head + row("a", "22") + row("b", "seven"), 3, "ssh.port"},
                        bad_case{head + row("a", "22") + "b,ssh\n", 3, "body"},
                        bad_case{head + row("a", "22") + "\"b,ssh\n", 3, "body"},
                        bad_case{head + "x\"y\",ssh,h,22,u,c,k,/a,/b\n", 2, "body"},
                        bad_case{head + "\"x\"\rssh,h,22,u,c,k,/a,/b\n", 2, "body"},
                        bad_case{"name,module,ssh.colour\n", 1, "ssh.colour"} /* caught by the row parser: no rows */,
                        bad_case{"name,name\n", 1, "name"},
                        bad_case{"name,ftp.host\n", 1, "ftp.host"},
                        bad_case{"name,ssh,ssh.host\nx,y,z\n", 2, "ssh"},
                        bad_case{"", 1, "body"}}) {
    auto t = parse_target_import(c.body, import_format::csv);
    ASSERT_GE(t.problem_count, 1u) << c.body;
    EXPECT_TRUE(t.rows.empty());
    if (c.field == "ssh.colour") {  // a header alone: no rows, so "holds no targets"
      EXPECT_EQ(t.problems[0].field, "body");
      continue;
    }
    EXPECT_EQ(t.problems[0].line, c.line) << c.body << " -> " << t.problems[0].message;
    EXPECT_EQ(t.problems[0].field, c.field) << c.body << " -> " << t.problems[0].message;
  }
}

TEST(target_import, content_types_name_the_format) {
  EXPECT_EQ(import_format_of("application/x-ndjson"), import_format::json_lines);
  EXPECT_EQ(import_format_of("application/jsonl; charset=utf-8"), import_format::json_lines);
  EXPECT_EQ(import_format_of("Text/CSV"), import_format::csv);
  EXPECT_FALSE(import_format_of("application/json"));
  EXPECT_FALSE(import_format_of(""));
}

// ---- known_hosts --------------------------------------------------------------------------

std::string hashed_name(const std::string& salt, const std::string& name) {
  unsigned char mac[20];
  unsigned int len = 0;
  HMAC(EVP_sha1(), salt.data(), static_cast<int>(salt.size()), reinterpret_cast<const unsigned char*>(name.data()),
       name.size(), mac, &len);
  auto b64 = [](const std::string& bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3), '\0');
    out.resize(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                               reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size())));
    return out;
  };
  return "|1|" + b64(salt) + "|" + b64(std::string(reinterpret_cast<char*>(mac), len));
}

TEST(known_hosts, plain_hashed_ported_wildcard_and_negated_names) {
  const auto k1 = host_key_line('1'), k2 = host_key_line('2'), k3 = host_key_line('3'), k4 = host_key_line('4');
  const std::string salt(20, 's');
  const std::string file = "# a comment\n"
                           "@cert-authority *.example.com " + host_key_line('c') + "\n"
                           "web1.example.com,10.0.0.1 " + k1 + " comment\r\n" +
                           hashed_name(salt, "10.0.0.2") + " " + k2 + "\n" +
                           "[10.0.0.3]:2222 " + k3 + "\n" +
                           "*.lab.example.com,!bad.lab.example.com " + k4 + "\n" +
                           "10.0.0.9 ssh-rsa AAAAB3NzaC1yc2E=\n";
  EXPECT_EQ(delivery::known_hosts_key(file, "10.0.0.1", 22), k1);
  EXPECT_EQ(delivery::known_hosts_key(file, "WEB1.example.com", 22), k1);
  EXPECT_EQ(delivery::known_hosts_key(file, "10.0.0.2", 22), k2);
  EXPECT_FALSE(delivery::known_hosts_key(file, "10.0.0.2", 2222));
  EXPECT_EQ(delivery::known_hosts_key(file, "10.0.0.3", 2222), k3);
  EXPECT_FALSE(delivery::known_hosts_key(file, "10.0.0.3", 22));
  EXPECT_EQ(delivery::known_hosts_key(file, "a.lab.example.com", 22), k4);
  EXPECT_FALSE(delivery::known_hosts_key(file, "bad.lab.example.com", 22));
  EXPECT_FALSE(delivery::known_hosts_key(file, "x.example.com", 22));  // only a @cert-authority line names it
  EXPECT_FALSE(delivery::known_hosts_key(file, "10.0.0.9", 22));       // RSA: not a type we pin
}

// ---- an inventory to import rows ------------------------------------------------------------

TEST(inventory_import, hosts_become_ssh_targets_from_the_template) {
  const std::string known = "10.0.0.1 " + host_key_line('1') + "\n[10.0.0.2]:2222 " + host_key_line('2') + "\n";
  auto inv = parse_ansible_ini_inventory(
      "[web]\n"
      "web1 ansible_host=10.0.0.1 ansible_user=ubuntu\n"
      "web2 ansible_host=10.0.0.2 ansible_port=2222 certfleet_cert_path=/etc/ssl/web2.pem\n"
      "web3 ansible_host=10.0.0.3 certfleet_host_key=\"" + host_key_line('3') + "\"\n");
  ASSERT_TRUE(inv) << inv.error().message;
  const std::string tmpl = fmt::format(R"({{"module":"ssh","ssh":{{"user":"deploy","credential_id":"{}",)"
                                       R"("cert_path":"/srv/c.pem","key_path":"/srv/k.pem"}}}})", cred);
  auto lines = inventory_import_lines(*inv, tmpl, known);
  ASSERT_TRUE(lines) << lines.error().message;
  auto t = parse_target_import(*lines, import_format::json_lines);
  ASSERT_EQ(t.problem_count, 0u) << describe_import_problems(t) << "\n" << *lines;
  ASSERT_EQ(t.rows.size(), 3u);
  const auto& w1 = t.rows[0].target.spec.ssh;
  EXPECT_EQ(t.rows[0].target.name, "web1");
  EXPECT_EQ(w1.host, "10.0.0.1");
  EXPECT_EQ(w1.user, "ubuntu");
  EXPECT_EQ(w1.pinned.to_line(), host_key_line('1'));
  const auto& w2 = t.rows[1].target.spec.ssh;
  EXPECT_EQ(w2.port, 2222);
  EXPECT_EQ(w2.user, "deploy");
  EXPECT_EQ(w2.cert_path, "/etc/ssl/web2.pem");
  EXPECT_EQ(w2.pinned.to_line(), host_key_line('2'));
  EXPECT_EQ(t.rows[2].target.spec.ssh.pinned.to_line(), host_key_line('3'));
}

TEST(inventory_import, a_host_without_a_key_or_a_bad_template_is_named) {
  auto inv = parse_ansible_ini_inventory("[web]\nweb1 ansible_host=10.0.0.1\n\n[db]\ndb1 ansible_port=99999\n");
  ASSERT_TRUE(inv) << inv.error().message;
  const std::string tmpl = fmt::format(R"({{"ssh":{{"user":"u","credential_id":"{}","cert_path":"/a","key_path":"/b"}}}})", cred);
  auto none = inventory_import_lines(*inv, tmpl, "");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().field, "line 2");
  EXPECT_NE(none.error().message.find("host web1: no host key for 10.0.0.1"), std::string::npos) << none.error().message;
  auto port = inventory_import_lines(*inv, tmpl, "10.0.0.1 " + host_key_line() + "\n");
  ASSERT_FALSE(port);
  EXPECT_EQ(port.error().field, "line 5");
  for (auto [bad, field] : {std::pair{R"({"name":"x"})", "template.name"}, std::pair{R"({"module":"webhook"})", "template.module"},
                            std::pair{"[]", "template"}, std::pair{R"({"ssh":7})", "template.ssh"}}) {
    auto r = inventory_import_lines(*inv, bad, "");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, field) << bad;
  }
}

}  // namespace
