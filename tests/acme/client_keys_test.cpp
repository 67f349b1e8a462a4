// Certificate keys, CSRs and the CA's chain (pure), checked with OpenSSL: each key type, the CSR's
// names and signature, the leaf/chain split and the key match, revocation reason names.
#include <gtest/gtest.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "certfleet/acme/keys.hpp"
#include "certs.hpp"

using namespace certfleet::acme;

namespace {

struct csr_view {
  std::string cn;
  std::vector<std::string> sans;
  bool signature_ok = false;
  int key_bits = 0;
};

csr_view inspect_csr(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  X509_REQ* req = d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size()));
  if (!req) throw std::runtime_error("CSR does not parse");
  csr_view v;
  X509_NAME* name = X509_REQ_get_subject_name(req);
  int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (i >= 0) {
    auto* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
    v.cn.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<std::size_t>(ASN1_STRING_length(s)));
  }
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req);
  for (int e = 0; e < sk_X509_EXTENSION_num(exts); ++e) {
    X509_EXTENSION* ext = sk_X509_EXTENSION_value(exts, e);
    if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_alt_name) continue;
    auto* names = static_cast<GENERAL_NAMES*>(X509V3_EXT_d2i(ext));
    for (int n = 0; n < sk_GENERAL_NAME_num(names); ++n) {
      const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, n);
      if (gn->type == GEN_DNS)
        v.sans.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(gn->d.dNSName)),
                            static_cast<std::size_t>(ASN1_STRING_length(gn->d.dNSName)));
    }
    GENERAL_NAMES_free(names);
  }
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req);
  v.key_bits = EVP_PKEY_get_bits(pub);
  v.signature_ok = X509_REQ_verify(req, pub) == 1;
  X509_REQ_free(req);
  return v;
}

}  // namespace

TEST(acme_keys, each_key_type_makes_a_key_and_a_signed_csr) {
  const std::vector<std::string> names{"www.example.org", "*.example.org", "example.org"};
  for (const auto& def : all_key_types()) {
    auto key = generate_private_key(def.type);
    ASSERT_TRUE(key) << def.name << ": " << key.error().message;
    EXPECT_EQ(key->rfind("-----BEGIN PRIVATE KEY-----", 0), 0u) << def.name;
    auto t = private_key_type(*key);
    ASSERT_TRUE(t) << def.name;
    EXPECT_EQ(*t, def.type) << def.name;
    auto csr = make_csr(*key, names);
    ASSERT_TRUE(csr) << def.name << ": " << csr.error().message;
    auto v = inspect_csr(*csr);
    EXPECT_TRUE(v.signature_ok) << def.name;
    EXPECT_EQ(v.cn, "www.example.org");
    EXPECT_EQ(v.sans, names);
    int bits = def.type == key_type::ecdsa_p256 ? 256 : def.type == key_type::ecdsa_p384 ? 384
                                                     : def.type == key_type::rsa_2048   ? 2048
                                                                                        : 3072;
    EXPECT_EQ(v.key_bits, bits) << def.name;
  }
}

TEST(acme_keys, csr_names_are_checked_and_named) {
  auto key = generate_private_key(key_type::ecdsa_p256);
  ASSERT_TRUE(key);
  struct row {
    std::vector<std::string> domains;
    std::string field;
  };
  std::vector<std::string> too_many;
  for (int i = 0; i < 101; ++i) too_many.push_back("n" + std::to_string(i) + ".example.org");
  for (const auto& [domains, field] : {row{{}, "domains"}, row{too_many, "domains"},
                                       row{{"ok.example.org", "bad_name!.example.org"}, "domains[1]"},
                                       row{{"a.*.example.org"}, "domains[0]"}, row{{"**.example.org"}, "domains[0]"},
                                       row{{"localhost"}, "domains[0]"},
                                       row{{"a.example.org", "A.example.org"}, "domains[1]"}}) {
    auto csr = make_csr(*key, domains);
    ASSERT_FALSE(csr) << field;
    EXPECT_EQ(csr.error().field, field) << csr.error().message;
  }
  // A first name longer than the CN limit: no CN, still every SAN.
  std::string long_name(60, 'a');
  long_name += ".example.org";
  auto csr = make_csr(*key, {long_name});
  ASSERT_TRUE(csr) << csr.error().message;
  auto v = inspect_csr(*csr);
  EXPECT_EQ(v.cn, "");
  EXPECT_EQ(v.sans, std::vector<std::string>{long_name});
  auto bad_key = make_csr("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", {"a.example.org"});
  ASSERT_FALSE(bad_key);
  EXPECT_EQ(bad_key.error().field, "key_pem");
}

TEST(acme_keys, issued_chain_is_split_and_matched_to_our_key) {
  auto root = testbed::make_certificate({.common_name = "Test Root", .is_ca = true});
  auto inter = testbed::make_certificate({.common_name = "Test Intermediate", .issuer = &root, .is_ca = true});
  auto leaf = testbed::make_certificate(
      {.common_name = "www.example.org", .dns_sans = {"www.example.org", "example.org"}, .issuer = &inter});
  auto got = read_issued_chain(leaf.cert_pem + "\n" + inter.cert_pem, leaf.key_pem);
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->leaf_pem, leaf.cert_pem);
  EXPECT_EQ(got->chain_pem, inter.cert_pem);
  EXPECT_EQ(got->dns_names, (std::vector<std::string>{"www.example.org", "example.org"}));
  EXPECT_GT(got->not_after_ms, got->not_before_ms);
  // The serial as `openssl x509 -serial` prints it, lower-cased.
  std::string out;
  {
    BIO* b = BIO_new_mem_buf(leaf.cert_pem.data(), static_cast<int>(leaf.cert_pem.size()));
    X509* x = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), nullptr);
    char* hex = BN_bn2hex(bn);
    out = hex;
    OPENSSL_free(hex);
    BN_free(bn);
    X509_free(x);
    BIO_free(b);
  }
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(got->serial_hex, out);

  // Somebody else's key: refused, naming key_pem.
  auto other = testbed::make_certificate({.common_name = "other"});
  auto mismatch = read_issued_chain(leaf.cert_pem + inter.cert_pem, other.key_pem);
  ASSERT_FALSE(mismatch);
  EXPECT_EQ(mismatch.error().field, "key_pem");
  EXPECT_NE(mismatch.error().message.find("does not match"), std::string::npos);
  auto none = read_issued_chain("<html>no</html>", leaf.key_pem);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().field, "certificate");
  auto der = certificate_der(leaf.cert_pem);
  ASSERT_TRUE(der);
  EXPECT_EQ(static_cast<unsigned char>((*der)[0]), 0x30);
}

TEST(acme_keys, revocation_reasons) {
  EXPECT_EQ(revocation_reason_code("unspecified"), 0);
  EXPECT_EQ(revocation_reason_code("keyCompromise"), 1);
  EXPECT_EQ(revocation_reason_code("superseded"), 4);
  EXPECT_EQ(revocation_reason_code("cessationOfOperation"), 5);
  EXPECT_EQ(revocation_reason_code("aACompromise"), 10);
  EXPECT_FALSE(revocation_reason_code("KeyCompromise"));
  EXPECT_FALSE(revocation_reason_code("7"));
  EXPECT_NE(revocation_reason_choices().find("keyCompromise"), std::string_view::npos);
  // And back: every code in use has its name, the unused ones none.
  for (int code = 0; code <= 10; ++code) {
    auto name = revocation_reason_name(code);
    if (code == 7) {
      EXPECT_TRUE(name.empty());
      continue;
    }
    EXPECT_EQ(revocation_reason_code(name), code) << name;
  }
  EXPECT_TRUE(revocation_reason_name(11).empty());
  EXPECT_TRUE(revocation_reason_name(-1).empty());
}
