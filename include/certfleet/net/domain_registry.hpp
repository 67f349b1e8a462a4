#pragma once
// Domain registration data for domain_expiration_check (DESIGN §12): when a domain's registration
// expires, who the registrar is and the registry's status codes. RDAP (RFC 9083) first, found
// through IANA's bootstrap file for DNS (RFC 9224: a snapshot ships with certfleet, an operator
// may give a newer one); WHOIS (RFC 3912, TCP port 43) when RDAP has no server for the TLD or
// fails. The parsers are pure (unit-tested and fuzzed alone); the lookups resolve names off the
// loop, check the egress allow-list on the resolved addresses before connecting, and run under
// one deadline each.
//
// Errors (result<T>): not_found — the registry has no such domain (RDAP 404, a WHOIS "No match");
// rate_limited — the server asked us to slow down (retry_after_s when it said how long);
// timeout — the deadline passed, or the network failed (refused, reset, unresolvable: worth a
// later retry, as the ACME client reports them); forbidden — the egress allow-list does not allow
// the server (field "egress_allow_list"); invalid_argument — a bad domain name, or an answer that
// is not what the protocol promises (field names the part: "rdap.events[2].eventDate", "whois").
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"

namespace certfleet::net {

// ---- RDAP bootstrap (RFC 9224) --------------------------------------------------------------

inline constexpr std::size_t max_rdap_bootstrap_bytes = 4u << 20;  // IANA's file is ~70 KiB

struct rdap_bootstrap {
  std::string publication;  // as the file states it ("2026-03-23T19:00:02Z"); may be empty
  // Label suffix (lower-case, A-labels as given, no trailing dot: "com", "xn--p1ai") → base URLs,
  // https ones first, each ending in '/'. Usually one label; RFC 9224 allows more.
  std::map<std::string, std::vector<std::string>, std::less<>> services;
};

// IANA's format: {"version": "1.0", "publication": …, "services": [[[labels…], [urls…]], …]}.
// Errors are invalid_argument (payload_too_large past max_rdap_bootstrap_bytes) naming the field
// under `what` ("rdap_bootstrap.services[3][1][0]"). A label listed twice keeps its first service.
result<rdap_bootstrap> parse_rdap_bootstrap(std::string_view json_text, std::string_view what = "rdap_bootstrap");

// The snapshot shipped in this build (data/rdap_bootstrap_dns.json, embedded), parsed once.
const rdap_bootstrap& shipped_rdap_bootstrap();

// The preferred base URL for a domain: the service of its longest matching label suffix
// (case-insensitive, a trailing dot ignored); nullopt when no entry matches.
std::optional<std::string> rdap_base_for(const rdap_bootstrap& table, std::string_view domain);

// ---- RDAP domain answers (RFC 9083) ----------------------------------------------------------

inline constexpr std::size_t max_rdap_bytes = 1u << 20;

struct rdap_domain_info {
  std::string ldh_name;                   // as the server spelled it
  std::optional<time_ms> expires_at_ms;   // event "expiration"; absent: the registry does not say
  std::optional<time_ms> registered_at_ms;    // event "registration"
  std::optional<time_ms> last_changed_at_ms;  // event "last changed"
  std::vector<std::string> statuses;      // as given ("client transfer prohibited")
  std::string registrar;                  // the "registrar" entity's vCard fn, else its handle
  std::string registrar_iana_id;          // its publicIds "IANA Registrar ID", when given
};

// One domain object for `domain` (ldhName compared case-insensitively). An RDAP error document
// ({"errorCode": 404, "title": …, "description": […]}) is an error quoting them: errorCode 404
// not_found, 429 rate_limited, else invalid_argument with field "rdap.errorCode".
result<rdap_domain_info> parse_rdap_domain(std::string_view json_text, std::string_view domain);

// ---- WHOIS answers (RFC 3912) ----------------------------------------------------------------

inline constexpr std::size_t max_whois_bytes = 256u << 10;

struct whois_info {
  std::optional<time_ms> expires_at_ms;     // the registry's date preferred over the registrar's
  std::optional<time_ms> registered_at_ms;  // "Creation Date:", "created:" …
  std::string registrar;
  std::vector<std::string> statuses;        // EPP codes without their explanatory URLs
  // Where the answer says to ask next ("Registrar WHOIS Server:", IANA's "refer:"/"whois:"):
  // a host name or IP literal, and a port when the answer gave one (0: the WHOIS port).
  std::string referral_host;
  std::uint16_t referral_port = 0;
};

// A "thick" or "thin" answer in the common shapes. Errors: not_found ("No match for", "NOT
// FOUND", …), rate_limited ("exceeded", "try again later", …), invalid_argument with field
// "whois" for an answer with nothing recognisable, payload_too_large past max_whois_bytes.
result<whois_info> parse_whois(std::string_view text);

// A date as WHOIS servers write them: "2026-08-13T04:00:00Z", "2026-08-13 04:00:00+03",
// "13-aug-2026", "2026.08.13", "13.08.2026", "20260813" …, as unix ms (UTC unless an offset is
// given). RFC 3339 with or without a fraction or offset is accepted too (RDAP uses it alone).
std::optional<time_ms> parse_registry_date(std::string_view text);

// ---- lookups (I/O) ---------------------------------------------------------------------------

// GET {base_url}domain/{domain} with Accept: application/rdap+json through http_exchange (no
// redirect followed). 404 not_found, 429 rate_limited (Retry-After kept), other non-2xx an error
// naming the status (5xx and 408: timeout, worth a retry; others invalid_argument).
// `egress` nullptr: no egress check. `ca_pem`: extra trust anchors for the RDAP server.
boost::asio::awaitable<result<rdap_domain_info>> rdap_lookup(std::string base_url, std::string domain,
                                                             std::chrono::milliseconds timeout,
                                                             const egress_policy* egress,
                                                             boost::asio::thread_pool* resolve_pool = nullptr,
                                                             std::string ca_pem = {});

struct whois_answer {
  whois_info info;
  std::string server;  // who gave `info`: "host" or "host:port" when not 43
  int referrals_followed = 0;
};

// Asks `server_host`:`port` (resolve_host off the loop; egress checked on the resolved addresses
// before connecting), sends "domain\r\n", reads to EOF (at most max_whois_bytes), parses. While
// an answer has no expiry date but names a referral, asks that server too — at most
// `max_referrals` times and never a server asked before. A referral that fails leaves the last
// good answer when it named a registrar or statuses. One deadline (`timeout`) covers every hop.
boost::asio::awaitable<result<whois_answer>> whois_lookup(std::string server_host, std::uint16_t port,
                                                          std::string domain, std::chrono::milliseconds timeout,
                                                          int max_referrals, const egress_policy* egress,
                                                          boost::asio::thread_pool* resolve_pool = nullptr);

struct registration_options {
  // nullptr: shipped_rdap_bootstrap(). Set (an operator's override, parsed by
  // parse_rdap_bootstrap): must outlive the awaited call.
  const rdap_bootstrap* bootstrap = nullptr;
  std::chrono::milliseconds rdap_timeout{10000};
  std::chrono::milliseconds whois_timeout{10000};  // all hops together
  // The first WHOIS server: a configured one, else IANA's, whose "refer:" names the registry's.
  std::string whois_server = "whois.iana.org";
  std::uint16_t whois_port = 43;
  int max_referrals = 2;  // IANA → registry → registrar
  bool whois_fallback = true;
  // nullptr: no egress check. Set: must outlive the awaited call; an empty policy allows nothing.
  const egress_policy* egress = nullptr;
  boost::asio::thread_pool* resolve_pool = nullptr;  // nullptr: the resolver's own
  std::string rdap_ca_pem;  // extra trust anchors for RDAP servers (a private CA, a test CA)
};

struct domain_registration {
  std::string source;  // "rdap" | "whois"
  std::optional<time_ms> expires_at_ms;  // absent: the registry does not publish it
  std::string registrar;
  std::vector<std::string> statuses;
  std::string server;  // the RDAP base URL or the WHOIS server that answered
  // Why WHOIS answered instead of RDAP: "no RDAP server for .io" or the RDAP error; "" for rdap.
  std::string rdap_skipped;
};

// RDAP through the bootstrap table; WHOIS when the table has no base for the TLD or RDAP fails
// with anything but not_found (a registry's "no such domain" is the answer). When both fail, the
// WHOIS error is returned, its message naming the RDAP failure too.
boost::asio::awaitable<result<domain_registration>> lookup_domain_registration(std::string domain,
                                                                               registration_options options);

}  // namespace certfleet::net
