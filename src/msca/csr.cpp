// The tokens an AD CS enrollment carries: the PKCS#10 of a new key (subject, DNS names, the
// certificate template extension) and the renewal's PKCS#7 signed with the current certificate.
#include "certfleet/msca/protocol.hpp"
#include "core/openssl_ptr.hpp"

#include <openssl/bio.h>
#include <openssl/cms.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <utility>

namespace certfleet::msca {

namespace {

error bad(std::string message, std::string field) { return make_error(errc::invalid_argument, std::move(message), std::move(field)); }

using bio_ptr = ossl_ptr<BIO, BIO_free>;
using pkey_ptr = ossl_ptr<EVP_PKEY, EVP_PKEY_free>;
using x509_ptr = ossl_ptr<X509, X509_free>;
using req_ptr = ossl_ptr<X509_REQ, X509_REQ_free>;
using name_ptr = ossl_ptr<X509_NAME, X509_NAME_free>;
using ext_ptr = ossl_ptr<X509_EXTENSION, X509_EXTENSION_free>;
using obj_ptr = ossl_ptr<ASN1_OBJECT, ASN1_OBJECT_free>;
using octets_ptr = ossl_ptr<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free>;
using string_ptr = ossl_ptr<ASN1_STRING, ASN1_STRING_free>;
using integer_ptr = ossl_ptr<ASN1_INTEGER, ASN1_INTEGER_free>;
using names_ptr = ossl_ptr<GENERAL_NAMES, GENERAL_NAMES_free>;
using cms_ptr = ossl_ptr<CMS_ContentInfo, CMS_ContentInfo_free>;
void free_ext_stack(STACK_OF(X509_EXTENSION)* s) { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); }
using exts_ptr = ossl_ptr<STACK_OF(X509_EXTENSION), free_ext_stack>;

// Never prompts for a passphrase (OpenSSL's default callback reads the terminal): an encrypted
// key is simply not readable here.
int no_passphrase(char*, int, int, void*) { return -1; }

pkey_ptr read_key(std::string_view pem) {
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return pkey_ptr(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
}

x509_ptr read_cert(std::string_view pem) {
  bio_ptr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return x509_ptr(PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr));
}

// ---- RFC 4514 subject -----------------------------------------------------------------------

struct rdn {
  int nid;
  std::string value;  // UTF-8, unescaped
};

// The attribute types RFC 4514 §3 names (plus none other: anything else is refused).
int attribute_nid(std::string_view type) {
  auto eq = [&](std::string_view k) {
    return type.size() == k.size() &&
           std::equal(type.begin(), type.end(), k.begin(), [](char a, char b) { return (a | 0x20) == (b | 0x20); });
  };
  if (eq("CN")) return NID_commonName;
  if (eq("O")) return NID_organizationName;
  if (eq("OU")) return NID_organizationalUnitName;
  if (eq("L")) return NID_localityName;
  if (eq("ST")) return NID_stateOrProvinceName;
  if (eq("C")) return NID_countryName;
  if (eq("STREET")) return NID_streetAddress;
  if (eq("DC")) return NID_domainComponent;
  if (eq("UID")) return NID_userId;
  return NID_undef;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size() || (n == 2 && c < 0xC2)) return false;
    std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n;
  }
  return true;
}

// A strict RFC 4514 reader: `type=value` pairs separated by ',', single-valued RDNs, the
// escapes §2.4 defines (\ followed by a special character or two hex digits), optional spaces
// after a ','. Anything else (a '+', an unescaped special, a #hexstring, an empty value, an
// unknown type, a control character) is refused rather than guessed at.
result<std::vector<rdn>> parse_subject(std::string_view s) {
  std::vector<rdn> out;
  std::size_t i = 0;
  const auto fail = [](std::string why) { return bad("subject: " + why, "subject"); };
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ' && !out.empty()) ++i;
    const std::size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return fail("an attribute has no '='");
    const std::string_view type = s.substr(i, eq - i);
    const int nid = attribute_nid(type);
    if (nid == NID_undef) return fail("unknown attribute type '" + std::string(type.substr(0, 32)) + "'");
    i = eq + 1;
    std::string value;
    bool trailing_space = false;
    if (i < s.size() && s[i] == '#') return fail("a #hexstring value is not accepted");
    if (i < s.size() && s[i] == ' ') return fail("a value may not start with an unescaped space");
    while (i < s.size() && s[i] != ',') {
      const char c = s[i];
      if (c == '\\') {
        if (i + 1 >= s.size()) return fail("a trailing '\\'");
        const char n = s[i + 1];
        const int h1 = hex_value(n);
        if (h1 >= 0 && i + 2 < s.size() && hex_value(s[i + 2]) >= 0) {
          value += static_cast<char>(h1 * 16 + hex_value(s[i + 2]));
          i += 3;
        } else if (std::string_view("\"+,;<>\\=# ").find(n) != std::string_view::npos) {
          value += n;
          i += 2;
        } else {
          return fail("'\\" + std::string(1, n) + "' is not an escape");
        }
        trailing_space = false;
        continue;
      }
      if (c == '+') return fail("multi-valued RDNs ('+') are not accepted");
      if (c == '"' || c == ';' || c == '<' || c == '>' || c == '=')
        return fail(std::string("'") + c + "' must be escaped");
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return fail("a control character");
      trailing_space = c == ' ';
      value += c;
      ++i;
    }
    if (value.empty()) return fail("an empty value");
    if (trailing_space) return fail("a value may not end with an unescaped space");
    if (!valid_utf8(value)) return fail("a value is not UTF-8");
    for (char c : value)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return fail("a control character");
    out.push_back({nid, std::move(value)});
    if (i < s.size()) {
      ++i;  // the ','
      if (i == s.size()) return fail("a trailing ','");
    }
  }
  return out;
}

// ---- DNS names ------------------------------------------------------------------------------

// A hostname (LDH labels, RFC 1123), optionally a leading "*." wildcard; no trailing dot.
bool valid_dns_name(std::string_view name) {
  if (name.size() >= 2 && name.substr(0, 2) == "*.") name.remove_prefix(2);
  if (name.empty() || name.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string_view label = name.substr(start, dot == std::string_view::npos ? name.size() - start : dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return true;
}

// ---- DER pieces -----------------------------------------------------------------------------

void append_length(std::string& out, std::size_t n) {
  if (n < 0x80) {
    out += static_cast<char>(n);
    return;
  }
  std::string bytes;
  while (n) {
    bytes.insert(bytes.begin(), static_cast<char>(n & 0xff));
    n >>= 8;
  }
  out += static_cast<char>(0x80 | bytes.size());
  out += bytes;
}

template <class T, class F>
std::string der_of(const T* v, F i2d) {
  unsigned char* buf = nullptr;
  const int n = i2d(v, &buf);
  if (n <= 0) return {};
  std::string out(reinterpret_cast<char*>(buf), static_cast<std::size_t>(n));
  OPENSSL_free(buf);
  return out;
}

result<ext_ptr> template_extension(const policy_template& t) {
  std::string value;  // the extension's DER value
  const char* ext_oid = nullptr;
  if (!t.oid.empty()) {
    // szOID_CERTIFICATE_TEMPLATE (MS-WCCE 2.2.2.7.7.2): SEQUENCE { templateID OID,
    // templateMajorVersion INTEGER, templateMinorVersion INTEGER }.
    ext_oid = "1.3.6.1.4.1.311.21.7";
    if (t.oid.find_first_not_of("0123456789.") != std::string::npos)
      return bad("the template OID '" + t.oid + "' is not a dotted OID", "template");
    obj_ptr id(OBJ_txt2obj(t.oid.c_str(), 1));
    if (!id) return bad("the template OID '" + t.oid + "' is not an OID", "template");
    integer_ptr major(ASN1_INTEGER_new()), minor(ASN1_INTEGER_new());
    if (!major || !minor || !ASN1_INTEGER_set_int64(major.get(), t.major_version) ||
        !ASN1_INTEGER_set_int64(minor.get(), t.minor_version))
      return bad("the template versions do not encode", "template");
    std::string content = der_of(id.get(), i2d_ASN1_OBJECT) + der_of(major.get(), i2d_ASN1_INTEGER) +
                          der_of(minor.get(), i2d_ASN1_INTEGER);
    value = "\x30";
    append_length(value, content.size());
    value += content;
  } else {
    // szOID_ENROLL_CERTTYPE_EXTENSION (MS-WCCE 2.2.2.7.7.1): the template's name as a BMPString.
    if (t.name.empty()) return bad("the template has neither an OID nor a name", "template");
    ASN1_STRING* raw = nullptr;
    if (ASN1_mbstring_copy(&raw, reinterpret_cast<const unsigned char*>(t.name.data()), static_cast<int>(t.name.size()),
                           MBSTRING_UTF8, B_ASN1_BMPSTRING) <= 0)
      return bad("the template name is not UTF-8", "template");
    string_ptr bmp(raw);
    value = der_of(bmp.get(), i2d_ASN1_BMPSTRING);
    ext_oid = "1.3.6.1.4.1.311.20.2";
  }
  obj_ptr oid(OBJ_txt2obj(ext_oid, 1));
  octets_ptr octets(ASN1_OCTET_STRING_new());
  if (!oid || !octets || value.empty() ||
      !ASN1_OCTET_STRING_set(octets.get(), reinterpret_cast<const unsigned char*>(value.data()), static_cast<int>(value.size())))
    return bad("the template extension does not encode", "template");
  ext_ptr ext(X509_EXTENSION_create_by_OBJ(nullptr, oid.get(), 0, octets.get()));
  if (!ext) return bad("the template extension does not encode", "template");
  return ext;
}

}  // namespace

result<std::string> make_enrollment_csr(std::string_view key_pem, std::string_view subject,
                                        const std::vector<std::string>& sans, const policy_template& tmpl) {
  auto rdns = parse_subject(subject);
  if (!rdns) return std::move(rdns).error();
  for (std::size_t i = 0; i < sans.size(); ++i) {
    const std::string field = "sans[" + std::to_string(i) + "]";
    if (!valid_dns_name(sans[i])) return bad(field + " is not a DNS name", field);
    for (std::size_t j = 0; j < i; ++j)
      if (sans[j] == sans[i]) return bad(field + " repeats sans[" + std::to_string(j) + "]", field);
  }
  pkey_ptr key = read_key(key_pem);
  if (!key) return bad("the key is not an unencrypted PEM private key", "key_pem");

  req_ptr req(X509_REQ_new());
  name_ptr name(X509_NAME_new());
  if (!req || !name || !X509_REQ_set_version(req.get(), 0)) return bad("the request could not be made", "csr");
  // RFC 4514 writes the last RDN of the DN first: add them back to front.
  for (auto it = rdns->rbegin(); it != rdns->rend(); ++it) {
    if (!X509_NAME_add_entry_by_NID(name.get(), it->nid, MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(it->value.data()),
                                    static_cast<int>(it->value.size()), -1, 0))
      // OpenSSL's string table refused it: too long for the type (CN: 64), C not two letters, …
      return bad(std::string("subject: ") + OBJ_nid2sn(it->nid) + " has a value its type does not allow", "subject");
  }
  if (!X509_REQ_set_subject_name(req.get(), name.get()) || !X509_REQ_set_pubkey(req.get(), key.get()))
    return bad("the request could not be made", "csr");

  exts_ptr exts(sk_X509_EXTENSION_new_null());
  if (!exts) return bad("the request could not be made", "csr");
  if (!sans.empty()) {
    names_ptr names(GENERAL_NAMES_new());
    if (!names) return bad("the request could not be made", "csr");
    for (std::size_t i = 0; i < sans.size(); ++i) {
      ossl_ptr<GENERAL_NAME, GENERAL_NAME_free> gn(GENERAL_NAME_new());
      ossl_ptr<ASN1_IA5STRING, ASN1_IA5STRING_free> ia5(ASN1_IA5STRING_new());
      if (!gn || !ia5 || !ASN1_STRING_set(ia5.get(), sans[i].data(), static_cast<int>(sans[i].size())))
        return bad("the request could not be made", "csr");
      GENERAL_NAME_set0_value(gn.get(), GEN_DNS, ia5.release());
      if (!sk_GENERAL_NAME_push(names.get(), gn.get())) return bad("the request could not be made", "csr");
      gn.release();
    }
    ext_ptr san(X509V3_EXT_i2d(NID_subject_alt_name, 0, names.get()));
    if (!san || !sk_X509_EXTENSION_push(exts.get(), san.get())) return bad("the request could not be made", "csr");
    san.release();
  }
  auto tmpl_ext = template_extension(tmpl);
  if (!tmpl_ext) return std::move(tmpl_ext).error();
  if (!sk_X509_EXTENSION_push(exts.get(), tmpl_ext->get())) return bad("the request could not be made", "csr");
  tmpl_ext->release();
  if (!X509_REQ_add_extensions(req.get(), exts.get())) return bad("the request could not be made", "csr");

  if (X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0)
    return bad("the key cannot sign the request with SHA-256", "key_pem");
  std::string der = der_of(req.get(), i2d_X509_REQ);
  if (der.empty()) return bad("the request could not be encoded", "csr");
  return der;
}

result<std::string> make_renewal_request(std::string_view csr_der, std::string_view current_cert_pem,
                                         std::string_view current_key_pem) {
  {
    const auto* p = reinterpret_cast<const unsigned char*>(csr_der.data());
    req_ptr csr(d2i_X509_REQ(nullptr, &p, static_cast<long>(csr_der.size())));
    if (!csr || p != reinterpret_cast<const unsigned char*>(csr_der.data()) + csr_der.size())
      return bad("the new request is not a DER PKCS#10", "csr_der");
  }
  x509_ptr cert = read_cert(current_cert_pem);
  if (!cert) return bad("the current certificate is not PEM", "current_cert_pem");
  pkey_ptr key = read_key(current_key_pem);
  if (!key) return bad("the current key is not an unencrypted PEM private key", "current_key_pem");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return bad("the current key is not the current certificate's", "current_key_pem");

  // SignedData with the PKCS#10 as its content (not detached), one signer: the current
  // certificate (included) and its key, SHA-256, signed attributes (content type, digest).
  bio_ptr content(BIO_new_mem_buf(csr_der.data(), static_cast<int>(csr_der.size())));
  cms_ptr cms(CMS_sign(nullptr, nullptr, nullptr, nullptr, CMS_BINARY | CMS_PARTIAL));
  if (!content || !cms) return bad("the renewal request could not be made", "renewal");
  if (!CMS_add1_signer(cms.get(), cert.get(), key.get(), EVP_sha256(), CMS_BINARY))
    return bad("the current key cannot sign with SHA-256", "current_key_pem");
  if (!CMS_final(cms.get(), content.get(), nullptr, CMS_BINARY)) return bad("the renewal request could not be signed", "renewal");
  std::string der = der_of(cms.get(), i2d_CMS_ContentInfo);
  if (der.empty()) return bad("the renewal request could not be encoded", "renewal");
  return der;
}

}  // namespace certfleet::msca
