#pragma once
// The egress allow-list as every outbound connection applies it. The grammar and the rule are core's
// (certfleet/core/allow_list.hpp), so the settings table validates egress_allow_list and
// ssh_allow_list with the same parser; the clients resolve names and check what they resolved to
// before anything connects (http.cpp, smtp.cpp, delivery's ssh/deliver.cpp), and connect only to
// those addresses.
//
// egress_allows() below is that rule made stricter for the spellings and services core's
// special ranges do not name; the HTTP client (http.hpp) and the DNS-01 client
// (certfleet/acme/dns.hpp) check with it.
#include <boost/asio/ip/address.hpp>

#include <algorithm>
#include <string_view>
#include <vector>

#include "certfleet/core/allow_list.hpp"

namespace certfleet::net {

using certfleet::cidr_range;
using certfleet::egress_policy;
using certfleet::is_special_address;
using certfleet::parse_egress_allow_list;
using certfleet::valid_dns_name;

// The destination an address reaches, as the allow-list should judge it. Besides the
// IPv4-mapped ::ffff:a.b.c.d core already folds, IPv6 has two more spellings of an IPv4
// address that some hosts and networks route to it: IPv4-compatible ::a.b.c.d (deprecated,
// RFC 4291 §2.5.5.1) and the NAT64 well-known prefix 64:ff9b::a.b.c.d (RFC 6052). Left as IPv6,
// ::127.0.0.1 would pass a "::/0" entry as an ordinary public address.
inline boost::asio::ip::address egress_canonical(const boost::asio::ip::address& a) {
  namespace ip = boost::asio::ip;
  if (!a.is_v6()) return a;
  const auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, v6);
  const auto b = v6.to_bytes();
  const bool high_zero = std::all_of(b.begin(), b.begin() + 12, [](unsigned char c) { return c == 0; });
  // :: and ::1 are themselves (core's special ranges), not IPv4-compatible addresses.
  const bool low_tiny = b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1;
  static constexpr unsigned char nat64[12] = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if ((high_zero && !low_tiny) || std::equal(b.begin(), b.begin() + 12, nat64))
    return ip::address_v4(ip::address_v4::bytes_type{b[12], b[13], b[14], b[15]});
  return a;
}

// Cloud instance-metadata services at addresses outside link-local (169.254.169.254 and AWS's
// 169.254.170.2 are link-local, hence already special): AWS's IPv6 endpoint fd00:ec2::254,
// Alibaba Cloud's 100.100.100.200, Oracle Cloud Classic's 192.0.0.192. They answer with the
// host's credentials, so a range entry covering them (10.0.0.0/8 does not, 0.0.0.0/0 does)
// is not enough: only an entry naming exactly that address allows one.
inline bool is_metadata_address(const boost::asio::ip::address& raw) {
  namespace ip = boost::asio::ip;
  const auto a = egress_canonical(raw);
  static const ip::address known[] = {ip::make_address("fd00:ec2::254"), ip::make_address("100.100.100.200"),
                                      ip::make_address("192.0.0.192")};
  return std::find(std::begin(known), std::end(known), a) != std::end(known);
}

// core's rule (egress_policy::allows), judged on the canonical addresses above, and a metadata
// address only when listed by itself. `resolved` empty: `host` is judged alone (an IP literal
// by its address, a name by the name entries).
inline bool egress_allows(const egress_policy& p, std::string_view host,
                          const std::vector<boost::asio::ip::address>& resolved) {
  namespace ip = boost::asio::ip;
  std::vector<ip::address> canon;
  for (const auto& a : resolved) canon.push_back(egress_canonical(a));
  if (canon.empty()) {
    std::string_view h = host;
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    // A scoped address ("fe80::1%eth0") is no literal here, as in core's parser.
    if (!h.empty() && h.size() <= 64 && h.find('%') == std::string_view::npos) {
      boost::system::error_code ec;
      auto literal = ip::make_address(std::string(h), ec);
      if (!ec) canon.push_back(egress_canonical(literal));
    }
  }
  for (const auto& a : canon) {
    if (!is_metadata_address(a)) continue;
    const unsigned width = a.is_v4() ? 32u : 128u;
    if (std::none_of(p.ranges.begin(), p.ranges.end(),
                     [&](const cidr_range& r) { return r.prefix == width && r.contains(a); }))
      return false;
  }
  return p.allows(host, canon);
}

}  // namespace certfleet::net
