#include "certfleet/core/object_id.hpp"

#include <bson/bson.h>

namespace certfleet {

std::string new_object_id() {
  bson_oid_t oid;
  bson_oid_init(&oid, nullptr);  // the default context is thread-safe
  char buf[25];
  bson_oid_to_string(&oid, buf);
  return std::string(buf, 24);
}

bool is_object_id(std::string_view s) noexcept {
  if (s.size() != 24) return false;
  for (char c : s) {
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex) return false;
  }
  return true;
}

}  // namespace certfleet
