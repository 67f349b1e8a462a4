// Secrets sealed at rest: the envelope, the key file and the start-up decision.
#include "certfleet/core/secrets.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace certfleet;

namespace {

kek new_key(std::uint32_t version = 1) { return kek::generate(version).value(); }

// A fixed key (tests that need the same key twice without a file).
const char* fixed_line = "certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n";

std::string b64_decode(const std::string& in) {
  std::string out(in.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n) - (in.ends_with("==") ? 2 : in.ends_with("=") ? 1 : 0));
  return out;
}
std::string b64_encode(const std::string& in) {
  std::string out(in.size() * 2 + 4, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

void write_file(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  ::chmod(path.c_str(), mode);
}

}  // namespace

TEST(secrets, seal_round_trip) {
  auto k = new_key();
  for (std::string plain : {std::string(), std::string("hunter2"), std::string("bin\0ary\xff", 8), std::string(100000, 'x')}) {
    auto env = seal(k, plain, "credential:abc:secret");
    ASSERT_TRUE(env) << env.error().message;
    EXPECT_TRUE(env->starts_with("cfs1:1:")) << *env;
    EXPECT_EQ(env->find(plain.empty() ? "\x01" : plain.substr(0, 5)), std::string::npos);
    auto back = open_sealed(k, *env, "credential:abc:secret");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, plain);
  }
  // A random nonce per seal: the same secret never gives the same envelope.
  EXPECT_NE(seal(k, "same", "a").value(), seal(k, "same", "a").value());
}

TEST(secrets, tampering_with_any_part_is_detected) {
  auto k = new_key();
  const std::string plain = "-----BEGIN PRIVATE KEY-----\nsecret\n";
  auto env = seal(k, plain, "certificate:1:key").value();
  const std::string head = "cfs1:1:";
  std::string blob = b64_decode(env.substr(head.size()));
  ASSERT_EQ(blob.size(), 12 + plain.size() + 16);
  // One byte in the nonce, the ciphertext (first and last) and the tag.
  for (std::size_t pos : {std::size_t{0}, std::size_t{11}, std::size_t{12}, 12 + plain.size() - 1, 12 + plain.size(),
                          blob.size() - 1}) {
    std::string bad = blob;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    auto r = open_sealed(k, head + b64_encode(bad), "certificate:1:key");
    ASSERT_FALSE(r) << "flipped byte " << pos;
    EXPECT_TRUE(r.error().is(errc::config_invalid));
    EXPECT_EQ(r.error().field, "key_file");
    EXPECT_EQ(r.error().message, "sealed secret does not open with this key (wrong key file, or the data was altered)");
  }
  // Truncated or extended blobs.
  EXPECT_FALSE(open_sealed(k, head + b64_encode(blob.substr(0, blob.size() - 1)), "certificate:1:key"));
  EXPECT_FALSE(open_sealed(k, head + b64_encode(blob + "x"), "certificate:1:key"));
  EXPECT_FALSE(open_sealed(k, head + b64_encode(blob.substr(0, 27)), "certificate:1:key"));
  // The text around the blob.
  for (std::string bad : {std::string(""), std::string("cfs1:"), std::string("cfs1:1:"), "cfs2:1:" + env.substr(head.size()),
                          "cfs1:01:" + env.substr(head.size()), "cfs1:x:" + env.substr(head.size()), env + "=",
                          env + "\n", " " + env, env.substr(0, env.size() - 1), std::string("cfs1:1:!!!!")}) {
    auto r = open_sealed(k, bad, "certificate:1:key");
    ASSERT_FALSE(r) << bad;
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << bad << ": " << r.error().message;
    EXPECT_EQ(r.error().field, "sealed");
  }
}

TEST(secrets, wrong_key_or_aad_does_not_open) {
  auto k = new_key();
  auto env = seal(k, "pw", "credential:1:secret").value();
  auto other = open_sealed(new_key(), env, "credential:1:secret");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("does not open with this key"), std::string::npos);
  // The aad binds the envelope to its row: copied to another row, it does not open.
  EXPECT_FALSE(open_sealed(k, env, "credential:2:secret"));
  EXPECT_FALSE(open_sealed(k, env, ""));
  EXPECT_TRUE(open_sealed(k, env, "credential:1:secret"));
}

TEST(secrets, envelope_names_its_key_version) {
  auto v1 = new_key(1), v2 = new_key(2);
  auto env = seal(v2, "pw", "x").value();
  EXPECT_TRUE(env.starts_with("cfs1:2:"));
  EXPECT_EQ(sealed_kek_version(env), 2u);
  EXPECT_EQ(sealed_kek_version(seal(v1, "pw", "x").value()), 1u);
  EXPECT_EQ(sealed_kek_version("cfs1:4294967295:AAAA"), 4294967295u);
  for (auto bad : {"", "cfs1", "cfs1:", "cfs1::AAAA", "cfs1:0:AAAA", "cfs1:4294967296:AAAA", "cfs1:-1:AAAA", "cfs1:+1:A",
                   "cfs1:1", "plain text"})
    EXPECT_EQ(sealed_kek_version(bad), std::nullopt) << bad;
  auto r = open_sealed(v1, env, "x");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::config_invalid));
  EXPECT_NE(r.error().message.find("key version 2"), std::string::npos) << r.error().message;
  EXPECT_FALSE(kek::generate(0));
}

TEST(secrets, fingerprint_is_stable_and_key_dependent) {
  auto a = parse_key_file_text(fixed_line).value();
  auto a2 = parse_key_file_text(fixed_line).value();
  EXPECT_EQ(a.fingerprint(), a2.fingerprint());
  EXPECT_EQ(a.fingerprint().size(), 64u);
  EXPECT_EQ(a.fingerprint().find_first_not_of("0123456789abcdef"), std::string::npos);
  // Not a bare hash of the key bytes (domain-separated), and it depends on the version.
  EXPECT_NE(a.fingerprint(), "630dcd2966c4336691125448bbb25b4ff412a49c732db2c8abc1b8581bd710dd");
  auto v2 = parse_key_file_text("certfleet-kek v2 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").value();
  EXPECT_NE(a.fingerprint(), v2.fingerprint());
  EXPECT_NE(new_key().fingerprint(), new_key().fingerprint());
  // A copy is the same key.
  kek c = a;
  EXPECT_EQ(c.fingerprint(), a.fingerprint());
  EXPECT_EQ(open_sealed(c, seal(a, "s", "x").value(), "x").value(), "s");
}

TEST(secrets, key_file_create_then_load) {
  testbed::temp_dir dir;
  auto path = dir.file("kek");
  auto made = create_key_file(path);
  ASSERT_TRUE(made) << made.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  EXPECT_TRUE(line.starts_with("certfleet-kek v1 ")) << "format";
  EXPECT_EQ(line.size(), std::string("certfleet-kek v1 ").size() + 44);

  auto loaded = load_key_file(path);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->version(), 1u);
  EXPECT_EQ(loaded->fingerprint(), made->fingerprint());
  // Sealed before the "restart", opened after it.
  EXPECT_EQ(open_sealed(*loaded, seal(*made, "pw", "a").value(), "a").value(), "pw");

  // Never over an existing file, whatever it holds.
  auto again = create_key_file(path);
  ASSERT_FALSE(again);
  EXPECT_TRUE(again.error().is(errc::config_invalid));
  EXPECT_EQ(again.error().field, "key_file");
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos);
  EXPECT_EQ(load_key_file(path)->fingerprint(), made->fingerprint());

  auto no_dir = create_key_file(dir.file("missing/kek"));
  ASSERT_FALSE(no_dir);
  EXPECT_NE(no_dir.error().message.find("directory"), std::string::npos) << no_dir.error().message;
}

TEST(secrets, key_file_errors_say_what_to_do) {
  testbed::temp_dir dir;
  auto expect_error = [](const std::string& path, const std::string& needle) {
    auto r = load_key_file(path);
    ASSERT_FALSE(r) << path;
    EXPECT_TRUE(r.error().is(errc::config_invalid));
    EXPECT_EQ(r.error().field, "key_file");
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  };
  expect_error(dir.file("nope"), "does not exist; restore it from backup");

  auto wide = dir.file("wide");
  write_file(wide, fixed_line, 0644);
  expect_error(wide, "chmod 600 " + wide);
  write_file(wide, fixed_line, 0640);
  expect_error(wide, "has mode 0640");
  write_file(wide, fixed_line, 0604);
  expect_error(wide, "chmod 600");
  write_file(wide, fixed_line, 0400);  // narrower is fine
  EXPECT_TRUE(load_key_file(wide));

  expect_error(dir.path().string(), "not a regular file");

  auto bad = dir.file("bad");
  const std::pair<std::string, std::string> cases[] = {
      {"", "not a certfleet key file"},
      {"hello world\n", "not a certfleet key file"},
      {"-----BEGIN PRIVATE KEY-----\n", "not a certfleet key file"},
      {"certfleet-key v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "not a certfleet key file"},
      {"certfleet-kek 1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "not v<number>"},
      {"certfleet-kek v0 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "not v<number>"},
      {"certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\n", "not valid base64"},
      {"certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8= \n", "", },  // trailing blank: fine
      {"certfleet-kek v1  AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "not valid base64"},
      {"certfleet-kek v1 AAECAwQFBgcICQoLDA0ODw==\n", "16-byte key; a key is 32 bytes"},
      {"certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gIQ==\n", "34-byte key"},
      {std::string(fixed_line) + std::string(fixed_line), "holds version 1 twice"},
      {std::string(fixed_line) + "certfleet-kek v2 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", "no \"primary <version>\" line"},
      {std::string(fixed_line) + "primary 2\n", "names primary version 2, which it does not hold (it holds v1)"},
      {std::string(fixed_line) + "primary 1\nprimary 1\n", "primary version twice"},
      {std::string(fixed_line) + "primary one\n", "line 2 is not \"primary <version>\""},
      {std::string(fixed_line) + "hello\n", "line 2 is not a certfleet key file"},
      {"primary 1\n", "not a certfleet key file"},
      {std::string(5000, 'a'), "too large"},
  };
  for (const auto& [text, needle] : cases) {
    write_file(bad, text);
    if (needle.empty()) {
      EXPECT_TRUE(load_key_file(bad)) << text;
    } else {
      SCOPED_TRACE(text);
      expect_error(bad, needle);
    }
  }
  write_file(bad, "certfleet-kek v1 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");  // no final newline: fine
  EXPECT_TRUE(load_key_file(bad));

  if (::geteuid() != 0) {  // root reads a 0000 file anyway
    write_file(bad, fixed_line, 0000);
    expect_error(bad, "cannot be opened");
  }
}

TEST(secrets, start_up_decision) {
  auto k = parse_key_file_text(fixed_line).value();
  auto other = new_key();
  const std::string fp = k.fingerprint();

  // First start: nothing recorded, nothing sealed, no key yet: go on (the caller creates one).
  EXPECT_TRUE(check_key_matches(std::nullopt, 0, nullptr, "/etc/certfleet/kek"));
  // The key file is gone but secrets exist: refuse, never regenerate.
  auto gone = check_key_matches(fp, 3, nullptr, "/etc/certfleet/kek");
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().is(errc::config_invalid));
  EXPECT_EQ(gone.error().field, "key_file");
  EXPECT_EQ(gone.error().message,
            "refusing to start: 3 sealed secrets exist but the key file /etc/certfleet/kek is missing; restore it from "
            "backup (it is never regenerated over existing secrets)");
  EXPECT_NE(check_key_matches(std::nullopt, 1, nullptr, "/k").error().message.find("1 sealed secret exists"),
            std::string::npos);
  // Recorded fingerprint but nothing sealed: a new key loses nothing.
  EXPECT_TRUE(check_key_matches(fp, 0, nullptr, "/k"));

  EXPECT_TRUE(check_key_matches(fp, 5, &k, "/k"));
  EXPECT_TRUE(check_key_matches(std::nullopt, 5, &k, "/k"));  // nothing recorded yet: the caller records it
  EXPECT_TRUE(check_key_matches(std::nullopt, 0, &k, "/k"));
  for (std::uint64_t n : {0u, 7u}) {
    auto wrong = check_key_matches(fp, n, &other, "/k");
    ASSERT_FALSE(wrong);
    EXPECT_TRUE(wrong.error().is(errc::config_invalid));
    EXPECT_NE(wrong.error().message.find("not the key this store's secrets were sealed with"), std::string::npos);
    EXPECT_NE(wrong.error().message.find(fp.substr(0, 16)), std::string::npos);
  }
}

// DESIGN §11: the key file is a keyring. The one-line file of earlier versions is a ring of one
// version, primary, byte for byte; more versions add a "primary" line.
TEST(keyring, old_one_line_file_is_a_ring_of_one) {
  auto k = parse_key_file_text(fixed_line).value();
  EXPECT_EQ(k.version(), 1u);
  EXPECT_EQ(k.versions(), std::vector<std::uint32_t>{1});
  EXPECT_EQ(key_file_text(k), fixed_line);  // written back unchanged
  auto v7 = parse_key_file_text("certfleet-kek v7 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=").value();
  EXPECT_EQ(v7.version(), 7u);
  EXPECT_EQ(key_file_text(v7), "certfleet-kek v7 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n");
}

TEST(keyring, rotate_seals_with_primary_and_opens_every_version) {
  auto v1 = parse_key_file_text(fixed_line).value();
  auto old_env = seal(v1, "old secret", "credential:1:secret").value();
  auto ring = v1.with_new_primary().value();
  EXPECT_EQ(ring.version(), 2u);
  EXPECT_EQ(ring.versions(), (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(v1.version(), 1u);  // the ring it came from is unchanged
  auto new_env = seal(ring, "new secret", "credential:2:secret").value();
  EXPECT_TRUE(new_env.starts_with("cfs1:2:"));
  EXPECT_EQ(open_sealed(ring, old_env, "credential:1:secret").value(), "old secret");
  EXPECT_EQ(open_sealed(ring, new_env, "credential:2:secret").value(), "new secret");
  EXPECT_FALSE(open_sealed(ring, new_env, "credential:1:secret"));  // aad still binds
  EXPECT_EQ(ring.fingerprint(1), v1.fingerprint());
  EXPECT_EQ(ring.fingerprint(), ring.fingerprint(2));
  EXPECT_EQ(ring.fingerprint(3), std::nullopt);

  // Serialized and parsed back: the same ring.
  auto text = key_file_text(ring);
  EXPECT_TRUE(text.starts_with(fixed_line));
  EXPECT_TRUE(text.ends_with("\nprimary 2\n")) << "format";
  auto back = parse_key_file_text(text).value();
  EXPECT_EQ(back.version(), 2u);
  EXPECT_EQ(back.fingerprint(1), ring.fingerprint(1));
  EXPECT_EQ(back.fingerprint(2), ring.fingerprint(2));
  EXPECT_EQ(open_sealed(back, old_env, "credential:1:secret").value(), "old secret");
  // Lines in any order, the primary line anywhere, blank lines and CRLF are read the same.
  auto lines = text.substr(std::string(fixed_line).size());
  auto shuffled = "primary 2\r\n\n" + lines.substr(0, lines.find("primary")) + fixed_line;
  EXPECT_EQ(parse_key_file_text(shuffled).value().fingerprint(), ring.fingerprint());

  // Retire: never the primary, never a version not held; the result opens only what is left.
  auto no_primary = ring.without_version(2);
  ASSERT_FALSE(no_primary);
  EXPECT_EQ(no_primary.error().field, "key_file");
  EXPECT_NE(no_primary.error().message.find("primary"), std::string::npos);
  EXPECT_FALSE(ring.without_version(5));
  auto retired = ring.without_version(1).value();
  EXPECT_EQ(retired.versions(), std::vector<std::uint32_t>{2});
  EXPECT_EQ(key_file_text(retired).find("primary"), std::string::npos);  // one version: one line again
  auto gone = open_sealed(retired, old_env, "credential:1:secret");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().field, "key_file");
  EXPECT_NE(gone.error().message.find("key version 1"), std::string::npos) << gone.error().message;
  EXPECT_NE(gone.error().message.find("holds v2"), std::string::npos) << gone.error().message;
}

TEST(keyring, replace_is_atomic_and_a_loaded_ring_reloads) {
  testbed::temp_dir dir;
  auto path = dir.file("kek");
  auto made = create_key_file(path).value();
  auto server = load_key_file(path).value();  // a process started before the rotation
  auto sealer = load_key_file(path).value();  // another one, that only seals
  auto rotated = replace_key_file(path, made.with_new_primary().value());
  ASSERT_TRUE(rotated) << rotated.error().message;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1) << "no temporary file left";
  auto env2 = seal(*rotated, "s", "a").value();
  EXPECT_EQ(server.version(), 1u);
  // The envelope names version 2, which the old process lacks: it reads the file again.
  EXPECT_EQ(open_sealed(server, env2, "a").value(), "s");
  EXPECT_EQ(server.version(), 2u);
  EXPECT_EQ(load_key_file(path).value().fingerprint(), rotated->fingerprint());
  // A process that only seals looks at the file at most once a second: within a second of the
  // rotation it seals with the new primary.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_TRUE(seal(sealer, "s", "a").value().starts_with("cfs1:2:"));
  EXPECT_EQ(sealer.version(), 2u);

  // A file whose version 1 is another key is refused at reload, and the ring in use is kept.
  auto other = replace_key_file(path, kek::generate(1).value().with_new_primary().value().with_new_primary().value());
  ASSERT_TRUE(other);
  auto env3 = seal(*other, "t", "a").value();
  auto r = open_sealed(server, env3, "a");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("another key for version 1"), std::string::npos) << r.error().message;
  EXPECT_EQ(server.version(), 2u);
}

TEST(keyring, start_up_decision_per_version) {
  auto v1 = parse_key_file_text(fixed_line).value();
  auto ring = v1.with_new_primary().value();
  keyring_facts f;
  f.legacy_fingerprint = v1.fingerprint();
  f.sealed_by_version = {{1, 4}, {2, 6}};
  EXPECT_TRUE(check_keyring_matches(f, &ring, "/k"));
  // The old file (v1 only) against a store that has v2 envelopes: refused, naming the version.
  auto missing = check_keyring_matches(f, &v1, "/k");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().field, "key_file");
  EXPECT_NE(missing.error().message.find("6 sealed secrets are sealed with key version 2, which the key file /k does "
                                         "not hold (it holds v1)"),
            std::string::npos)
      << missing.error().message;
  // Values that are not envelopes (counted as version 0) name no key version.
  keyring_facts junk;
  junk.sealed_by_version = {{0, 2}, {1, 1}};
  EXPECT_TRUE(check_keyring_matches(junk, &v1, "/k"));
  // Recorded per version: a different key of that version is the wrong file.
  f.fingerprints = {{1, *ring.fingerprint(1)}, {2, *ring.fingerprint(2)}};
  EXPECT_TRUE(check_keyring_matches(f, &ring, "/k"));
  auto impostor = v1.with_new_primary().value();  // same v1, another v2
  auto wrong = check_keyring_matches(f, &impostor, "/k");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message.find("not the key this store's secrets were sealed with"), std::string::npos);
  // Legacy only (a store from before keyrings): some version must match it.
  keyring_facts legacy{new_key().fingerprint(), {}, {{1, 1}}};
  EXPECT_FALSE(check_keyring_matches(legacy, &ring, "/k"));
  // No key file: refused while anything is sealed.
  EXPECT_FALSE(check_keyring_matches(f, nullptr, "/k"));
  EXPECT_TRUE(check_keyring_matches(keyring_facts{}, nullptr, "/k"));
}
