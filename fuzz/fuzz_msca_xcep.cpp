// What a CEP server answers to GetPolicies (certfleet/msca/protocol.hpp): any bytes give a policy
// or an error naming what is wrong; hostile XML (DTDs, entities, depth, size) never crashes or
// expands. A parsed policy is consistent: every template has a name, its endpoints are in
// priority order, and each one comes from a CA the template names.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "certfleet/msca/protocol.hpp"

using namespace certfleet::msca;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto p = parse_get_policies_response(in);
  if (!p) {
    const auto& e = p.error();
    if (e.message.empty() || e.field.empty() || e.message.size() > 4096) std::abort();
    return 0;
  }
  for (const auto& t : p->templates) {
    if (t.name.empty() || t.display_name.empty()) std::abort();
    for (std::size_t i = 1; i < t.endpoints.size(); ++i)
      if (t.endpoints[i - 1].priority > t.endpoints[i].priority) std::abort();
    for (const auto& ep : t.endpoints) {
      if (ep.url.empty() || ces_auth_name(ep.authentication) == "?") std::abort();
      const bool from_named_ca = std::any_of(p->cas.begin(), p->cas.end(), [&](const policy_ca& ca) {
        return std::find(t.ca_references.begin(), t.ca_references.end(), ca.reference) != t.ca_references.end() &&
               std::any_of(ca.endpoints.begin(), ca.endpoints.end(), [&](const auto& e) { return e.url == ep.url; });
      });
      if (!from_named_ca) std::abort();
    }
  }
  return 0;
}
