// Revocation checks (revocation.hpp) over bytes a CA's web server or an OCSP responder sent:
// a value or an error carrying one of the problem names, never a crash or a leak. The first
// byte picks the target, the rest is the document:
//   0: check_crl (DER or PEM) for the fixed leaf and issuer below, with a bound from the size;
//   1: check_ocsp_response for the fixed leaf and issuer, with the seeds' nonce and without one;
//   2: the rest as a certificate: revocation_points_of, ocsp_request_der and check_crl with it as
//      the leaf (and as the issuer), so the certificate readers see arbitrary PEM and DER.
// The issuer and leaf were made once with the openssl CLI (`openssl ca`, the leaf revoked); the
// seeds in fuzz/corpus/revocation/ are that CA's CRL and OCSP responses. `now` is fixed so the
// seeds stay fresh whatever the date.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/net/revocation.hpp"

using namespace certfleet::net;

namespace {

constexpr std::string_view issuer_pem = R"(-----BEGIN CERTIFICATE-----
MIIBZzCCAQ6gAwIBAgIUAhW1l2+U25PeBx7Fxw3lvPiiJcswCgYIKoZIzj0EAwIw
EjEQMA4GA1UEAwwHZnV6eiBDQTAeFw0yNjEyMDMxNDQ3NDZaFw0zNjExMzAxNDQ3
NDZaMBIxEDAOBgNVBAMMB2Z1enogQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAR5hKzluZheyL/3Lku+nwv/EzrPjbKDLJAW5jn8z12qjhlc765YYsh5QmdGCP9g
p8QC3xFYcNyK20KLTN/Z1isgo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB
/wQEAwIBBjAdBgNVHQ4EFgQUDGVolhoG1de83gTZ9dAwRPSrfe8wCgYIKoZIzj0E
AwIDRwAwRAIgJ3YW7bAYQY34/jvkm/XEKmZhL2e0Qw26B7ODuvpsVSsCIGAcDTwG
bXoCtE+VRZYl1lsh2FZIWDvC8XeEGNOvYjAt
-----END CERTIFICATE-----
)";

constexpr std::string_view leaf_pem = R"(-----BEGIN CERTIFICATE-----
MIIB1jCCAXugAwIBAgICEAAwCgYIKoZIzj0EAwIwEjEQMA4GA1UEAwwHZnV6eiBD
QTAeFw0yNjEyMDMxNDQ3NDZaFw0zNjExMzAxNDQ3NDZaMA8xDTALBgNVBAMMBGxl
YWYwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARwukA6eunVWicoNg2Nqq5e6m3N
F+AFlZTSR9SjR9EH4PB3Zq2xf7VAg4VVqbU3uopOX5b/bIc76SabWEFeAf1Zo4HD
MIHAMAkGA1UdEwQCMAAwHwYDVR0jBBgwFoAUDGVolhoG1de83gTZ9dAwRPSrfe8w
PwYDVR0fBDgwNjAioCCgHoYcaHR0cDovLzEyNy4wLjAuMTo4MDgwL2NhLmNybDAQ
oA6gDIYKbGRhcDovL3gveTAyBggrBgEFBQcBAQQmMCQwIgYIKwYBBQUHMAGGFmh0
dHA6Ly8xMjcuMC4wLjE6ODA4MS8wHQYDVR0OBBYEFKoSi1UPpuGy0NupRxLcbIw8
11LfMAoGCCqGSM49BAMCA0kAMEYCIQDMEZftltlrvvjhzO83DxAMAbmpgBauhjeM
fdeL5BPTEQIhAJ5hIPlY6T+YQMr7jUmv9rJeEb2AOeX1+0/W0QNhhuuT
-----END CERTIFICATE-----
)";

constexpr std::int64_t now_ms = 1'796'312'866'000;  // an hour after the seeds were made
// The nonce of the delegated-responder seed (an `openssl ocsp -nonce` request).
constexpr std::string_view seed_nonce =
    "\xDA\x88\x3E\x09\xCC\xB9\x75\x43\x4E\xBD\xDF\xF1\x79\x37\x95\x67";

template <class T>
void expect_sane(const certfleet::result<T>& r) {
  if (r) return;
  // Every refusal names its problem: an error without one would leave the caller guessing.
  if (!revocation_problem_of(r.error())) std::abort();
  if (r.error().message.empty()) std::abort();
}

void expect_sane_verdict(const certfleet::result<revocation_verdict>& r, bool may_be_unknown) {
  expect_sane(r);
  if (!r) return;
  if (!may_be_unknown && r->status == revocation_status::unknown) std::abort();
  if (r->status != revocation_status::revoked && (r->revoked_at_ms != 0 || !r->reason.empty())) std::abort();
  if (r->next_update_ms < now_ms) std::abort();  // a stale document is never a verdict
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view doc(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      expect_sane_verdict(check_crl(doc, issuer_pem, leaf_pem, now_ms), false);
      // A bound just under the size must refuse before parsing anything.
      if (!doc.empty()) {
        auto r = check_crl(doc, issuer_pem, leaf_pem, now_ms, doc.size() - 1);
        if (r || revocation_problem_of(r.error()) != revocation_problem::too_large) std::abort();
      }
      break;
    }
    case 1:
      expect_sane_verdict(check_ocsp_response(doc, leaf_pem, issuer_pem, seed_nonce, now_ms), true);
      expect_sane_verdict(check_ocsp_response(doc, leaf_pem, issuer_pem, "", now_ms), true);
      break;
    case 2: {
      auto pts = revocation_points_of(doc);
      expect_sane(pts);
      if (pts)
        for (const auto* list : {&pts->crl_urls, &pts->ocsp_urls})
          for (const auto& url : *list)
            if (url.empty() || url.size() > 2048) std::abort();
      expect_sane(ocsp_request_der(doc, issuer_pem, seed_nonce));
      expect_sane(ocsp_request_der(leaf_pem, doc, ""));
      break;
    }
  }
  return 0;
}
