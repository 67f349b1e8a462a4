// Any bytes as a JSON body or job payload: parsing and every typed accessor must return a value
// or an error, never crash; and the three entry points (check_object, object_reader::parse,
// parse_value) agree on duplicate keys: when one refuses a key given twice, all refuse it, naming
// the same field.
#include "certfleet/core/json.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto duplicate = [](const auto& res) -> std::string {
    if (res || res.error().message.find("is given twice") == std::string::npos) return {};
    return res.error().field.empty() ? std::string("?") : res.error().field;
  };
  auto checked = certfleet::json::check_object(text, "payload");
  auto as_payload = certfleet::json::object_reader::parse(text, "payload");
  auto as_value = certfleet::json::parse_value(text, "payload", 1024);
  auto d1 = duplicate(checked), d2 = duplicate(as_payload), d3 = duplicate(as_value);
  if (!d1.empty() || !d2.empty() || !d3.empty()) {
    // A document any of them accepted cannot hold a duplicate (the others' other refusals, such
    // as depth, may come first).
    if ((!d1.empty() && (as_payload || as_value)) || (!d2.empty() && (checked || as_value)) ||
        (!d3.empty() && (checked || as_payload)))
      __builtin_trap();
    for (const auto* d : {&d1, &d2, &d3})
      for (const auto* e : {&d1, &d2, &d3})
        if (!d->empty() && !e->empty() && *d != *e) __builtin_trap();
  }
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
