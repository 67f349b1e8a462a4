// The checks' and discovery's client input: POST …/domains and …/discovery-sources bodies, the
// domain_expiration_check payload, and the discovered-certificates query with its filters. Any
// input gets a value or an error naming a field, never a crash; an accepted source reads back
// through its stored-document parser unchanged.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/router.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

using namespace certfleet;
using namespace certfleet::checks;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  auto must_name_field = [](const error& e) {
    if (e.field.empty()) std::abort();
  };
  switch (data[0] % 4) {
    case 0:
      if (auto n = checks::parse_domain_request(in); !n) must_name_field(n.error());
      else if (n->empty() || n->find('.') == std::string::npos) std::abort();
      break;
    case 1:
      if (auto p = checks::parse_domain_check_payload(in); !p) must_name_field(p.error());
      break;
    case 2: {
      auto r = checks::parse_discovery_source_request(in);
      if (!r) {
        must_name_field(r.error());
        break;
      }
      store::catalog_object o;
      o.kind = std::string(store::kind_discovery_source);
      o.doc = checks::discovery_source_doc_json(r->spec, 0);
      auto back = checks::parse_discovery_source_doc(o);
      if (back.endpoints != r->spec.endpoints || back.cidrs != r->spec.cidrs || back.ports != r->spec.ports ||
          back.sni != r->spec.sni || back.schedule_s != r->spec.schedule_s)
        std::abort();
      (void)checks::discovery_source_view(o);
      break;
    }
    case 3: {
      auto q = api::parse_query(in);
      if (!q) break;
      auto dq = api::parse_discovered_query(*q);
      if (!dq) {
        must_name_field(dq.error());
        break;
      }
      if (auto ok = checks::check_discovered_filter(dq->source, dq->finding); !ok) must_name_field(ok.error());
      break;
    }
  }
  return 0;
}
