#pragma once
// DNS-01's conversations with DNS servers (DESIGN §9): RFC 2136 UPDATEs signed with TSIG to put
// and remove `_acme-challenge` TXT records, and the queries that find a name's zone, the zone's
// authoritative servers, and the TXT values each of them answers (propagation).
//
// Coroutines on the caller's executor over Asio sockets; every exchange under one deadline
// (client_options::timeout). Queries go over UDP (retransmitted inside the deadline; an answer
// with TC set is asked again over TCP), UPDATEs over TCP. A server is "host:port": an IP literal
// is used as is, a name is resolved on the caller's thread pool (never on the loop).
// The DNS server is a project admin's input (a DNS provider's server, a manual provider's
// check_server) and the zone's NS addresses come from DNS data: with client_options::egress set
// (the system setting acme_allow_list, the same policy as the ACME client's), every server's
// resolved addresses must pass it before a datagram or a connection leaves (not_allowed
// otherwise, permanent, naming the setting). The recursive resolver (acme_dns_resolver or
// /etc/resolv.conf) is the system's, and is asked with egress unset.
//
// Failures are values: result<T> whose error carries a code of dns_category() (dns_errc below),
// a message that names the server, the zone or name, the cause and the operator's next step,
// and never the TSIG secret. dns_permanent(e) says whether retrying can help: a job ends dead at
// once on a permanent failure and retries a transient one.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "certfleet/acme/dns_message.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"

namespace certfleet::acme::dns {

// What went wrong talking to a DNS server. The table behind dns_errc_name / dns_errc_permanent /
// dns_errc_hint (src/acme/dns_errors.cpp) is the one place these facts live.
enum class dns_errc {
  tsig_rejected = 1,  // NOTAUTH with a TSIG error (BADKEY, BADSIG, BADTIME): key name, algorithm,
                      // secret or the zone's update ACL do not match (knot answers BADKEY for a
                      // zone whose ACL lacks the key)                                  permanent
  not_authoritative,  // NOTAUTH / NOTZONE without a TSIG error: the server does not serve the
                      // zone                                                             permanent
  refused,            // REFUSED: policy (ACL, no updates for this zone, no recursion)    permanent
  zone_not_found,     // the SOA walk found no zone containing the name at this server  permanent
  name_error,         // NXDOMAIN where a name must exist (the zone's apex)              permanent
  update_failed,      // another UPDATE rcode (FORMERR, NOTIMP, YXDOMAIN, …)             permanent
  bad_answer_signature,  // the answer's TSIG does not verify (or is missing) for our key:
                         // something between us and the server altered it, or the server
                         // is not the one holding the key                                 permanent
  server_failure,     // SERVFAIL (the zone not loaded yet, a secondary without the zone)  transient
  timeout,            // no answer within the deadline                                    transient
  network,            // name resolution, connection refused / reset                      transient
  malformed_answer,   // the answer does not parse, does not match the question, or has
                      // the wrong id                                                      transient
  not_allowed,        // the server's address is outside acme_allow_list (decided before
                      // anything is sent)                                                 permanent
};

const std::error_category& dns_category() noexcept;
inline std::error_code make_error_code(dns_errc e) noexcept { return {static_cast<int>(e), dns_category()}; }
// "tsig_rejected", "timeout", …
std::string_view dns_errc_name(dns_errc e) noexcept;
bool dns_errc_permanent(dns_errc e) noexcept;
// What an operator should do about it, one sentence (docs/acme-dns.md has the long form).
std::string_view dns_errc_hint(dns_errc e) noexcept;
// The code of an error from this file, when it is one of ours.
std::optional<dns_errc> dns_error_code(const error& e) noexcept;
// Whether a job should stop retrying: a dns_errc that is permanent, and bad input
// (errc::invalid_argument from the parsers below). Anything else is transient.
bool dns_permanent(const error& e) noexcept;

// "host:port" (port 1-65535; 53 when left out), "[v6]:port" for an IPv6 literal; host an IP
// literal or a DNS name. Errors are invalid_argument naming `field`.
struct server_address {
  std::string host;  // lower-case; IPv6 without brackets
  std::uint16_t port = 53;
  bool host_is_ip() const;
  std::string text() const;  // "127.0.0.1:5353", "[::1]:53", "ns1.example.net:53"
  bool operator==(const server_address&) const = default;
};
result<server_address> parse_server(std::string_view text, std::string_view field = "server");

struct client_options {
  // One exchange: resolution, every retransmission, the TCP fallback, the answer.
  std::chrono::milliseconds timeout{5000};
  // UDP queries are sent this many times within the timeout (evenly spaced) before giving up.
  int udp_tries = 3;
  // Where a server name is resolved (getaddrinfo; the cpu pool); nullptr: delivery's own pool.
  boost::asio::thread_pool* resolve_pool = nullptr;
  // The clock TSIG's "time signed" comes from (tests move it to provoke BADTIME).
  const clock_source* clock = nullptr;  // nullptr: the system clock
  std::uint16_t tsig_fudge = default_tsig_fudge;
  // authoritative_servers: at most this many NS names are looked at, and their addresses are
  // used with this port (53 in the world; tests run servers on other ports).
  std::size_t max_nameservers = 8;
  std::uint16_t nameserver_port = 53;
  // find_zone / authoritative_servers through a recursive resolver: queries ask for recursion
  // (RD=1) and answers without the AA flag are taken (a resolver's answers never carry it).
  // txt_lookup is never asked this way: a record's presence is checked at the zone's own servers.
  bool recursion_desired = false;
  // acme_allow_list, parsed (must outlive the calls); nullptr: no check (the system's resolver).
  const net::egress_policy* egress = nullptr;
};

// The first `nameserver` of a resolv.conf text as "host:53" ("[v6]:53" for IPv6; a scoped
// address's %zone dropped); nullopt when there is none. Pure.
std::optional<std::string> resolv_conf_nameserver(std::string_view text);

// --- UPDATE (TCP, TSIG-signed) ----------------------------------------------------------------

// Adds one TXT RR `fqdn` = `value` with `ttl` (RFC 2136 add: adding a value that is already there
// changes nothing, so a retried job is harmless). `zone` empty: found first with find_zone at
// the same server. Returns the zone the update went to (lower-case text, no trailing dot).
// Names are accepted with or without the trailing dot.
boost::asio::awaitable<result<std::string>> present_txt(std::string server, std::string zone, tsig_key key,
                                                        std::string fqdn, std::string value, std::uint32_t ttl,
                                                        client_options opts = {});
// Deletes exactly that RR (class NONE): other values at the same name (a wildcard and its apex
// share `_acme-challenge.example.test`) stay. Removing a value that is not there succeeds.
boost::asio::awaitable<result<std::string>> remove_txt(std::string server, std::string zone, tsig_key key,
                                                       std::string fqdn, std::string value,
                                                       client_options opts = {});

// --- queries (RD=0: the server's own data, not a resolver's) ---------------------------------

// The zone containing `fqdn` as `server` serves it: asks SOA for the name, then for each parent
// in turn, until an answer (or an NXDOMAIN/NODATA authority section) shows the zone's SOA.
// Returns the zone in lower case without the trailing dot ("example.test"). zone_not_found when
// the server serves none of them, or delegates the name to other servers (a referral).
boost::asio::awaitable<result<std::string>> find_zone(std::string server, std::string fqdn,
                                                      client_options opts = {});

// One authoritative server of a zone, as `server` describes it.
struct nameserver {
  std::string name;                    // the NS target, text form ("ns1.example.test")
  std::vector<std::string> addresses;  // "host:port" to ask (IP literals, nameserver_port)
  std::string error;                   // why there are no addresses (empty when there are)
};
// The zone's NS names (at most max_nameservers) and their A/AAAA addresses, taken from the
// answer's additional section or asked at `server` (RD=0): a name `server` cannot answer for
// keeps an `error` instead of addresses and the caller skips it. Fails when `server` does not
// answer the NS query itself (not_authoritative, refused, timeout …).
boost::asio::awaitable<result<std::vector<nameserver>>> authoritative_servers(std::string server, std::string zone,
                                                                              client_options opts = {});
// The servers a propagation check asks: `server` first, then every address of `nameservers`
// not already listed (by text). Pure.
std::vector<std::string> propagation_targets(const std::string& server, const std::vector<nameserver>& nameservers);

struct txt_answer {
  std::string server;               // who answered ("127.0.0.1:5353")
  std::vector<std::string> values;  // each TXT RR's strings joined; empty when there are none
  bool authoritative = false;       // the AA flag: the values are the server's own data
  bool name_exists = false;         // false for NXDOMAIN
};
// The TXT values `server` answers for `fqdn` (RD=0). NXDOMAIN and NODATA are answers (no values
// yet), not errors; REFUSED, NOTAUTH, SERVFAIL, a timeout or a malformed answer are errors.
// A CNAME at the name is followed inside the answer.
boost::asio::awaitable<result<txt_answer>> txt_lookup(std::string server, std::string fqdn, client_options opts = {});

// Where a CNAME at `fqdn` leads, as `server` answers (a resolver: set recursion_desired): the
// last name of the chain (at most 8 hops), lower-case without the trailing dot; `fqdn` itself
// when there is no CNAME (NXDOMAIN and NODATA included). DNS-01 delegation: an operator points
// `_acme-challenge.example.com` at a name in a zone certfleet can update. A chain longer than 8
// hops or one that loops is malformed_answer.
boost::asio::awaitable<result<std::string>> follow_cname(std::string server, std::string fqdn, client_options opts = {});

}  // namespace certfleet::acme::dns

template <>
struct std::is_error_code_enum<certfleet::acme::dns::dns_errc> : std::true_type {};
