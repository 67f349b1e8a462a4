#pragma once
// The certificate expiration check (DESIGN §3 type table; docs/notifications.md): marks expired
// certificates and fires certificate.expiring / certificate.expired once per threshold crossed.
// What it does with one certificate is the pure plan_expiry (catalog.hpp).
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>

namespace certfleet::checks {

// certificate_expiration_check (DESIGN §3 type table; issue: expiration checks).
struct expiry_report {
  std::int64_t examined = 0, expiring_soon = 0, expired_marked = 0, notifications = 0;
};
boost::asio::awaitable<result<expiry_report>> check_expirations(store::store& st, time_ms now);
void register_expiration_check(queue::handler_registry& r);

}  // namespace certfleet::checks
