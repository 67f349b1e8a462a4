#include "certfleet/core/secrets.hpp"
#include "openssl_ptr.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <charconv>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>

#include "certfleet/core/base64.hpp"

namespace certfleet {

struct kek_ring {
  struct entry {
    std::uint32_t version = 0;
    std::array<unsigned char, kek::key_size> key{};
  };
  std::vector<entry> keys;  // ascending by version, unique
  std::uint32_t primary = 0;

  kek_ring() = default;
  kek_ring(const kek_ring&) = default;
  ~kek_ring() {
    for (auto& e : keys) OPENSSL_cleanse(e.key.data(), e.key.size());
  }
  const entry* find(std::uint32_t v) const {
    for (const auto& e : keys)
      if (e.version == v) return &e;
    return nullptr;
  }
};

// What identifies a version of the key file on disk (a rotation replaces it: a new inode).
struct file_stamp {
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const file_stamp&) const = default;
};
std::optional<file_stamp> stamp_of(const std::filesystem::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return file_stamp{st.st_ino, st.st_size, static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
}
std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct kek::holder {
  mutable std::mutex m;
  std::shared_ptr<const kek_ring> ring;
  std::filesystem::path file;
  std::optional<file_stamp> stamp;            // of the file the ring was read from
  std::atomic<std::int64_t> next_look_ms{0};  // seal(): when to stat the file again
};

struct kek_access {
  static kek make(std::shared_ptr<const kek_ring> ring, std::filesystem::path file = {}) {
    kek k;
    k.h_ = std::make_shared<kek::holder>();
    k.h_->ring = std::move(ring);
    k.h_->file = std::move(file);
    if (!k.h_->file.empty()) k.h_->stamp = stamp_of(k.h_->file);
    k.h_->next_look_ms = steady_ms() + look_interval_ms;
    return k;
  }
  // seal(): at most once a second, a stat of the key file; a changed file is read again, so a
  // rotation's new primary seals in every process within a second.
  static void look_at_file(const kek& k) {
    if (!k.h_) return;
    const auto now = steady_ms();
    auto due = k.h_->next_look_ms.load(std::memory_order_relaxed);
    if (now < due || !k.h_->next_look_ms.compare_exchange_strong(due, now + look_interval_ms)) return;
    std::filesystem::path file;
    std::optional<file_stamp> seen;
    {
      std::lock_guard lock(k.h_->m);
      file = k.h_->file;
      seen = k.h_->stamp;
    }
    if (file.empty()) return;
    if (auto now_stamp = stamp_of(file); now_stamp && now_stamp != seen) (void)k.reload();
  }
  static constexpr std::int64_t look_interval_ms = 1000;
  static std::shared_ptr<const kek_ring> ring(const kek& k) {
    if (!k.h_) return std::make_shared<const kek_ring>();
    std::lock_guard lock(k.h_->m);
    return k.h_->ring;
  }
  static void swap_ring(const kek& k, std::shared_ptr<const kek_ring> r, std::optional<file_stamp> stamp) {
    std::lock_guard lock(k.h_->m);
    k.h_->ring = std::move(r);
    k.h_->stamp = stamp;
  }
  static std::optional<file_stamp> stamp(const kek& k) {
    if (!k.h_) return std::nullopt;
    std::lock_guard lock(k.h_->m);
    return k.h_->stamp;
  }
};

namespace {

constexpr std::string_view key_file_magic = "certfleet-kek";
constexpr std::string_view envelope_prefix = "cfs1:";
constexpr std::size_t nonce_size = 12, tag_size = 16;
constexpr std::size_t max_plaintext = 16 * 1024 * 1024;  // far above any PEM bundle; keeps sizes in int
constexpr std::size_t max_key_file = 4096;
constexpr std::string_view primary_word = "primary";

// Wipes a buffer that held key material when it goes out of scope.
struct cleanse_on_exit {
  std::string& s;
  ~cleanse_on_exit() { OPENSSL_cleanse(s.data(), s.size()); }
};

error key_error(std::string msg) { return make_error(errc::config_invalid, std::move(msg), "key_file"); }

// A decimal u32 >= 1 without sign or leading zeros ("1", "42").
std::optional<std::uint32_t> parse_version(std::string_view s) {
  std::uint32_t v = 0;
  if (s.empty() || s.front() == '0') return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string key_line(const kek_ring::entry& e) {
  std::string_view raw(reinterpret_cast<const char*>(e.key.data()), kek::key_size);
  return std::string(key_file_magic) + " v" + std::to_string(e.version) + " " + base64_encode(raw) + "\n";
}

std::string fingerprint_of(std::uint32_t version, const std::array<unsigned char, kek::key_size>& key) {
  // The prefix keeps this hash from ever equalling a hash of the key used elsewhere.
  static constexpr char domain[] = "certfleet-kek-fingerprint-v1";
  unsigned char ver[4] = {static_cast<unsigned char>(version >> 24), static_cast<unsigned char>(version >> 16),
                          static_cast<unsigned char>(version >> 8), static_cast<unsigned char>(version)};
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  ossl_ptr<EVP_MD_CTX, EVP_MD_CTX_free> ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), domain, sizeof domain);  // with its NUL: a fixed-length separator
  EVP_DigestUpdate(ctx.get(), ver, sizeof ver);
  EVP_DigestUpdate(ctx.get(), key.data(), key.size());
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}

std::string versions_text(const kek_ring& r) {
  std::string out;
  for (const auto& e : r.keys) out += (out.empty() ? "v" : ", v") + std::to_string(e.version);
  return out.empty() ? "none" : out;
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// envelope -> {version, base64 part}
std::optional<std::pair<std::uint32_t, std::string_view>> split_envelope(std::string_view env) {
  if (!env.starts_with(envelope_prefix)) return std::nullopt;
  env.remove_prefix(envelope_prefix.size());
  auto colon = env.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto v = parse_version(env.substr(0, colon));
  if (!v) return std::nullopt;
  return std::pair{*v, env.substr(colon + 1)};
}

using cipher_ctx = ossl_ptr<EVP_CIPHER_CTX, EVP_CIPHER_CTX_free>;

}  // namespace

kek::~kek() = default;  // the ring wipes its keys when its last holder lets go

result<kek> kek::generate(std::uint32_t version) {
  if (version == 0) return make_error(errc::invalid_argument, "key version must be at least 1", "key_file");
  auto r = std::make_shared<kek_ring>();
  r->keys.push_back({version, {}});
  r->primary = version;
  if (RAND_bytes(r->keys.back().key.data(), static_cast<int>(key_size)) != 1)
    return key_error("the system random generator failed; cannot make a key");
  return kek_access::make(std::move(r));
}

std::uint32_t kek::version() const noexcept { return kek_access::ring(*this)->primary; }

std::vector<std::uint32_t> kek::versions() const {
  std::vector<std::uint32_t> out;
  for (const auto& e : kek_access::ring(*this)->keys) out.push_back(e.version);
  return out;
}

bool kek::has_version(std::uint32_t v) const { return kek_access::ring(*this)->find(v) != nullptr; }

std::string kek::fingerprint() const {
  auto r = kek_access::ring(*this);
  const auto* e = r->find(r->primary);
  return e ? fingerprint_of(e->version, e->key) : std::string();
}

std::optional<std::string> kek::fingerprint(std::uint32_t version) const {
  auto r = kek_access::ring(*this);
  const auto* e = r->find(version);
  if (!e) return std::nullopt;
  return fingerprint_of(e->version, e->key);
}

result<kek> kek::with_new_primary() const {
  auto cur = kek_access::ring(*this);
  if (cur->keys.empty()) return key_error("the keyring is empty");
  if (cur->keys.size() >= max_versions)
    return key_error("the key file holds " + std::to_string(cur->keys.size()) +
                     " versions, the most it may: retire old versions first (certfleet kek retire N)");
  std::uint32_t next = cur->keys.back().version + 1;
  if (next == 0) return key_error("no key version is left after " + std::to_string(cur->keys.back().version));
  auto r = std::make_shared<kek_ring>(*cur);
  r->keys.push_back({next, {}});
  r->primary = next;
  if (RAND_bytes(r->keys.back().key.data(), static_cast<int>(key_size)) != 1)
    return key_error("the system random generator failed; cannot make a key");
  return kek_access::make(std::move(r));
}

result<kek> kek::without_version(std::uint32_t v) const {
  auto cur = kek_access::ring(*this);
  if (!cur->find(v)) return key_error("the key file holds no version " + std::to_string(v) + " (it holds " +
                                      versions_text(*cur) + ")");
  if (v == cur->primary)
    return key_error("version " + std::to_string(v) + " is the primary version (what new secrets are sealed with): "
                     "rotate first (certfleet kek rotate), then retire it once nothing uses it");
  auto r = std::make_shared<kek_ring>(*cur);
  std::erase_if(r->keys, [v](const kek_ring::entry& e) { return e.version == v; });
  return kek_access::make(std::move(r));
}

std::filesystem::path kek::file() const {
  if (!h_) return {};
  std::lock_guard lock(h_->m);
  return h_->file;
}

result<void> kek::reload() const {
  auto path = file();
  if (path.empty()) return {};
  auto fresh = load_key_file(path);
  if (!fresh) return std::move(fresh).error();
  auto now = kek_access::ring(*this);
  auto next = kek_access::ring(*fresh);
  for (const auto& e : now->keys) {
    const auto* n = next->find(e.version);
    if (!n) continue;  // retired (`certfleet kek retire` checked that nothing uses it)
    if (n->key != e.key)
      return key_error("key file " + path.string() + " now holds another key for version " + std::to_string(e.version) +
                       "; it was replaced by a different key file: restore the right one");
  }
  kek_access::swap_ring(*this, std::move(next), kek_access::stamp(*fresh));
  return {};
}

std::string kek_fingerprint_meta_key(std::uint32_t v) { return "kek_fingerprint_v" + std::to_string(v); }

namespace {
const std::string expected_text =
    "expected lines \"certfleet-kek v<version> <base64 of 32 bytes>\" (and \"primary <version>\" when there are "
    "several)";

// One key line "certfleet-kek v<N> <base64>" (trimmed).
result<kek_ring::entry> parse_key_line(std::string_view line) {
  auto sp1 = line.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.substr(0, sp1) != key_file_magic)
    return key_error("is not a certfleet key file; " + expected_text);
  auto ver_word = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = ver_word.starts_with("v") ? parse_version(ver_word.substr(1)) : std::nullopt;
  if (!version)
    return key_error("has version \"" + std::string(ver_word.substr(0, 16)) + "\", not v<number>; " + expected_text);
  auto raw = base64_decode(line.substr(sp2 + 1));
  if (!raw) return key_error("holds a key that is not valid base64; " + expected_text);
  cleanse_on_exit wipe{*raw};
  if (raw->size() != kek::key_size)
    return key_error("holds a " + std::to_string(raw->size()) + "-byte key; a key is " +
                     std::to_string(kek::key_size) + " bytes");
  kek_ring::entry e;
  e.version = *version;
  std::memcpy(e.key.data(), raw->data(), kek::key_size);
  return e;
}

// The messages say what is wrong; the callers put "key file <path>" in front. A file of one key
// line (the format before keyrings) is a ring of that one version, primary.
result<std::shared_ptr<kek_ring>> parse_ring_text(std::string_view text) {
  auto ring = std::make_shared<kek_ring>();
  std::optional<std::uint32_t> primary;
  std::size_t line_no = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty()) continue;
    if (line.starts_with(primary_word) && !line.starts_with(key_file_magic)) {
      auto v = line.size() > primary_word.size() + 1 && line[primary_word.size()] == ' '
                   ? parse_version(line.substr(primary_word.size() + 1))
                   : std::nullopt;
      if (!v) return key_error("line " + std::to_string(line_no) + " is not \"primary <version>\"");
      if (primary) return key_error("names a primary version twice");
      primary = *v;
      continue;
    }
    auto e = parse_key_line(line);
    if (!e) {
      if (line_no == 1) return std::move(e).error();
      return key_error("line " + std::to_string(line_no) + " " + e.error().message);
    }
    if (ring->find(e->version)) return key_error("holds version " + std::to_string(e->version) + " twice");
    if (ring->keys.size() >= kek::max_versions)
      return key_error("holds more than " + std::to_string(kek::max_versions) + " versions");
    ring->keys.push_back(*e);
    OPENSSL_cleanse(e->key.data(), e->key.size());
  }
  if (ring->keys.empty()) return key_error("is not a certfleet key file; " + expected_text);
  std::sort(ring->keys.begin(), ring->keys.end(),
            [](const kek_ring::entry& a, const kek_ring::entry& b) { return a.version < b.version; });
  if (!primary) {
    if (ring->keys.size() > 1)
      return key_error("holds " + std::to_string(ring->keys.size()) +
                       " versions but no \"primary <version>\" line saying which one seals");
    primary = ring->keys.front().version;
  }
  if (!ring->find(*primary))
    return key_error("names primary version " + std::to_string(*primary) + ", which it does not hold (it holds " +
                     versions_text(*ring) + ")");
  ring->primary = *primary;
  return ring;
}
}  // namespace

std::string key_file_text(const kek& k) {
  auto r = kek_access::ring(k);
  std::string out;
  for (const auto& e : r->keys) {
    auto line = key_line(e);
    out += line;
    OPENSSL_cleanse(line.data(), line.size());
  }
  // One version: the original one-line format, byte for byte.
  if (r->keys.size() > 1) out += std::string(primary_word) + " " + std::to_string(r->primary) + "\n";
  return out;
}

result<kek> parse_key_file_text(std::string_view text) {
  auto r = parse_ring_text(text);
  if (!r) return key_error("key file " + r.error().message);
  return kek_access::make(std::move(*r));
}

result<kek> load_key_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT)
      return key_error("key file " + p + " does not exist; restore it from backup (a new key cannot open secrets "
                       "sealed with the old one)");
    return key_error("key file " + p + " cannot be opened: " + std::strerror(e) +
                     "; it must be readable by the user certfleet runs as");
  }
  std::unique_ptr<int, void (*)(int*)> close_fd(&fd, [](int* f) { ::close(*f); });
  struct stat st {};
  // Checked on the open descriptor: the file read is the file checked.
  if (::fstat(fd, &st) != 0) return key_error("key file " + p + " cannot be examined: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return key_error("key file " + p + " is not a regular file");
  if (st.st_mode & 077)
    return key_error("key file " + p + " has mode " + mode_text(st.st_mode) +
                     ": group and others must have no access to it; run `chmod 600 " + p + "`");
  if (st.st_size > static_cast<off_t>(max_key_file))
    return key_error("key file " + p + " is " + std::to_string(st.st_size) + " bytes, too large for a key file");
  std::string text(max_key_file + 1, '\0');
  cleanse_on_exit wipe{text};
  std::size_t got = 0;
  while (got < text.size()) {
    auto n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return key_error("key file " + p + " cannot be read: " + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  auto r = parse_ring_text(std::string_view(text.data(), got));
  if (!r) return key_error("key file " + p + " " + r.error().message);
  return kek_access::make(std::move(*r), path);
}

result<kek> create_key_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  auto k = kek::generate();
  if (!k) return k;
  std::string line = key_file_text(*k);
  cleanse_on_exit wipe{line};
  // O_EXCL: never replace a key file; the one there may be the only key to existing secrets.
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST)
      return key_error("key file " + p + " already exists; it is never overwritten (it may be the only key to "
                       "existing secrets): load it, or move it away first if it is truly unused");
    return key_error("cannot create key file " + p + ": " + std::strerror(e) + "; check that its directory exists "
                     "and is writable");
  }
  auto fail = [&](const char* what) {
    int e = errno;
    ::close(fd);
    ::unlink(p.c_str());  // no half-written key file left to be mistaken for a key
    return key_error(std::string("cannot write key file ") + p + ": " + what + ": " + std::strerror(e));
  };
  // The umask may have narrowed the mode, never widened it; be explicit anyway.
  if (::fchmod(fd, 0600) != 0) return fail("chmod");
  std::size_t done = 0;
  while (done < line.size()) {
    auto n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(p.c_str());
    return key_error("cannot write key file " + p + ": close: " + std::strerror(e));
  }
  // Make the new directory entry durable too: a crash must not lose the key after secrets were
  // sealed with it.
  auto dir = path.has_parent_path() ? path.parent_path().string() : std::string(".");
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return kek_access::make(kek_access::ring(*k), path);
}

result<kek> replace_key_file(const std::filesystem::path& path, const kek& ring) {
  const std::string p = path.string();
  std::string text = key_file_text(ring);
  cleanse_on_exit wipe{text};
  if (text.size() > max_key_file)
    return key_error("the key file would be " + std::to_string(text.size()) + " bytes, more than " +
                     std::to_string(max_key_file) + ": retire old versions first (certfleet kek retire N)");
  const std::string tmp = p + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a temporary file a crash of this same pid left
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return key_error("cannot write key file " + p + ": cannot create " + tmp + ": " + std::strerror(errno) +
                     "; its directory must be writable by the user running this command");
  auto fail = [&](const char* what) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return key_error(std::string("cannot write key file ") + p + ": " + what + ": " + std::strerror(e) +
                     " (the old key file is unchanged)");
  };
  if (::fchmod(fd, 0600) != 0) return fail("chmod");
  // Keep the owner of the file it replaces (root running the command for the service user).
  struct stat old {};
  if (::stat(p.c_str(), &old) == 0) (void)!::fchown(fd, old.st_uid, old.st_gid);
  std::size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("write");
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("fsync");
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return key_error("cannot write key file " + p + ": close: " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), p.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return key_error("cannot write key file " + p + ": rename: " + std::strerror(e) + " (the old key file is unchanged)");
  }
  auto dir = path.has_parent_path() ? path.parent_path().string() : std::string(".");
  if (int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return kek_access::make(kek_access::ring(ring), path);
}

result<std::string> seal(const kek& key, std::string_view plaintext, std::string_view aad) {
  if (plaintext.size() > max_plaintext || aad.size() > max_plaintext)
    return make_error(errc::payload_too_large, "secret too large to seal", "sealed");
  std::string blob(nonce_size + plaintext.size() + tag_size, '\0');
  auto* out = reinterpret_cast<unsigned char*>(blob.data());
  if (RAND_bytes(out, nonce_size) != 1) return key_error("the system random generator failed; cannot seal");
  kek_access::look_at_file(key);
  auto ring = kek_access::ring(key);
  const auto* k = ring->find(ring->primary);
  if (!k) return key_error("no key is loaded; cannot seal");
  cipher_ctx ctx(EVP_CIPHER_CTX_new());
  int n = 0, fin = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k->key.data(), out) == 1 &&
            EVP_EncryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) == 1 &&
            EVP_EncryptUpdate(ctx.get(), out + nonce_size, &n, reinterpret_cast<const unsigned char*>(plaintext.data()),
                              static_cast<int>(plaintext.size())) == 1 &&
            EVP_EncryptFinal_ex(ctx.get(), out + nonce_size + n, &fin) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, tag_size, out + nonce_size + plaintext.size()) == 1;
  if (!ok) {
    ERR_clear_error();
    return make_error(errc::store_failure, "sealing failed in the crypto library", "sealed");
  }
  return std::string(envelope_prefix) + std::to_string(k->version) + ":" + base64_encode(blob);
}

result<std::string> open_sealed(const kek& key, std::string_view envelope, std::string_view aad) {
  auto parts = split_envelope(envelope);
  if (!parts) return make_error(errc::invalid_argument, "not a sealed secret (expected cfs1:<version>:<base64>)", "sealed");
  auto ring = kek_access::ring(key);
  const auto* k = ring->find(parts->first);
  if (!k) {
    // Another process may have rotated since this one read the key file.
    if (auto re = key.reload(); !re) return std::move(re).error();
    ring = kek_access::ring(key);
    k = ring->find(parts->first);
  }
  if (!k)
    return key_error("sealed secret is for key version " + std::to_string(parts->first) +
                     ", which the key file does not hold (it holds " + versions_text(*ring) +
                     "); restore a key file that holds version " + std::to_string(parts->first));
  if (parts->second.size() > 2 * max_plaintext)
    return make_error(errc::invalid_argument, "sealed secret is malformed (longer than any secret)", "sealed");
  auto blob = base64_decode(parts->second);
  if (!blob || blob->size() < nonce_size + tag_size || aad.size() > max_plaintext)
    return make_error(errc::invalid_argument, "sealed secret is malformed (bad base64 or too short)", "sealed");
  const auto* in = reinterpret_cast<const unsigned char*>(blob->data());
  std::size_t ct_size = blob->size() - nonce_size - tag_size;
  std::string plain(ct_size, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  cipher_ctx ctx(EVP_CIPHER_CTX_new());
  int n = 0, fin = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k->key.data(), in) == 1 &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) == 1 &&
            EVP_DecryptUpdate(ctx.get(), out, &n, in + nonce_size, static_cast<int>(ct_size)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, tag_size,
                                const_cast<unsigned char*>(in + nonce_size + ct_size)) == 1 &&
            EVP_DecryptFinal_ex(ctx.get(), out + n, &fin) == 1;
  if (!ok) {
    // Nothing of an unauthenticated plaintext may leave this function (nor a stale error queue
    // entry this thread's next OpenSSL caller would see).
    OPENSSL_cleanse(plain.data(), plain.size());
    ERR_clear_error();
    return key_error("sealed secret does not open with this key (wrong key file, or the data was altered)");
  }
  return plain;
}

std::optional<std::uint32_t> sealed_kek_version(std::string_view envelope) {
  auto parts = split_envelope(envelope);
  if (!parts) return std::nullopt;
  return parts->first;
}

result<void> check_key_matches(std::optional<std::string> stored_fingerprint, std::uint64_t sealed_secrets,
                               const kek* loaded, const std::filesystem::path& key_file) {
  const std::string file = key_file.empty() ? std::string("(key_file)") : key_file.string();
  if (!loaded) {
    if (sealed_secrets > 0)
      return key_error("refusing to start: " + std::to_string(sealed_secrets) + " sealed secret" +
                       (sealed_secrets == 1 ? " exists" : "s exist") + " but the key file " + file +
                       " is missing; restore it from backup (it is never regenerated over existing secrets)");
    return {};  // nothing sealed yet: the caller may create a key
  }
  if (stored_fingerprint && *stored_fingerprint != loaded->fingerprint())
    return key_error("refusing to start: the key file " + file + " is not the key this store's secrets were sealed with "
                     "(fingerprint " + loaded->fingerprint().substr(0, 16) + "…, expected " +
                     stored_fingerprint->substr(0, 16) + "…); point key_file at the original key or restore it from backup");
  return {};
}

result<void> check_keyring_matches(const keyring_facts& facts, const kek* loaded, const std::filesystem::path& key_file) {
  std::uint64_t sealed = 0;
  for (const auto& [v, n] : facts.sealed_by_version) sealed += n;
  if (!loaded) return check_key_matches(facts.legacy_fingerprint, sealed, nullptr, key_file);
  const std::string file = key_file.empty() ? std::string("(key_file)") : key_file.string();
  for (const auto& [v, n] : facts.sealed_by_version) {
    // Version 0: values that are not envelopes at all (they open with no key; their readers say so).
    if (n == 0 || v == 0 || loaded->has_version(v)) continue;
    std::string held;
    for (auto h : loaded->versions()) held += (held.empty() ? "v" : ", v") + std::to_string(h);
    return key_error("refusing to start: " + std::to_string(n) + " sealed secret" + (n == 1 ? " is" : "s are") +
                     " sealed with key version " + std::to_string(v) + ", which the key file " + file +
                     " does not hold (it holds " + held + "); restore the key file that holds version " +
                     std::to_string(v) + " (a backup from before it was retired, or the file `certfleet kek rotate` "
                     "wrote)");
  }
  auto wrong = [&](const std::string& have, const std::string& want) {
    return key_error("refusing to start: the key file " + file + " is not the key this store's secrets were sealed with "
                     "(fingerprint " + have.substr(0, 16) + "…, expected " + want.substr(0, 16) +
                     "…); point key_file at the original key or restore it from backup");
  };
  for (const auto& [v, fp] : facts.fingerprints) {
    auto have = loaded->fingerprint(v);
    if (have && *have != fp) return wrong(*have, fp);
  }
  if (facts.fingerprints.empty() && facts.legacy_fingerprint) {
    bool any = false;
    for (auto v : loaded->versions()) any = any || loaded->fingerprint(v) == facts.legacy_fingerprint;
    if (!any) return wrong(loaded->fingerprint(), *facts.legacy_fingerprint);
  }
  return {};
}

}  // namespace certfleet
