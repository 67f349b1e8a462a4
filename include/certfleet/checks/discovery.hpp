#pragma once
// Discovery (DESIGN §12): discovery sources (endpoints, bounded CIDR ranges with ports, SNI
// names) scanned by `discovery_execute` with TLS handshakes (net/tls_probe.hpp), and the
// certificates found, kept per project by the SHA-256 of the leaf with where each was seen and
// what is wrong with it. Operator page: docs/discovery.md.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::checks {

struct discovery_source_spec {
  std::vector<std::string> endpoints;  // "host:port"
  std::vector<std::string> cidrs;      // "10.0.0.0/24"
  std::vector<std::int64_t> ports;     // for cidrs; empty: 443
  std::vector<std::string> sni;
  std::int64_t schedule_s = 0;         // 0: only "Run now"; else the scheduler runs it this often
};

inline constexpr std::int64_t min_discovery_schedule_s = 3600;
inline constexpr std::int64_t max_discovery_schedule_s = 30 * 86400;

// POST …/discovery-sources {name, endpoints?, cidrs?, ports?, sni?, schedule_s?}: the shape
// only (fields named: "endpoints[2]", "schedule_s"); the targets and the allow-list are checked by
// the caller with net::parse_discovery_spec / check_discovery_egress.
struct discovery_source_request {
  std::string name;
  discovery_source_spec spec;
};
result<discovery_source_request> parse_discovery_source_request(std::string_view body);
std::string discovery_source_doc_json(const discovery_source_spec& spec, std::uint64_t targets,
                                      const boost::json::object& last_run = {});
discovery_source_spec parse_discovery_source_doc(const store::catalog_object& o);
boost::json::object discovery_source_view(const store::catalog_object& o);
boost::json::object discovered_certificate_view(const store::catalog_object& o);
// The list's filters: a source id and a finding name (empty: any). An unknown finding is
// invalid_argument naming `finding`.
result<void> check_discovered_filter(std::string_view source, std::string_view finding);
bool discovered_matches(const store::catalog_object& o, std::string_view source, std::string_view finding);

// discovery_execute's payload {source_id}, and its keys: "Run now" (one per source and minute)
// and the scheduler's (one per source and schedule period).
std::string discovery_payload_json(std::string_view source_id);
std::string discovery_run_key(std::string_view source_id, time_ms now);
std::string discovery_schedule_key(std::string_view source_id, std::int64_t schedule_s, time_ms now);
// Whether the scheduler owes a source a scan: a whole schedule_s since its last run ended (by hand
// or scheduled), or since it was created when it never ran — so a new source, or one just run by
// hand, waits a period instead of being scanned again at once.
bool discovery_scan_due(const store::catalog_object& source, std::int64_t schedule_s, time_ms now);

struct discovery_options {
  boost::asio::thread_pool* cpu = nullptr;  // name resolution
};
void register_discovery_handler(queue::handler_registry& r, std::shared_ptr<const discovery_options> options);

}  // namespace certfleet::checks
