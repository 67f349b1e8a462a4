#pragma once
// The egress allow-list (DESIGN §6): which destinations webhook deliveries and notifications may
// talk to, so a project cannot point certfleet at arbitrary internal addresses. Pure: no I/O.
//
// Setting `egress_allow_list`: entries separated by commas and/or whitespace, each one of
//   10.0.0.0/8, 2001:db8::/32   CIDR ranges (IPv4 or IPv6); host bits must be zero
//   192.0.2.7, ::1              a single address (/32, /128)
//   hooks.example.com           one host name (case-insensitive, a trailing dot ignored)
//   *.example.com               any name strictly below example.com (not example.com itself)
//
// The rule, deliberately simple: a destination is allowed when
//   (a) its host name (as written in the URL) matches a name entry, or
//   (b) it resolved to at least one address and EVERY resolved address lies inside a CIDR entry.
// A name entry is the operator vouching for that name, whatever it resolves to; without one, no
// resolved address may fall outside the allowed ranges (a name resolving to one public and one
// internal address is refused). An IP-literal host is judged by (b) alone. The caller connects
// only to the addresses it checked, so DNS cannot change between check and connect.
// An empty list allows nothing.
#include <boost/asio/ip/address.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet::delivery {

struct cidr_range {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // network address; IPv4 in the first 4 bytes
  unsigned prefix = 0;                   // 0..32 (v4) or 0..128 (v6)

  bool contains(const boost::asio::ip::address& a) const;
  std::string to_string() const;  // "10.0.0.0/8"
};

struct egress_policy {
  std::vector<cidr_range> ranges;
  std::vector<std::string> names;     // exact host names, lower-case, no trailing dot
  std::vector<std::string> suffixes;  // "*.example.com" stored as ".example.com"

  bool empty() const { return ranges.empty() && names.empty() && suffixes.empty(); }
  // The rule above. `host` may be a name or an IP literal (brackets allowed: "[::1]").
  bool allows(std::string_view host, const std::vector<boost::asio::ip::address>& resolved) const;
  // (a) alone: the name matches an exact or suffix entry. Always false for IP literals.
  bool allows_name(std::string_view host) const;
  // One address inside a CIDR entry (IPv4-mapped IPv6 addresses count as their IPv4 address).
  bool allows_address(const boost::asio::ip::address& a) const;
  // Canonical setting text: ranges, then names, then patterns, comma-separated; parses back
  // to an equal policy.
  std::string to_string() const;
};

// A DNS host name as the allow-list and URLs accept it: labels of [A-Za-z0-9_-] (1-63 characters,
// no leading/trailing '-'), at most 253 characters, and a last label that is not all digits (so
// a mistyped address like "10.0.0.256" is never taken for a name). No trailing dot.
bool valid_dns_name(std::string_view name);

// Parses the setting value. Errors are invalid_argument with field "egress_allow_list" and a
// message quoting the offending entry.
result<egress_policy> parse_egress_allow_list(std::string_view text);

}  // namespace certfleet::delivery
