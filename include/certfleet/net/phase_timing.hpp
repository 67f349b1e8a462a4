#pragma once
// How long one phase of an outbound exchange took. HTTP, SMTP and every delivery module report
// their phases with it, and /metrics turns them into the phase histograms.
#include <cstdint>
#include <string>

namespace certfleet::net {

struct phase_timing {
  std::string phase;  // resolve, connect, handshake, host_key, auth, hash_check, upload, install, validate, restore
  std::int64_t ms = 0;
};

}  // namespace certfleet::net
