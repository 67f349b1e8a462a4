#pragma once
// One delivery's result being built phase by phase, and a failed step: shared by the ssh and
// file modules (webhook builds a webhook_result the same way).
#include <chrono>
#include <optional>
#include <string>

#include "certfleet/net/error_class.hpp"
#include "certfleet/delivery/module.hpp"

namespace certfleet::delivery::detail {

// A failed step: its class and a message for operators (never secret material).
struct failure {
  error_class cls = error_class::unknown;
  std::string message;
  // The precise cause when `message` is deliberately uniform (a connect failure): it goes to
  // the result's error_detail, which only admins see.
  std::string detail = {};
};
using step = std::optional<failure>;  // nullopt: the step succeeded

inline std::int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
}

struct recorder {
  delivery_result r;
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
  delivery_result& fail(const failure& f) {
    end();
    r.status = delivery_status::failed;
    r.cls = f.cls;
    r.phase = current;
    r.error = current + ": " + f.message;
    r.error_detail = f.detail.empty() ? std::string() : current + ": " + f.detail;
    return r;
  }
};

}  // namespace certfleet::delivery::detail
