// The egress_allow_list / ssh_allow_list grammar (core) and matcher: any text gets a policy or an error naming
// the setting; a policy's canonical text parses back to the same policy; matching never crashes.
#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/settings.hpp"

using namespace certfleet;
namespace ip = boost::asio::ip;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The first line is the list; the rest a host to match, then 16-byte addresses.
  auto nl = in.find('\n');
  std::string_view list = in.substr(0, nl);
  std::string_view rest = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  auto p = parse_egress_allow_list(list);
  // The settings table validates both allow-list settings with this grammar: same verdict, and
  // the same refusal, for every value within a setting's length bound.
  if (list.size() <= 4096)
    for (const char* name : {"egress_allow_list", "ssh_allow_list"}) {
      auto v = validate_setting(*find_setting(name), list);
      auto named = parse_egress_allow_list(list, name);
      if (bool(v) != bool(named)) std::abort();
      if (!v && (v.error().field != name || v.error().message != named.error().message)) std::abort();
    }
  if (!p) {
    if (p.error().field != "egress_allow_list" || p.error().message.empty()) std::abort();
    return 0;
  }
  auto again = parse_egress_allow_list(p->to_string());
  if (!again || again->to_string() != p->to_string()) std::abort();
  auto nl2 = rest.find('\n');
  std::string_view host = rest.substr(0, nl2);
  std::string_view raw = nl2 == std::string_view::npos ? std::string_view{} : rest.substr(nl2 + 1);
  std::vector<ip::address> addrs;
  for (std::size_t i = 0; i + 16 <= raw.size() && addrs.size() < 8; i += 16) {
    ip::address_v6::bytes_type b;
    std::memcpy(b.data(), raw.data() + i, 16);
    // Odd first byte: the last four bytes as an IPv4 address.
    if (b[0] & 1) addrs.push_back(ip::address_v4(ip::address_v4::bytes_type{b[12], b[13], b[14], b[15]}));
    else addrs.push_back(ip::address_v6(b));
  }
  bool allowed = p->allows(host, addrs);
  if (p->empty() && allowed) std::abort();  // an empty list allows nothing
  // The rule as documented: every (non-empty) resolved address vouched for by a name match (an
  // ordinary address) or in a range (a special address: a range inside its special range).
  bool all_in = !addrs.empty();
  for (const auto& a : addrs) all_in = all_in && ((p->allows_name(host) && !is_special_address(a)) || p->allows_address(a));
  if (!addrs.empty() && allowed != all_in) std::abort();
  // A list that allows everything still never reaches a special address it does not name.
  static const auto everything = *parse_egress_allow_list("0.0.0.0/0, ::/0, ::ffff:0:0/96");
  for (const auto& a : addrs)
    if (is_special_address(a) && everything.allows_address(a)) std::abort();
  return 0;
}
