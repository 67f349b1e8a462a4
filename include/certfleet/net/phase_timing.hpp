#pragma once
// How long one phase of an outbound exchange took, and the one recorder that times them. HTTP,
// SMTP and every delivery module report their phases with it, and /metrics turns them into the
// phase histograms.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "certfleet/net/error_class.hpp"

namespace certfleet::net {

struct phase_timing {
  std::string phase;  // resolve, connect, handshake, host_key, auth, hash_check, upload, install, validate, restore
  std::int64_t ms = 0;
};

inline std::int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

// A result being built phase by phase: `Result` has `timings`, `cls`, `phase` and `error` (an
// HTTP response, an SMTP result, a delivery result). A failure is reported in the phase it
// happened in, with that phase's time, so the histograms and the error agree on where it was.
template <class Result>
struct phase_recorder {
  Result r;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::string current;

  void begin(std::string phase) {
    current = std::move(phase);
    started = std::chrono::steady_clock::now();
  }
  void end() { r.timings.push_back({current, ms_since(started)}); }
  // A phase timed outside begin/end (a restore inside a failed phase).
  void add_timing(std::string phase, std::chrono::steady_clock::time_point since) {
    r.timings.push_back({std::move(phase), ms_since(since)});
  }
  // The current phase failed: the result's class, phase and message come from it.
  Result& fail(error_class cls, std::string message) {
    end();
    r.cls = cls;
    r.phase = current;
    r.error = std::move(message);
    return r;
  }
};

}  // namespace certfleet::net
