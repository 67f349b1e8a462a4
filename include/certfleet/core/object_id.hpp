#pragma once
// ObjectId (12 bytes: time, process-random, counter) as 24 lowercase hex characters, the id of
// every stored object, in MongoDB's ObjectId layout so both backends store the same ids.
#include <string>
#include <string_view>

namespace certfleet {

std::string new_object_id();
// True for exactly 24 hex characters (either case is accepted on input).
bool is_object_id(std::string_view s) noexcept;

}  // namespace certfleet
