// Any bytes as the payload of each job type at enqueue: validation refuses or accepts, never crashes.
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/job_types.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const certfleet::queue::handler_registry handlers = [] {
    certfleet::queue::handler_registry r;
    certfleet::queue::register_noop(r);
    return r;
  }();
  std::string payload(reinterpret_cast<const char*>(data), size);
  for (const auto& t : certfleet::queue::all_job_types())
    if (const auto* v = handlers.validator(t.name); v && *v) (void)(*v)(payload);
  return 0;
}
