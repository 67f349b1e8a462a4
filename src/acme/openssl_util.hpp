#pragma once
// OpenSSL object ownership and the few PEM/sign helpers the ACME sources share (private to
// src/acme). Nothing here logs or quotes key material.
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "core/openssl_ptr.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::acme {

using bio_ptr = std::unique_ptr<BIO, ossl_deleter<BIO_free_all>>;
using pkey_ptr = std::unique_ptr<EVP_PKEY, ossl_deleter<EVP_PKEY_free>>;
using x509_ptr = std::unique_ptr<X509, ossl_deleter<X509_free>>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, ossl_deleter<EVP_MD_CTX_free>>;

inline bio_ptr memory_bio(std::string_view text) {
  return bio_ptr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

inline std::string bio_text(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

// An unencrypted PEM private key (PKCS#8 or traditional); null otherwise (no passphrase prompt).
inline pkey_ptr read_private_key(std::string_view pem) {
  if (pem.empty() || pem.size() > 64 * 1024) return nullptr;
  auto b = memory_bio(pem);
  static char empty_pass[] = "";
  pkey_ptr k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, empty_pass));
  ERR_clear_error();
  return k;
}

// PKCS#8 PEM ("BEGIN PRIVATE KEY").
inline std::string write_private_key(EVP_PKEY* k) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PKCS8PrivateKey(b.get(), k, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    ERR_clear_error();
    return {};
  }
  return bio_text(b.get());
}

// A signature over `data` (DER for ECDSA); md nullptr for keys that hash themselves.
inline std::optional<std::string> sign_digest(EVP_PKEY* k, const EVP_MD* md, std::string_view data) {
  md_ctx_ptr ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, md, nullptr, k) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  std::string out(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    ERR_clear_error();
    return std::nullopt;
  }
  out.resize(len);
  return out;
}

// Every certificate of a PEM text, in order; stops at the first block that is not one.
inline std::vector<x509_ptr> read_certificates(std::string_view pem) {
  std::vector<x509_ptr> out;
  auto b = memory_bio(pem);
  for (;;) {
    x509_ptr x(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
    if (!x) break;
    out.push_back(std::move(x));
  }
  ERR_clear_error();
  return out;
}

inline std::string certificate_pem(X509* x) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_X509(b.get(), x) != 1) {
    ERR_clear_error();
    return {};
  }
  return bio_text(b.get());
}

}  // namespace certfleet::acme
