// Revocation checks (revocation.hpp): CRLs and OCSP responses verified against the issuer we
// already hold, never against whatever chain a peer sends along, plus their HTTP fetches over
// the one client (http.cpp). Every input is untrusted: sizes are bounded before parsing, DER
// must be consumed whole, and OpenSSL's per-thread error queue is left empty on every path.
#include "certfleet/net/revocation.hpp"
#include "core/openssl_ptr.hpp"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <ctime>
#include <limits>
#include <memory>

#include "certfleet/net/http.hpp"

namespace certfleet::net {

using boost::asio::awaitable;

namespace {

using bio_ptr = std::unique_ptr<BIO, ossl_deleter<BIO_free>>;
using x509_ptr = std::unique_ptr<X509, ossl_deleter<X509_free>>;
using crl_ptr = std::unique_ptr<X509_CRL, ossl_deleter<X509_CRL_free>>;
using ocsp_request_ptr = std::unique_ptr<OCSP_REQUEST, ossl_deleter<OCSP_REQUEST_free>>;
using ocsp_response_ptr = std::unique_ptr<OCSP_RESPONSE, ossl_deleter<OCSP_RESPONSE_free>>;
using ocsp_basic_ptr = std::unique_ptr<OCSP_BASICRESP, ossl_deleter<OCSP_BASICRESP_free>>;
using ocsp_certid_ptr = std::unique_ptr<OCSP_CERTID, ossl_deleter<OCSP_CERTID_free>>;
using dist_points_ptr = std::unique_ptr<STACK_OF(DIST_POINT), ossl_deleter<CRL_DIST_POINTS_free>>;
using info_access_ptr = std::unique_ptr<AUTHORITY_INFO_ACCESS, ossl_deleter<AUTHORITY_INFO_ACCESS_free>>;
using idp_ptr = std::unique_ptr<ISSUING_DIST_POINT, ossl_deleter<ISSUING_DIST_POINT_free>>;
using enumerated_ptr = std::unique_ptr<ASN1_ENUMERATED, ossl_deleter<ASN1_ENUMERATED_free>>;
using octets_ptr = std::unique_ptr<ASN1_OCTET_STRING, ossl_deleter<ASN1_OCTET_STRING_free>>;
void x509_stack_free(STACK_OF(X509)* s) { sk_X509_free(s); }  // a macro: needs a function to point to
using x509_stack_ptr = std::unique_ptr<STACK_OF(X509), ossl_deleter<x509_stack_free>>;
void ossl_free(void* p) { OPENSSL_free(p); }
using ossl_free_ptr = std::unique_ptr<unsigned char, ossl_deleter<ossl_free>>;

// OpenSSL queues errors per thread; a stale entry would confuse the next caller on this thread.
struct clear_errors_on_exit {
  ~clear_errors_on_exit() { ERR_clear_error(); }
};

constexpr std::array<const char*, 19> problem_names = {
    "leaf_pem", "issuer_pem", "nonce", "too_large", "malformed", "unsupported", "issuer_mismatch",
    "bad_signature", "stale", "not_yet_valid", "responder_status", "cert_mismatch", "nonce_mismatch",
    "url", "egress", "unreachable", "timeout", "http_status", "truncated"};
static_assert(problem_names.size() == static_cast<std::size_t>(revocation_problem::truncated) + 1);

errc code_of(revocation_problem p) {
  switch (p) {
    case revocation_problem::too_large: return errc::payload_too_large;
    case revocation_problem::responder_status:
    case revocation_problem::http_status: return errc::conflict;
    case revocation_problem::egress: return errc::forbidden;
    case revocation_problem::unreachable:
    case revocation_problem::timeout:
    case revocation_problem::truncated: return errc::timeout;
    default: return errc::invalid_argument;
  }
}

error refuse(revocation_problem p, std::string message) {
  return make_error(code_of(p), std::move(message), revocation_problem_name(p));
}

bool looks_like_pem(std::string_view text) {
  return text.find("-----BEGIN ") != std::string_view::npos;
}

x509_ptr parse_cert(std::string_view text) {
  if (text.empty() || text.size() > 1024 * 1024) return nullptr;
  if (looks_like_pem(text)) {
    bio_ptr bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
    if (!bio) return nullptr;
    return x509_ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  x509_ptr cert(d2i_X509(nullptr, &p, static_cast<long>(text.size())));
  if (cert && p != reinterpret_cast<const unsigned char*>(text.data()) + text.size()) return nullptr;
  return cert;
}

crl_ptr parse_crl(std::string_view bytes) {
  if (bytes.empty()) return nullptr;
  if (looks_like_pem(bytes)) {
    bio_ptr bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
    if (!bio) return nullptr;
    return crl_ptr(PEM_read_bio_X509_CRL(bio.get(), nullptr, nullptr, nullptr));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  crl_ptr crl(d2i_X509_CRL(nullptr, &p, static_cast<long>(bytes.size())));
  if (crl && p != reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size()) return nullptr;
  return crl;
}

std::optional<std::int64_t> time_ms(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

std::string time_text(std::int64_t ms) {
  std::time_t s = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  if (!gmtime_r(&s, &tm)) return std::to_string(ms) + " ms";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string name_text(const X509_NAME* name) {
  bio_ptr bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253) < 0) return "?";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string out(data, static_cast<std::size_t>(std::max(n, 0L)));
  // The name comes from a peer: keep it one printable line, of a length fit for a message.
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (out.size() > 200) out = out.substr(0, 200) + "…";
  return out;
}

// RFC 5280 §5.3.1 CRLReason names; 7 is unused.
std::string reason_name(long code) {
  static constexpr std::array<const char*, 11> names = {
      "unspecified", "keyCompromise", "cACompromise", "affiliationChanged", "superseded", "cessationOfOperation",
      "certificateHold", "", "removeFromCRL", "privilegeWithdrawn", "aACompromise"};
  if (code < 0) return "";
  if (code < static_cast<long>(names.size()) && names[static_cast<std::size_t>(code)][0] != '\0')
    return names[static_cast<std::size_t>(code)];
  return "reason " + std::to_string(code);
}
constexpr long remove_from_crl = 8;

// The leaf and its issuer, both ours: the issuer must really have issued the leaf (name, key
// identifiers and signature), or every later check would compare against the wrong CA.
struct cert_pair {
  x509_ptr leaf, issuer;
};
result<cert_pair> parse_pair(std::string_view leaf_text, std::string_view issuer_text) {
  cert_pair pair{parse_cert(leaf_text), parse_cert(issuer_text)};
  if (!pair.leaf) return refuse(revocation_problem::leaf, "the certificate to check does not parse as PEM or DER");
  if (!pair.issuer) return refuse(revocation_problem::issuer, "the issuer certificate does not parse as PEM or DER");
  EVP_PKEY* issuer_key = X509_get0_pubkey(pair.issuer.get());
  if (X509_check_issued(pair.issuer.get(), pair.leaf.get()) != X509_V_OK || !issuer_key ||
      X509_verify(pair.leaf.get(), issuer_key) != 1)
    return refuse(revocation_problem::issuer, "the issuer certificate (" +
                                                  name_text(X509_get_subject_name(pair.issuer.get())) +
                                                  ") did not issue the certificate to check");
  return pair;
}

// Freshness shared by CRLs and OCSP answers; fills the verdict's times.
result<void> check_times(const ASN1_TIME* this_update, const ASN1_TIME* next_update, std::int64_t now_ms,
                         const char* what, revocation_verdict& v) {
  auto tu = time_ms(this_update);
  if (!tu) return refuse(revocation_problem::malformed, std::string(what) + " has no readable thisUpdate");
  v.this_update_ms = *tu;
  if (next_update) {
    auto nu = time_ms(next_update);
    if (!nu) return refuse(revocation_problem::malformed, std::string(what) + " has an unreadable nextUpdate");
    v.next_update_ms = *nu;
  } else {
    v.next_update_ms = *tu + assumed_validity_ms;
    v.next_update_assumed = true;
  }
  if (*tu > now_ms + max_clock_skew_ms)
    return refuse(revocation_problem::not_yet_valid,
                  std::string(what) + " has thisUpdate " + time_text(*tu) + ", later than now (" + time_text(now_ms) +
                      ") by more than the allowed clock skew");
  if (v.next_update_ms < now_ms)
    return refuse(revocation_problem::stale,
                  std::string(what) + " is stale: " +
                      (v.next_update_assumed ? "it has no nextUpdate and thisUpdate " + time_text(*tu) + " is more than " +
                                                   std::to_string(assumed_validity_ms / 86'400'000) + " days ago"
                                             : "nextUpdate " + time_text(v.next_update_ms) + " has passed") +
                      " (now " + time_text(now_ms) + ")");
  return {};
}

// Whether a CRL covers every reason and every end-entity certificate of its issuer, alone.
result<void> check_crl_scope(X509_CRL* crl) {
  int n = X509_CRL_get_ext_count(crl);
  for (int i = 0; i < n; ++i) {
    X509_EXTENSION* ext = X509_CRL_get_ext(crl, i);
    int nid = OBJ_obj2nid(X509_EXTENSION_get_object(ext));
    if (nid == NID_delta_crl)
      return refuse(revocation_problem::unsupported, "the CRL is a delta CRL, which lists changes only");
    bool known = nid == NID_crl_number || nid == NID_authority_key_identifier || nid == NID_issuer_alt_name ||
                 nid == NID_issuing_distribution_point || nid == NID_freshest_crl;
    if (X509_EXTENSION_get_critical(ext) && !known)
      return refuse(revocation_problem::unsupported, "the CRL has a critical extension certfleet does not know");
  }
  int crit = 0;
  idp_ptr idp(static_cast<ISSUING_DIST_POINT*>(X509_CRL_get_ext_d2i(crl, NID_issuing_distribution_point, &crit, nullptr)));
  if (!idp && crit != -1)  // present but unreadable (or repeated)
    return refuse(revocation_problem::malformed, "the CRL's issuingDistributionPoint does not parse");
  if (idp) {
    if (idp->indirectCRL)
      return refuse(revocation_problem::unsupported, "the CRL is an indirect CRL");
    if (idp->onlysomereasons)
      return refuse(revocation_problem::unsupported, "the CRL covers only some revocation reasons");
    if (idp->onlyCA || idp->onlyattr)
      return refuse(revocation_problem::unsupported, "the CRL does not cover end-entity certificates");
  }
  return {};
}

}  // namespace

const char* revocation_problem_name(revocation_problem p) noexcept {
  auto i = static_cast<std::size_t>(p);
  return i < problem_names.size() ? problem_names[i] : "unknown";
}

std::optional<revocation_problem> revocation_problem_of(const error& e) noexcept {
  for (std::size_t i = 0; i < problem_names.size(); ++i)
    if (e.field == problem_names[i]) return static_cast<revocation_problem>(i);
  return std::nullopt;
}

const char* revocation_status_name(revocation_status s) noexcept {
  switch (s) {
    case revocation_status::good: return "good";
    case revocation_status::revoked: return "revoked";
    case revocation_status::unknown: return "unknown";
  }
  return "unknown";
}

result<revocation_points> revocation_points_of(std::string_view cert_text) {
  clear_errors_on_exit clear;
  x509_ptr cert = parse_cert(cert_text);
  if (!cert) return refuse(revocation_problem::leaf, "the certificate does not parse as PEM or DER");

  revocation_points out;
  auto keep = [](std::vector<std::string>& list, const GENERAL_NAME* gn) {
    if (!gn || gn->type != GEN_URI || !gn->d.uniformResourceIdentifier) return;
    const ASN1_IA5STRING* s = gn->d.uniformResourceIdentifier;
    std::string url(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), static_cast<std::size_t>(ASN1_STRING_length(s)));
    // Only what our client can fetch; parse_url refuses userinfo, non-ASCII and other schemes,
    // and a URL is shown to operators, so no spaces or control bytes either.
    bool printable = std::all_of(url.begin(), url.end(), [](char c) { return c > 0x20 && c < 0x7f; });
    if (url.empty() || url.size() > 2048 || !printable || !parse_url(url)) return;
    if (std::find(list.begin(), list.end(), url) == list.end()) list.push_back(std::move(url));
  };

  int crit = 0;
  dist_points_ptr dps(static_cast<STACK_OF(DIST_POINT)*>(X509_get_ext_d2i(cert.get(), NID_crl_distribution_points, &crit, nullptr)));
  for (int i = 0; dps && i < sk_DIST_POINT_num(dps.get()); ++i) {
    const DIST_POINT* dp = sk_DIST_POINT_value(dps.get(), i);
    // A nameRelativeToCRLIssuer names no URL, and a point with its own cRLIssuer serves an
    // indirect CRL, which check_crl refuses anyway.
    if (!dp || !dp->distpoint || dp->distpoint->type != 0 || dp->CRLissuer) continue;
    const GENERAL_NAMES* names = dp->distpoint->name.fullname;
    for (int j = 0; names && j < sk_GENERAL_NAME_num(names); ++j) keep(out.crl_urls, sk_GENERAL_NAME_value(names, j));
  }
  info_access_ptr aia(static_cast<AUTHORITY_INFO_ACCESS*>(X509_get_ext_d2i(cert.get(), NID_info_access, &crit, nullptr)));
  for (int i = 0; aia && i < sk_ACCESS_DESCRIPTION_num(aia.get()); ++i) {
    const ACCESS_DESCRIPTION* ad = sk_ACCESS_DESCRIPTION_value(aia.get(), i);
    if (ad && OBJ_obj2nid(ad->method) == NID_ad_OCSP) keep(out.ocsp_urls, ad->location);
  }
  return out;
}

result<revocation_verdict> check_crl(std::string_view crl_bytes, std::string_view issuer_text,
                                     std::string_view leaf_text, std::int64_t now_ms, std::size_t max_bytes) {
  clear_errors_on_exit clear;
  if (crl_bytes.size() > max_bytes)
    return refuse(revocation_problem::too_large, "the CRL is " + std::to_string(crl_bytes.size()) +
                                                     " bytes, over the bound of " + std::to_string(max_bytes));
  if (crl_bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    return refuse(revocation_problem::too_large, "the CRL is too large to parse");
  crl_ptr crl = parse_crl(crl_bytes);
  if (!crl) return refuse(revocation_problem::malformed, "the CRL does not parse as DER or PEM (X509 CRL)");
  auto pair = parse_pair(leaf_text, issuer_text);
  if (!pair) return std::move(pair).error();
  X509* issuer = pair->issuer.get();
  X509* leaf = pair->leaf.get();

  if (auto scope = check_crl_scope(crl.get()); !scope) return std::move(scope).error();
  if (X509_NAME_cmp(X509_CRL_get_issuer(crl.get()), X509_get_subject_name(issuer)) != 0)
    return refuse(revocation_problem::issuer_mismatch,
                  "the CRL is issued by " + name_text(X509_CRL_get_issuer(crl.get())) + ", not by the certificate's issuer " +
                      name_text(X509_get_subject_name(issuer)));
  if ((X509_get_extension_flags(issuer) & EXFLAG_KUSAGE) && !(X509_get_key_usage(issuer) & KU_CRL_SIGN))
    return refuse(revocation_problem::bad_signature, "the issuer's keyUsage does not allow it to sign CRLs");
  EVP_PKEY* key = X509_get0_pubkey(issuer);
  if (!key || X509_CRL_verify(crl.get(), key) != 1)
    return refuse(revocation_problem::bad_signature,
                  "the CRL's signature does not verify with the public key of " + name_text(X509_get_subject_name(issuer)));

  revocation_verdict v;
  v.status = revocation_status::good;
  if (auto t = check_times(X509_CRL_get0_lastUpdate(crl.get()), X509_CRL_get0_nextUpdate(crl.get()), now_ms, "the CRL", v); !t)
    return std::move(t).error();

  const ASN1_INTEGER* serial = X509_get0_serialNumber(leaf);
  STACK_OF(X509_REVOKED)* revoked = X509_CRL_get_REVOKED(crl.get());
  // A linear scan: X509_CRL_get0_by_serial would sort the list inside the shared object first.
  for (int i = 0; revoked && i < sk_X509_REVOKED_num(revoked); ++i) {
    X509_REVOKED* entry = sk_X509_REVOKED_value(revoked, i);
    if (ASN1_INTEGER_cmp(X509_REVOKED_get0_serialNumber(entry), serial) != 0) continue;
    int crit = 0;
    enumerated_ptr reason(static_cast<ASN1_ENUMERATED*>(X509_REVOKED_get_ext_d2i(entry, NID_crl_reason, &crit, nullptr)));
    if (!reason && crit != -1)
      return refuse(revocation_problem::malformed, "the CRL entry for the certificate has an unreadable reason code");
    long code = reason ? ASN1_ENUMERATED_get(reason.get()) : -1;
    if (code == remove_from_crl) break;  // un-revoked (a lifted hold)
    auto at = time_ms(X509_REVOKED_get0_revocationDate(entry));
    if (!at) return refuse(revocation_problem::malformed, "the CRL entry for the certificate has an unreadable revocation date");
    v.status = revocation_status::revoked;
    v.revoked_at_ms = *at;
    v.reason = reason_name(code);
    break;
  }
  return v;
}

result<std::string> ocsp_request_der(std::string_view leaf_text, std::string_view issuer_text, std::string_view nonce) {
  clear_errors_on_exit clear;
  if (nonce.size() > 32)
    return refuse(revocation_problem::nonce, "the OCSP nonce must be 1 to 32 bytes, not " + std::to_string(nonce.size()));
  auto pair = parse_pair(leaf_text, issuer_text);
  if (!pair) return std::move(pair).error();

  ocsp_request_ptr req(OCSP_REQUEST_new());
  ocsp_certid_ptr id(OCSP_cert_to_id(EVP_sha1(), pair->leaf.get(), pair->issuer.get()));
  if (!req || !id || !OCSP_request_add0_id(req.get(), id.get()))
    return refuse(revocation_problem::leaf, "could not make a CertID for the certificate");
  id.release();  // the request owns it now
  if (!nonce.empty() &&
      OCSP_request_add1_nonce(req.get(), reinterpret_cast<unsigned char*>(const_cast<char*>(nonce.data())),
                              static_cast<int>(nonce.size())) != 1)
    return refuse(revocation_problem::nonce, "could not add the nonce to the OCSP request");
  unsigned char* der = nullptr;
  int n = i2d_OCSP_REQUEST(req.get(), &der);
  ossl_free_ptr owned(der);
  if (n <= 0) return refuse(revocation_problem::leaf, "could not encode the OCSP request");
  return std::string(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n));
}

namespace {

// The signer of a basic response, if it is one we accept: the issuer itself, or a responder
// certificate the issuer issued and signed for OCSP signing (RFC 6960 §4.2.2.2), valid at now.
result<X509*> authorized_signer(OCSP_BASICRESP* bs, X509* issuer, std::int64_t now_ms) {
  x509_stack_ptr extra(sk_X509_new_null());
  if (!extra || !sk_X509_push(extra.get(), issuer))
    return refuse(revocation_problem::malformed, "out of memory while looking for the OCSP signer");
  X509* signer = nullptr;
  if (OCSP_resp_get0_signer(bs, &signer, extra.get()) != 1 || !signer)
    return refuse(revocation_problem::bad_signature,
                  "the OCSP response is signed by a responder that is neither the issuer nor a certificate it includes");
  if (X509_cmp(signer, issuer) == 0) return signer;

  std::string who = name_text(X509_get_subject_name(signer));
  EVP_PKEY* issuer_key = X509_get0_pubkey(issuer);
  if (X509_check_issued(issuer, signer) != X509_V_OK || !issuer_key || X509_verify(signer, issuer_key) != 1)
    return refuse(revocation_problem::bad_signature,
                  "the OCSP response is signed by " + who + ", which is not the issuer and not a responder it delegated to");
  if (!(X509_get_extension_flags(signer) & EXFLAG_XKUSAGE) || !(X509_get_extended_key_usage(signer) & XKU_OCSP_SIGN))
    return refuse(revocation_problem::bad_signature,
                  "the OCSP response is signed by " + who + ", a certificate of the issuer without id-kp-OCSPSigning");
  auto nb = time_ms(X509_get0_notBefore(signer)), na = time_ms(X509_get0_notAfter(signer));
  if (!nb || !na || *nb > now_ms + max_clock_skew_ms || *na < now_ms)
    return refuse(revocation_problem::bad_signature, "the OCSP responder certificate " + who + " is not valid now");
  return signer;
}

// The single response about our certificate, whatever hash the responder used in its CertID.
OCSP_SINGLERESP* find_single(OCSP_BASICRESP* bs, X509* leaf, X509* issuer) {
  int n = OCSP_resp_count(bs);
  for (int i = 0; i < n; ++i) {
    OCSP_SINGLERESP* single = OCSP_resp_get0(bs, i);
    const OCSP_CERTID* cid = single ? OCSP_SINGLERESP_get0_id(single) : nullptr;
    ASN1_OBJECT* md_oid = nullptr;
    if (!cid || OCSP_id_get0_info(nullptr, &md_oid, nullptr, nullptr, const_cast<OCSP_CERTID*>(cid)) != 1) continue;
    const EVP_MD* md = EVP_get_digestbyobj(md_oid);
    if (!md) continue;
    ocsp_certid_ptr ours(OCSP_cert_to_id(md, leaf, issuer));
    if (ours && OCSP_id_cmp(ours.get(), cid) == 0) return single;
  }
  return nullptr;
}

// The nonce extension's value as OCSP_request_add1_nonce writes it: an OCTET STRING around the
// nonce, itself the extnValue (RFC 6960 §4.4.1).
std::string wrapped_nonce(std::string_view nonce) {
  octets_ptr os(ASN1_OCTET_STRING_new());
  if (!os || !ASN1_OCTET_STRING_set(os.get(), reinterpret_cast<const unsigned char*>(nonce.data()), static_cast<int>(nonce.size())))
    return {};
  unsigned char* der = nullptr;
  int n = i2d_ASN1_OCTET_STRING(os.get(), &der);
  ossl_free_ptr owned(der);
  return n > 0 ? std::string(reinterpret_cast<const char*>(der), static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

result<revocation_verdict> check_ocsp_response(std::string_view der, std::string_view leaf_text,
                                               std::string_view issuer_text, std::string_view nonce, std::int64_t now_ms) {
  clear_errors_on_exit clear;
  if (der.size() > max_ocsp_response_bytes)
    return refuse(revocation_problem::too_large, "the OCSP response is " + std::to_string(der.size()) +
                                                     " bytes, over the bound of " + std::to_string(max_ocsp_response_bytes));
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  ocsp_response_ptr resp(der.empty() ? nullptr : d2i_OCSP_RESPONSE(nullptr, &p, static_cast<long>(der.size())));
  if (!resp || p != reinterpret_cast<const unsigned char*>(der.data()) + der.size())
    return refuse(revocation_problem::malformed, "the answer is not a DER OCSP response");
  int status = OCSP_response_status(resp.get());
  if (status != OCSP_RESPONSE_STATUS_SUCCESSFUL)
    return refuse(revocation_problem::responder_status,
                  std::string("the OCSP responder answered ") + OCSP_response_status_str(status) + " (status " +
                      std::to_string(status) + ")");
  auto pair = parse_pair(leaf_text, issuer_text);
  if (!pair) return std::move(pair).error();
  X509* leaf = pair->leaf.get();
  X509* issuer = pair->issuer.get();

  ocsp_basic_ptr bs(OCSP_response_get1_basic(resp.get()));
  if (!bs) return refuse(revocation_problem::malformed, "the OCSP response is not a basic OCSP response");
  auto signer = authorized_signer(bs.get(), issuer, now_ms);
  if (!signer) return std::move(signer).error();
  EVP_PKEY* signer_key = X509_get0_pubkey(*signer);
  // The signature over tbsResponseData, checked directly: OCSP_basic_verify would also build a
  // chain from a trust store, which we do not have and do not want (the issuer is the anchor).
  if (!signer_key ||
      ASN1_item_verify(ASN1_ITEM_rptr(OCSP_RESPDATA), OCSP_resp_get0_tbs_sigalg(bs.get()), OCSP_resp_get0_signature(bs.get()),
                       const_cast<OCSP_RESPDATA*>(OCSP_resp_get0_respdata(bs.get())), signer_key) != 1)
    return refuse(revocation_problem::bad_signature,
                  "the OCSP response's signature does not verify with the key of " + name_text(X509_get_subject_name(*signer)));

  OCSP_SINGLERESP* single = find_single(bs.get(), leaf, issuer);
  if (!single) return refuse(revocation_problem::cert_mismatch, "the OCSP response has no answer for this certificate");

  if (int idx = OCSP_BASICRESP_get_ext_by_NID(bs.get(), NID_id_pkix_OCSP_Nonce, -1); idx >= 0 && !nonce.empty()) {
    const ASN1_OCTET_STRING* value = X509_EXTENSION_get_data(OCSP_BASICRESP_get_ext(bs.get(), idx));
    std::string expected = wrapped_nonce(nonce);
    std::string_view got(value ? reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)) : "",
                         value ? static_cast<std::size_t>(ASN1_STRING_length(value)) : 0);
    if (expected.empty() || got != expected)
      return refuse(revocation_problem::nonce_mismatch, "the OCSP response echoes a nonce other than the one sent");
  }

  int reason = -1;
  ASN1_GENERALIZEDTIME *revoked_at = nullptr, *this_update = nullptr, *next_update = nullptr;
  int cert_status = OCSP_single_get0_status(single, &reason, &revoked_at, &this_update, &next_update);
  revocation_verdict v;
  if (auto t = check_times(this_update, next_update, now_ms, "the OCSP response", v); !t) return std::move(t).error();
  switch (cert_status) {
    case V_OCSP_CERTSTATUS_GOOD: v.status = revocation_status::good; break;
    case V_OCSP_CERTSTATUS_UNKNOWN: v.status = revocation_status::unknown; break;
    case V_OCSP_CERTSTATUS_REVOKED: {
      auto at = time_ms(revoked_at);
      if (!at) return refuse(revocation_problem::malformed, "the OCSP response has an unreadable revocation time");
      v.status = revocation_status::revoked;
      v.revoked_at_ms = *at;
      v.reason = reason_name(reason);
      break;
    }
    default: return refuse(revocation_problem::malformed, "the OCSP response has an unknown certificate status");
  }
  return v;
}

namespace {

std::int64_t elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
}

// One HTTP exchange whose answer must be a whole 200 body of at most max_bytes.
awaitable<result<std::string>> fetch_bounded(http_request req, std::size_t max_bytes, std::string what) {
  auto url = parse_url(req.url);
  if (!url) co_return refuse(revocation_problem::url, what + " URL is not one certfleet fetches: " + url.error().message);
  std::string where = url->authority();
  auto timeout = req.timeout;
  const egress_policy* egress = req.egress;
  req.max_body = max_bytes;
  auto started = std::chrono::steady_clock::now();
  http_response res = co_await http_exchange(std::move(req));

  if (!res.ok()) {
    if (res.timed_out)
      co_return refuse(revocation_problem::timeout, what + " from " + where + " did not arrive within " +
                                                        std::to_string(timeout.count()) + " ms: " + res.error);
    // The URL and headers already passed, so a refusal before resolving is the empty policy.
    if (res.phase == "egress" || (res.phase == "check" && egress && egress->empty()))
      co_return refuse(revocation_problem::egress, res.error);
    co_return refuse(revocation_problem::unreachable, what + ": " + res.error);
  }
  if (res.status != 200)
    co_return refuse(revocation_problem::http_status, where + " answered HTTP " + std::to_string(res.status) + " for " + what);
  auto too_large = [&] {
    return refuse(revocation_problem::too_large, what + " from " + where + " is over the bound of " +
                                                     std::to_string(max_bytes) + " bytes");
  };
  std::string length = res.header("Content-Length");
  if (!length.empty() && std::all_of(length.begin(), length.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // Anything longer than 20 digits is over any bound we could hold.
    if (length.size() > 19 || std::stoull(length) > max_bytes) co_return too_large();
  }
  if (!res.body_complete) {
    if (res.body.size() >= max_bytes) co_return too_large();
    // http.cpp keeps a body cut by the deadline without saying so: the clock tells.
    if (elapsed_ms(started) >= timeout.count())
      co_return refuse(revocation_problem::timeout, what + " from " + where + " did not arrive within " +
                                                        std::to_string(timeout.count()) + " ms");
    co_return refuse(revocation_problem::truncated, what + " from " + where + " broke off after " +
                                                        std::to_string(res.body.size()) + " bytes");
  }
  co_return std::move(res.body);
}

}  // namespace

awaitable<result<std::string>> fetch_crl(std::string url, std::chrono::milliseconds timeout, std::size_t max_bytes,
                                         const egress_policy* egress, boost::asio::thread_pool* resolve_pool) {
  http_request req;
  req.method = http_method::get;
  req.url = std::move(url);
  req.timeout = timeout;
  req.egress = egress;
  req.resolve_pool = resolve_pool;
  co_return co_await fetch_bounded(std::move(req), max_bytes, "the CRL");
}

awaitable<result<std::string>> query_ocsp(std::string url, std::string request_der, std::chrono::milliseconds timeout,
                                          const egress_policy* egress, boost::asio::thread_pool* resolve_pool) {
  http_request req;
  req.method = http_method::post;
  req.url = std::move(url);
  req.headers = {{"Content-Type", "application/ocsp-request"}, {"Accept", "application/ocsp-response"}};
  req.body = std::move(request_der);
  req.timeout = timeout;
  req.egress = egress;
  req.resolve_pool = resolve_pool;
  co_return co_await fetch_bounded(std::move(req), max_ocsp_response_bytes, "the OCSP response");
}

}  // namespace certfleet::net
