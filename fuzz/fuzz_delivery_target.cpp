// The SSH target spec (JSON `ssh` + `validate` objects) and pinned host-key line parsers: any
// input gets a value or a clear error naming a field, never a crash.
#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/delivery/ssh_target.hpp"

using namespace certfleet::delivery;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {  // a host key line as an operator pastes it
      auto k = parse_host_key(in);
      if (k) {
        auto again = parse_host_key(k->to_line());
        if (!again || again->blob != k->blob || again->type != k->type) std::abort();
        if (k->fingerprint().rfind("SHA256:", 0) != 0) std::abort();
      } else if (k.error().field != "host_key") {
        std::abort();
      }
      break;
    }
    case 1: {  // {"ssh": {...}, "validate": {...}} as the API receives it
      boost::system::error_code ec;
      auto v = boost::json::parse(in, ec);
      if (ec || !v.is_object()) break;
      auto* ssh = v.as_object().if_contains("ssh");
      if (!ssh) break;
      auto t = parse_ssh_target(*ssh, v.as_object().if_contains("validate"));
      if (t) {
        // Whatever parses must pass the delivery's own checks (no relative path, no bad mode…).
        if (!check_ssh_target(*t)) std::abort();
        if (t->cert_path.empty() || t->cert_path.front() != '/') std::abort();
      } else if (t.error().field.empty()) {
        std::abort();
      }
      break;
    }
    default: {  // the small checkers on their own
      (void)check_remote_path(in, "f");
      (void)parse_mode(in);
      (void)valid_host_name(in);
      (void)valid_owner(in);
      (void)valid_run_id(in);
      break;
    }
  }
  return 0;
}
