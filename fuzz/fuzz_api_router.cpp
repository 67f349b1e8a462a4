// Request routing and query strings: the first line of the input is the method, the rest the
// request target. Every parser that takes a query runs on whatever the query parser accepted.
#include "certfleet/api/requests.hpp"
#include "certfleet/api/router.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace certfleet::api;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view method = nl == std::string_view::npos ? std::string_view("GET") : in.substr(0, nl);
  std::string_view target = nl == std::string_view::npos ? in : in.substr(nl + 1);
  auto parts = split_target(target);
  if (!parts) return 0;
  auto m = match_route(method, parts->path);
  if (m && !m->route) __builtin_trap();  // a match always names its route
  auto q = parse_query(parts->query);
  if (!q) return 0;
  (void)parse_job_list_query(*q);
  (void)parse_log_query(*q, false);
  (void)parse_log_query(*q, true);
  (void)parse_audit_query(*q);
  (void)parse_results_query(*q);
  (void)percent_decode(parts->path, false);
  return 0;
}
