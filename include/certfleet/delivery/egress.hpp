#pragma once
// The egress allow-list as delivery applies it. The grammar and the rule are core's
// (certfleet/core/allow_list.hpp), so the settings table validates egress_allow_list and
// ssh_allow_list with the same parser; delivery resolves names and checks what they resolved to
// before anything connects (webhook.cpp, ssh/deliver.cpp), and connects only to those addresses.
#include "certfleet/core/allow_list.hpp"

namespace certfleet::delivery {

using certfleet::cidr_range;
using certfleet::egress_policy;
using certfleet::is_special_address;
using certfleet::parse_egress_allow_list;
using certfleet::valid_dns_name;

}  // namespace certfleet::delivery
