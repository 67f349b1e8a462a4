#pragma once
// The distribution object's request body (DESIGN §6), parsed without I/O: the API checks a body
// with it before anything is stored.
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

#include <cstddef>
#include <string_view>

namespace certfleet::distribution {

inline constexpr std::size_t max_distribution_targets = 10'000;

// POST …/distributions {name, certificate_id, target_ids[], canary=false, failure_tolerance=0,
// fail_fast=false, auto_execute?}; target ids sorted and deduplicated. `auto_execute_given` tells
// whether the body set auto_execute (absent: the service decides from the certificate's source).
result<store::distribution_record> parse_distribution_request(std::string_view body, bool* auto_execute_given = nullptr);

}  // namespace certfleet::distribution
