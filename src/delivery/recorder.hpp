#pragma once
// One delivery's result being built phase by phase, and a failed step: shared by the ssh and
// file modules (webhook builds a webhook_result the same way).
#include <optional>
#include <string>

#include "certfleet/net/error_class.hpp"
#include "certfleet/net/phase_timing.hpp"
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

using net::ms_since;

// The ssh and file modules' recorder: a failure is a delivery failure whose message names its
// phase, and whose precise cause goes to error_detail (admins only).
struct recorder : net::phase_recorder<delivery_result> {
  delivery_result& fail(const failure& f) {
    phase_recorder::fail(f.cls, current + ": " + f.message);
    r.status = delivery_status::failed;
    r.error_detail = f.detail.empty() ? std::string() : current + ": " + f.detail;
    return r;
  }
};

}  // namespace certfleet::delivery::detail
