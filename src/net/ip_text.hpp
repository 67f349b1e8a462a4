#pragma once
// An IP address as discovery spells it (private to src/net): the plan and the probe agree on it.
#include <boost/asio/ip/address.hpp>

#include <optional>
#include <string_view>

namespace certfleet::net::detail {

// An IPv4 or IPv6 literal without a scope id; an IPv4-mapped IPv6 address as its IPv4 host.
std::optional<boost::asio::ip::address> parse_ip(std::string_view s);

}  // namespace certfleet::net::detail
