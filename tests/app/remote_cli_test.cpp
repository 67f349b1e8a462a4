// The CLI's remote mode (issue 35 §2) against the real server over HTTPS on 127.0.0.1: a private
// CA's certificate for 127.0.0.1, tokens made through the new token API by the CLI itself, jobs
// enqueued, followed to their end and listed over the API, a revoked token refused; and the
// fail-closed cases (untrusted certificate, plain HTTP off this machine, both modes at once, no
// token, no server) with the exit code each has.
#include "certfleet/app/exit_codes.hpp"
#include "certs.hpp"
#include "process.hpp"
#include "sshd.hpp"
#include "temp_dir.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

using namespace std::chrono_literals;
using certfleet::app::exit_code;
using certfleet::app::to_int;

namespace {

struct run_result {
  int status = -1;
  std::string out, err;
};

run_result run(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  static int n = 0;
  testbed::temp_dir logs("certfleet-remote-run");
  std::vector<std::string> argv{CERTFLEET_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  testbed::process p(argv, std::move(env), logs.file("cmd" + std::to_string(++n)));
  run_result r;
  r.status = p.wait(60s);
  if (r.status == -1) p.signal(SIGKILL);
  r.out = p.stdout_text();
  r.err = p.stderr_text();
  return r;
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::trunc) << text; }
std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
boost::json::object json_of(const std::string& out) {
  auto v = boost::json::parse(out);
  return v.as_object();
}

class remote_cli : public ::testing::Test {
 protected:
  void SetUp() override {
    testbed::cert_spec ca_spec;
    ca_spec.common_name = "certfleet test CA";
    ca_spec.is_ca = true;
    ca = testbed::make_certificate(ca_spec);
    testbed::cert_spec leaf_spec;
    leaf_spec.common_name = "127.0.0.1";
    leaf_spec.ip_sans = {"127.0.0.1"};
    leaf_spec.issuer = &ca;
    auto leaf = testbed::make_certificate(leaf_spec);
    write_file(dir.file("ca.pem"), ca.cert_pem);
    write_file(dir.file("tls.pem"), leaf.cert_pem);
    write_file(dir.file("tls.key"), leaf.key_pem);
    ::chmod(dir.file("tls.key").c_str(), 0600);
    auto init = run({"store", "init", "--data", data});
    ASSERT_EQ(init.status, 0) << init.err;
    server = std::make_unique<testbed::process>(
        std::vector<std::string>{CERTFLEET_BINARY, "serve", "--data", data, "--listen", "127.0.0.1:0", "--set",
                                 "tls_cert_file=" + dir.file("tls.pem"), "--set", "tls_key_file=" + dir.file("tls.key")},
        std::map<std::string, std::string>{}, dir.file("server"));
    auto line = server->wait_for_stdout("serving:", 30s);
    ASSERT_FALSE(line.empty()) << server->stderr_text();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, std::regex(R"( listen=127\.0\.0\.1:(\d+))"))) << line;
    addr = "https://127.0.0.1:" + m[1].str();
    owner = read_file(data + "/owner-token");
    while (!owner.empty() && owner.back() == '\n') owner.pop_back();
  }
  void TearDown() override {
    if (server) {
      server->signal(SIGTERM);
      EXPECT_EQ(server->wait(30s), 0);
    }
  }
  // The environment of a remote command: the server, its CA and (unless empty) a token.
  std::map<std::string, std::string> env(const std::string& token) const {
    std::map<std::string, std::string> e{{"CERTFLEET_ADDR", addr}, {"CERTFLEET_CACERT", dir.file("ca.pem")}};
    if (!token.empty()) e["CERTFLEET_TOKEN"] = token;
    return e;
  }

  testbed::temp_dir dir{"certfleet-remote-cli"};
  std::string data = dir.file("var");
  testbed::pem_cert ca;
  std::unique_ptr<testbed::process> server;
  std::string addr, owner;
};

TEST_F(remote_cli, tokens_from_the_new_api_drive_jobs_over_https_and_a_revoked_one_is_refused) {
  // A token made over the API by the CLI, with an expiry; written to a file for --token-file.
  auto made = run({"token", "create", "--role", "admin", "--name", "remote-ci", "--ttl", "2h"}, env(owner));
  ASSERT_EQ(made.status, 0) << made.err;
  auto tok = json_of(made.out);
  const std::string admin(tok.at("token").as_string());
  const std::string admin_id(tok.at("id").as_string());
  EXPECT_EQ(tok.at("role"), "admin");
  EXPECT_EQ(tok.at("status"), "active");
  EXPECT_TRUE(tok.at("expires_at").is_string());
  write_file(dir.file("admin-token"), admin + "\n");

  // Jobs over the API with that token (from the file): enqueue, follow its log to the end, list.
  auto env_file = env("");
  auto with_file = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--token-file", dir.file("admin-token")});
    return run(std::move(args), env_file);
  };
  auto enq = with_file({"jobs", "enqueue", "--type", "noop", "--payload", R"({"lines":3,"ms":300})"});
  ASSERT_EQ(enq.status, 0) << enq.err;
  const std::string job(json_of(enq.out).at("id").as_string());
  EXPECT_EQ(std::string(json_of(enq.out).at("triggered_by").as_string()), "token:" + admin_id);
  auto logs = with_file({"jobs", "logs", job, "--watch", "--timeout", "60"});
  EXPECT_EQ(logs.status, 0) << logs.err;
  EXPECT_NE(logs.out.find("line 3 of 3"), std::string::npos) << logs.out;
  EXPECT_NE(logs.err.find("completed"), std::string::npos) << logs.err;
  auto show = with_file({"jobs", "show", job, "--json"});
  ASSERT_EQ(show.status, 0) << show.err;
  EXPECT_EQ(json_of(show.out).at("status"), "completed");
  auto list = with_file({"jobs", "list", "--type", "noop"});
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(job + R"( +noop +completed +1/3)"))) << list.out;
  // The API's refusals keep their exit codes: a completed job cannot be retried (conflict), an
  // unknown one is not found.
  EXPECT_EQ(with_file({"jobs", "retry", job}).status, to_int(exit_code::conflict));
  auto missing = with_file({"jobs", "show", "0123456789abcdef01234567"});
  EXPECT_EQ(missing.status, to_int(exit_code::not_found)) << missing.err;
  EXPECT_NE(missing.err.find("not found"), std::string::npos) << missing.err;

  // The token list shows it used; revoking it ends it at once.
  auto tokens = run({"token", "list", "--json"}, env(owner));
  ASSERT_EQ(tokens.status, 0) << tokens.err;
  bool seen = false;
  const auto listed = json_of(tokens.out);
  for (const auto& t : listed.at("items").as_array())
    if (t.at("id").as_string() == admin_id) {
      seen = true;
      EXPECT_TRUE(t.at("last_used_at").is_string()) << tokens.out;
    }
  EXPECT_TRUE(seen) << tokens.out;
  EXPECT_EQ(tokens.out.find(admin), std::string::npos) << "a listing never shows a token's text";
  auto revoked = run({"token", "revoke", admin_id}, env(owner));
  ASSERT_EQ(revoked.status, 0) << revoked.err;
  EXPECT_EQ(json_of(revoked.out).at("status"), "revoked");
  auto refused = with_file({"jobs", "list"});
  EXPECT_EQ(refused.status, to_int(exit_code::failed)) << refused.out;
  EXPECT_NE(refused.err.find("invalid or revoked token"), std::string::npos) << refused.err;

  // Projects over the API; the store's own commands still work on the host.
  EXPECT_EQ(run({"project", "create", "team-remote"}, env(owner)).status, 0);
  auto projects = run({"project", "list"}, env(owner));
  EXPECT_NE(projects.out.find("team-remote"), std::string::npos) << projects.out;
  auto local = run({"jobs", "list", "--data", data, "--type", "noop"});
  EXPECT_EQ(local.status, 0) << local.err;
  EXPECT_NE(local.out.find(job), std::string::npos) << local.out;
}

TEST_F(remote_cli, certificates_credentials_and_settings_over_the_api) {
  testbed::cert_spec spec;
  spec.common_name = "www.remote.test";
  spec.dns_sans = {"www.remote.test"};
  auto pem = testbed::make_certificate(spec);
  write_file(dir.file("c.pem"), pem.cert_pem);
  write_file(dir.file("k.pem"), pem.key_pem);
  auto up = run({"certificates", "upload", "--name", "www", "--cert", dir.file("c.pem"), "--key", dir.file("k.pem")}, env(owner));
  ASSERT_EQ(up.status, 0) << up.err;
  const std::string cert(json_of(up.out).at("id").as_string());
  EXPECT_EQ(up.out.find("PRIVATE KEY"), std::string::npos) << "the key is never returned";
  auto list = run({"certificates", "list"}, env(owner));
  EXPECT_TRUE(std::regex_search(list.out, std::regex(cert + R"( +www +uploaded +active +1 +\d{4}-)"))) << list.out;
  EXPECT_EQ(std::string(json_of(run({"certificates", "show", cert}, env(owner)).out).at("name").as_string()), "www");
  // An uploaded certificate is not renewed by certfleet: the API's conflict, exit 4.
  EXPECT_EQ(run({"certificates", "renew", cert}, env(owner)).status, to_int(exit_code::conflict));

  write_file(dir.file("cred.json"), R"({"name":"hook-secret","kind":"password","password":"s3cret-value"})");
  auto cred = run({"credentials", "create", "--from-file", dir.file("cred.json")}, env(owner));
  ASSERT_EQ(cred.status, 0) << cred.err;
  EXPECT_EQ(cred.out.find("s3cret-value"), std::string::npos) << cred.out;
  auto creds = run({"credentials", "list"}, env(owner));
  EXPECT_NE(creds.out.find("hook-secret"), std::string::npos) << creds.out;
  EXPECT_EQ(creds.out.find("s3cret-value"), std::string::npos) << creds.out;
  write_file(dir.file("bad.json"), R"({"name":"x","kind":"password","password":"p","extra":1})");
  auto bad = run({"credentials", "create", "--from-file", dir.file("bad.json")}, env(owner));
  EXPECT_EQ(bad.status, to_int(exit_code::usage));
  EXPECT_NE(bad.err.find("extra"), std::string::npos) << bad.err;

  EXPECT_EQ(run({"settings", "set", "jobs_page_size_default=40"}, env(owner)).status, 0);
  EXPECT_EQ(run({"settings", "get", "jobs_page_size_default"}, env(owner)).out, "40\n");
  auto refused = run({"settings", "set", "jobs_page_size_default=0", "no_such_setting=1"}, env(owner));
  EXPECT_EQ(refused.status, to_int(exit_code::usage)) << refused.err;
  EXPECT_EQ(run({"settings", "get", "jobs_page_size_default"}, env(owner)).out, "40\n") << "all of it or none";

  // A project's settings with --project (docs/approval.md); a system setting there is refused.
  EXPECT_EQ(run({"settings", "get", "issuance_requires_approval", "--project", "default"}, env(owner)).out, "off\n");
  EXPECT_EQ(run({"settings", "set", "issuance_requires_approval=on", "--project", "default"}, env(owner)).status, 0);
  EXPECT_EQ(run({"settings", "get", "issuance_requires_approval", "--project", "default"}, env(owner)).out, "on\n");
  auto wrong_scope = run({"settings", "set", "jobs_page_size_default=30", "--project", "default"}, env(owner));
  EXPECT_EQ(wrong_scope.status, to_int(exit_code::usage)) << wrong_scope.err;
  EXPECT_NE(wrong_scope.err.find("system-wide setting"), std::string::npos) << wrong_scope.err;
  EXPECT_EQ(run({"settings", "get", "issuance_requires_approval"}, env(owner)).status, to_int(exit_code::not_found))
      << "without --project: the system settings, which do not have it";
  EXPECT_EQ(run({"settings", "set", "issuance_requires_approval=off", "--project", "default"}, env(owner)).status, 0);
  // approve / reject reach their routes: an uploaded certificate awaits no approval (conflict),
  // an unknown one is not found; reject needs --reason.
  EXPECT_EQ(run({"certificates", "approve", cert}, env(owner)).status, to_int(exit_code::conflict));
  EXPECT_EQ(run({"certificates", "reject", cert, "--reason", "no"}, env(owner)).status, to_int(exit_code::conflict));
  EXPECT_EQ(run({"certificates", "approve", "0123456789abcdef01234567"}, env(owner)).status, to_int(exit_code::not_found));
  EXPECT_EQ(run({"certificates", "reject", cert}, env(owner)).status, to_int(exit_code::usage));

  EXPECT_EQ(run({"certificates", "delete", cert}, env(owner)).status, 0);
  // Without --server these commands say where they work.
  auto local = run({"certificates", "list", "--data", data});
  EXPECT_NE(local.status, 0);
}

// `certfleet targets import`: an Ansible INI inventory with a template and a known_hosts file
// (one host's name hashed, as Debian's ssh writes them) becomes SSH targets, all or none; a
// second import of the same names is refused row by row and stores nothing; CSV from a file.
TEST_F(remote_cli, targets_import_from_an_ansible_inventory_and_csv) {
  auto login = testbed::make_ssh_key(dir.path() / "login", "id_ed25519");
  auto host_a = testbed::make_ssh_key(dir.path() / "ha", "host_a");
  auto host_b = testbed::make_ssh_key(dir.path() / "hb", "host_b");
  write_file(dir.file("cred.json"), boost::json::serialize(boost::json::object{
                                        {"name", "deploy-key"}, {"kind", "ssh_key"}, {"private_key_pem", login.private_key}}));
  auto cred = run({"credentials", "create", "--from-file", dir.file("cred.json")}, env(owner));
  ASSERT_EQ(cred.status, 0) << cred.err;
  const std::string cred_id(json_of(cred.out).at("id").as_string());
  ASSERT_EQ(run({"settings", "set", "ssh_allow_list=10.0.0.0/8"}, env(owner)).status, 0);

  write_file(dir.file("hosts.ini"), "# the fleet\n"
                                    "[web]\n"
                                    "web1 ansible_host=10.0.0.31 ansible_user=ubuntu\n"
                                    "web2 ansible_host=10.0.0.32\n"
                                    "web3 ansible_host=10.0.0.33 ansible_port=2222\n"
                                    "[db]\n"
                                    "db1 ansible_host=10.0.0.50\n"
                                    "[web:vars]\n"
                                    "certfleet_cert_path=/etc/nginx/tls/www.crt\n");
  // web2 is known by its inventory name only (not its address), hashed there by OpenSSH's own ssh-keygen -H (as Debian's
  // HashKnownHosts writes every new entry).
  write_file(dir.file("known_hosts"), "10.0.0.31 " + host_a.public_line + "\n" + "web2 " + host_b.public_line + "\n" +
                                          "[10.0.0.33]:2222 " + host_a.public_line + "\n");
  ASSERT_EQ(std::system(("ssh-keygen -q -H -f " + dir.file("known_hosts") + " >/dev/null 2>&1").c_str()), 0);
  ASSERT_EQ(read_file(dir.file("known_hosts")).find("web2"), std::string::npos) << "the names are hashed";
  write_file(dir.file("template.json"), boost::json::serialize(boost::json::object{
                                            {"ssh", boost::json::object{{"user", "deploy"}, {"credential_id", cred_id},
                                                                        {"cert_path", "/srv/c.pem"}, {"key_path", "/srv/k.pem"},
                                                                        {"post_command", "nginx -t && systemctl reload nginx"}}}}));
  const std::vector<std::string> import{"targets", "import", "--ansible", dir.file("hosts.ini"), "--template",
                                        dir.file("template.json"), "--known-hosts", dir.file("known_hosts"), "--group", "web"};
  auto dry = run([&] { auto a = import; a.push_back("--dry-run"); return a; }(), {});
  ASSERT_EQ(dry.status, 0) << dry.err;
  std::vector<boost::json::object> rows;
  std::istringstream lines(dry.out);
  for (std::string l; std::getline(lines, l);) rows.push_back(json_of(l));
  ASSERT_EQ(rows.size(), 3u) << dry.out;  // the web group only
  EXPECT_EQ(rows[0].at("ssh").at("user").as_string(), "ubuntu");
  EXPECT_EQ(rows[0].at("ssh").at("cert_path").as_string(), "/etc/nginx/tls/www.crt");
  EXPECT_EQ(rows[1].at("ssh").at("host").as_string(), "10.0.0.32");
  EXPECT_EQ(rows[1].at("ssh").at("host_key").as_string(), host_b.public_line) << "a hashed entry, by the inventory name";
  EXPECT_EQ(rows[2].at("ssh").at("port").as_int64(), 2222);

  auto first = run(import, env(owner));
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out, "imported 3 targets into project default\n");
  auto list = run({"targets", "list"}, env(owner));
  // The NAME column (the second), not a substring: an object id may hold "db1".
  std::set<std::string> names;
  std::istringstream table(list.out);
  for (std::string l; std::getline(table, l);) {
    std::istringstream cells(l);
    std::string id, name;
    if (cells >> id >> name && id != "ID") names.insert(name);
  }
  EXPECT_EQ(names, (std::set<std::string>{"web1", "web2", "web3"})) << list.out;

  // Again: every row's name is taken; each named by its line, nothing stored, exit 2 (bad input).
  auto again = run(import, env(owner));
  EXPECT_EQ(again.status, to_int(exit_code::usage)) << again.err;
  EXPECT_NE(again.err.find("line 1: name: a target named \"web1\" already exists"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("line 3: name: a target named \"web3\" already exists"), std::string::npos) << again.err;

  // A host without a key anywhere: refused before anything is sent, naming its inventory line.
  auto no_key = run({"targets", "import", "--ansible", dir.file("hosts.ini"), "--template", dir.file("template.json"),
                     "--group", "db"},
                    env(owner));
  EXPECT_EQ(no_key.status, to_int(exit_code::usage));
  EXPECT_NE(no_key.err.find("line 7: host db1: no host key for 10.0.0.50"), std::string::npos) << no_key.err;

  write_file(dir.file("fleet.csv"), "name,module,ssh.host,ssh.user,ssh.credential_id,ssh.host_key,ssh.cert_path,ssh.key_path\n" +
                                        fmt::format("csv-1,ssh,10.0.0.60,deploy,{},{},/srv/c.pem,/srv/k.pem\n", cred_id,
                                                    host_a.public_line));
  auto csv = run({"targets", "import", "--from-file", dir.file("fleet.csv"), "-o", "json"}, env(owner));
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_EQ(json_of(csv.out).at("imported").as_int64(), 1);
}

TEST_F(remote_cli, fails_closed_with_the_reason_and_exit_code) {
  // The server's certificate is from a CA the system does not trust: refused, nothing sent.
  auto untrusted = run({"jobs", "list", "--server", addr, "--token", owner});
  EXPECT_EQ(untrusted.status, to_int(exit_code::unavailable)) << untrusted.out;
  EXPECT_NE(untrusted.err.find("certificate"), std::string::npos) << untrusted.err;
  // Plain HTTP to another machine would send the token in clear.
  auto clear = run({"jobs", "list", "--server", "http://192.0.2.10:8080", "--token", owner});
  EXPECT_EQ(clear.status, to_int(exit_code::usage));
  EXPECT_NE(clear.err.find("https://"), std::string::npos) << clear.err;
  // A name that merely starts like a loopback address is not this machine.
  auto named = run({"jobs", "list", "--server", "http://127.0.0.1.nip.example:8080", "--token", owner});
  EXPECT_EQ(named.status, to_int(exit_code::usage)) << named.err;
  // Both modes at once: which store is meant is unclear.
  auto both = run({"jobs", "list", "--data", data}, env(owner));
  EXPECT_EQ(both.status, to_int(exit_code::usage));
  EXPECT_NE(both.err.find("give one"), std::string::npos) << both.err;
  // No token, a malformed one.
  auto none = run({"jobs", "list"}, env(""));
  EXPECT_EQ(none.status, to_int(exit_code::usage));
  EXPECT_NE(none.err.find("CERTFLEET_TOKEN"), std::string::npos) << none.err;
  EXPECT_EQ(run({"jobs", "list", "--token", "not-a-token"}, env("")).status, to_int(exit_code::usage));
  // Nobody listening: unavailable, naming the server.
  auto down = run({"jobs", "list", "--server", "https://127.0.0.1:1", "--token", owner});
  EXPECT_EQ(down.status, to_int(exit_code::unavailable));
  EXPECT_NE(down.err.find("127.0.0.1:1"), std::string::npos) << down.err;
  // System tokens and --count stay on the store's host.
  EXPECT_EQ(run({"token", "create", "--role", "owner", "--system"}, env(owner)).status, to_int(exit_code::usage));
  EXPECT_EQ(run({"jobs", "enqueue", "--type", "noop", "--count", "5"}, env(owner)).status, to_int(exit_code::usage));
}

}  // namespace
