// The catalog kinds the checks own (checks.hpp): domains, discovery sources and the certificates
// discovery found.
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"

#include <array>

namespace certfleet::checks {

namespace {
const std::array<catalog::kind, 3> check_kinds{{
    {store::kind_domain, domain_view, {}, nullptr},
    {store::kind_discovery_source, discovery_source_view, {}, nullptr},
    {store::kind_discovered_certificate, discovered_certificate_view, {}, nullptr},
}};
}  // namespace

std::span<const catalog::kind> kinds() noexcept { return check_kinds; }

}  // namespace certfleet::checks
