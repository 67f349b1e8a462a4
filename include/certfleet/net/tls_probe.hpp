#pragma once
// Discovery (DESIGN §12, discovery_execute): which endpoints a source names, whether the egress
// allow-list lets us reach them, one TLS handshake per endpoint that records whatever chain the
// peer sends, and what is wrong with that chain.
//
// Pure parts, unit-tested and fuzzed alone: parse_discovery_spec (the source's endpoints, CIDR
// ranges, ports and SNI names → a discovery_plan that computes its targets by index, so a /20 is
// a few dozen bytes, not 4096 strings), check_discovery_egress, assess_chain and the findings
// table. The I/O (probe_tls, scan) runs as coroutines on the caller's event loop, every await
// under the endpoint's deadline.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/thread_pool.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"

namespace certfleet::net {

// ---- Targets --------------------------------------------------------------------------------

struct probe_target {
  std::string host;        // an IP literal without brackets ("10.0.0.7", "2001:db8::1") or a lower-case DNS name
  std::uint16_t port = 0;
  std::string sni;         // empty: the ClientHello carries no server_name

  bool host_is_ip() const;
  // What the certificate should be for: the SNI name when one is sent, else the host (an IP
  // target is then matched against IP SANs).
  const std::string& expected_name() const { return sni.empty() ? host : sni; }
  // "10.0.0.7:443", "[2001:db8::1]:443", "www.example.com:8443" (no SNI: see `sni`).
  std::string endpoint_text() const;
};

// The targets of one discovery source, computed on demand from the parsed spec. Order: the
// endpoints as listed, then each CIDR range address by address (ascending), each address with
// every port in the order listed; each of those once per SNI name (in the order listed) when SNI
// names are given, else once: with the host as SNI for a named endpoint and no SNI for an address.
class discovery_plan {
 public:
  struct endpoint_entry {
    std::string host;  // as in probe_target
    std::uint16_t port = 0;
  };
  struct range_entry {
    cidr_range range;
    std::uint64_t first_offset = 0;  // 1 for IPv4 ranges shorter than /31 (the network address is skipped)
    std::uint64_t addresses = 0;     // probed addresses (IPv4 < /31: without network and broadcast)
  };

  // Any list of targets (tests, a caller's own list), probed as given.
  static discovery_plan from_targets(std::vector<probe_target> targets);

  std::uint64_t size() const { return total_; }
  bool empty() const { return total_ == 0; }
  // index < size(); out of range is a bug (std::out_of_range).
  probe_target at(std::uint64_t index) const;

  const std::vector<endpoint_entry>& endpoints() const { return endpoints_; }
  const std::vector<range_entry>& ranges() const { return ranges_; }
  const std::vector<std::uint16_t>& ports() const { return ports_; }
  const std::vector<std::string>& sni_names() const { return sni_; }
  const std::vector<probe_target>& listed_targets() const { return explicit_; }  // from_targets only

 private:
  friend result<discovery_plan> parse_discovery_spec(const std::vector<std::string>&, const std::vector<std::string>&,
                                                     const std::vector<std::int64_t>&, const std::vector<std::string>&,
                                                     std::uint64_t);
  void finish();  // computes range_starts_ and total_

  std::vector<endpoint_entry> endpoints_;
  std::vector<range_entry> ranges_;
  std::vector<std::uint64_t> range_starts_;  // base index of each range's first target (prefix sums)
  std::vector<std::uint16_t> ports_;
  std::vector<std::string> sni_;
  std::vector<probe_target> explicit_;       // from_targets only
  std::uint64_t bases_ = 0;                  // targets before SNI multiplication
  std::uint64_t total_ = 0;
};

// The source spec as the API takes it (DESIGN §12). Errors are invalid_argument naming the entry:
//   endpoints[i]  "host:port", "[v6]:port" or "1.2.3.4:443" (the port is required; a name must
//                 be a valid DNS name; no duplicates)
//   cidrs[i]      "10.0.0.0/24", "2001:db8::/120" (host bits zero; a bare address is its /32 or
//                 /128); refused when its addresses × ports, or the running total with the
//                 entries before it, exceed `max_addresses`
//   ports[i]      1-65535, no duplicates; only used with cidrs (an empty list means 443)
//   sni[i]        valid DNS names (no IP literals: RFC 6066), no duplicates; the whole product
//                 (targets × SNI names) is bounded by `max_addresses` too (field "sni")
// At least one endpoint or range is required (field "endpoints").
result<discovery_plan> parse_discovery_spec(const std::vector<std::string>& endpoints, const std::vector<std::string>& cidrs,
                                            const std::vector<std::int64_t>& ports, const std::vector<std::string>& sni,
                                            std::uint64_t max_addresses);

// ---- Egress ---------------------------------------------------------------------------------

// One address against the policy (core's rule: inside a range entry; loopback, link-local and
// "this host" only through an entry inside their special range).
bool egress_allows_address(const egress_policy& policy, const boost::asio::ip::address& a);

// Validation before any packet leaves: every address of every range must be allowed, else the
// whole range is refused (invalid_argument, field "cidrs[i]", naming the first address outside);
// an IP endpoint must be allowed ("endpoints[i]"); a named endpoint passes when a name entry
// allows it, otherwise it is judged after resolution (probe_tls) — unless the policy has no
// range entries at all, when it can never pass and is refused here. Linear in the addresses, which
// parse_discovery_spec bounded. A from_targets plan is checked target by target ("targets[i]").
result<void> check_discovery_egress(const discovery_plan& plan, const egress_policy& policy);

// ---- Findings -------------------------------------------------------------------------------

enum class finding : std::uint8_t {
  expired,
  expiring,
  self_signed,
  name_mismatch,
  incomplete_chain,
  weak_key,
  deprecated_protocol,
};

struct finding_info {
  finding id;
  std::string_view name;      // stable, stored and used in ?finding= filters
  std::string_view severity;  // "critical" or "warning"
  std::string_view text;      // one line for operators
};

// The one table of findings: the API, the UI and the docs read these rows.
inline constexpr std::array<finding_info, 7> finding_table{{
    {finding::expired, "expired", "critical", "The certificate's validity has ended; clients refuse it."},
    {finding::expiring, "expiring", "warning", "The certificate expires within the warning window; renew it."},
    {finding::self_signed, "self_signed", "warning", "The certificate is signed by its own key; no CA vouches for it."},
    {finding::name_mismatch, "name_mismatch", "critical",
     "No subjectAltName matches the name (SNI or host) it was reached by."},
    {finding::incomplete_chain, "incomplete_chain", "warning",
     "The server does not send the intermediates linking its certificate to a root."},
    {finding::weak_key, "weak_key", "warning", "The key is too small (RSA or DSA under 2048 bits, EC under 256)."},
    {finding::deprecated_protocol, "deprecated_protocol", "warning",
     "The server negotiated SSLv3, TLS 1.0 or TLS 1.1 with a client that offers TLS 1.3."},
}};

const finding_info& finding_row(finding f);
// nullptr when `name` is not a finding (for validating filters).
const finding_info* find_finding(std::string_view name);

struct chain_assessment {
  std::string sha256;                  // lower-case hex of the leaf's DER (the discovered certificate's key)
  std::string subject, issuer;         // RFC 2253 text ("CN=www.example.com,O=Example")
  std::vector<std::string> sans;       // DNS names and IP addresses, in certificate order
  std::int64_t not_before_ms = 0, not_after_ms = 0;  // unix ms
  std::string key_type;                // "rsa", "ec", "ed25519", "ed448", "dsa" or "unknown"
  int key_bits = 0;
  std::vector<std::string> findings;   // names from finding_table, in table order
  std::size_t chain_length = 0;        // certificates sent, leaf included

  bool has(finding f) const;
};

// `chain_der`: the certificates as sent, leaf first. `expected_name`: a DNS name or an IP
// literal (brackets allowed); empty skips the name check. `negotiated_protocol`: SSL_get_version
// text ("TLSv1.2"); empty skips the protocol check. Rules:
//   expired            not_after < now
//   expiring           not expired and not_after <= now + expiring_days
//   self_signed        the leaf's issuer is its subject and its own key verifies its signature
//   name_mismatch      SANs only (no CN fallback), wildcards in the left-most label only and
//                      never across labels; an IP name matches IP SANs
//   incomplete_chain   starting at the leaf, each certificate's issuer is looked for among the
//                      certificates sent (name and signature), the walk ending well at a
//                      self-signed certificate or at one whose issuer is in the system trust
//                      store (default paths); anything else is incomplete. A private root sent
//                      in full therefore counts as complete: this finding is about what the
//                      server sends, not about trust (which discovery does not judge).
//   weak_key           RSA/DSA < 2048 bits, EC < 256 bits
//   deprecated_protocol SSLv3, TLSv1 (1.0), TLSv1.1
// An empty chain or a certificate that is not DER is invalid_argument with field "chain[i]".
result<chain_assessment> assess_chain(const std::vector<std::string>& chain_der, std::string_view expected_name,
                                      std::string_view negotiated_protocol, std::int64_t now_ms, int expiring_days);

// ---- Probing --------------------------------------------------------------------------------

enum class probe_failure : std::uint8_t {
  none = 0,
  refused,      // nothing listens (connection refused on every address)
  timeout,      // the deadline passed: a filtered port, or a peer that stalls the handshake
  tls_error,    // something answered but the TLS handshake failed (OpenSSL's reason in `error`)
  unreachable,  // the name does not resolve, or no route to the host/network
  not_allowed,  // the egress allow-list refuses what the name resolved to
  skipped,      // never probed: the scan was stopped first (scan_all only; probe_tls never says it)
};
// Stable names: "none", "refused", "timeout", "tls_error", "unreachable", "not_allowed", "skipped".
const char* probe_failure_name(probe_failure f) noexcept;

struct probe_outcome {
  probe_failure failure = probe_failure::none;
  std::string error;                    // for operators; empty on success
  std::string address;                  // the address connected to (or last tried), "" before that
  std::vector<std::string> chain_der;   // as sent, leaf first (SSL_get_peer_cert_chain)
  std::string protocol;                 // "TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1"
  std::string cipher;                   // OpenSSL's name ("TLS_AES_256_GCM_SHA384")
  std::int64_t connect_ms = 0;
  std::int64_t handshake_ms = 0;

  bool ok() const { return failure == probe_failure::none; }
};

// One TLS handshake, peer NOT verified (we inventory whatever is there), the full chain kept.
// The client offers TLS 1.0 to 1.3 and every cipher, so deprecated servers are seen rather than
// refused. `timeout` covers resolution, connect and handshake together. `egress`: nullptr means
// no check (the caller vouches); otherwise a name's resolved addresses are checked by the
// policy's rule and only those are connected to. `pool`: the resolver's thread pool (nullptr:
// the resolver's own small pool); unused for IP targets.
boost::asio::awaitable<probe_outcome> probe_tls(probe_target target, std::chrono::milliseconds timeout,
                                                const egress_policy* egress, boost::asio::thread_pool* pool);

struct scan_options {
  std::size_t concurrency = 16;  // handshakes in flight at most (0 counts as 1)
  std::chrono::milliseconds per_endpoint_timeout{5000};
  const egress_policy* egress = nullptr;         // as in probe_tls
  boost::asio::thread_pool* resolve_pool = nullptr;
  // Polled before each new probe: once true, no further target is started (those in flight
  // finish). For job cancellation and lost leases.
  std::function<bool()> stop_requested;
};

struct scan_counts {
  std::uint64_t total = 0;  // targets in the plan
  std::uint64_t ok = 0, refused = 0, timeout = 0, tls_error = 0, unreachable = 0, not_allowed = 0;
  std::uint64_t skipped = 0;  // never started because of stop_requested
  std::uint64_t failed() const { return refused + timeout + tls_error + unreachable + not_allowed; }
};

// Called once per finished target, in completion order (index = the target's index in the
// plan), on the scan's strand: two calls never run at the same time, though one may start while
// another is suspended in a co_await. Awaited before that worker takes its next target, so a slow
// consumer (a store write) slows the scan instead of piling results up in memory.
using scan_callback = std::function<boost::asio::awaitable<void>(std::uint64_t index, const probe_target& target,
                                                                 probe_outcome outcome)>;

// Probes every target of the plan with at most `concurrency` handshakes in flight: that many
// coroutines on the caller's executor (one strand), no thread per endpoint. Memory stays
// proportional to `concurrency`, not to the plan.
boost::asio::awaitable<scan_counts> scan(const discovery_plan& plan, scan_options options, scan_callback on_result);

struct scan_report {
  std::vector<probe_outcome> results;  // in target order
  scan_counts counts;
};
// The same, collecting every outcome; for small plans.
boost::asio::awaitable<scan_report> scan_all(const discovery_plan& plan, scan_options options);

}  // namespace certfleet::net
