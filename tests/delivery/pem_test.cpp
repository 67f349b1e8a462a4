// Catalog checks of certificate bundles and SSH login keys (pure parsers), against certificates
// made in-process and keys made by the real ssh-keygen.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <sstream>

#include "certfleet/delivery/pem.hpp"
#include "certs.hpp"
#include "process.hpp"
#include "sshd.hpp"
#include "temp_dir.hpp"

using namespace certfleet;
using namespace certfleet::delivery;

namespace {

const std::int64_t now = testbed::unix_now_ms();

// Root CA → intermediate → leaf, made once (a few ms each).
struct chain_fixture {
  // When the certificates were made (the first test that asks, possibly long after start-up).
  std::int64_t made_at = testbed::unix_now_ms();
  testbed::pem_cert root = testbed::make_certificate({.common_name = "Test Root", .is_ca = true});
  testbed::pem_cert inter = testbed::make_certificate({.common_name = "Test Intermediate", .issuer = &root, .is_ca = true});
  testbed::pem_cert leaf = testbed::make_certificate(
      {.common_name = "www.example.test", .dns_sans = {"www.example.test", "example.test"}, .issuer = &inter});
};
const chain_fixture& pki() {
  static const chain_fixture f;
  return f;
}

void expect_error(const result<certificate_info>& r, const std::string& field, const std::string& needle) {
  ASSERT_FALSE(r) << "expected an error about " << field;
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, field) << r.error().message;
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ssh-keygen ARGS… -f dir/name; returns the private key text.
std::string keygen(const testbed::temp_dir& dir, const std::string& name, std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/ssh-keygen", "-q", "-C", "certfleet-test", "-f", dir.file(name)};
  argv.insert(argv.end(), args.begin(), args.end());
  auto [rc, out] = testbed::run_command(argv);
  if (rc != 0) throw std::runtime_error("ssh-keygen failed: " + out);
  return slurp(dir.file(name));
}

// The fingerprint `ssh-keygen -lf` prints for a key file ("256 SHA256:… comment (ED25519)").
std::string keygen_fingerprint(const std::string& path) {
  auto [rc, out] = testbed::run_command({"/usr/bin/ssh-keygen", "-lf", path});
  EXPECT_EQ(rc, 0) << out;
  auto a = out.find(' ');
  return out.substr(a + 1, out.find(' ', a + 1) - a - 1);
}

std::string first_two_words(const std::string& line) {
  auto a = line.find(' ');
  return line.substr(0, line.find_first_of(" \n", a + 1));
}

void expect_key_error(const result<ssh_key_info>& r, const std::string& needle) {
  ASSERT_FALSE(r) << "expected: " << needle;
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "private_key_pem");
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

// Rewrites the binary inside an OpenSSH private key file (to corrupt one part of it).
std::string edit_openssh(const std::string& pem, const std::function<void(std::string&)>& edit) {
  const std::string begin = "-----BEGIN OPENSSH PRIVATE KEY-----\n", end = "-----END OPENSSH PRIVATE KEY-----\n";
  std::string b64;
  for (char c : pem.substr(begin.size(), pem.find(end) - begin.size()))
    if (c != '\n') b64 += c;
  std::string raw(b64.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(raw.data()), reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  raw.resize(static_cast<std::size_t>(n) - (b64.ends_with("==") ? 2 : b64.ends_with("=") ? 1 : 0));
  edit(raw);
  std::string out(raw.size() * 2 + 4, '\0');
  n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(raw.data()),
                      static_cast<int>(raw.size()));
  out.resize(static_cast<std::size_t>(n));
  return begin + out + "\n" + end;
}

}  // namespace

TEST(pem_bundle, leaf_with_chain) {
  const auto& p = pki();
  auto r = parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem + p.root.cert_pem, p.leaf.key_pem, now);
  ASSERT_TRUE(r) << r.error().field << ": " << r.error().message;
  EXPECT_EQ(r->subject, "CN=www.example.test");
  EXPECT_EQ(r->issuer, "CN=Test Intermediate");
  EXPECT_EQ(r->sans, (std::vector<std::string>{"www.example.test", "example.test"}));
  EXPECT_EQ(r->chain_length, 2u);
  EXPECT_NEAR(static_cast<double>(r->not_after_ms), static_cast<double>(p.made_at + 90LL * 86400'000), 5000);
  EXPECT_NEAR(static_cast<double>(r->not_before_ms), static_cast<double>(p.made_at - 3600'000), 5000);
  EXPECT_EQ(r->not_after_ms % 1000, 0);

  // The fingerprint is the one openssl prints for the leaf (SHA-256 of the DER).
  testbed::temp_dir dir;
  std::ofstream(dir.file("leaf.pem")) << p.leaf.cert_pem;
  auto [rc, out] = testbed::run_command({"/usr/bin/openssl", "x509", "-in", dir.file("leaf.pem"), "-noout", "-fingerprint", "-sha256"});
  ASSERT_EQ(rc, 0);
  std::string hex;
  for (char c : out.substr(out.find('=') + 1))
    if (std::isxdigit(static_cast<unsigned char>(c))) hex += static_cast<char>(std::tolower(c));
  EXPECT_EQ(r->fingerprint_sha256, hex);

  // The chain may stop below the root.
  auto partial = parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem, p.leaf.key_pem, now);
  ASSERT_TRUE(partial) << partial.error().message;
  EXPECT_EQ(partial->chain_length, 1u);
}

TEST(pem_bundle, leaf_without_chain_and_other_key_formats) {
  auto self = testbed::make_certificate({.common_name = "solo.test"});
  for (std::string chain : {std::string(), std::string("\n  \n")}) {
    auto r = parse_certificate_bundle(self.cert_pem, chain, self.key_pem, now);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->chain_length, 0u);
    EXPECT_TRUE(r->sans.empty());
    EXPECT_EQ(r->subject, r->issuer);
  }
  // Traditional "BEGIN EC PRIVATE KEY" and ed25519 certificates.
  auto trad = testbed::make_certificate({.common_name = "trad.test", .traditional_key = true});
  ASSERT_NE(trad.key_pem.find("BEGIN EC PRIVATE KEY"), std::string::npos);
  EXPECT_TRUE(parse_certificate_bundle(trad.cert_pem, "", trad.key_pem, now));
  auto ed_ca = testbed::make_certificate({.common_name = "Ed CA", .key_type = "ed25519", .is_ca = true});
  auto ed = testbed::make_certificate({.common_name = "ed.test", .key_type = "ed25519", .issuer = &ed_ca});
  auto r = parse_certificate_bundle(ed.cert_pem, ed_ca.cert_pem, ed.key_pem, now);
  EXPECT_TRUE(r) << r.error().message;
  // Text around the blocks (as `openssl pkcs12` writes "Bag Attributes") is ignored.
  EXPECT_TRUE(parse_certificate_bundle("subject=CN = solo.test\n" + self.cert_pem + "\n", "", "comment\n" + self.key_pem, now));
}

TEST(pem_bundle, key_of_another_certificate) {
  const auto& p = pki();
  auto other = testbed::make_certificate({.common_name = "www.example.test", .issuer = &p.inter});
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem, other.key_pem, now), "key_pem",
               "private key does not belong to the certificate");
  // A key of another type altogether.
  auto ed = testbed::make_certificate({.common_name = "x", .key_type = "ed25519"});
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", ed.key_pem, now), "key_pem", "does not belong");
  // The intermediate's key next to the leaf.
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", p.inter.key_pem, now), "key_pem", "does not belong");
}

TEST(pem_bundle, expired_leaf) {
  // 2020-01-02T03:04:05Z
  auto old = testbed::make_certificate(
      {.common_name = "old.test", .not_before_ms = 1577000000000, .not_after_ms = 1577934245000});
  expect_error(parse_certificate_bundle(old.cert_pem, "", old.key_pem, now), "cert_pem",
               "certificate expired at 2020-01-02T03:04:05Z");
  // not_after == now is expired; one second later is not.
  auto edge = testbed::make_certificate({.common_name = "edge.test", .not_after_ms = 1900000000000});
  expect_error(parse_certificate_bundle(edge.cert_pem, "", edge.key_pem, 1900000000000), "cert_pem", "expired");
  EXPECT_TRUE(parse_certificate_bundle(edge.cert_pem, "", edge.key_pem, 1899999999999));
  // An expired intermediate is the TLS client's business, not a parse error.
  auto old_ca = testbed::make_certificate(
      {.common_name = "Old CA", .not_before_ms = 1577000000000, .not_after_ms = 1577934245000, .is_ca = true});
  auto leaf = testbed::make_certificate({.common_name = "l.test", .issuer = &old_ca});
  EXPECT_TRUE(parse_certificate_bundle(leaf.cert_pem, old_ca.cert_pem, leaf.key_pem, now));
}

TEST(pem_bundle, chain_must_be_in_order) {
  const auto& p = pki();
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, p.root.cert_pem + p.inter.cert_pem, p.leaf.key_pem, now),
               "chain_pem", "certificate 1 does not issue the one before it (chain must be in order leaf→root)");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem + p.inter.cert_pem, p.leaf.key_pem, now),
               "chain_pem", "certificate 2 does not issue the one before it");
  auto stranger = testbed::make_certificate({.common_name = "Stranger CA", .is_ca = true});
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem + stranger.cert_pem, p.leaf.key_pem, now),
               "chain_pem", "certificate 2 does not issue");
  // Same name, other key: the signature decides, not the name.
  auto impostor = testbed::make_certificate({.common_name = "Test Intermediate", .issuer = &p.root, .is_ca = true});
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, impostor.cert_pem, p.leaf.key_pem, now), "chain_pem",
               "certificate 1 does not issue");
  // A leaf certificate cannot issue (no keyCertSign).
  auto leaf2 = testbed::make_certificate({.common_name = "child", .issuer = &p.leaf});
  expect_error(parse_certificate_bundle(leaf2.cert_pem, p.leaf.cert_pem, leaf2.key_pem, now), "chain_pem",
               "certificate 1 does not issue");
}

TEST(pem_bundle, garbage_and_wrong_blocks) {
  const auto& p = pki();
  for (std::string bad : {std::string(), std::string("hello"), std::string("\0\1\2", 3),
                          std::string("-----BEGIN CERTIFICATE-----\nnot base64!!\n-----END CERTIFICATE-----\n"),
                          std::string("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
                          p.leaf.cert_pem.substr(0, p.leaf.cert_pem.size() / 2)}) {
    auto r = parse_certificate_bundle(bad, "", p.leaf.key_pem, now);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "cert_pem") << r.error().message;
  }
  expect_error(parse_certificate_bundle(p.leaf.key_pem, "", p.leaf.key_pem, now), "cert_pem", "the key goes in key_pem");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "junk", p.leaf.key_pem, now), "chain_pem", "not PEM certificates");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, p.inter.cert_pem + p.leaf.key_pem, p.leaf.key_pem, now),
               "chain_pem", "PRIVATE KEY");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", "", now), "key_pem", "not a PEM private key");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", p.leaf.cert_pem, now), "key_pem", "not a PEM private key");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", now),
               "key_pem", "not a PEM private key");
}

TEST(pem_bundle, exactly_one_leaf_and_size_limits) {
  const auto& p = pki();
  expect_error(parse_certificate_bundle(p.leaf.cert_pem + p.inter.cert_pem, "", p.leaf.key_pem, now), "cert_pem",
               "must hold exactly one certificate");
  std::string big = p.leaf.cert_pem + std::string(64 * 1024, '\n');
  expect_error(parse_certificate_bundle(big, "", p.leaf.key_pem, now), "cert_pem", "larger than 64 KiB");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, big, p.leaf.key_pem, now), "chain_pem", "larger than 64 KiB");
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", big, now), "key_pem", "larger than 64 KiB");

  // Ten chain certificates are fine, eleven are not.
  std::vector<testbed::pem_cert> cas{testbed::make_certificate({.common_name = "CA 0", .is_ca = true})};
  for (int i = 1; i <= 11; ++i)
    cas.push_back(testbed::make_certificate({.common_name = "CA " + std::to_string(i), .issuer = &cas.back(), .is_ca = true}));
  auto leaf = testbed::make_certificate({.common_name = "deep.test", .issuer = &cas.back()});
  auto chain_of = [&](std::size_t n) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += cas[cas.size() - 1 - i].cert_pem;
    return s;
  };
  auto ten = parse_certificate_bundle(leaf.cert_pem, chain_of(10), leaf.key_pem, now);
  ASSERT_TRUE(ten) << ten.error().message;
  EXPECT_EQ(ten->chain_length, 10u);
  expect_error(parse_certificate_bundle(leaf.cert_pem, chain_of(11), leaf.key_pem, now), "chain_pem",
               "more than 10 certificates");
}

TEST(pem_bundle, encrypted_key_is_refused) {
  const auto& p = pki();
  testbed::temp_dir dir;
  std::ofstream(dir.file("k.pem")) << p.leaf.key_pem;
  auto [rc, out] = testbed::run_command({"/usr/bin/openssl", "pkey", "-in", dir.file("k.pem"), "-aes256", "-passout",
                                         "pass:secret", "-out", dir.file("enc.pem")});
  ASSERT_EQ(rc, 0) << out;
  expect_error(parse_certificate_bundle(p.leaf.cert_pem, "", slurp(dir.file("enc.pem")), now), "key_pem",
               "encrypted; upload it unencrypted");
}

// ---- SSH login keys ----

TEST(ssh_private_key, openssh_format_matches_ssh_keygen) {
  testbed::temp_dir dir;
  auto ed = testbed::make_ssh_key(dir.path(), "ed");
  auto r = parse_ssh_private_key(ed.private_key, "");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->type, "ssh-ed25519");
  EXPECT_EQ(r->public_line, ed.public_line);
  EXPECT_EQ(r->fingerprint, keygen_fingerprint(dir.file("ed")));

  for (std::string bits : {"256", "384", "521"}) {
    auto pem = keygen(dir, "ec" + bits, {"-t", "ecdsa", "-b", bits, "-N", ""});
    auto e = parse_ssh_private_key(pem, "");
    ASSERT_TRUE(e) << bits << ": " << e.error().message;
    EXPECT_EQ(e->type, "ecdsa-sha2-nistp" + bits);
    EXPECT_EQ(e->public_line, first_two_words(slurp(dir.file("ec" + bits + ".pub"))));
    EXPECT_EQ(e->fingerprint, keygen_fingerprint(dir.file("ec" + bits)));
  }
}

TEST(ssh_private_key, pem_and_pkcs8_formats) {
  testbed::temp_dir dir;
  for (auto [format, bits] : {std::pair{"PEM", "256"}, {"PEM", "521"}, {"PKCS8", "384"}}) {
    std::string name = std::string(format) + bits;
    auto pem = keygen(dir, name, {"-t", "ecdsa", "-b", bits, "-m", format, "-N", ""});
    ASSERT_EQ(pem.find("OPENSSH"), std::string::npos) << pem;
    auto r = parse_ssh_private_key(pem, "");
    ASSERT_TRUE(r) << name << ": " << r.error().message;
    EXPECT_EQ(r->type, "ecdsa-sha2-nistp" + std::string(bits));
    EXPECT_EQ(r->public_line, first_two_words(slurp(dir.file(name + ".pub"))));
    EXPECT_EQ(r->fingerprint, keygen_fingerprint(dir.file(name)));
  }
  // ed25519 PKCS#8 (what `openssl genpkey` makes): same public line as the OpenSSH form of that key.
  auto ed = testbed::make_certificate({.key_type = "ed25519"}).key_pem;
  auto r = parse_ssh_private_key(ed, "");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->type, "ssh-ed25519");
  EXPECT_TRUE(r->public_line.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI")) << r->public_line;
  EXPECT_TRUE(r->fingerprint.starts_with("SHA256:"));
}

TEST(ssh_private_key, encrypted_keys) {
  testbed::temp_dir dir;
  // OpenSSH format: the public key is in clear; the passphrase is only checked at login.
  auto pem = keygen(dir, "enc_ed", {"-t", "ed25519", "-N", "correct horse"});
  auto r = parse_ssh_private_key(pem, "correct horse");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->public_line, first_two_words(slurp(dir.file("enc_ed.pub"))));
  EXPECT_EQ(r->fingerprint, keygen_fingerprint(dir.file("enc_ed")));
  expect_key_error(parse_ssh_private_key(pem, ""), "encrypted: give its passphrase");

  // PEM: OpenSSL decrypts it, so a wrong passphrase is caught now.
  auto pem_enc = keygen(dir, "enc_ec", {"-t", "ecdsa", "-m", "PEM", "-N", "correct horse"});
  ASSERT_NE(pem_enc.find("ENCRYPTED"), std::string::npos);
  auto ok = parse_ssh_private_key(pem_enc, "correct horse");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->fingerprint, keygen_fingerprint(dir.file("enc_ec")));
  expect_key_error(parse_ssh_private_key(pem_enc, "wrong"), "passphrase does not decrypt");
  expect_key_error(parse_ssh_private_key(pem_enc, ""), "encrypted: give its passphrase");
}

TEST(ssh_private_key, rsa_is_refused) {
  testbed::temp_dir dir;
  const std::string msg = "RSA keys are not supported: libssh2 1.10 cannot sign with rsa-sha2; use ed25519 or ECDSA";
  auto openssh = keygen(dir, "rsa", {"-t", "rsa", "-b", "1024", "-N", ""});
  auto r = parse_ssh_private_key(openssh, "");
  expect_key_error(r, msg);
  EXPECT_EQ(r.error().message, msg);
  expect_key_error(parse_ssh_private_key(keygen(dir, "rsa_pem", {"-t", "rsa", "-b", "1024", "-m", "PEM", "-N", ""}), ""), msg);
  expect_key_error(parse_ssh_private_key(keygen(dir, "rsa_enc", {"-t", "rsa", "-b", "1024", "-N", "passphrase"}), ""), msg);
}

TEST(ssh_private_key, corrupt_and_wrong_input) {
  testbed::temp_dir dir;
  auto ed = testbed::make_ssh_key(dir.path(), "ed");
  ASSERT_TRUE(parse_ssh_private_key(ed.private_key, ""));
  // Offsets inside openssh-key-v1: magic(15) cipher(4+4) kdf(4+4) kdfopts(4) count(4) pub(4+51)
  // private-length(4), then check1, check2, type, public(4+32), private(4+64).
  const std::size_t priv = 15 + 8 + 8 + 4 + 4 + 4 + 51 + 4;
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b[priv + 7] ^= 1; }), ""),
                   "check numbers differ");
  const std::size_t seed = priv + 8 + 4 + 11 + 4 + 32 + 4;
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b[seed] ^= 1; }), ""),
                   "does not match its public key");
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b[priv + 8 + 4 + 11 + 4] ^= 1; }), ""),
                   "malformed");
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b.resize(b.size() - 20); }), ""),
                   "truncated");
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b[0] = 'X'; }), ""),
                   "not an openssh-key-v1");
  expect_key_error(parse_ssh_private_key(edit_openssh(ed.private_key, [&](std::string& b) { b.back() ^= 0x40; }), ""),
                   "padding");

  auto ec = keygen(dir, "ec", {"-t", "ecdsa", "-N", ""});
  // The last byte of the private scalar, just before the comment (4 + 14) and padding.
  expect_key_error(parse_ssh_private_key(edit_openssh(ec, [&](std::string& b) {
                                           auto pad = static_cast<std::size_t>(b.back());
                                           b[b.size() - pad - 4 - 14 - 1] ^= 1;
                                         }), ""),
                   "does not match its public key");

  expect_key_error(parse_ssh_private_key("", ""), "not a private key");
  expect_key_error(parse_ssh_private_key("hello", ""), "not a private key");
  expect_key_error(parse_ssh_private_key(ed.public_line, ""), "this is a public key");
  expect_key_error(parse_ssh_private_key(ed.private_key.substr(0, 60), ""), "no END line");
  expect_key_error(parse_ssh_private_key("-----BEGIN OPENSSH PRIVATE KEY-----\n!!!\n-----END OPENSSH PRIVATE KEY-----\n", ""),
                   "base64 is broken");
  expect_key_error(parse_ssh_private_key(testbed::make_certificate({}).cert_pem, ""), "not a private key");
  expect_key_error(parse_ssh_private_key("PuTTY-User-Key-File-3: ssh-ed25519\n", ""), "PuTTY");
  expect_key_error(parse_ssh_private_key(ed.private_key + std::string(64 * 1024, '\n'), ""), "larger than 64 KiB");
  // Windows line endings are fine.
  std::string crlf;
  for (char c : ed.private_key) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(parse_ssh_private_key(crlf, ""));
}

// Issue 28: certificates and keys below current minimums are refused, naming the field and the
// size or curve found; RSA 2048+, P-256, P-384 and Ed25519 pass.
TEST(pem_bundle, weak_certificate_keys_are_refused_naming_the_field_and_what_was_found) {
  const auto now = testbed::unix_now_ms();
  struct weak {
    const char* type;
    const char* found;
  };
  for (auto [type, found] : {weak{"rsa:1024", "RSA key of 1024 bits"}, weak{"ec:P-521", "curve secp521r1"},
                             weak{"ec:secp256k1", "curve secp256k1"}, weak{"ec:P-224", "curve secp224r1"}}) {
    auto c = testbed::make_certificate({.common_name = "weak.example", .key_type = type});
    auto r = parse_certificate_bundle(c.cert_pem, "", c.key_pem, now);
    ASSERT_FALSE(r) << type;
    EXPECT_EQ(r.error().field, "cert_pem") << type;
    EXPECT_NE(r.error().message.find(found), std::string::npos) << type << ": " << r.error().message;
    // The same weak key under a strong certificate: key_pem is the field named.
    auto strong = testbed::make_certificate({.common_name = "strong.example"});
    auto k = parse_certificate_bundle(strong.cert_pem, "", c.key_pem, now);
    ASSERT_FALSE(k) << type;
    EXPECT_EQ(k.error().field, "key_pem") << type;
    EXPECT_NE(k.error().message.find(found), std::string::npos) << type << ": " << k.error().message;
  }
  for (const char* type : {"ec", "ec:P-384", "rsa:2048", "ed25519"}) {
    auto c = testbed::make_certificate({.common_name = "ok.example", .key_type = type});
    auto r = parse_certificate_bundle(c.cert_pem, "", c.key_pem, now);
    EXPECT_TRUE(r) << type << ": " << (r ? "" : r.error().message);
  }
}
