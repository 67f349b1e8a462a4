#pragma once
// ACME Renewal Information (RFC 9773) and the renewal decision. Pure: no I/O, no clock (the
// caller passes now), so the scheduler's sweep and the tests call them alike.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"

namespace certfleet::acme {

// §4.1: base64url(AKI keyIdentifier) "." base64url(serial's DER content octets, sign byte kept).
// The raw bytes form (tests pin RFC 9773's example with it).
std::string ari_cert_id(std::string_view aki_key_identifier, std::string_view serial_der_content);
// The same, read from a certificate (PEM). Errors: invalid_argument naming `field` (a
// certificate without an Authority Key Identifier keyIdentifier cannot be named for ARI).
result<std::string> ari_cert_id_of(std::string_view cert_pem, std::string_view field = "cert_pem");

struct renewal_window {
  time_ms start = 0;  // unix ms
  time_ms end = 0;
};

// The renewalInfo answer (§4.2): {"suggestedWindow": {"start", "end"}, "explanationURL"?}.
// start must be before end (§4.2: otherwise the window is invalid). Errors name
// "renewalInfo.<member>".
struct renewal_info {
  renewal_window suggested_window;
  std::string explanation_url;  // "" when absent
};
result<renewal_info> parse_renewal_info(std::string_view json);

// Inputs of one decision. Times are unix ms.
struct renewal_inputs {
  time_ms now = 0;
  time_ms not_before = 0;  // of the current certificate
  time_ms not_after = 0;
  // The CA's suggested window, when it has renewalInfo and answered.
  std::optional<renewal_window> ari;
  // The renewalInfo answer's Retry-After in seconds, when it had one.
  std::optional<std::int64_t> retry_after_s;
  // Picks the point inside an ARI window (§4.2 "a uniformly random time"): the same seed gives
  // the same point, so a sweep that runs every minute does not redraw it each time. Seed it
  // with something stable per certificate version (e.g. a hash of its serial).
  std::uint64_t seed = 0;
};

enum class renewal_source { ari, lifetime };
std::string_view renewal_source_name(renewal_source s) noexcept;  // "ari" | "lifetime"

struct renewal_decision {
  bool renew_now = false;
  // When to renew, as decided: the chosen point inside the ARI window, or the start of the last
  // third of the lifetime.
  time_ms renew_at = 0;
  // When to look again (meaningful when !renew_now): the earlier of renew_at and, with ARI, the
  // next renewalInfo fetch (now + Retry-After, clamped to [1 min, 1 day]; 6 h without one).
  time_ms next_check_at = 0;
  renewal_source source = renewal_source::lifetime;
  renewal_window window;  // the window the decision used (ARI's, or the lifetime's last third)
  std::string reason;     // one line for the job/scheduler log
};

// RFC 9773 §4.2 with ARI: a uniform point in [start, end) drawn from the seed; at or before now
// (which includes every window already in the past) → renew now. Without ARI: the last third
// of the lifetime, renew from not_before + 2/3 (not_after − not_before); an expired certificate
// is renewed now.
renewal_decision decide_renewal(const renewal_inputs& in);

// Clamp of a renewalInfo Retry-After (§4.3: the client should re-poll after it, within reason).
inline constexpr std::int64_t ari_default_retry_s = 6 * 3600;
inline constexpr std::int64_t ari_min_retry_s = 60;
inline constexpr std::int64_t ari_max_retry_s = 86400;

}  // namespace certfleet::acme
