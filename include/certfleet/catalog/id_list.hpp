#pragma once
// A request body's list of object ids (bulk renewal's certificate_ids, retry-targets' target_ids):
// one reading, so both refuse the same things with the same words.
#include "certfleet/core/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::catalog {

// `raw` (the member as JSON text) must be an array of 1 to `max` distinct 24-hex ids; they come
// back in the order given. Errors are invalid_argument naming `field`, or `field[i]` for a bad or
// repeated element; `what` names the kind of object ("certificate", "target").
result<std::vector<std::string>> parse_id_list(std::string_view raw, std::string_view field, std::size_t max,
                                               std::string_view what);

}  // namespace certfleet::catalog
