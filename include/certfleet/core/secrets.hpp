#pragma once
// Secrets sealed at rest (DESIGN §4: private keys, SSH credentials): AES-256-GCM under a
// key-encryption key (KEK) that lives in a file of its own, never in the store. The store keeps
// only envelopes and the KEK's fingerprint, so a stolen database alone opens nothing, and a
// start with the wrong key file is refused before anything is written.
#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "certfleet/core/error.hpp"

namespace certfleet {

struct kek_access;  // the implementation's only way to the key bytes (src/core/secrets.cpp)

// A key-encryption key: a version (what envelopes name) and 32 random bytes. It has no way to be
// printed or serialized except the key file; its memory is wiped when it is destroyed.
class kek {
 public:
  static constexpr std::size_t key_size = 32;
  static constexpr std::uint32_t current_version = 1;

  // A fresh random key (create_key_file is the way to make one that survives a restart).
  static result<kek> generate(std::uint32_t version = current_version);

  kek(const kek&) = default;
  kek& operator=(const kek&) = default;
  ~kek();

  std::uint32_t version() const noexcept { return version_; }
  // Lower-case hex SHA-256 over a domain-separation prefix, the version and the key: identifies
  // the key (safe to store and log) without revealing it.
  std::string fingerprint() const;

 private:
  friend struct kek_access;
  kek() = default;
  std::uint32_t version_ = 0;
  std::array<unsigned char, key_size> key_{};
};

// Key file: one line "certfleet-kek v<version> <base64 of 32 bytes>\n", mode 0600.
// Errors: errc::config_invalid, field "key_file", saying what is wrong and how to fix it.
result<kek> load_key_file(const std::filesystem::path& path);
// Creates the file (never over an existing one: it may be the only key to existing secrets) with
// a new random key, mode 0600, synced to disk.
result<kek> create_key_file(const std::filesystem::path& path);
// The key file's text without the file (what load_key_file checks after the permissions).
result<kek> parse_key_file_text(std::string_view text);

// Envelope "cfs1:<kek version>:<base64(nonce[12] | ciphertext | tag[16])>". `aad` binds the
// ciphertext to where it is stored ("credential:<id>:secret"): an envelope copied to another row
// does not open.
result<std::string> seal(const kek& key, std::string_view plaintext, std::string_view aad);
// Errors: a malformed envelope is errc::invalid_argument (field "sealed"); an envelope for another
// key version, or one that does not authenticate (wrong key, wrong aad, altered data), is
// errc::config_invalid (field "key_file").
result<std::string> open_sealed(const kek& key, std::string_view envelope, std::string_view aad);
// The KEK version an envelope names; nullopt when it is not an envelope.
std::optional<std::uint32_t> sealed_kek_version(std::string_view envelope);

// The start-up decision, without I/O. `stored_fingerprint`: the KEK fingerprint the store
// recorded (nullopt: none yet); `sealed_secrets`: how many sealed values the store holds;
// `loaded`: the key read from the key file (nullptr: the file does not exist); `key_file` is only
// named in messages.
//  - no key, sealed secrets exist        -> refuse (restore the file; never regenerated over them)
//  - no key, no sealed secrets            -> ok: the caller creates a key and records its fingerprint
//  - key, fingerprint recorded and differs -> refuse (wrong key file)
//  - key, nothing recorded or it matches  -> ok (the caller records the fingerprint if missing)
// Errors: errc::config_invalid, field "key_file".
result<void> check_key_matches(std::optional<std::string> stored_fingerprint, std::uint64_t sealed_secrets,
                               const kek* loaded, const std::filesystem::path& key_file = {});

}  // namespace certfleet
