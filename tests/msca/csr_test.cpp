// The tokens of an enrollment, read back with OpenSSL: the PKCS#10 (subject, SANs, the template
// extension's exact bytes) and the renewal's PKCS#7, which verifies with the current certificate.
#include "certfleet/msca/protocol.hpp"
#include "core/openssl_ptr.hpp"
#include "msca_fixtures.hpp"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/cms.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <string>

using certfleet::errc;
using certfleet::ossl_ptr;
using namespace certfleet::msca;

namespace {

std::string key_pem(EVP_PKEY* key) {
  ossl_ptr<BIO, BIO_free> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string cert_pem(X509* cert) {
  ossl_ptr<BIO, BIO_free> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

ossl_ptr<X509_REQ, X509_REQ_free> read_csr(const std::string& der) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  return ossl_ptr<X509_REQ, X509_REQ_free>(d2i_X509_REQ(nullptr, &p, static_cast<long>(der.size())));
}

std::string subject_of(X509_REQ* req) {
  ossl_ptr<BIO, BIO_free> bio(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), X509_REQ_get_subject_name(req), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// The DER value of the request's extension `oid`, "" when it has none.
std::string extension_value(X509_REQ* req, const char* oid) {
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req);
  std::string out;
  ossl_ptr<ASN1_OBJECT, ASN1_OBJECT_free> want(OBJ_txt2obj(oid, 1));
  for (int i = 0; i < sk_X509_EXTENSION_num(exts); ++i) {
    X509_EXTENSION* e = sk_X509_EXTENSION_value(exts, i);
    if (OBJ_cmp(X509_EXTENSION_get_object(e), want.get()) == 0) {
      ASN1_OCTET_STRING* v = X509_EXTENSION_get_data(e);
      out.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(v)), static_cast<std::size_t>(ASN1_STRING_length(v)));
    }
  }
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  return out;
}

std::vector<std::string> dns_sans(X509_REQ* req) {
  STACK_OF(X509_EXTENSION)* exts = X509_REQ_get_extensions(req);
  std::vector<std::string> out;
  auto* names = static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    if (gn->type == GEN_DNS)
      out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(gn->d.dNSName)),
                       static_cast<std::size_t>(ASN1_STRING_length(gn->d.dNSName)));
  }
  GENERAL_NAMES_free(names);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  return out;
}

policy_template v2_template() {
  policy_template t;
  t.name = "ContosoWebServer";
  t.oid = "1.3.6.1.4.1.311.21.8.1234567.7654321.1.2.3.4.100.200";
  t.major_version = 100;
  t.minor_version = 5;
  return t;
}

struct keys {
  ossl_ptr<EVP_PKEY, EVP_PKEY_free> rsa{EVP_RSA_gen(2048)};
  ossl_ptr<EVP_PKEY, EVP_PKEY_free> ec{EVP_EC_gen("P-256")};
};
const keys& test_keys() {
  static keys k;
  return k;
}

}  // namespace

TEST(msca_csr, subject_sans_and_template_extension) {
  const auto& k = test_keys();
  auto der = make_enrollment_csr(key_pem(k.rsa.get()), "CN=web01.contoso.com,OU=Web,O=Contoso\\, Ltd,C=US",
                                 {"web01.contoso.com", "www.contoso.com", "*.apps.contoso.com"}, v2_template());
  ASSERT_TRUE(der) << der.error().field << ": " << der.error().message;
  auto req = read_csr(*der);
  ASSERT_TRUE(req);
  ossl_ptr<EVP_PKEY, EVP_PKEY_free> pub(X509_REQ_get_pubkey(req.get()));
  EXPECT_EQ(X509_REQ_verify(req.get(), pub.get()), 1);
  EXPECT_EQ(EVP_PKEY_eq(pub.get(), k.rsa.get()), 1);
  EXPECT_EQ(subject_of(req.get()), "CN=web01.contoso.com,OU=Web,O=Contoso\\, Ltd,C=US");
  // RFC 4514 writes the DN last-RDN-first: the ASN.1 sequence starts with C.
  EXPECT_EQ(OBJ_obj2nid(X509_NAME_ENTRY_get_object(X509_NAME_get_entry(X509_REQ_get_subject_name(req.get()), 0))),
            NID_countryName);
  EXPECT_EQ(dns_sans(req.get()), (std::vector<std::string>{"web01.contoso.com", "www.contoso.com", "*.apps.contoso.com"}));
  // SEQUENCE { OID 1.3.6.1.4.1.311.21.8.1234567.7654321.1.2.3.4.100.200, INTEGER 100, INTEGER 5 }
  const std::string want(
      "\x30\x1f"
      "\x06\x17\x2b\x06\x01\x04\x01\x82\x37\x15\x08\xcb\xad\x07\x83\xd3\x97\x31\x01\x02\x03\x04\x64\x81\x48"
      "\x02\x01\x64"
      "\x02\x01\x05",
      33);
  EXPECT_EQ(extension_value(req.get(), "1.3.6.1.4.1.311.21.7"), want);
  EXPECT_EQ(extension_value(req.get(), "1.3.6.1.4.1.311.20.2"), "");
}

TEST(msca_csr, template_name_when_the_oid_is_unknown) {
  policy_template t;
  t.name = "WebServer";
  auto der = make_enrollment_csr(key_pem(test_keys().ec.get()), "", {}, t);
  ASSERT_TRUE(der) << der.error().message;
  auto req = read_csr(*der);
  ASSERT_TRUE(req);
  EXPECT_EQ(X509_NAME_entry_count(X509_REQ_get_subject_name(req.get())), 0);
  // BMPString "WebServer": tag 0x1e, UTF-16BE.
  std::string want("\x1e\x12", 2);
  for (char c : std::string("WebServer")) want += std::string("\0", 1) + c;
  EXPECT_EQ(extension_value(req.get(), "1.3.6.1.4.1.311.20.2"), want);
  EXPECT_EQ(extension_value(req.get(), "1.3.6.1.4.1.311.21.7"), "");
  EXPECT_TRUE(dns_sans(req.get()).empty());
}

TEST(msca_csr, refuses_odd_subjects) {
  const auto pem = key_pem(test_keys().ec.get());
  for (const char* subject :
       {"CN", "CN=", "CN=a,", ",CN=a", "CN=a+O=b", "XX=a", "1.2.3=a", "CN=#04026869", "CN= a", "CN=a ", "CN=a;b",
        "CN=a\"b", "CN=a\\", "CN=a\\q", "CN=a=b", "CN=a<b", "C=USA", "CN=\x01", "CN=\xc3\x28",
        "CN=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    auto r = make_enrollment_csr(pem, subject, {}, v2_template());
    ASSERT_FALSE(r) << subject;
    EXPECT_TRUE(r.error().is(errc::invalid_argument));
    EXPECT_EQ(r.error().field, "subject") << subject;
  }
  // Escapes and spaces after a comma are RFC 4514's.
  auto ok = make_enrollment_csr(pem, "CN=a\\2Cb\\+c, O=x\\ ", {}, v2_template());
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(subject_of(read_csr(*ok).get()), "CN=a\\,b\\+c,O=x\\ ");
}

TEST(msca_csr, refuses_odd_sans) {
  const auto pem = key_pem(test_keys().ec.get());
  const std::vector<std::vector<std::string>> cases{
      {"ok.example", "bad_name.example"}, {"ok.example", ""}, {"ok.example", "-a.example"},
      {"ok.example", "a..example"}, {"ok.example", "a.example."}, {"ok.example", "*"},
      {"ok.example", "a.*.example"}, {"ok.example", "ok.example"}, {"ok.example", "10.0.0.1/8"},
      {"ok.example", std::string(64, 'a') + ".example"}};
  for (const auto& sans : cases) {
    auto r = make_enrollment_csr(pem, "CN=x", sans, v2_template());
    ASSERT_FALSE(r) << sans[1];
    EXPECT_EQ(r.error().field, "sans[1]") << sans[1];
  }
}

TEST(msca_csr, refuses_bad_keys_and_templates) {
  auto r = make_enrollment_csr("not a key", "CN=x", {}, v2_template());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "key_pem");
  // An encrypted key is not read (and nothing prompts for its passphrase).
  ossl_ptr<BIO, BIO_free> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), test_keys().ec.get(), EVP_aes_128_cbc(), nullptr, 0, nullptr,
                           const_cast<char*>("passphrase"));
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  r = make_enrollment_csr(std::string(data, static_cast<std::size_t>(n)), "CN=x", {}, v2_template());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "key_pem");
  EXPECT_EQ(r.error().message.find("passphrase"), std::string::npos);
  auto t = v2_template();
  t.oid = "1.3.6.x";
  r = make_enrollment_csr(key_pem(test_keys().ec.get()), "CN=x", {}, t);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "template");
}

TEST(msca_csr, renewal_verifies_with_the_current_certificate) {
  const auto& k = test_keys();
  // The current certificate: self-signed with the RSA key.
  ossl_ptr<X509, X509_free> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 42);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("web01.contoso.com"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), k.rsa.get());
  ASSERT_GT(X509_sign(cert.get(), k.rsa.get(), EVP_sha256()), 0);

  auto csr = make_enrollment_csr(key_pem(k.ec.get()), "CN=web01.contoso.com", {"web01.contoso.com"}, v2_template());
  ASSERT_TRUE(csr);
  auto p7 = make_renewal_request(*csr, cert_pem(cert.get()), key_pem(k.rsa.get()));
  ASSERT_TRUE(p7) << p7.error().field << ": " << p7.error().message;

  const auto* p = reinterpret_cast<const unsigned char*>(p7->data());
  ossl_ptr<CMS_ContentInfo, CMS_ContentInfo_free> cms(d2i_CMS_ContentInfo(nullptr, &p, static_cast<long>(p7->size())));
  ASSERT_TRUE(cms);
  EXPECT_EQ(OBJ_obj2nid(CMS_get0_type(cms.get())), NID_pkcs7_signed);
  ossl_ptr<BIO, BIO_free> out(BIO_new(BIO_s_mem()));
  // The signer's certificate travels inside; NOVERIFY: the chain is the CA's business.
  ASSERT_EQ(CMS_verify(cms.get(), nullptr, nullptr, nullptr, out.get(), CMS_NO_SIGNER_CERT_VERIFY | CMS_BINARY), 1);
  char* data = nullptr;
  long n = BIO_get_mem_data(out.get(), &data);
  EXPECT_EQ(std::string(data, static_cast<std::size_t>(n)), *csr);
  STACK_OF(X509)* certs = CMS_get1_certs(cms.get());
  ASSERT_EQ(sk_X509_num(certs), 1);
  EXPECT_EQ(X509_cmp(sk_X509_value(certs, 0), cert.get()), 0);
  sk_X509_pop_free(certs, X509_free);
  // SHA-256.
  STACK_OF(CMS_SignerInfo)* signers = CMS_get0_SignerInfos(cms.get());
  X509_ALGOR* digest = nullptr;
  CMS_SignerInfo_get0_algs(sk_CMS_SignerInfo_value(signers, 0), nullptr, nullptr, &digest, nullptr);
  const ASN1_OBJECT* alg = nullptr;
  X509_ALGOR_get0(&alg, nullptr, nullptr, digest);
  EXPECT_EQ(OBJ_obj2nid(alg), NID_sha256);
}

TEST(msca_csr, renewal_refuses_mismatched_inputs) {
  const auto& k = test_keys();
  const auto leaf = msca_test::fixture("leaf_certificate.pem");
  auto csr = make_enrollment_csr(key_pem(k.ec.get()), "CN=x", {}, v2_template());
  ASSERT_TRUE(csr);
  auto r = make_renewal_request("not der", leaf, key_pem(k.rsa.get()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "csr_der");
  r = make_renewal_request(*csr, "not pem", key_pem(k.rsa.get()));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "current_cert_pem");
  r = make_renewal_request(*csr, leaf, key_pem(k.rsa.get()));  // not the leaf's key
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "current_key_pem");
}
