#pragma once
// The allow-list grammar and rule of the settings egress_allow_list (DESIGN §6: which destinations
// webhook deliveries and notifications may talk to, so a project cannot point certfleet at
// arbitrary internal addresses) and ssh_allow_list (the same for SSH targets). Pure: no I/O, no
// resolution. It lives in core so the settings table validates both settings with it; delivery
// (certfleet/net/egress.hpp) resolves names and applies the rule before it connects.
//
// Setting `egress_allow_list`: entries separated by commas and/or whitespace, each one of
//   10.0.0.0/8, 2001:db8::/32   CIDR ranges (IPv4 or IPv6); host bits must be zero
//   192.0.2.7, ::1              a single address (/32, /128)
//   hooks.example.com           one host name (case-insensitive, a trailing dot ignored)
//   *.example.com               any name strictly below example.com (not example.com itself)
//
// The rule, deliberately simple: a destination is allowed when
//   (a) its host name (as written in the URL) matches a name entry, or
//   (b) it resolved to at least one address and EVERY resolved address lies inside a CIDR entry,
// with one exception that overrides both: a SPECIAL address — loopback (127.0.0.0/8, ::1),
// link-local (169.254.0.0/16 with the cloud metadata services, fe80::/10), "this host"
// (0.0.0.0/8, ::), in any form (IPv4-mapped ::ffff:127.0.0.1 is 127.0.0.1) — is allowed only by
// a range entry that lies inside that special range (127.0.0.1, 127.0.0.0/8, 169.254.169.254,
// fe80::/64, ::1 …). So 0.0.0.0/0, ::/0 or a name entry never reach this host or its metadata
// service; listing the address does.
// A name entry is the operator vouching for that name, whatever public or private address it
// resolves to; without one, no resolved address may fall outside the allowed ranges (a name
// resolving to one public and one internal address is refused). An IP-literal host is judged by
// (b) alone. The caller connects only to the addresses it checked, so DNS cannot change between
// check and connect. An empty list allows nothing.
#include <boost/asio/ip/address.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"

namespace certfleet {

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
  // One address inside a CIDR entry (IPv4-mapped IPv6 addresses count as their IPv4 address);
  // a special address only inside an entry that lies inside its special range.
  bool allows_address(const boost::asio::ip::address& a) const;
  // Canonical setting text: ranges, then names, then patterns, comma-separated; parses back
  // to an equal policy.
  std::string to_string() const;
};

// Loopback, link-local, unspecified/"this network" (IPv4-mapped forms included): see the rule.
bool is_special_address(const boost::asio::ip::address& a);

// A DNS host name as the allow-list and URLs accept it: labels of [A-Za-z0-9_-] (1-63 characters,
// no leading/trailing '-'), at most 253 characters, and a last label that is not all digits (so
// a mistyped address like "10.0.0.256" is never taken for a name). No trailing dot.
bool valid_dns_name(std::string_view name);

// Parses the setting value. Errors are invalid_argument with field `setting` (the same grammar
// serves egress_allow_list and ssh_allow_list) and a message quoting the offending entry.
result<egress_policy> parse_egress_allow_list(std::string_view text, std::string_view setting = "egress_allow_list");

}  // namespace certfleet
