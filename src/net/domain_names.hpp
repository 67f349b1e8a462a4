#pragma once
// Host-name helpers the two halves of domain_registry share (private to src/net).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::net::detail {

// Lower-case, one trailing dot dropped, a valid host name: the form every lookup uses.
std::optional<std::string> normalize_domain(std::string_view domain);
// An IPv4 or IPv6 address literal.
bool is_ip_literal(std::string_view host);
// A WHOIS referral ("whois.example.net", "whois://whois.example.net:4343/", "127.0.0.1:4343")
// as host and port; false when it names neither.
bool parse_referral(std::string_view v, std::string& host, std::uint16_t& port);

}  // namespace certfleet::net::detail
