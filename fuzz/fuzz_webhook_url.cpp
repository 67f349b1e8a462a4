// The webhook/notification URL parser: any text gets a URL or an error naming the field; a
// parsed URL rebuilt from its parts parses to the same parts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "certfleet/delivery/webhook.hpp"

using namespace certfleet::delivery;
using namespace certfleet::net;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto u = parse_url(in);
  if (!u) {
    if (u.error().field != "url" || u.error().message.empty()) std::abort();
    // Error texts are fixed phrases (tests/delivery/webhook_test.cpp checks no secret leaks).
    if (u.error().message.size() > 200) std::abort();
    return 0;
  }
  if (u->scheme != "http" && u->scheme != "https") std::abort();
  if (u->host.empty() || u->port == 0 || u->target.empty() || u->target.front() != '/') std::abort();
  auto again = parse_url(u->scheme + "://" + u->authority() + u->target);
  if (!again || again->host != u->host || again->port != u->port || again->target != u->target ||
      again->scheme != u->scheme)
    std::abort();
  if (hmac_sha256_hex(in, u->target).size() != 64) std::abort();
  return 0;
}
