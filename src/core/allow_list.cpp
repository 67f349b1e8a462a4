// The allow-list parser and matcher (see allow_list.hpp for the rule). Address parsing uses
// Asio's inet_pton wrappers only (header-only): no resolution, no I/O.
#include "certfleet/core/allow_list.hpp"

#include <algorithm>
#include <cstring>
#include <optional>

namespace certfleet {
namespace {

namespace ip = boost::asio::ip;

constexpr std::size_t max_text = 64 * 1024;
constexpr std::size_t max_entries = 1024;

bool is_separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// An entry quoted in an error message: bounded and printable, whatever was typed.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) out += (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) ? '?' : c;
  if (s.size() > 80) out += "…";
  return out + "\"";
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

bool valid_dns_name(std::string_view n) {
  if (n.empty() || n.size() > 253) return false;
  std::size_t i = 0;
  bool last_numeric = false;
  while (i <= n.size()) {
    std::size_t j = n.find('.', i);
    if (j == std::string_view::npos) j = n.size();
    auto label = n.substr(i, j - i);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    last_numeric = true;
    for (char c : label) {
      bool digit = c >= '0' && c <= '9';
      if (!(digit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_')) return false;
      if (!digit) last_numeric = false;
    }
    i = j + 1;
  }
  return !last_numeric;
}

namespace {

// inet_pton through Asio; a scope id ("fe80::1%eth0") is refused: it names an interface, not a
// destination an operator can reason about.
std::optional<ip::address> parse_address(std::string_view s) {
  if (s.empty() || s.size() > 64 || s.find('%') != std::string_view::npos) return std::nullopt;
  boost::system::error_code ec;
  auto a = ip::make_address(std::string(s), ec);
  if (ec) return std::nullopt;
  return a;
}

// IPv4-mapped IPv6 (::ffff:a.b.c.d) is the same destination as a.b.c.d on a dual-stack socket.
ip::address normalize(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

std::array<std::uint8_t, 16> bytes_of(const ip::address& a) {
  std::array<std::uint8_t, 16> b{};
  if (a.is_v4()) {
    auto v4 = a.to_v4().to_bytes();
    std::copy(v4.begin(), v4.end(), b.begin());
  } else {
    auto v6 = a.to_v6().to_bytes();
    std::copy(v6.begin(), v6.end(), b.begin());
  }
  return b;
}

bool prefix_equal(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& b, unsigned prefix) {
  unsigned full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a.data(), b.data(), full) != 0) return false;
  if (rest == 0) return true;
  std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

bool host_bits_zero(const std::array<std::uint8_t, 16>& b, unsigned prefix, unsigned width) {
  for (unsigned bit = prefix; bit < width; ++bit)
    if (b[bit / 8] & (0x80 >> (bit % 8))) return false;
  return true;
}

std::array<std::uint8_t, 16> masked(std::array<std::uint8_t, 16> b, unsigned prefix, unsigned width) {
  for (unsigned bit = prefix; bit < width; ++bit) b[bit / 8] &= static_cast<std::uint8_t>(~(0x80u >> (bit % 8)));
  return b;
}

std::string_view strip_brackets(std::string_view h) {
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') return h.substr(1, h.size() - 2);
  return h;
}

result<void> add_entry(egress_policy& p, std::string_view e, std::string_view field) {
  auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_argument, "invalid entry " + quote(e) + ": " + why, std::string(field));
  };
  if (e.size() > 260) return bad("entry is too long");
  if (auto slash = e.rfind('/'); slash != std::string_view::npos) {
    auto addr = parse_address(e.substr(0, slash));
    if (!addr) return bad("not an IPv4/IPv6 network address before the /");
    auto len = e.substr(slash + 1);
    if (len.empty() || len.size() > 3 || !std::all_of(len.begin(), len.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("prefix length must be a number");
    unsigned prefix = 0;
    for (char c : len) prefix = prefix * 10 + unsigned(c - '0');
    unsigned width = addr->is_v4() ? 32 : 128;
    if (prefix > width) return bad("prefix length must be 0-" + std::to_string(width));
    cidr_range r{addr->is_v6(), bytes_of(*addr), prefix};
    // Refused rather than masked: "10.1.2.3/8" usually means the operator meant something else.
    if (!host_bits_zero(r.bytes, prefix, width))
      return bad("host bits are set (did you mean " + cidr_range{r.v6, masked(r.bytes, prefix, width), prefix}.to_string() + "?)");
    // ::ffff:0:0/96 and narrower are IPv4 ranges in disguise: store them as such, so they
    // match the (normalized) IPv4 addresses a resolver returns.
    if (r.v6 && prefix >= 96 && addr->to_v6().is_v4_mapped()) {
      cidr_range v4{false, {}, prefix - 96};
      std::copy(r.bytes.begin() + 12, r.bytes.end(), v4.bytes.begin());
      r = v4;
    }
    p.ranges.push_back(r);
    return {};
  }
  if (auto addr = parse_address(e)) {
    auto a = normalize(*addr);
    p.ranges.push_back(cidr_range{a.is_v6(), bytes_of(a), a.is_v4() ? 32u : 128u});
    return {};
  }
  if (e == "*") return bad("a bare * is not accepted; to allow every address use 0.0.0.0/0 and ::/0");
  std::string name = lower(e);
  if (!name.empty() && name.back() == '.') name.pop_back();
  if (name.rfind("*.", 0) == 0) {
    if (!valid_dns_name(std::string_view(name).substr(2))) return bad("not a valid host name pattern (use *.example.com)");
    p.suffixes.push_back(name.substr(1));
    return {};
  }
  if (name.find('*') != std::string::npos) return bad("* is only accepted as the first label (*.example.com)");
  if (name.find(':') != std::string::npos) return bad("not a valid IPv6 address (write a port-less address or CIDR)");
  if (!valid_dns_name(name)) return bad("not a valid host name, address or CIDR range");
  p.names.push_back(std::move(name));
  return {};
}

cidr_range range_of(const char* addr, unsigned prefix) {
  auto a = ip::make_address(addr);
  return cidr_range{a.is_v6(), bytes_of(a), prefix};
}

// Where "this host" and its metadata service live (IPv4-mapped forms are normalized to IPv4
// before any comparison).
const std::array<cidr_range, 6>& special_ranges() {
  static const std::array<cidr_range, 6> r{range_of("0.0.0.0", 8),   range_of("127.0.0.0", 8), range_of("169.254.0.0", 16),
                                           range_of("::", 128),        range_of("::1", 128),      range_of("fe80::", 10)};
  return r;
}

const cidr_range* special_range_of(const ip::address& a) {
  for (const auto& s : special_ranges())
    if (s.contains(a)) return &s;
  return nullptr;
}

// `inner` lies entirely inside `outer`.
bool inside(const cidr_range& inner, const cidr_range& outer) {
  return inner.v6 == outer.v6 && inner.prefix >= outer.prefix && prefix_equal(inner.bytes, outer.bytes, outer.prefix);
}

}  // namespace

bool is_special_address(const ip::address& a) { return special_range_of(a) != nullptr; }

bool cidr_range::contains(const ip::address& raw) const {
  auto a = normalize(raw);
  if (a.is_v6() != v6) return false;
  return prefix_equal(bytes_of(a), bytes, prefix);
}

std::string cidr_range::to_string() const {
  std::string s;
  if (v6) {
    ip::address_v6::bytes_type b;
    std::copy(bytes.begin(), bytes.end(), b.begin());
    s = ip::address_v6(b).to_string();
  } else {
    s = ip::address_v4(ip::address_v4::bytes_type{bytes[0], bytes[1], bytes[2], bytes[3]}).to_string();
  }
  return s + "/" + std::to_string(prefix);
}

bool egress_policy::allows_name(std::string_view host) const {
  host = strip_brackets(host);
  if (parse_address(host)) return false;
  std::string n = lower(host);
  if (!n.empty() && n.back() == '.') n.pop_back();
  if (!valid_dns_name(n)) return false;
  if (std::find(names.begin(), names.end(), n) != names.end()) return true;
  for (const auto& s : suffixes)
    if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) return true;
  return false;
}

bool egress_policy::allows_address(const ip::address& a) const {
  const cidr_range* special = special_range_of(a);
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const cidr_range& r) { return r.contains(a) && (!special || inside(r, *special)); });
}

bool egress_policy::allows(std::string_view host, const std::vector<ip::address>& resolved) const {
  bool by_name = allows_name(host);
  if (resolved.empty()) {
    if (by_name) return true;
    // An IP literal needs no resolver: judge the literal itself.
    auto literal = parse_address(strip_brackets(host));
    return literal && allows_address(*literal);
  }
  // A name entry vouches for ordinary addresses, never for a special one.
  return std::all_of(resolved.begin(), resolved.end(),
                     [&](const ip::address& a) { return (by_name && !is_special_address(a)) || allows_address(a); });
}

std::string egress_policy::to_string() const {
  std::string out;
  auto add = [&](const std::string& s) {
    if (!out.empty()) out += ",";
    out += s;
  };
  for (const auto& r : ranges) add(r.to_string());
  for (const auto& n : names) add(n);
  for (const auto& s : suffixes) add("*" + s);
  return out;
}

result<egress_policy> parse_egress_allow_list(std::string_view text, std::string_view setting) {
  const std::string field(setting);
  if (text.size() > max_text)
    return make_error(errc::invalid_argument, "the allow-list is longer than 64 KiB", field);
  egress_policy p;
  std::size_t count = 0, i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_separator(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_separator(text[i])) ++i;
    if (start == i) continue;
    if (++count > max_entries)
      return make_error(errc::invalid_argument, "more than " + std::to_string(max_entries) + " entries", field);
    if (auto r = add_entry(p, text.substr(start, i - start), field); !r) return std::move(r).error();
  }
  return p;
}

}  // namespace certfleet
