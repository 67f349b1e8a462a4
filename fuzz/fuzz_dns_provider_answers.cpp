// What DNS-01 providers send back (issue 33): PowerDNS's zone list and zone documents, read by
// powerdns_zone_for / powerdns_txt_of, and a program's or an API's output redacted before it
// reaches a job log. Any input gets a value, never a crash; a chosen zone contains the name; the
// redacted text never holds the secret.
#include "certfleet/lifecycle/dns_providers.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace certfleet;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto z = lifecycle::powerdns_zone_for(in, "_acme-challenge.www.example.test");
      if (z) {
        std::string n = z->name;
        for (auto& c : n) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
        if (n.empty() || n.back() != '.') n += '.';
        const std::string name = "_acme-challenge.www.example.test.";
        if (name != n && (name.size() <= n.size() || name.compare(name.size() - n.size() - 1, n.size() + 1, "." + n) != 0))
          std::abort();
      }
      break;
    }
    case 1: {
      auto rr = lifecycle::powerdns_txt_of(in, "_acme-challenge.example.test");
      if (!rr.found && !rr.contents.empty()) std::abort();
      auto body = lifecycle::powerdns_patch_body("_acme-challenge.example.test", rr.contents, rr.ttl);
      if (body.empty()) std::abort();
      break;
    }
    case 2: {
      const std::vector<std::pair<std::string, std::string>> secrets{{"API_TOKEN", "s3cr3t-token-value"}};
      auto out = lifecycle::redact_provider_output(in, secrets);
      if (out.find("s3cr3t-token-value") != std::string::npos) std::abort();
      break;
    }
  }
  return 0;
}
