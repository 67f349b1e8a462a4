// The DNS codec on whatever a DNS server (or anything answering in its place) sends: any bytes
// decode to a message or an error naming dns_message; a decoded message re-encodes, decodes to
// the same message and re-encodes to the same bytes; TSIG verification of any bytes with a fixed
// key gives a verdict and never an ok for bytes it did not sign. The bytes are also read as a
// resolv.conf (the manual DNS path's resolver).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/dns_message.hpp"

using namespace certfleet::acme::dns;

namespace {
const tsig_key& fixed_key() {
  // base64 of "0123456789abcdef0123456789abcdef"
  static const tsig_key k = *make_tsig_key("certfleet-key.", "hmac-sha256", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=");
  return k;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> in(data, size);
  // The same bytes as a resolv.conf: a nameserver comes back as an address with port 53.
  if (auto ns = resolv_conf_nameserver(std::string_view(reinterpret_cast<const char*>(data), size)))
    if (ns->size() < 4 || ns->substr(ns->size() - 3) != ":53" || !parse_server(*ns)) std::abort();
  auto m = decode(in);
  if (!m) {
    if (m.error().field != "dns_message" || m.error().message.empty()) std::abort();
  } else {
    for (const auto& q : m->questions) (void)q.name.text();
    auto w = encode(*m);
    if (!w) {
      // Only a message that grows past 65535 bytes (pointers into data we do not compress
      // against, spelled out) has no encoding.
      if (w.error().message.find("65535") == std::string::npos) std::abort();
    } else {
      auto again = decode(*w);
      if (!again || !identical(*m, *again)) std::abort();
      auto w2 = encode(*again);
      if (!w2 || *w2 != *w) std::abort();
    }
  }
  static const bytes request_mac(32, 0x5a);
  for (auto mac : {std::span<const std::uint8_t>(request_mac), std::span<const std::uint8_t>()}) {
    auto v = tsig_verify(in, fixed_key(), mac, 1'800'000'000);
    if (v.ok() && (!m || !m->tsig)) std::abort();
  }
  return 0;
}
