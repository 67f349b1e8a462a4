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
#include <map>
#include <memory>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet {

struct kek_access;  // the implementation's only way to the key bytes (src/core/secrets.cpp)
struct kek_ring;    // the versions a kek holds (src/core/secrets.cpp)

// The key-encryption keyring (DESIGN §11): one or more versions of 32 random bytes each, one of
// them primary. Sealing uses the primary; opening uses the version the envelope names. A kek
// loaded from a key file remembers the file: when an envelope names a version it does not hold,
// it reads the file again first (another process may have rotated), so a server started before
// `certfleet kek rotate` keeps working. Copies share the ring (and its reloads); every member is
// safe to call from any thread. It has no way to be printed or serialized except the key file;
// its memory is wiped when the last copy is destroyed.
class kek {
 public:
  static constexpr std::size_t key_size = 32;
  static constexpr std::uint32_t current_version = 1;
  // Versions a key file may hold at most (its size limit allows more; this keeps it readable).
  static constexpr std::size_t max_versions = 32;

  // A fresh random key, the only version of its ring (create_key_file is the way to make one
  // that survives a restart).
  static result<kek> generate(std::uint32_t version = current_version);

  kek(const kek&) = default;
  kek& operator=(const kek&) = default;
  ~kek();

  // The primary version: what seal() writes.
  std::uint32_t version() const noexcept;
  // Every version held, ascending.
  std::vector<std::uint32_t> versions() const;
  bool has_version(std::uint32_t v) const;
  // Lower-case hex SHA-256 over a domain-separation prefix, the version and the key: identifies
  // the key (safe to store and log) without revealing it. Without an argument: the primary's.
  std::string fingerprint() const;
  std::optional<std::string> fingerprint(std::uint32_t version) const;

  // A new, independent ring: this one plus a random version (highest + 1) that becomes primary.
  result<kek> with_new_primary() const;
  // A new, independent ring without version `v` (refused when v is primary or not held).
  result<kek> without_version(std::uint32_t v) const;

  // The key file this ring was loaded from (empty: none).
  std::filesystem::path file() const;
  // Reads the file again and takes its ring when it holds every version held now (a file that
  // lost a version is refused: it may be a stale copy). No file: nothing to do.
  result<void> reload() const;

 private:
  friend struct kek_access;
  kek() = default;
  struct holder;
  std::shared_ptr<holder> h_;
};

// Key file: a keyring, mode 0600. A single version is one line (the original format, still
// written for a ring of one version): "certfleet-kek v<version> <base64 of 32 bytes>\n". More
// versions: one such line each, then "primary <version>\n".
// Errors: errc::config_invalid, field "key_file", saying what is wrong and how to fix it.
result<kek> load_key_file(const std::filesystem::path& path);
// Creates the file (never over an existing one: it may be the only key to existing secrets) with
// a new random key, mode 0600, synced to disk.
result<kek> create_key_file(const std::filesystem::path& path);
// Replaces the key file with `ring` atomically (a temporary file in the same directory, mode
// 0600, fsynced, renamed over it, the directory fsynced): a crash leaves the old ring or the new
// one, never a mix. The returned kek is bound to `path` (reloads read it).
result<kek> replace_key_file(const std::filesystem::path& path, const kek& ring);
// The key file's text without the file (what load_key_file checks after the permissions).
result<kek> parse_key_file_text(std::string_view text);
// The key file's text for a ring (what create/replace_key_file write). The caller wipes it.
std::string key_file_text(const kek& ring);

// Envelope "cfs1:<kek version>:<base64(nonce[12] | ciphertext | tag[16])>". `aad` binds the
// ciphertext to where it is stored ("credential:<id>:secret"): an envelope copied to another row
// does not open.
result<std::string> seal(const kek& key, std::string_view plaintext, std::string_view aad);
// Opens with the version the envelope names (reloading the key file once when the ring lacks it).
// Errors: a malformed envelope is errc::invalid_argument (field "sealed"); an envelope for a key
// version the ring does not hold, or one that does not authenticate (wrong key, wrong aad, altered data), is
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


// The store's meta key recording the fingerprint of key version `v` ("kek_fingerprint_v2").
// (`kek_fingerprint`, without a version, is what stores before keyrings recorded: the fingerprint
// of their one key.)
std::string kek_fingerprint_meta_key(std::uint32_t v);

// What the start-up check of a keyring reads from the store.
struct keyring_facts {
  std::optional<std::string> legacy_fingerprint;          // meta kek_fingerprint
  std::map<std::uint32_t, std::string> fingerprints;      // meta kek_fingerprint_v<N>, for the ring's versions
  std::map<std::uint32_t, std::uint64_t> sealed_by_version;  // envelopes per version they name
};
// The start-up decision for a keyring, without I/O (check_key_matches for each part):
//  - no key: as check_key_matches (refused while anything is sealed);
//  - an envelope names a version the ring lacks   -> refuse, naming the version and how many;
//  - a version's recorded fingerprint differs      -> refuse (wrong key file);
//  - nothing recorded per version, the legacy fingerprint matches no version of the ring -> refuse.
// Errors: errc::config_invalid, field "key_file".
result<void> check_keyring_matches(const keyring_facts& facts, const kek* loaded,
                                   const std::filesystem::path& key_file = {});

}  // namespace certfleet
