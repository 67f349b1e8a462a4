// What registries send (net/domain_registry): the first byte picks the reader — IANA's RDAP
// bootstrap file (an operator's override goes through it too), an RDAP domain answer (the domain
// asked for on the first line, the answer after it), a WHOIS answer, or a registry date — and the
// rest is the input. None may crash, leak or throw; what they return must hold what the header
// promises.
#include "certfleet/net/domain_registry.hpp"
#include "certfleet/net/http.hpp"  // parse_url

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace certfleet;
using namespace certfleet::net;

namespace {

void check_text(std::string_view s, std::size_t max) {
  if (s.size() > max) std::abort();
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20) std::abort();  // control characters never kept
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto t = parse_rdap_bootstrap(in);
      if (!t) {
        if (t.error().field.empty() || t.error().message.empty()) std::abort();
        break;
      }
      for (const auto& [label, urls] : t->services) {
        if (label.empty() || urls.empty()) std::abort();
        for (const auto& u : urls)
          if (u.back() != '/' || !parse_url(u)) std::abort();
        // A domain under a listed label finds a service, the longest match's or a longer one's.
        if (label.size() <= 251 && !rdap_base_for(*t, "x." + label)) std::abort();
      }
      (void)rdap_base_for(*t, in.substr(0, 300));
      break;
    }
    case 1: {
      // The domain asked for is the first line, the answer the rest.
      auto nl = in.find('\n');
      std::string_view domain = in.substr(0, std::min<std::size_t>(nl, 300));
      auto r = parse_rdap_domain(nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1), domain);
      if (r) {
        check_text(r->registrar, 256);
        for (const auto& s : r->statuses) check_text(s, 64);
      } else if (r.error().message.empty()) {
        std::abort();
      }
      break;
    }
    case 2: {
      auto w = parse_whois(in);
      if (w) {
        check_text(w->registrar, 256);
        if (w->statuses.size() > 32) std::abort();
        for (const auto& s : w->statuses) check_text(s, 64);
        if (!w->expires_at_ms && w->registrar.empty() && w->statuses.empty() && w->referral_host.empty())
          std::abort();  // an answer is data, or an error
        if (!w->referral_host.empty() && !valid_dns_name(w->referral_host) &&
            w->referral_host.find_first_not_of("0123456789abcdef:.") != std::string::npos)
          std::abort();
      } else if (w.error().message.empty()) {
        std::abort();
      }
      break;
    }
    default: {
      auto t = parse_registry_date(in);
      // Years 1900-9999 only.
      if (t && (*t < -2'209'075'200'000LL || *t > 253'402'387'200'000LL)) std::abort();
      break;
    }
  }
  return 0;
}
