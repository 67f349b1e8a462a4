// Discovery (certfleet/net/tls_probe.hpp), the two inputs others shape: a source's spec (from
// the API) and the certificate chain a scanned endpoint sends. The first byte picks one:
//   even: the spec parser. The rest is lines, each "<kind><text>": e = endpoint, c = CIDR,
//         p = port (a decimal number, sign allowed), s = SNI name; a parsed plan is walked at its
//         first, middle and last index and checked against a fixed allow-list.
//   odd:  assess_chain. The rest is certificates, each a 2-byte big-endian length and that many
//         bytes (the last one takes what is left); the second byte picks the expected name and the
//         negotiated protocol.
// Any input gets a result or an error naming its field; a crash or leak is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/net/tls_probe.hpp"

using namespace certfleet;
using namespace certfleet::net;

namespace {

// Small enough that the egress check (linear in the addresses) stays fast per input.
constexpr std::uint64_t max_addresses = 4096;

std::int64_t number(std::string_view s) {
  bool neg = !s.empty() && s.front() == '-';
  if (neg) s.remove_prefix(1);
  std::int64_t n = 0;
  for (char c : s.substr(0, 18)) n = n * 10 + (c >= '0' && c <= '9' ? c - '0' : 0);
  return neg ? -n : n;
}

bool field_of(const error& e, std::string_view list) {
  return e.field == list || e.field.rfind(std::string(list) + "[", 0) == 0;
}

void spec(std::string_view in) {
  std::vector<std::string> endpoints, cidrs, sni;
  std::vector<std::int64_t> ports;
  while (!in.empty()) {
    auto nl = in.find('\n');
    auto line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
    if (line.empty()) continue;
    auto text = std::string(line.substr(1));
    switch (line.front()) {
      case 'e': endpoints.push_back(text); break;
      case 'c': cidrs.push_back(text); break;
      case 'p': ports.push_back(number(text)); break;
      case 's': sni.push_back(text); break;
      default: break;
    }
  }
  auto plan = parse_discovery_spec(endpoints, cidrs, ports, sni, max_addresses);
  if (!plan) {
    const auto& e = plan.error();
    if (!e.is(errc::invalid_argument) || e.message.empty()) std::abort();
    if (!field_of(e, "endpoints") && !field_of(e, "cidrs") && !field_of(e, "ports") && !field_of(e, "sni")) std::abort();
    return;
  }
  if (plan->empty() || plan->size() > max_addresses) std::abort();
  for (std::uint64_t i : {std::uint64_t{0}, plan->size() / 2, plan->size() - 1}) {
    auto t = plan->at(i);
    if (t.port == 0 || t.host.empty() || t.endpoint_text().empty()) std::abort();
  }
  static const egress_policy policy = [] {
    auto p = parse_egress_allow_list("10.0.0.0/8, 2001:db8::/32, 127.0.0.1, *.example.com");
    if (!p) std::abort();
    return *p;
  }();
  auto ok = check_discovery_egress(*plan, policy);
  if (!ok && !field_of(ok.error(), "endpoints") && !field_of(ok.error(), "cidrs")) std::abort();
}

void chain(std::string_view in) {
  if (in.empty()) return;
  static const char* const names[] = {"", "a.example.com", "127.0.0.1", "[::1]", "*.example.com", "EXAMPLE.com."};
  static const char* const protocols[] = {"", "TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1", "SSLv3"};
  const auto pick = static_cast<unsigned char>(in.front());
  in.remove_prefix(1);
  std::vector<std::string> certs;
  while (!in.empty() && certs.size() < 16) {
    std::size_t n = in.size();
    if (in.size() >= 2) {
      n = (static_cast<unsigned char>(in[0]) << 8) | static_cast<unsigned char>(in[1]);
      in.remove_prefix(2);
      if (n > in.size()) n = in.size();
    }
    certs.emplace_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  auto a = assess_chain(certs, names[pick % 6], protocols[(pick / 6) % 6], 1'700'000'000'000, 30);
  if (!a) {
    if (!a.error().is(errc::invalid_argument) || a.error().field.rfind("chain[", 0) != 0) std::abort();
    return;
  }
  if (a->chain_length != certs.size()) std::abort();
  for (const auto& f : a->findings)
    if (!find_finding(f)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) spec(in);
  else chain(in);
  return 0;
}
