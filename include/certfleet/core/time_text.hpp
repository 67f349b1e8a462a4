#pragma once
// Dates and waits as peers write them in headers and documents: RFC 3339 (ACME documents),
// HTTP-dates and Retry-After (RFC 9110, every HTTP peer: a CA, Slack, Teams, a webhook). Pure.
#include <cstdint>
#include <optional>
#include <string_view>

#include "certfleet/core/clock.hpp"

namespace certfleet {

// RFC 3339 date-time ("2025-01-02T04:00:00Z", fractions and offsets allowed) as unix ms.
std::optional<time_ms> parse_rfc3339(std::string_view text);

// The three HTTP-date forms of RFC 9110 §5.6.7 (IMF-fixdate and the two obsolete ones).
std::optional<time_ms> parse_http_date(std::string_view text);

// Retry-After (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as seconds from `now` (0 for a
// date in the past); nullopt when absent or unreadable. Capped at one day: a peer asking for
// more is asked again then.
std::optional<std::int64_t> parse_retry_after(std::string_view value, time_ms now);

}  // namespace certfleet
