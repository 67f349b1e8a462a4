#pragma once
// Putting and removing one DNS-01 TXT record through a DNS provider that presents records itself,
// whatever its kind (DESIGN §9, docs/acme-dns.md, docs/acme-dns-providers.md):
//  - rfc2136 sends TSIG-signed UPDATEs to the provider's server;
//  - exec runs the system admin's program as `PROGRAM present|cleanup FQDN VALUE` (lego's exec
//    interface: FQDN with its trailing dot), without a shell, with the provider's sealed
//    variables as its environment, under its timeout;
//  - httpreq POSTs {"fqdn", "value"} to {endpoint}/present and /cleanup (lego's httpreq), with
//    basic auth when configured;
//  - powerdns PATCHes the TXT RRset of the name in its zone through PowerDNS's HTTP API, keeping
//    the values already there (two names of one order, two orders for one name).
// HTTP calls go through the one HTTP client with acme_allow_list as their egress policy. A
// manual provider's records are the operator's: it has no handle.
//
// Failures are values: acme::dns::dns_permanent(e) says whether a retry can help. Permanent:
// bad configuration (a program missing, an exec provider without a system admin's grant), an
// API's 4xx (its own message quoted), an address acme_allow_list refuses. Transient: a program's
// non-zero exit or timeout, an API's 5xx, network failures and timeouts. What a program printed
// or an API answered reaches the job log with every secret value of the provider redacted.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "certfleet/acme/dns.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"

namespace certfleet::lifecycle {

// What the exec program's output tail in the job log is cut to.
inline constexpr std::size_t exec_output_tail = 2048;

struct dns_provider_handle {
  std::string name;  // the provider object's name, for messages
  dns_provider_spec spec;
  std::optional<acme::dns::tsig_key> tsig;                    // rfc2136
  std::vector<std::pair<std::string, std::string>> secrets;  // exec: its environment; httpreq: password; powerdns: api_key
};

// The provider's secret opened and checked. Errors are permanent (invalid_argument): a secret
// that does not open, a TSIG key that does not parse, an exec provider without a grant.
result<dns_provider_handle> open_dns_provider(const kek& key, const store::catalog_object& o, const dns_provider_spec& spec);

struct dns_call_options {
  acme::dns::client_options dns;  // rfc2136's exchanges (deadline, …); its egress is every kind's acme_allow_list
  boost::asio::thread_pool* cpu = nullptr;  // name resolution of the HTTP kinds (exec programs wait on a pool of their own)
  std::function<boost::asio::awaitable<void>(std::string level, std::string message)> log;  // may be empty
};

// Presents `fqdn` = `value`. Returns the zone it went to (lower-case, no trailing dot); "" when
// the provider does not say which (exec).
boost::asio::awaitable<result<std::string>> present_dns_record(const dns_provider_handle& p, std::string zone,
                                                               std::string fqdn, std::string value, std::uint32_t ttl,
                                                               const dns_call_options& o);
// Removes exactly that value; other values at the name stay. Removing what is not there succeeds
// for rfc2136; an exec program is expected to behave the same.
boost::asio::awaitable<result<std::string>> remove_dns_record(const dns_provider_handle& p, std::string zone,
                                                              std::string fqdn, std::string value,
                                                              const dns_call_options& o);

// The exec program's argv and environment for one call (pure, tested alone).
struct exec_call {
  std::vector<std::string> argv;  // program, action, FQDN (with a trailing dot), value
  std::vector<std::string> env;   // PATH, LC_ALL, then the provider's variables
};
exec_call make_exec_call(const dns_provider_spec& spec, const std::vector<std::pair<std::string, std::string>>& env,
                         std::string_view action, std::string_view fqdn, std::string_view value);
// `text` with every value of `secrets` at least 4 bytes long replaced by "[redacted]", and every
// PEM private key block too (pure).
std::string redact_provider_output(std::string_view text, const std::vector<std::pair<std::string, std::string>>& secrets);

// PowerDNS (pure, tested alone): the zone of `fqdn` among a server's zone list (GET …/zones: an
// array of {"id", "name"}), the longest one containing it; nullopt when none does.
struct powerdns_zone {
  std::string id, name;  // as the server spells them ("example.test.")
};
std::optional<powerdns_zone> powerdns_zone_for(std::string_view zones_json, std::string_view fqdn);
// The TXT contents and TTL of `fqdn` in a zone document (GET …/zones/{id}: {"rrsets": […]}).
struct powerdns_rrset {
  std::vector<std::string> contents;  // as stored: "\"value\""
  std::uint32_t ttl = 60;
  bool found = false;
};
powerdns_rrset powerdns_txt_of(std::string_view zone_json, std::string_view fqdn);
// The PATCH body that leaves `contents` at `fqdn` (REPLACE), or removes the RRset (DELETE) when
// there are none.
std::string powerdns_patch_body(std::string_view fqdn, const std::vector<std::string>& contents, std::uint32_t ttl);

}  // namespace certfleet::lifecycle
