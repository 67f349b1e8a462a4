#include "certs.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <stdexcept>

namespace testbed {
namespace {

template <auto fn>
struct deleter {
  template <class T>
  void operator()(T* p) const { fn(p); }
};
using bio_ptr = std::unique_ptr<BIO, deleter<BIO_free_all>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, deleter<EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, deleter<X509_free>>;

[[noreturn]] void fail(const std::string& what) {
  char buf[256] = {};
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  throw std::runtime_error("make_certificate: " + what + ": " + buf);
}

void check(bool ok, const char* what) {
  if (!ok) fail(what);
}

std::string bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

pkey_ptr make_key(const std::string& type) {
  EVP_PKEY* k = nullptr;
  if (type == "ec") k = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  else if (type == "ed25519") k = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  else if (type.rfind("ec:", 0) == 0) k = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", type.substr(3).c_str());
  else if (type.rfind("rsa:", 0) == 0) k = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(std::stoul(type.substr(4))));
  else throw std::runtime_error("make_certificate: key_type must be \"ec\", \"ec:CURVE\", \"rsa:BITS\" or \"ed25519\", not \"" + type + "\"");
  check(k != nullptr, "key generation");
  return pkey_ptr(k);
}

void set_time(ASN1_TIME* t, std::int64_t ms) {
  // Floor to seconds so a not_after of "now - 1 ms" is still in the past.
  std::int64_t s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  check(ASN1_TIME_set(t, static_cast<time_t>(s)) != nullptr, "validity time");
}

void add_ext(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str());
  check(ext != nullptr, "extension");
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  check(ok == 1, "add extension");
}

}  // namespace

pem_cert make_certificate(const cert_spec& spec) {
  pkey_ptr key = make_key(spec.key_type);

  // The issuer (for a chain) or the new certificate itself (self-signed) signs.
  x509_ptr issuer_cert;
  pkey_ptr issuer_key;
  if (spec.issuer) {
    bio_ptr cb(BIO_new_mem_buf(spec.issuer->cert_pem.data(), static_cast<int>(spec.issuer->cert_pem.size())));
    issuer_cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    bio_ptr kb(BIO_new_mem_buf(spec.issuer->key_pem.data(), static_cast<int>(spec.issuer->key_pem.size())));
    issuer_key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    check(issuer_cert && issuer_key, "issuer PEM");
  }

  x509_ptr cert(X509_new());
  check(cert != nullptr, "X509_new");
  check(X509_set_version(cert.get(), X509_VERSION_3) == 1, "version");
  // Random positive 63-bit serial: distinct certificates with the same name stay distinct.
  std::uint64_t serial = 0;
  check(RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial) == 1, "serial");
  check(ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), (serial >> 1) | 1) == 1, "serial");
  set_time(X509_getm_notBefore(cert.get()), spec.not_before_ms);
  set_time(X509_getm_notAfter(cert.get()), spec.not_after_ms);
  check(X509_set_pubkey(cert.get(), key.get()) == 1, "public key");

  X509_NAME* name = X509_get_subject_name(cert.get());
  check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0) == 1,
        "common name");
  check(X509_set_issuer_name(cert.get(), issuer_cert ? X509_get_subject_name(issuer_cert.get()) : name) == 1, "issuer name");

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : cert.get(), cert.get(), nullptr, nullptr, 0);
  if (spec.is_ca) {
    add_ext(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE");
    add_ext(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
  } else {
    add_ext(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature");
    add_ext(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  add_ext(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  if (issuer_cert) add_ext(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  if (!spec.dns_sans.empty() || !spec.ip_sans.empty()) {
    std::string sans;
    for (const auto& d : spec.dns_sans) sans += (sans.empty() ? "DNS:" : ",DNS:") + d;
    for (const auto& ip : spec.ip_sans) sans += (sans.empty() ? "IP:" : ",IP:") + ip;
    add_ext(cert.get(), &ctx, NID_subject_alt_name, sans);
  }

  if (!spec.crl_url.empty()) add_ext(cert.get(), &ctx, NID_crl_distribution_points, "URI:" + spec.crl_url);
  if (!spec.ocsp_url.empty()) add_ext(cert.get(), &ctx, NID_info_access, "OCSP;URI:" + spec.ocsp_url);

  EVP_PKEY* signer = issuer_key ? issuer_key.get() : key.get();
  // Ed25519 signs the message itself: no separate digest.
  const EVP_MD* md = EVP_PKEY_get_id(signer) == EVP_PKEY_ED25519 ? nullptr : EVP_sha256();
  check(X509_sign(cert.get(), signer, md) > 0, "sign");

  pem_cert out;
  bio_ptr cb(BIO_new(BIO_s_mem()));
  check(PEM_write_bio_X509(cb.get(), cert.get()) == 1, "write certificate");
  out.cert_pem = bio_text(cb.get());
  bio_ptr kb(BIO_new(BIO_s_mem()));
  int ok = spec.traditional_key && spec.key_type == "ec"
               ? PEM_write_bio_PrivateKey_traditional(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr)
               : PEM_write_bio_PrivateKey(kb.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  check(ok == 1, "write key");
  out.key_pem = bio_text(kb.get());
  return out;
}

std::string make_crl_der(const crl_spec& spec) {
  if (!spec.issuer) throw std::runtime_error("make_crl_der: an issuer is required");
  bio_ptr cb(BIO_new_mem_buf(spec.issuer->cert_pem.data(), static_cast<int>(spec.issuer->cert_pem.size())));
  x509_ptr issuer(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  bio_ptr kb(BIO_new_mem_buf(spec.issuer->key_pem.data(), static_cast<int>(spec.issuer->key_pem.size())));
  pkey_ptr key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  check(issuer && key, "issuer PEM");
  std::unique_ptr<X509_CRL, deleter<X509_CRL_free>> crl(X509_CRL_new());
  check(crl && X509_CRL_set_version(crl.get(), X509_CRL_VERSION_2) == 1, "CRL version");
  check(X509_CRL_set_issuer_name(crl.get(), X509_get_subject_name(issuer.get())) == 1, "CRL issuer");
  std::unique_ptr<ASN1_TIME, deleter<ASN1_TIME_free>> t(ASN1_TIME_new());
  set_time(t.get(), spec.this_update_ms);
  check(X509_CRL_set1_lastUpdate(crl.get(), t.get()) == 1, "thisUpdate");
  if (spec.next_update_ms != 0) {
    set_time(t.get(), spec.next_update_ms);
    check(X509_CRL_set1_nextUpdate(crl.get(), t.get()) == 1, "nextUpdate");
  }
  for (const auto& pem : spec.revoked) {
    bio_ptr rb(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
    x509_ptr leaf(PEM_read_bio_X509(rb.get(), nullptr, nullptr, nullptr));
    check(leaf != nullptr, "revoked PEM");
    X509_REVOKED* r = X509_REVOKED_new();
    check(r != nullptr, "X509_REVOKED_new");
    X509_REVOKED_set_serialNumber(r, X509_get_serialNumber(leaf.get()));
    set_time(t.get(), spec.revoked_at_ms);
    X509_REVOKED_set_revocationDate(r, t.get());
    std::unique_ptr<ASN1_ENUMERATED, deleter<ASN1_ENUMERATED_free>> reason(ASN1_ENUMERATED_new());
    ASN1_ENUMERATED_set(reason.get(), 1);  // keyCompromise
    X509_REVOKED_add1_ext_i2d(r, NID_crl_reason, reason.get(), 0, 0);
    check(X509_CRL_add0_revoked(crl.get(), r) == 1, "add revoked");
  }
  X509_CRL_sort(crl.get());
  check(X509_CRL_sign(crl.get(), key.get(), EVP_sha256()) > 0, "CRL sign");
  unsigned char* der = nullptr;
  int n = i2d_X509_CRL(crl.get(), &der);
  check(n > 0, "CRL DER");
  std::string out(reinterpret_cast<char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

bool chains_to(const std::string& leaf, const std::string& chain, const std::string& root) {
  auto read_all = [](const std::string& pem) {
    STACK_OF(X509)* s = sk_X509_new_null();
    BIO* b = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    while (X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr)) sk_X509_push(s, x);
    BIO_free(b);
    ERR_clear_error();
    return s;
  };
  STACK_OF(X509)* leafs = read_all(leaf);
  STACK_OF(X509)* inter = read_all(chain);
  STACK_OF(X509)* roots = read_all(root);
  X509_STORE* store = X509_STORE_new();
  for (int i = 0; i < sk_X509_num(roots); ++i) X509_STORE_add_cert(store, sk_X509_value(roots, i));
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  bool ok = sk_X509_num(leafs) == 1 && X509_STORE_CTX_init(ctx, store, sk_X509_value(leafs, 0), inter) == 1 &&
            X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  sk_X509_pop_free(leafs, X509_free);
  sk_X509_pop_free(inter, X509_free);
  sk_X509_pop_free(roots, X509_free);
  return ok;
}

}  // namespace testbed
