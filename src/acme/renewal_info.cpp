// ACME Renewal Information (renewal_info.hpp): the certID, the renewalInfo document and the
// renewal decision.
#include "certfleet/acme/renewal_info.hpp"

#include <openssl/asn1.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/json.hpp>

#include "certfleet/acme/documents.hpp"
#include "certfleet/acme/jose.hpp"
#include "certfleet/core/json.hpp"
#include "openssl_util.hpp"

namespace certfleet::acme {

namespace {

error bad(std::string field, std::string message) {
  return make_error(errc::invalid_argument, field + " " + message, field);
}

// SplitMix64: a well-spread 64-bit value from any seed (0 included).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string when(time_ms t) { return format_iso8601(t); }

}  // namespace

std::string ari_cert_id(std::string_view aki_key_identifier, std::string_view serial_der_content) {
  return base64url_encode(aki_key_identifier) + "." + base64url_encode(serial_der_content);
}

result<std::string> ari_cert_id_of(std::string_view cert_pem, std::string_view field) {
  auto certs = read_certificates(cert_pem);
  if (certs.empty()) return make_error(errc::invalid_argument, "is not a PEM certificate", std::string(field));
  X509* x = certs.front().get();
  const ASN1_OCTET_STRING* aki = X509_get0_authority_key_id(x);
  if (!aki || ASN1_STRING_length(aki) <= 0)
    return make_error(errc::invalid_argument,
                      "has no Authority Key Identifier keyIdentifier, so ACME Renewal Information cannot name it",
                      std::string(field));
  // The serial's DER content octets: i2d gives tag, length, content; keep the content (with
  // its sign byte, as RFC 9773 §4.1 asks).
  const ASN1_INTEGER* serial = X509_get0_serialNumber(x);
  unsigned char* der = nullptr;
  int n = i2d_ASN1_INTEGER(serial, &der);
  if (n <= 2 || !der) {
    OPENSSL_free(der);
    return make_error(errc::invalid_argument, "has a serial number that cannot be encoded", std::string(field));
  }
  std::size_t header = 2;
  if (der[1] & 0x80) header = 2 + (der[1] & 0x7f);
  std::string content = header < static_cast<std::size_t>(n)
                            ? std::string(reinterpret_cast<const char*>(der) + header, static_cast<std::size_t>(n) - header)
                            : std::string();
  OPENSSL_free(der);
  if (content.empty()) return make_error(errc::invalid_argument, "has an empty serial number", std::string(field));
  return ari_cert_id(std::string_view(reinterpret_cast<const char*>(ASN1_STRING_get0_data(aki)),
                                      static_cast<std::size_t>(ASN1_STRING_length(aki))),
                     content);
}

result<renewal_info> parse_renewal_info(std::string_view text) {
  if (text.size() > max_document_bytes) return bad("renewalInfo", "is larger than " + std::to_string(max_document_bytes) + " bytes");
  auto v = certfleet::json::parse_value(text, "renewalInfo", 16);
  if (!v) return std::move(v).error();
  if (!v->is_object()) return bad("renewalInfo", "is not a JSON object");
  const auto& o = v->as_object();
  auto* w = o.if_contains("suggestedWindow");
  if (!w || w->is_null()) return bad("renewalInfo.suggestedWindow", "is missing");
  if (!w->is_object()) return bad("renewalInfo.suggestedWindow", "must be an object");
  renewal_info info;
  for (auto [key, out] : {std::pair{"start", &info.suggested_window.start}, std::pair{"end", &info.suggested_window.end}}) {
    std::string f = std::string("renewalInfo.suggestedWindow.") + key;
    auto* t = w->as_object().if_contains(key);
    if (!t || t->is_null()) return bad(f, "is missing");
    if (!t->is_string()) return bad(f, "must be an RFC 3339 date-time string");
    auto ms = parse_rfc3339(t->as_string());
    if (!ms) return bad(f, "is not an RFC 3339 date-time");
    *out = *ms;
  }
  if (info.suggested_window.end <= info.suggested_window.start)
    return bad("renewalInfo.suggestedWindow.end", "must be after start (RFC 9773 §4.2: an invalid window)");
  if (auto* e = o.if_contains("explanationURL"); e && !e->is_null()) {
    if (!e->is_string()) return bad("renewalInfo.explanationURL", "must be a string");
    info.explanation_url = std::string(e->as_string());
  }
  return info;
}

std::string_view renewal_source_name(renewal_source s) noexcept { return s == renewal_source::ari ? "ari" : "lifetime"; }

renewal_decision decide_renewal(const renewal_inputs& in) {
  renewal_decision d;
  if (in.ari) {
    d.source = renewal_source::ari;
    d.window = *in.ari;
    // A uniform point in [start, end): 53 random bits of the mixed seed as a fraction.
    const auto span = static_cast<double>(std::max<time_ms>(0, d.window.end - d.window.start));
    const double fraction = static_cast<double>(mix(in.seed) >> 11) * 0x1.0p-53;
    d.renew_at = d.window.start + static_cast<time_ms>(fraction * span);
    std::int64_t retry = in.retry_after_s.value_or(ari_default_retry_s);
    retry = std::clamp(retry, ari_min_retry_s, ari_max_retry_s);
    const time_ms next_fetch = in.now + retry * 1000;
    if (d.renew_at <= in.now) {
      d.renew_now = true;
      d.next_check_at = in.now;
      d.reason = d.window.end <= in.now
                     ? "the CA's renewal window (" + when(d.window.start) + " to " + when(d.window.end) + ") is in the past: renew now"
                     : "inside the CA's renewal window (" + when(d.window.start) + " to " + when(d.window.end) +
                           "); the chosen time " + when(d.renew_at) + " has come";
    } else {
      d.next_check_at = std::min(d.renew_at, next_fetch);
      d.reason = "renew at " + when(d.renew_at) + " (inside the CA's window " + when(d.window.start) + " to " +
                 when(d.window.end) + "); renewal information checked again at " + when(std::min(next_fetch, d.renew_at));
    }
    return d;
  }
  d.source = renewal_source::lifetime;
  const time_ms lifetime = std::max<time_ms>(0, in.not_after - in.not_before);
  d.window = {in.not_before + lifetime * 2 / 3, in.not_after};
  d.renew_at = d.window.start;
  if (in.now >= in.not_after) {
    d.renew_now = true;
    d.next_check_at = in.now;
    d.reason = "the certificate expired at " + when(in.not_after) + ": renew now";
  } else if (in.now >= d.renew_at) {
    d.renew_now = true;
    d.next_check_at = in.now;
    d.reason = "in the last third of the certificate's lifetime (from " + when(d.window.start) + "): renew now";
  } else {
    d.next_check_at = d.renew_at;
    d.reason = "renew at " + when(d.renew_at) + " (the last third of the lifetime; no renewal information from the CA)";
  }
  return d;
}

}  // namespace certfleet::acme
