// Certificate keys, CSRs and the CA's chain (keys.hpp).
#include "certfleet/acme/keys.hpp"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <ctime>

#include "certfleet/core/allow_list.hpp"  // valid_dns_name
#include "openssl_util.hpp"

namespace certfleet::acme {

namespace {

constexpr std::size_t max_domains = 100;

using req_ptr = std::unique_ptr<X509_REQ, ossl_deleter<X509_REQ_free>>;
using names_ptr = std::unique_ptr<GENERAL_NAMES, ossl_deleter<GENERAL_NAMES_free>>;
using ext_stack_ptr = std::unique_ptr<STACK_OF(X509_EXTENSION), decltype([](STACK_OF(X509_EXTENSION)* s) {
                                        sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
                                      })>;

error bad(std::string field, std::string message) { return make_error(errc::invalid_argument, std::move(message), std::move(field)); }

std::string group_name(EVP_PKEY* k) {
  char group[64] = {};
  size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(k, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &len) != 1) return {};
  return group;
}

std::optional<key_type> type_of(EVP_PKEY* k) {
  switch (EVP_PKEY_get_base_id(k)) {
    case EVP_PKEY_EC: {
      auto g = group_name(k);
      if (g == "prime256v1" || g == "P-256") return key_type::ecdsa_p256;
      if (g == "secp384r1" || g == "P-384") return key_type::ecdsa_p384;
      return std::nullopt;
    }
    case EVP_PKEY_RSA: {
      int bits = EVP_PKEY_get_bits(k);
      if (bits == 2048) return key_type::rsa_2048;
      if (bits == 3072) return key_type::rsa_3072;
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

std::optional<std::int64_t> unix_ms(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

result<std::string> generate_private_key(key_type type) {
  pkey_ptr k;
  switch (type) {
    case key_type::ecdsa_p256: k.reset(EVP_EC_gen("P-256")); break;
    case key_type::ecdsa_p384: k.reset(EVP_EC_gen("P-384")); break;
    case key_type::rsa_2048: k.reset(EVP_RSA_gen(2048)); break;
    case key_type::rsa_3072: k.reset(EVP_RSA_gen(3072)); break;
  }
  if (!k) {
    ERR_clear_error();
    return bad("key_type", "the " + std::string(key_type_name(type)) + " key could not be generated (OpenSSL)");
  }
  auto pem = write_private_key(k.get());
  if (pem.empty()) return bad("key_type", "the new key could not be written as PKCS#8");
  return pem;
}

result<key_type> private_key_type(std::string_view key_pem, std::string_view field) {
  auto k = read_private_key(key_pem);
  if (!k) return bad(std::string(field), std::string(field) + " is not an unencrypted PEM private key");
  auto t = type_of(k.get());
  if (!t)
    return bad(std::string(field), std::string(field) + " is not one of the key types " + std::string(key_type_choices()));
  return *t;
}

result<void> check_domains(const std::vector<std::string>& domains) {
  if (domains.empty()) return bad("domains", "domains must name at least one DNS name");
  if (domains.size() > max_domains) return bad("domains", "domains may have at most " + std::to_string(max_domains) + " names");
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < domains.size(); ++i) {
    const std::string f = "domains[" + std::to_string(i) + "]";
    std::string_view d = domains[i];
    std::string_view base = d.substr(0, 2) == "*." ? d.substr(2) : d;
    if (!valid_dns_name(base) || base.find('*') != std::string_view::npos || base.find('.') == std::string_view::npos)
      return bad(f, f + " is not a DNS name (a wildcard only as a leading \"*.\")");
    auto l = lower(d);
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) return bad(f, f + " repeats an earlier name");
    seen.push_back(l);
  }
  return {};
}

result<std::string> make_csr(std::string_view key_pem, const std::vector<std::string>& domains) {
  if (auto ok = check_domains(domains); !ok) return std::move(ok).error();
  auto key = read_private_key(key_pem);
  if (!key) return bad("key_pem", "key_pem is not an unencrypted PEM private key");
  auto type = type_of(key.get());
  if (!type) return bad("key_pem", "key_pem is not one of the key types " + std::string(key_type_choices()));

  req_ptr req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), 0) != 1 || X509_REQ_set_pubkey(req.get(), key.get()) != 1) {
    ERR_clear_error();
    return bad("key_pem", "the CSR could not be built (OpenSSL)");
  }
  // The CN is limited to 64 characters (RFC 5280 ub-common-name); the SANs are what counts.
  if (domains.front().size() <= 64) {
    X509_NAME* name = X509_REQ_get_subject_name(req.get());
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(domains.front().c_str()),
                               -1, -1, 0);
  }
  names_ptr sans(GENERAL_NAMES_new());
  for (const auto& d : domains) {
    GENERAL_NAME* gn = GENERAL_NAME_new();
    ASN1_IA5STRING* ia5 = ASN1_IA5STRING_new();
    if (!gn || !ia5 || ASN1_STRING_set(ia5, d.data(), static_cast<int>(d.size())) != 1) {
      GENERAL_NAME_free(gn);
      ASN1_IA5STRING_free(ia5);
      ERR_clear_error();
      return bad("domains", "the CSR's names could not be encoded");
    }
    GENERAL_NAME_set0_value(gn, GEN_DNS, ia5);
    sk_GENERAL_NAME_push(sans.get(), gn);
  }
  ext_stack_ptr exts(sk_X509_EXTENSION_new_null());
  X509_EXTENSION* ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, sans.get());
  if (!ext || !exts) {
    X509_EXTENSION_free(ext);
    ERR_clear_error();
    return bad("domains", "the CSR's subjectAltName could not be encoded");
  }
  sk_X509_EXTENSION_push(exts.get(), ext);
  if (X509_REQ_add_extensions(req.get(), exts.get()) != 1) {
    ERR_clear_error();
    return bad("domains", "the CSR's extensions could not be added");
  }
  const EVP_MD* md = *type == key_type::ecdsa_p384 ? EVP_sha384() : EVP_sha256();
  if (X509_REQ_sign(req.get(), key.get(), md) <= 0) {
    ERR_clear_error();
    return bad("key_pem", "the CSR could not be signed with the certificate key");
  }
  unsigned char* der = nullptr;
  int n = i2d_X509_REQ(req.get(), &der);
  if (n <= 0) {
    ERR_clear_error();
    return bad("domains", "the CSR could not be encoded");
  }
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

result<issued_certificate> read_issued_chain(std::string_view pem_chain, std::string_view key_pem) {
  if (pem_chain.size() > 1024 * 1024) return bad("certificate", "the CA's certificate chain is larger than 1 MiB");
  auto certs = read_certificates(pem_chain);
  if (certs.empty()) return bad("certificate", "the CA's answer holds no PEM certificate");
  auto key = read_private_key(key_pem);
  if (!key) return bad("key_pem", "key_pem is not an unencrypted PEM private key");
  X509* leaf = certs.front().get();
  EVP_PKEY* leaf_key = X509_get0_pubkey(leaf);
  if (!leaf_key || EVP_PKEY_eq(leaf_key, key.get()) != 1) {
    ERR_clear_error();
    return bad("key_pem", "the CA's certificate does not match the key certfleet made for this order (its public key differs)");
  }
  issued_certificate out;
  out.leaf_pem = certificate_pem(leaf);
  for (std::size_t i = 1; i < certs.size(); ++i) out.chain_pem += certificate_pem(certs[i].get());
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), nullptr)) {
    char* hex = BN_bn2hex(bn);
    out.serial_hex = lower(hex ? hex : "");
    OPENSSL_free(hex);
    BN_free(bn);
  }
  out.not_before_ms = unix_ms(X509_get0_notBefore(leaf)).value_or(0);
  out.not_after_ms = unix_ms(X509_get0_notAfter(leaf)).value_or(0);
  if (auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr))) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
      const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
      if (gn->type != GEN_DNS) continue;
      const ASN1_IA5STRING* s = gn->d.dNSName;
      out.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                 static_cast<std::size_t>(ASN1_STRING_length(s)));
    }
    GENERAL_NAMES_free(names);
  }
  ERR_clear_error();
  return out;
}

result<std::string> certificate_der(std::string_view pem, std::string_view field) {
  auto certs = read_certificates(pem);
  if (certs.empty()) return bad(std::string(field), std::string(field) + " holds no PEM certificate");
  unsigned char* der = nullptr;
  int n = i2d_X509(certs.front().get(), &der);
  if (n <= 0) {
    ERR_clear_error();
    return bad(std::string(field), std::string(field) + " could not be encoded as DER");
  }
  std::string out(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
  OPENSSL_free(der);
  return out;
}

namespace {
constexpr std::array<std::pair<std::string_view, int>, 10> reasons{{
    {"unspecified", 0},
    {"keyCompromise", 1},
    {"cACompromise", 2},
    {"affiliationChanged", 3},
    {"superseded", 4},
    {"cessationOfOperation", 5},
    {"certificateHold", 6},
    {"removeFromCRL", 8},
    {"privilegeWithdrawn", 9},
    {"aACompromise", 10},
}};
}  // namespace

std::optional<int> revocation_reason_code(std::string_view name) noexcept {
  for (const auto& [n, code] : reasons)
    if (n == name) return code;
  return std::nullopt;
}

std::string_view revocation_reason_name(int code) noexcept {
  for (const auto& [n, c] : reasons)
    if (c == code) return n;
  return {};
}

std::string_view revocation_reason_choices() noexcept {
  return "unspecified|keyCompromise|cACompromise|affiliationChanged|superseded|cessationOfOperation|certificateHold|"
         "removeFromCRL|privilegeWithdrawn|aACompromise";
}

}  // namespace certfleet::acme
