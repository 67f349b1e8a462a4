// Any bytes as a client's X-Request-Id: what is echoed is either that text, unchanged, when it is
// 1-64 characters of [A-Za-z0-9._-], or a new object id; never anything else (it goes into a
// response header and a log line as it is).
#include "certfleet/api/requests.hpp"
#include "certfleet/core/object_id.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto id = certfleet::api::request_id_for(in);
  if (certfleet::api::is_valid_request_id(in)) {
    if (id != in) std::abort();
  } else if (!certfleet::is_object_id(id)) {
    std::abort();
  }
  for (char c : id)
    if (c == '\r' || c == '\n' || c == ' ' || c == '"' || c == '\\' || c == '\0') std::abort();
  if (id.empty() || id.size() > certfleet::api::max_request_id) std::abort();
  return 0;
}
