#include "certfleet/core/secrets.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <charconv>
#include <cstring>
#include <memory>

#include "certfleet/core/base64.hpp"

namespace certfleet {

struct kek_access {
  static kek make(std::uint32_t version) {
    kek k;
    k.version_ = version;
    return k;
  }
  static unsigned char* bytes(kek& k) { return k.key_.data(); }
  static const unsigned char* bytes(const kek& k) { return k.key_.data(); }
};

namespace {

constexpr std::string_view key_file_magic = "certfleet-kek";
constexpr std::string_view envelope_prefix = "cfs1:";
constexpr std::size_t nonce_size = 12, tag_size = 16;
constexpr std::size_t max_plaintext = 16 * 1024 * 1024;  // far above any PEM bundle; keeps sizes in int
constexpr std::size_t max_key_file = 4096;

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

std::string key_line(const kek& k) {
  std::string_view raw(reinterpret_cast<const char*>(kek_access::bytes(k)), kek::key_size);
  return std::string(key_file_magic) + " v" + std::to_string(k.version()) + " " + base64_encode(raw) + "\n";
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

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

}  // namespace

kek::~kek() { OPENSSL_cleanse(key_.data(), key_.size()); }

result<kek> kek::generate(std::uint32_t version) {
  if (version == 0) return make_error(errc::invalid_argument, "key version must be at least 1", "key_file");
  kek k = kek_access::make(version);
  if (RAND_bytes(kek_access::bytes(k), static_cast<int>(key_size)) != 1)
    return key_error("the system random generator failed; cannot make a key");
  return k;
}

std::string kek::fingerprint() const {
  // The prefix keeps this hash from ever equalling a hash of the key used elsewhere.
  static constexpr char domain[] = "certfleet-kek-fingerprint-v1";
  unsigned char ver[4] = {static_cast<unsigned char>(version_ >> 24), static_cast<unsigned char>(version_ >> 16),
                          static_cast<unsigned char>(version_ >> 8), static_cast<unsigned char>(version_)};
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), domain, sizeof domain);  // with its NUL: a fixed-length separator
  EVP_DigestUpdate(ctx.get(), ver, sizeof ver);
  EVP_DigestUpdate(ctx.get(), key_.data(), key_.size());
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += digits[md[i] >> 4];
    out += digits[md[i] & 15];
  }
  return out;
}

namespace {
// The messages say what is wrong; the callers put "key file <path>" in front.
result<kek> parse_key_text(std::string_view text) {
  static const std::string expected = "expected one line \"certfleet-kek v1 <base64 of 32 bytes>\"";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.remove_suffix(1);
  if (text.find('\n') != std::string_view::npos) return key_error("has more than one line; " + expected);
  auto sp1 = text.find(' ');
  auto sp2 = sp1 == std::string_view::npos ? sp1 : text.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || text.substr(0, sp1) != key_file_magic)
    return key_error("is not a certfleet key file; " + expected);
  auto ver_word = text.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = ver_word.starts_with("v") ? parse_version(ver_word.substr(1)) : std::nullopt;
  if (!version) return key_error("has version \"" + std::string(ver_word.substr(0, 16)) + "\", not v<number>; " + expected);
  auto raw = base64_decode(text.substr(sp2 + 1));
  if (!raw) return key_error("holds a key that is not valid base64; " + expected);
  cleanse_on_exit wipe{*raw};
  if (raw->size() != kek::key_size)
    return key_error("holds a " + std::to_string(raw->size()) + "-byte key; a key is " +
                     std::to_string(kek::key_size) + " bytes");
  kek k = kek_access::make(*version);
  std::memcpy(kek_access::bytes(k), raw->data(), kek::key_size);
  return k;
}
}  // namespace

result<kek> parse_key_file_text(std::string_view text) {
  auto k = parse_key_text(text);
  if (!k) return key_error("key file " + k.error().message);
  return k;
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
  auto k = parse_key_text(std::string_view(text.data(), got));
  if (!k) return key_error("key file " + p + " " + k.error().message);
  return k;
}

result<kek> create_key_file(const std::filesystem::path& path) {
  const std::string p = path.string();
  auto k = kek::generate();
  if (!k) return k;
  std::string line = key_line(*k);
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
  return k;
}

result<std::string> seal(const kek& key, std::string_view plaintext, std::string_view aad) {
  if (plaintext.size() > max_plaintext || aad.size() > max_plaintext)
    return make_error(errc::payload_too_large, "secret too large to seal", "sealed");
  std::string blob(nonce_size + plaintext.size() + tag_size, '\0');
  auto* out = reinterpret_cast<unsigned char*>(blob.data());
  if (RAND_bytes(out, nonce_size) != 1) return key_error("the system random generator failed; cannot seal");
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, fin = 0;
  bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, kek_access::bytes(key), out) == 1 &&
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
  return std::string(envelope_prefix) + std::to_string(key.version()) + ":" + base64_encode(blob);
}

result<std::string> open_sealed(const kek& key, std::string_view envelope, std::string_view aad) {
  auto parts = split_envelope(envelope);
  if (!parts) return make_error(errc::invalid_argument, "not a sealed secret (expected cfs1:<version>:<base64>)", "sealed");
  if (parts->first != key.version())
    return key_error("sealed secret is for key version " + std::to_string(parts->first) + " but the loaded key is version " +
                     std::to_string(key.version()) + "; load the key file of version " + std::to_string(parts->first));
  if (parts->second.size() > 2 * max_plaintext)
    return make_error(errc::invalid_argument, "sealed secret is malformed (longer than any secret)", "sealed");
  auto blob = base64_decode(parts->second);
  if (!blob || blob->size() < nonce_size + tag_size || aad.size() > max_plaintext)
    return make_error(errc::invalid_argument, "sealed secret is malformed (bad base64 or too short)", "sealed");
  const auto* in = reinterpret_cast<const unsigned char*>(blob->data());
  std::size_t ct_size = blob->size() - nonce_size - tag_size;
  std::string plain(ct_size, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  cipher_ctx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, fin = 0;
  bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, kek_access::bytes(key), in) == 1 &&
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

}  // namespace certfleet
