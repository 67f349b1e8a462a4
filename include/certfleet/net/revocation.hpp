#pragma once
// Revocation checks of a certificate (DESIGN §12, `revocation_check`): where its issuer publishes
// revocation (CRL distribution points, OCSP responders), the verdict of a CRL or of an OCSP
// response, and fetching either over the one HTTP client (http.hpp).
//
// The parsers and checks are pure: no I/O, no clock (the caller passes now), every input bounded
// and untrusted, so the job handler, the tests and the fuzzer call them alike. OpenSSL stays in
// src/.
//
// Refusals are errors, never a verdict: a CRL or response that cannot be trusted says nothing
// about the certificate. Each refusal names its kind in `error.field` (a `revocation_problem`
// name, read back with `revocation_problem_of`) so a handler can tell "the CA's CRL is stale"
// from "someone answered with garbage" without parsing the message; the message is for people.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"

namespace certfleet::net {

// What went wrong, as `error.field` carries it (the stable names in comments). errc is given
// for each so callers that only look at the code still do something sensible.
enum class revocation_problem {
  leaf,              // "leaf_pem": our own certificate does not parse (invalid_argument)
  issuer,            // "issuer_pem": the issuer does not parse or did not issue the leaf (invalid_argument)
  nonce,             // "nonce": nonce_bytes not 1..32 bytes (invalid_argument)
  too_large,         // "too_large": over the size bound (payload_too_large)
  malformed,         // "malformed": not a CRL / OCSP response (invalid_argument)
  unsupported,       // "unsupported": a delta, indirect or partial CRL, an unknown critical extension (invalid_argument)
  issuer_mismatch,   // "issuer_mismatch": the CRL's issuer name is not the issuer's subject (invalid_argument)
  bad_signature,     // "bad_signature": signature does not verify, or the OCSP signer is neither the
                     //   issuer nor a responder it delegated to with id-kp-OCSPSigning (invalid_argument)
  stale,             // "stale": nextUpdate passed (or the assumed validity, see below) (invalid_argument)
  not_yet_valid,     // "not_yet_valid": thisUpdate later than now + max_clock_skew (invalid_argument)
  responder_status,  // "responder_status": OCSP responseStatus not successful, e.g. tryLater (conflict)
  cert_mismatch,     // "cert_mismatch": the OCSP response has no answer for our CertID (invalid_argument)
  nonce_mismatch,    // "nonce_mismatch": the responder echoed a different nonce (invalid_argument)
  url,               // "url": not an http(s) URL our client accepts (invalid_argument)
  egress,            // "egress": the egress allow-list refused the destination (forbidden)
  unreachable,       // "unreachable": no HTTP answer (DNS, refused, reset, TLS) (timeout: worth a retry)
  timeout,           // "timeout": the deadline ended the exchange (timeout)
  http_status,       // "http_status": answered, but not 200 (conflict; the status is in the message)
  truncated,         // "truncated": the body broke off before its end (timeout: worth a retry)
};

const char* revocation_problem_name(revocation_problem p) noexcept;
// The problem an error from this header carries; nullopt for any other error.
std::optional<revocation_problem> revocation_problem_of(const error& e) noexcept;

// Bounds and tolerances. A CRL of a large public CA runs to megabytes; 10 MiB is the default
// bound, the caller may pass less. OCSP responses are small (one answer, maybe a signer cert).
inline constexpr std::size_t default_max_crl_bytes = 10 * 1024 * 1024;
inline constexpr std::size_t max_ocsp_response_bytes = 64 * 1024;
// How far a peer's clock may run ahead of ours before its thisUpdate counts as "in the future".
inline constexpr std::int64_t max_clock_skew_ms = 5 * 60 * 1000;
// A CRL without nextUpdate (RFC 5280 makes it mandatory, some CAs omit it) or an OCSP answer
// without nextUpdate ("newer information is always available", RFC 6960 §4.2.2.1) is taken as
// valid for this long after its thisUpdate, then refused as stale: a week is the longest
// nextUpdate interval common CAs use, so an older one is no evidence of anything current.
inline constexpr std::int64_t assumed_validity_ms = 7LL * 24 * 3600 * 1000;

// Where a certificate's issuer publishes revocation, in the certificate's order, duplicates
// dropped. Only URLs our HTTP client accepts (http/https, parse_url): LDAP and others are skipped.
struct revocation_points {
  std::vector<std::string> crl_urls;   // cRLDistributionPoints, fullName URIs
  std::vector<std::string> ocsp_urls;  // authorityInfoAccess, id-ad-ocsp URIs
};
// `cert` is PEM (the first certificate) or DER. Errors: invalid_argument, problem leaf.
result<revocation_points> revocation_points_of(std::string_view cert);

enum class revocation_status { good, revoked, unknown };
const char* revocation_status_name(revocation_status s) noexcept;  // "good", "revoked", "unknown"

struct revocation_verdict {
  revocation_status status = revocation_status::unknown;
  std::int64_t revoked_at_ms = 0;  // unix ms, when revoked
  // RFC 5280 reason name ("keyCompromise", "certificateHold", …) when revoked and a reason was
  // given; empty otherwise. certificateHold is reported as revoked: the hold may be lifted, and
  // the next check then says good.
  std::string reason;
  std::int64_t this_update_ms = 0;
  // The document's nextUpdate; when it has none, this_update + assumed_validity_ms and
  // next_update_assumed is set. A cache keeps the verdict until then.
  std::int64_t next_update_ms = 0;
  bool next_update_assumed = false;
};

// A CRL (DER or PEM "X509 CRL") for `leaf` (PEM or DER), issued by `issuer` (PEM or DER).
// Checked in this order: size (> max_bytes: too_large), parse (malformed), leaf and issuer parse
// and the issuer issued the leaf (leaf / issuer), complete CRL of that issuer (unsupported:
// delta, indirect, only-some-reasons, CA-only, unknown critical extensions), issuer name
// (issuer_mismatch), signature with the issuer's public key, which must be allowed to sign CRLs
// when it has a keyUsage (bad_signature), thisUpdate ≤ now + skew (not_yet_valid), nextUpdate ≥
// now (stale). Then good, or revoked with its date and reason (removeFromCRL counts as good).
// The verdict is never unknown.
result<revocation_verdict> check_crl(std::string_view crl, std::string_view issuer, std::string_view leaf,
                                     std::int64_t now_ms, std::size_t max_bytes = default_max_crl_bytes);

// A DER OCSPRequest for `leaf` issued by `issuer`: one SHA-1 CertID (what responders expect;
// RFC 5019) and, when `nonce` is not empty, the nonce extension (1..32 bytes, RFC 8954). The
// caller makes the nonce (random) and keeps it for check_ocsp_response.
// Errors: invalid_argument, problem leaf, issuer or nonce.
result<std::string> ocsp_request_der(std::string_view leaf, std::string_view issuer, std::string_view nonce);

// A DER OCSPResponse answering a request made by ocsp_request_der with this `nonce`. Checked:
// size (max_ocsp_response_bytes), parse, responseStatus successful (responder_status, naming it),
// the signer: the issuer itself, or a certificate in the response issued and signed by the
// issuer, with id-kp-OCSPSigning and valid at now (else bad_signature), the signature
// (bad_signature), an answer for our CertID (cert_mismatch), the nonce: when we sent one and the
// response echoes one, they must be equal (nonce_mismatch); a response without a nonce is
// accepted, because many responders (pre-signed RFC 5019 responses, CDNs) never echo one, and
// freshness then rests on the times: thisUpdate ≤ now + skew (not_yet_valid), nextUpdate ≥ now
// or, absent, thisUpdate + assumed_validity_ms ≥ now (stale). The verdict may be unknown (the
// responder does not know the certificate).
result<revocation_verdict> check_ocsp_response(std::string_view der, std::string_view leaf, std::string_view issuer,
                                               std::string_view nonce, std::int64_t now_ms);

// GET a CRL. The deadline covers the whole exchange; `egress` is passed to the HTTP client as
// it is (nullptr: no egress check, the caller vouches for the destination). Errors (problem):
// url, egress, unreachable, timeout, http_status (not 200), too_large (Content-Length or body
// over max_bytes), truncated. The bytes are not checked here: check_crl does that.
boost::asio::awaitable<result<std::string>> fetch_crl(std::string url, std::chrono::milliseconds timeout,
                                                      std::size_t max_bytes, const egress_policy* egress,
                                                      boost::asio::thread_pool* resolve_pool = nullptr);

// POST an OCSPRequest (Content-Type application/ocsp-request) and return the response DER.
// Same deadline, egress and errors as fetch_crl; the bound is max_ocsp_response_bytes.
boost::asio::awaitable<result<std::string>> query_ocsp(std::string url, std::string request_der,
                                                       std::chrono::milliseconds timeout, const egress_policy* egress,
                                                       boost::asio::thread_pool* resolve_pool = nullptr);

}  // namespace certfleet::net
