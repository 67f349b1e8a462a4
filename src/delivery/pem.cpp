// Catalog checks of uploaded certificates and SSH keys (pure; see pem.hpp). Every input is
// untrusted: sizes are bounded first, every length read from a key is checked, and OpenSSL's
// per-thread error queue is left empty on every path.
#include "certfleet/delivery/pem.hpp"
#include "core/openssl_ptr.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>

#include "certfleet/delivery/ssh_target.hpp"
#include "certfleet/delivery/module.hpp"
#include "delivery/codec.hpp"
#include "certfleet/net/x509.hpp"

namespace certfleet::delivery {
namespace {

using bio_ptr = std::unique_ptr<BIO, ossl_deleter<BIO_free>>;
using x509_ptr = std::unique_ptr<X509, ossl_deleter<X509_free>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, ossl_deleter<EVP_PKEY_free>>;
using pkey_ctx_ptr = std::unique_ptr<EVP_PKEY_CTX, ossl_deleter<EVP_PKEY_CTX_free>>;
using names_ptr = std::unique_ptr<GENERAL_NAMES, ossl_deleter<GENERAL_NAMES_free>>;
using bn_ptr = std::unique_ptr<BIGNUM, ossl_deleter<BN_free>>;
void ossl_free(void* p) { OPENSSL_free(p); }  // a macro: needs a function to point to
using ossl_free_ptr = std::unique_ptr<void, ossl_deleter<ossl_free>>;

// OpenSSL queues errors per thread; a stale entry would confuse the next caller on this thread.
struct clear_errors_on_exit {
  ~clear_errors_on_exit() { ERR_clear_error(); }
};

// Never prompts: an encrypted PEM without a passphrase simply fails to parse.
int no_password(char*, int, int, void*) { return 0; }

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), std::move(field));
}

bio_ptr mem_bio(std::string_view s) {
  // BIO_new_mem_buf refuses a null pointer, which an empty string_view may hold.
  return bio_ptr(BIO_new_mem_buf(s.empty() ? "" : s.data(), static_cast<int>(s.size())));
}

std::string bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// ---- certificates ----

// Why a certificate's public key or a private key is below current minimums (RSA of at least
// 2048 bits, ECDSA on P-256 or P-384, Ed25519), or nullopt. Kept in step with what certfleet
// itself generates (acme key types) and what current CA/Browser Forum rules allow.
std::optional<std::string> weak_key(EVP_PKEY* k) {
  const int id = EVP_PKEY_get_base_id(k);
  if (id == EVP_PKEY_RSA || id == EVP_PKEY_RSA_PSS) {
    const int bits = EVP_PKEY_get_bits(k);
    if (bits >= 2048) return std::nullopt;
    return "is an RSA key of " + std::to_string(bits) + " bits; at least 2048 bits are required";
  }
  if (id == EVP_PKEY_EC) {
    char group[80] = {0};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1)
      return std::string("is an EC key on explicit curve parameters; only the named curves P-256 and P-384 are accepted");
    const std::string_view g(group, std::min(len, sizeof group - 1));
    if (g == "prime256v1" || g == "P-256" || g == "secp384r1" || g == "P-384") return std::nullopt;
    return "is an EC key on curve " + std::string(g) + "; only P-256 and P-384 are accepted (or Ed25519, or RSA of "
           "at least 2048 bits)";
  }
  if (id == EVP_PKEY_ED25519) return std::nullopt;
  const char* name = EVP_PKEY_get0_type_name(k);
  return std::string("is a ") + (name ? name : "unknown") +
         " key; accepted are RSA of at least 2048 bits, ECDSA on P-256 or P-384, and Ed25519";
}

// Every PEM block of `pem`, each of which must be a CERTIFICATE; at most `limit` of them.
result<std::vector<x509_ptr>> read_certificates(std::string_view pem, const std::string& field, std::size_t limit) {
  std::vector<x509_ptr> out;
  auto bio = mem_bio(pem);
  for (;;) {
    char *name = nullptr, *header = nullptr;
    unsigned char* data = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name, &header, &data, &len) != 1) {
      unsigned long e = ERR_peek_last_error();
      ERR_clear_error();
      if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) break;  // no more blocks
      return bad(field, "PEM block " + std::to_string(out.size() + 1) + " is broken (bad base64 or no END line)");
    }
    ossl_free_ptr n(name), h(header), d(data);
    std::string block = std::string(name).substr(0, 40);
    if (block != "CERTIFICATE")
      return bad(field, "holds a \"" + block + "\" PEM block where a CERTIFICATE was expected" +
                            (block.find("PRIVATE KEY") != std::string::npos ? " (the key goes in key_pem)" : ""));
    const unsigned char* p = data;
    x509_ptr x(d2i_X509(nullptr, &p, len));
    if (!x || p != data + len)
      return bad(field, "certificate " + std::to_string(out.size() + 1) + " is not a valid X.509 certificate");
    out.push_back(std::move(x));
    if (out.size() > limit)
      return bad(field, "holds more than " + std::to_string(limit) + " certificate" + (limit == 1 ? "" : "s"));
  }
  return out;
}

std::optional<std::int64_t> time_ms(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

std::string name_text(const X509_NAME* n) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  // RFC 2253, but UTF-8 kept as is rather than \XX-escaped.
  X509_NAME_print_ex(b.get(), n, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  return bio_text(b.get());
}

std::vector<std::string> subject_alt_names(X509* x) {
  std::vector<std::string> out;
  names_ptr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName)),
                       static_cast<std::size_t>(ASN1_STRING_length(g->d.dNSName)));
    } else if (g->type == GEN_IPADD) {
      int len = ASN1_STRING_length(g->d.iPAddress);
      char buf[INET6_ADDRSTRLEN] = {};
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(g->d.iPAddress), buf, sizeof buf))
        out.emplace_back(buf);
    }
  }
  return out;
}

// `issuer` issued `child`: names/key identifiers/key usage agree and the signature verifies.
bool issued_by(X509* child, X509* issuer) {
  EVP_PKEY* pub = X509_get0_pubkey(issuer);
  return X509_check_issued(issuer, child) == X509_V_OK && pub && X509_verify(child, pub) == 1;
}

struct password_request {
  std::string_view passphrase;
  bool asked = false;
};

// Never prompts: returns the given passphrase, or fails when there is none.
int password_callback(char* buf, int size, int, void* u) {
  auto* req = static_cast<password_request*>(u);
  req->asked = true;
  if (req->passphrase.empty() || req->passphrase.size() > static_cast<std::size_t>(size)) return -1;
  std::memcpy(buf, req->passphrase.data(), req->passphrase.size());
  return static_cast<int>(req->passphrase.size());
}

// ---- SSH keys ----

// SSH wire format (RFC 4251): uint32 and length-prefixed strings; any overrun sets !ok.
struct wire_reader {
  std::string_view s;
  bool ok = true;
  std::uint32_t u32() {
    if (s.size() < 4) { ok = false; return 0; }
    std::uint32_t v = (std::uint32_t(std::uint8_t(s[0])) << 24) | (std::uint32_t(std::uint8_t(s[1])) << 16) |
                      (std::uint32_t(std::uint8_t(s[2])) << 8) | std::uint32_t(std::uint8_t(s[3]));
    s.remove_prefix(4);
    return v;
  }
  std::string_view str() {
    std::uint32_t n = u32();
    if (!ok || n > s.size()) { ok = false; return {}; }
    auto v = s.substr(0, n);
    s.remove_prefix(n);
    return v;
  }
};

void put_string(std::string& out, std::string_view v) {
  auto n = static_cast<std::uint32_t>(v.size());
  out += {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
  out += v;
}

const std::string key_field = "private_key_pem";
error key_bad(std::string message) { return bad(key_field, std::move(message)); }
error rsa_refused() {
  return key_bad("RSA keys are not supported: libssh2 1.10 cannot sign with rsa-sha2; use ed25519 or ECDSA");
}

struct ec_curve {
  std::string_view ssh_name, openssl_group, alias;  // "nistp256", "P-256", "prime256v1"
  std::size_t point_size;                           // uncompressed: 0x04 | x | y
  std::size_t scalar_size;
};
constexpr ec_curve curves[] = {{"nistp256", "P-256", "prime256v1", 65, 32},
                               {"nistp384", "P-384", "secp384r1", 97, 48},
                               {"nistp521", "P-521", "secp521r1", 133, 66}};

const ec_curve* curve_by_ssh_name(std::string_view n) {
  for (const auto& c : curves)
    if (c.ssh_name == n) return &c;
  return nullptr;
}

// An EC key from its SSH parts; with `d` (an SSH mpint) the private scalar must match the point.
// nullptr when the point is not on the curve or the pair does not match.
pkey_ptr ec_key(const ec_curve& c, std::string_view q, std::optional<std::string_view> d) {
  std::unique_ptr<OSSL_PARAM_BLD, ossl_deleter<OSSL_PARAM_BLD_free>> bld(OSSL_PARAM_BLD_new());
  std::unique_ptr<BIGNUM, ossl_deleter<BN_clear_free>> priv;
  if (d) priv.reset(BN_bin2bn(reinterpret_cast<const unsigned char*>(d->data()), static_cast<int>(d->size()), nullptr));
  std::string group(c.openssl_group);
  if (!bld || (d && !priv) ||
      !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, group.c_str(), 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, q.data(), q.size()) ||
      (priv && !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_PRIV_KEY, priv.get())))
    return nullptr;
  std::unique_ptr<OSSL_PARAM, ossl_deleter<OSSL_PARAM_free>> params(OSSL_PARAM_BLD_to_param(bld.get()));
  pkey_ctx_ptr ctx(EVP_PKEY_CTX_new_from_name(nullptr, "EC", nullptr));
  EVP_PKEY* raw = nullptr;
  if (!params || !ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, d ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY, params.get()) != 1)
    return nullptr;
  pkey_ptr key(raw);
  pkey_ctx_ptr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  int ok = !check ? 0 : d ? EVP_PKEY_pairwise_check(check.get()) : EVP_PKEY_public_check(check.get());
  return ok == 1 ? std::move(key) : nullptr;
}

// The public key blob (type string first) -> what we report; refuses what libssh2 cannot use.
result<ssh_key_info> describe_public_blob(std::string_view blob) {
  wire_reader w{blob};
  std::string type(w.str());
  if (!w.ok) return key_bad("the public key inside the private key is malformed");
  if (type == "ssh-rsa") return rsa_refused();
  if (type == "ssh-dss") return key_bad("DSA keys are not supported; use ed25519 or ECDSA");
  if (type.starts_with("sk-")) return key_bad("security-key (FIDO) keys are not supported; use ed25519 or ECDSA");
  if (type == "ssh-ed25519") {
    auto pub = w.str();
    if (!w.ok || pub.size() != 32 || !w.s.empty()) return key_bad("the ed25519 public key is malformed");
  } else if (type.starts_with("ecdsa-sha2-")) {
    auto curve_name = w.str();
    auto q = w.str();
    const ec_curve* c = curve_by_ssh_name(curve_name);
    if (!w.ok || !w.s.empty() || !c || type != "ecdsa-sha2-" + std::string(curve_name))
      return key_bad("the ECDSA public key is malformed or not on P-256, P-384 or P-521");
    if (q.size() != c->point_size || q[0] != 4 || !ec_key(*c, q, std::nullopt))
      return key_bad("the ECDSA public key is not a valid point on " + std::string(c->openssl_group));
  } else {
    return key_bad("unsupported key type \"" + type.substr(0, 40) + "\"; use ed25519 or ECDSA");
  }
  return ssh_key_info{type, type + " " + base64_encode(blob), host_key{type, std::string(blob)}.fingerprint()};
}

// The private section of an unencrypted openssh-key-v1 key (after the check numbers).
result<void> check_openssh_private(wire_reader& p, std::string_view public_blob) {
  wire_reader pub{public_blob};
  auto type = pub.str();
  if (p.str() != type) return key_bad("the private key's private and public parts are of different types");
  if (type == "ssh-ed25519") {
    auto pk = p.str(), sk = p.str();  // sk = seed(32) | public(32)
    if (!p.ok || pk.size() != 32 || sk.size() != 64 || sk.substr(32) != pk || pk != pub.str())
      return key_bad("the ed25519 private key is malformed");
    pkey_ptr k(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(sk.data()), 32));
    unsigned char derived[32];
    std::size_t len = sizeof derived;
    if (!k || EVP_PKEY_get_raw_public_key(k.get(), derived, &len) != 1 || len != 32 || std::memcmp(derived, pk.data(), 32) != 0)
      return key_bad("the ed25519 private key does not match its public key (the file is corrupt)");
  } else {
    auto curve_name = p.str(), q = p.str(), d = p.str();
    const ec_curve* c = curve_by_ssh_name(curve_name);
    // mpint: positive, so a set top bit comes with a leading zero byte.
    if (!p.ok || !c || curve_name != pub.str() || q != pub.str() || d.empty() || (d[0] & 0x80) ||
        d.size() > c->scalar_size + 1)
      return key_bad("the ECDSA private key is malformed");
    if (!ec_key(*c, q, d)) return key_bad("the ECDSA private key does not match its public key (the file is corrupt)");
  }
  (void)p.str();  // comment
  if (!p.ok) return key_bad("the private key is truncated");
  // Padding 1, 2, 3, … up to the cipher block size (8 for "none").
  if (p.s.size() >= 8) return key_bad("the private key has trailing data");
  for (std::size_t i = 0; i < p.s.size(); ++i)
    if (static_cast<unsigned char>(p.s[i]) != i + 1) return key_bad("the private key's padding is wrong (the file is corrupt)");
  return {};
}

result<ssh_key_info> parse_openssh(std::string_view pem, std::string_view passphrase) {
  constexpr std::string_view begin = "-----BEGIN OPENSSH PRIVATE KEY-----", end = "-----END OPENSSH PRIVATE KEY-----";
  auto b = pem.find(begin);
  auto e = pem.find(end, b);
  if (e == std::string_view::npos) return key_bad("the OpenSSH private key has no END line");
  std::string body;
  for (char ch : pem.substr(b + begin.size(), e - b - begin.size()))
    if (ch != '\n' && ch != '\r' && ch != ' ' && ch != '\t') body += ch;
  auto raw = base64_decode(body);
  if (!raw) return key_bad("the OpenSSH private key's base64 is broken");
  constexpr std::string_view magic{"openssh-key-v1\0", 15};
  if (!std::string_view(*raw).starts_with(magic)) return key_bad("not an openssh-key-v1 private key");
  wire_reader w{std::string_view(*raw).substr(magic.size())};
  auto cipher = w.str(), kdf = w.str();
  (void)w.str();  // kdf options (salt, rounds)
  auto count = w.u32();
  if (w.ok && count != 1) return key_bad("the file holds " + std::to_string(count) + " keys; give exactly one");
  auto public_blob = w.str(), private_section = w.str();
  if (!w.ok) return key_bad("the OpenSSH private key is truncated");
  auto info = describe_public_blob(public_blob);
  if (!info) return info;
  if (cipher != "none") {
    // The private part needs bcrypt-pbkdf to open; libssh2 does that at login. Here only the
    // presence of a passphrase can be checked; the public key above is in clear.
    if (kdf != "bcrypt") return key_bad("the private key is encrypted with an unknown scheme (kdf \"" + std::string(kdf.substr(0, 20)) + "\")");
    if (passphrase.empty()) return key_bad("the private key is encrypted: give its passphrase");
    return info;
  }
  if (kdf != "none") return key_bad("the private key names a kdf but no cipher (the file is corrupt)");
  wire_reader p{private_section};
  auto check1 = p.u32(), check2 = p.u32();
  if (!p.ok || check1 != check2) return key_bad("the private key's check numbers differ (the file is corrupt)");
  if (auto ok = check_openssh_private(p, public_blob); !ok) return std::move(ok).error();
  return info;
}

// PEM / PKCS#8 through OpenSSL, then the same public blob as an OpenSSH key would have.
result<ssh_key_info> parse_openssl_key(std::string_view pem, std::string_view passphrase) {
  auto bio = mem_bio(pem);
  password_request req{passphrase};
  pkey_ptr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, password_callback, &req));
  if (!key) {
    if (req.asked)
      return key_bad(passphrase.empty() ? "the private key is encrypted: give its passphrase"
                                        : "the passphrase does not decrypt the private key");
    return key_bad("is not a private key in OpenSSH or PEM format");
  }
  std::string blob;
  switch (EVP_PKEY_get_base_id(key.get())) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS: return rsa_refused();
    case EVP_PKEY_ED25519: {
      unsigned char pub[32];
      std::size_t len = sizeof pub;
      if (EVP_PKEY_get_raw_public_key(key.get(), pub, &len) != 1 || len != 32) return key_bad("the ed25519 key is malformed");
      put_string(blob, "ssh-ed25519");
      put_string(blob, std::string_view(reinterpret_cast<const char*>(pub), len));
      break;
    }
    case EVP_PKEY_EC: {
      char group[64] = {};
      std::size_t glen = 0;
      const ec_curve* c = nullptr;
      if (EVP_PKEY_get_utf8_string_param(key.get(), OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &glen) == 1)
        for (const auto& cv : curves)
          if (cv.alias == group || cv.openssl_group == group) c = &cv;
      if (!c) return key_bad("ECDSA keys must be on P-256, P-384 or P-521");
      // SSH carries the point uncompressed whatever form the PEM had.
      unsigned char q[133];
      std::size_t qlen = 0;
      pkey_ctx_ptr check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
      if (EVP_PKEY_set_utf8_string_param(key.get(), OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed") != 1 ||
          EVP_PKEY_get_octet_string_param(key.get(), OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, q, sizeof q, &qlen) != 1 ||
          !check || EVP_PKEY_pairwise_check(check.get()) != 1)
        return key_bad("the ECDSA private key is malformed");
      std::string type = "ecdsa-sha2-" + std::string(c->ssh_name);
      put_string(blob, type);
      put_string(blob, c->ssh_name);
      put_string(blob, std::string_view(reinterpret_cast<const char*>(q), qlen));
      break;
    }
    default: return key_bad("unsupported key type; use ed25519 or ECDSA");
  }
  return describe_public_blob(blob);
}

}  // namespace

namespace {
// The serial as lower-case hex (BN_bn2hex gives upper case, and "0" for zero).
std::string serial_hex(const X509* x) {
  const ASN1_INTEGER* a = X509_get0_serialNumber(x);
  bn_ptr bn(a ? ASN1_INTEGER_to_BN(a, nullptr) : nullptr);
  if (!bn) return {};
  ossl_free_ptr h(BN_bn2hex(bn.get()));
  if (!h) return {};
  std::string out(static_cast<const char*>(h.get()));
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}
}  // namespace

result<certificate_info> parse_certificate_bundle(std::string_view cert_pem, std::string_view chain_pem,
                                                  std::string_view key_pem, std::int64_t now_ms) {
  clear_errors_on_exit clear;
  const std::pair<const char*, std::string_view> inputs[] = {{"cert_pem", cert_pem}, {"chain_pem", chain_pem}, {"key_pem", key_pem}};
  for (auto [field, text] : inputs)
    if (text.size() > max_pem_bytes) return bad(field, "is larger than 64 KiB");

  auto leaves = read_certificates(cert_pem, "cert_pem", 1);
  if (!leaves) {
    if (leaves.error().message.starts_with("holds more than"))
      return bad("cert_pem", "must hold exactly one certificate, the leaf; put the intermediates in chain_pem");
    return std::move(leaves).error();
  }
  if (leaves->empty()) return bad("cert_pem", "is not a PEM certificate (expected -----BEGIN CERTIFICATE-----)");
  X509* leaf = leaves->front().get();

  certificate_info info;
  auto nb = time_ms(X509_get0_notBefore(leaf)), na = time_ms(X509_get0_notAfter(leaf));
  if (!nb || !na) return bad("cert_pem", "the certificate's validity dates do not parse");
  info.not_before_ms = *nb;
  info.not_after_ms = *na;
  if (info.not_after_ms <= now_ms) return bad("cert_pem", "certificate expired at " + certificate_time_text(info.not_after_ms));
  if (EVP_PKEY* pub = X509_get0_pubkey(leaf); !pub) return bad("cert_pem", "the certificate's public key does not parse");
  else if (auto why = weak_key(pub)) return bad("cert_pem", "the certificate's public key " + *why);

  auto chain = read_certificates(chain_pem, "chain_pem", max_chain_certs);
  if (!chain) return std::move(chain).error();
  if (chain->empty() && !blank(chain_pem))
    return bad("chain_pem", "is not PEM certificates (expected -----BEGIN CERTIFICATE----- blocks)");
  X509* child = leaf;
  for (std::size_t i = 0; i < chain->size(); ++i) {
    if (!issued_by(child, (*chain)[i].get()))
      return bad("chain_pem", "certificate " + std::to_string(i + 1) +
                                  " does not issue the one before it (chain must be in order leaf→root)");
    child = (*chain)[i].get();
  }

  auto kbio = mem_bio(key_pem);
  password_request req;  // no passphrase: an encrypted key is refused, not prompted for
  pkey_ptr key(PEM_read_bio_PrivateKey(kbio.get(), nullptr, password_callback, &req));
  if (!key)
    return bad("key_pem", req.asked ? "the private key is encrypted; upload it unencrypted (it is sealed at rest here)"
                                    : "is not a PEM private key (expected -----BEGIN PRIVATE KEY----- or "
                                      "-----BEGIN EC/RSA PRIVATE KEY-----)");
  if (auto why = weak_key(key.get())) return bad("key_pem", "the private key " + *why);
  if (X509_check_private_key(leaf, key.get()) != 1) return bad("key_pem", "private key does not belong to the certificate");

  info.subject = name_text(X509_get_subject_name(leaf));
  info.issuer = name_text(X509_get_issuer_name(leaf));
  info.sans = subject_alt_names(leaf);
  info.fingerprint_sha256 = net::fingerprint_sha256(leaf);
  if (info.fingerprint_sha256.empty()) return bad("cert_pem", "the certificate cannot be hashed");
  info.serial = serial_hex(leaf);
  info.chain_length = chain->size();
  return info;
}

result<ssh_key_info> parse_ssh_private_key(std::string_view pem, std::string_view passphrase) {
  clear_errors_on_exit clear;
  if (pem.size() > max_pem_bytes) return key_bad("is larger than 64 KiB");
  if (pem.find("-----BEGIN OPENSSH PRIVATE KEY-----") != std::string_view::npos) return parse_openssh(pem, passphrase);
  if (pem.find("PuTTY-User-Key-File") != std::string_view::npos)
    return key_bad("PuTTY keys are not supported; export it in OpenSSH format (puttygen KEY.ppk -O private-openssh)");
  auto start = pem.find_first_not_of(" \t\r\n");
  if (start != std::string_view::npos && (pem.substr(start).starts_with("ssh-") || pem.substr(start).starts_with("ecdsa-")))
    return key_bad("this is a public key; give the private key");
  if (pem.find("-----BEGIN ") != std::string_view::npos) return parse_openssl_key(pem, passphrase);
  return key_bad("is not a private key in OpenSSH or PEM format");
}


std::optional<std::string> certificate_fingerprint(std::string_view pem) {
  clear_errors_on_exit clear;
  auto bio = mem_bio(pem);
  x509_ptr x(PEM_read_bio_X509(bio.get(), nullptr, no_password, nullptr));
  if (!x) return std::nullopt;
  auto fp = net::fingerprint_sha256(x.get());
  if (fp.empty()) return std::nullopt;
  return fp;
}

std::string certificate_time_text(std::int64_t ms) {
  std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

result<std::string> check_bundle(const cert_bundle& b) {
  clear_errors_on_exit clear;
  auto cbio = mem_bio(b.cert_pem);
  x509_ptr cert(PEM_read_bio_X509(cbio.get(), nullptr, no_password, nullptr));
  if (!cert) return make_error(errc::invalid_argument, "the certificate PEM does not parse", "cert_pem");
  auto kbio = mem_bio(b.key_pem);
  pkey_ptr key(PEM_read_bio_PrivateKey(kbio.get(), nullptr, no_password, nullptr));
  if (!key)
    return make_error(errc::invalid_argument, "the private key PEM does not parse (encrypted keys are not accepted)", "key_pem");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return make_error(errc::invalid_argument, "the private key does not belong to the certificate", "key_pem");
  return net::fingerprint_sha256(cert.get());
}

result<std::string> bundle_fingerprint(const cert_bundle& b) {
  if (!b.checked_fingerprint.empty()) return b.checked_fingerprint;
  return check_bundle(b);
}

}  // namespace certfleet::delivery
