// Any bytes as a JSON body or job payload: parsing and every typed accessor must return a value
// or an error, never crash.
#include "certfleet/core/json.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)certfleet::json::check_object(text, "payload");
  auto r = certfleet::json::object_reader::parse(text);
  if (!r) return 0;
  for (auto key : {"type", "payload", "idempotency_key", "run_at", "ms", "fail_times", "log", ""}) {
    (void)r->has(key);
    (void)r->required_string(key);
    (void)r->optional_string(key);
    (void)r->optional_int(key);
    (void)r->optional_number(key);
    (void)r->optional_bool(key);
    (void)r->optional_raw(key, true);
    (void)r->optional_raw(key, false);
  }
  (void)r->only({"type", "payload"});
  return 0;
}
