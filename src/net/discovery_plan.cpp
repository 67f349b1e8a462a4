// Discovery (tls_probe.hpp), the pure half: the source spec and its plan, its egress check, and
// what is wrong with a chain (the findings). tls_probe.cpp does the probing.
#include "certfleet/net/tls_probe.hpp"

#include "net/ip_text.hpp"
#include "core/openssl_ptr.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/tcp.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>

#include "certfleet/net/x509.hpp"

namespace certfleet::net {

namespace asio = boost::asio;
namespace ip = asio::ip;
using detail::parse_ip;

namespace {

constexpr std::size_t max_entry = 300;  // longer than any host:port or CIDR text

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

// An entry quoted back in an error: printable ASCII only, cut short.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 80) out += "...";
  return out + "\"";
}

std::string field_at(const char* list, std::size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

error bad(const std::string& field, std::string message) {
  return make_error(errc::invalid_argument, std::move(message), field);
}


std::optional<std::uint16_t> parse_port_text(std::string_view s) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  unsigned long n = std::stoul(std::string(s));
  if (n < 1 || n > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(n);
}

// A DNS name as a target or SNI: lower-case, a trailing dot dropped; nullopt when not valid.
std::optional<std::string> dns_name(std::string_view s) {
  std::string n = lower(s);
  if (!n.empty() && n.back() == '.') n.pop_back();
  if (!valid_dns_name(n)) return std::nullopt;
  return n;
}

result<discovery_plan::endpoint_entry> parse_endpoint(std::string_view text, const std::string& field) {
  if (text.empty()) return bad(field, field + " is empty");
  if (text.size() > max_entry) return bad(field, field + " is longer than " + std::to_string(max_entry) + " characters");
  std::string_view host, port;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return bad(field, field + " " + quote(text) + " has an unterminated [IPv6] address");
    host = text.substr(1, close - 1);
    auto after = text.substr(close + 1);
    if (after.empty() || after.front() != ':') return bad(field, field + " " + quote(text) + " must be [address]:port");
    port = after.substr(1);
    auto a = parse_ip(host);
    if (!a) return bad(field, field + " " + quote(text) + " does not hold a valid IPv6 address in brackets");
    host = {};  // replaced below by the canonical text
    auto p = parse_port_text(port);
    if (!p) return bad(field, field + " " + quote(text) + ": port must be 1-65535");
    return discovery_plan::endpoint_entry{a->to_string(), *p};
  }
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad(field, field + " " + quote(text) + " must be host:port (the port is required)");
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  if (host.find(':') != std::string_view::npos)
    return bad(field, field + " " + quote(text) + ": write an IPv6 address in brackets, as [2001:db8::1]:443");
  auto p = parse_port_text(port);
  if (!p) return bad(field, field + " " + quote(text) + ": port must be 1-65535");
  if (auto a = parse_ip(host)) return discovery_plan::endpoint_entry{a->to_string(), *p};
  auto name = dns_name(host);
  if (!name) return bad(field, field + " " + quote(text) + ": not a valid host name or IPv4 address");
  return discovery_plan::endpoint_entry{*name, *p};
}

result<cidr_range> parse_cidr(std::string_view text, const std::string& field) {
  if (text.empty()) return bad(field, field + " is empty");
  if (text.size() > max_entry) return bad(field, field + " is longer than " + std::to_string(max_entry) + " characters");
  // Core's allow-list grammar reads one CIDR entry exactly as the egress setting does; a list
  // separator here would make it read several.
  if (text.find_first_of(", \t\r\n") != std::string_view::npos)
    return bad(field, field + " " + quote(text) + " must be one CIDR range (no spaces or commas)");
  auto parsed = parse_egress_allow_list(text, field);
  if (!parsed) return std::move(parsed).error();
  if (parsed->ranges.size() != 1 || !parsed->names.empty() || !parsed->suffixes.empty())
    return bad(field, field + " " + quote(text) + " is not a CIDR range (10.0.0.0/24 or 2001:db8::/120)");
  return parsed->ranges.front();
}

ip::address address_of(const cidr_range& r) {
  if (!r.v6) return ip::address_v4(ip::address_v4::bytes_type{r.bytes[0], r.bytes[1], r.bytes[2], r.bytes[3]});
  ip::address_v6::bytes_type b;
  std::copy(r.bytes.begin(), r.bytes.end(), b.begin());
  return ip::address_v6(b);
}

// The network address plus `offset` (within the range, so no carry leaves it).
ip::address address_at(const cidr_range& r, std::uint64_t offset) {
  cidr_range a = r;
  const std::size_t last = r.v6 ? 15 : 3;
  std::uint64_t carry = offset;
  for (std::size_t i = last + 1; i-- > 0 && carry != 0;) {
    std::uint64_t sum = a.bytes[i] + (carry & 0xff);
    a.bytes[i] = static_cast<std::uint8_t>(sum & 0xff);
    carry = (carry >> 8) + (sum >> 8);
  }
  return address_of(a);
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::numeric_limits<std::uint64_t>::max();
  return a * b;
}

}  // namespace

namespace detail {

std::optional<ip::address> parse_ip(std::string_view s) {
  if (s.empty() || s.size() > 64 || s.find('%') != std::string_view::npos) return std::nullopt;  // no scope ids
  boost::system::error_code ec;
  auto a = ip::make_address(std::string(s), ec);
  if (ec) return std::nullopt;
  // ::ffff:10.0.0.1 is the IPv4 host: one spelling for duplicates and the allow-list.
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::address(ip::make_address_v4(ip::v4_mapped, a.to_v6()));
  return a;
}

}  // namespace detail

// ---- Targets --------------------------------------------------------------------------------

bool probe_target::host_is_ip() const { return parse_ip(host).has_value(); }

std::string probe_target::endpoint_text() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

discovery_plan discovery_plan::from_targets(std::vector<probe_target> targets) {
  discovery_plan p;
  p.explicit_ = std::move(targets);
  p.bases_ = p.total_ = p.explicit_.size();
  return p;
}

void discovery_plan::finish() {
  std::uint64_t base = endpoints_.size();
  range_starts_.clear();
  for (const auto& r : ranges_) {
    range_starts_.push_back(base);
    base += r.addresses * ports_.size();  // bounded by parse_discovery_spec
  }
  bases_ = base;
  total_ = bases_ * std::max<std::uint64_t>(1, sni_.size());
}

probe_target discovery_plan::at(std::uint64_t index) const {
  if (index >= total_) throw std::out_of_range("discovery_plan::at: index past the end");
  if (!explicit_.empty()) return explicit_[index];
  const std::uint64_t sni_count = std::max<std::uint64_t>(1, sni_.size());
  const std::uint64_t base = index / sni_count;
  probe_target t;
  if (base < endpoints_.size()) {
    t.host = endpoints_[base].host;
    t.port = endpoints_[base].port;
    // Without listed names a named endpoint is asked for itself, as a browser would.
    if (sni_.empty()) {
      if (!t.host_is_ip()) t.sni = t.host;
    } else {
      t.sni = sni_[index % sni_count];
    }
    return t;
  }
  auto it = std::upper_bound(range_starts_.begin(), range_starts_.end(), base);
  const std::size_t r = static_cast<std::size_t>(it - range_starts_.begin()) - 1;
  const std::uint64_t within = base - range_starts_[r];
  const auto& entry = ranges_[r];
  t.host = address_at(entry.range, entry.first_offset + within / ports_.size()).to_string();
  t.port = ports_[within % ports_.size()];
  if (!sni_.empty()) t.sni = sni_[index % sni_count];
  return t;
}

result<discovery_plan> parse_discovery_spec(const std::vector<std::string>& endpoints, const std::vector<std::string>& cidrs,
                                            const std::vector<std::int64_t>& ports, const std::vector<std::string>& sni,
                                            std::uint64_t max_addresses) {
  discovery_plan plan;
  if (endpoints.empty() && cidrs.empty())
    return bad("endpoints", "a discovery source needs endpoints (host:port) or cidrs (ranges to scan)");
  if (endpoints.size() > max_addresses)
    return bad("endpoints", "more than " + std::to_string(max_addresses) + " endpoints");

  std::set<std::string> seen;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    auto field = field_at("endpoints", i);
    auto e = parse_endpoint(endpoints[i], field);
    if (!e) return std::move(e).error();
    probe_target t{e->host, e->port, {}};
    if (!seen.insert(t.endpoint_text()).second) return bad(field, field + " " + quote(endpoints[i]) + " is listed twice");
    plan.endpoints_.push_back(std::move(*e));
  }

  for (std::size_t i = 0; i < ports.size(); ++i) {
    auto field = field_at("ports", i);
    if (ports[i] < 1 || ports[i] > 65535) return bad(field, field + " must be 1-65535");
    auto p = static_cast<std::uint16_t>(ports[i]);
    if (std::find(plan.ports_.begin(), plan.ports_.end(), p) != plan.ports_.end())
      return bad(field, field + " repeats port " + std::to_string(p));
    plan.ports_.push_back(p);
  }
  if (plan.ports_.empty()) plan.ports_.push_back(443);

  std::uint64_t bases = plan.endpoints_.size();
  for (std::size_t i = 0; i < cidrs.size(); ++i) {
    auto field = field_at("cidrs", i);
    auto r = parse_cidr(cidrs[i], field);
    if (!r) return std::move(r).error();
    discovery_plan::range_entry entry{*r, 0, 0};
    const unsigned width = r->v6 ? 128 : 32;
    const unsigned host_bits = width - r->prefix;
    entry.addresses = host_bits >= 64 ? std::numeric_limits<std::uint64_t>::max() : std::uint64_t{1} << host_bits;
    // An IPv4 subnet's network and broadcast addresses are no host's (RFC 3021 makes /31 two hosts).
    if (!r->v6 && r->prefix < 31) {
      entry.first_offset = 1;
      entry.addresses -= 2;
    }
    const std::uint64_t probes = saturating_mul(entry.addresses, plan.ports_.size());
    if (probes > max_addresses) {
      std::string size = host_bits >= 64 ? "at least 2^64 addresses" : std::to_string(entry.addresses) + " addresses";
      return bad(field, field + " " + quote(cidrs[i]) + " is " + size + " × " + std::to_string(plan.ports_.size()) +
                            " ports, more than the " + std::to_string(max_addresses) + " probes allowed");
    }
    bases += probes;
    if (bases > max_addresses)
      return bad(field, field + " " + quote(cidrs[i]) + " brings the source to more than " + std::to_string(max_addresses) +
                            " probes together with the entries before it");
    plan.ranges_.push_back(entry);
  }

  for (std::size_t i = 0; i < sni.size(); ++i) {
    auto field = field_at("sni", i);
    if (sni[i].size() > max_entry) return bad(field, field + " is longer than " + std::to_string(max_entry) + " characters");
    auto name = dns_name(sni[i]);
    if (!name) return bad(field, field + " " + quote(sni[i]) + " is not a valid DNS name (SNI carries names, not addresses)");
    if (std::find(plan.sni_.begin(), plan.sni_.end(), *name) != plan.sni_.end())
      return bad(field, field + " " + quote(sni[i]) + " is listed twice");
    plan.sni_.push_back(std::move(*name));
  }
  if (saturating_mul(bases, std::max<std::uint64_t>(1, plan.sni_.size())) > max_addresses)
    return bad("sni", "every target is probed once per SNI name: " + std::to_string(bases) + " targets × " +
                          std::to_string(plan.sni_.size()) + " names exceed " + std::to_string(max_addresses) + " probes");
  plan.finish();
  return plan;
}

// ---- Egress ---------------------------------------------------------------------------------

bool egress_allows_address(const egress_policy& policy, const ip::address& a) { return policy.allows_address(a); }

result<void> check_discovery_egress(const discovery_plan& plan, const egress_policy& policy) {
  const auto not_allowed = [](const std::string& field, const std::string& what) {
    // invalid_argument like any other refused field of the source: the operator fixes the spec
    // (or the allow-list), the API answers 400 naming the entry.
    return make_error(errc::invalid_argument, field + " " + what + " is outside egress_allow_list", field);
  };
  for (std::size_t i = 0; i < plan.endpoints().size(); ++i) {
    const auto& e = plan.endpoints()[i];
    auto field = field_at("endpoints", i);
    if (auto a = parse_ip(e.host)) {
      if (!policy.allows_address(*a)) return not_allowed(field, e.host);
    } else if (!policy.allows_name(e.host) && policy.ranges.empty()) {
      // No range entry can ever hold what the name resolves to: refused now, not per scan.
      return not_allowed(field, e.host);
    }
  }
  for (std::size_t i = 0; i < plan.ranges().size(); ++i) {
    const auto& r = plan.ranges()[i];
    // Address by address: core's rule stays the only rule (special addresses included), and the
    // spec parser bounded the count. A range partly outside is refused as a whole.
    for (std::uint64_t k = 0; k < r.addresses; ++k) {
      auto a = address_at(r.range, r.first_offset + k);
      if (!policy.allows_address(a))
        return not_allowed(field_at("cidrs", i), r.range.to_string() + " (" + a.to_string() + " and maybe more)");
    }
  }
  const auto& listed = plan.listed_targets();
  for (std::size_t i = 0; i < listed.size(); ++i)
    if (auto a = parse_ip(listed[i].host); a ? !policy.allows_address(*a) : (!policy.allows_name(listed[i].host) && policy.ranges.empty()))
      return not_allowed(field_at("targets", i), listed[i].host);
  return {};
}

// ---- Findings -------------------------------------------------------------------------------

const finding_info& finding_row(finding f) {
  for (const auto& row : finding_table)
    if (row.id == f) return row;
  throw std::logic_error("finding_row: a finding without a row");  // the table covers the enum
}

const finding_info* find_finding(std::string_view name) {
  for (const auto& row : finding_table)
    if (row.name == name) return &row;
  return nullptr;
}

bool chain_assessment::has(finding f) const {
  return std::find(findings.begin(), findings.end(), finding_row(f).name) != findings.end();
}

namespace {

using x509_ptr = std::unique_ptr<X509, ossl_deleter<X509_free>>;
using bio_ptr = std::unique_ptr<BIO, ossl_deleter<BIO_free>>;
using store_ctx_ptr = std::unique_ptr<X509_STORE_CTX, ossl_deleter<X509_STORE_CTX_free>>;
using names_ptr = std::unique_ptr<GENERAL_NAMES, ossl_deleter<GENERAL_NAMES_free>>;

// OpenSSL's error queue is per thread: whatever a failed parse or verify left there must not
// be read later as the cause of some unrelated failure on this thread.
struct clear_errors_on_exit {
  ~clear_errors_on_exit() { ERR_clear_error(); }
};

std::string name_text(const X509_NAME* name) {
  bio_ptr b(BIO_new(BIO_s_mem()));
  if (!b || X509_NAME_print_ex(b.get(), name, 0, XN_FLAG_RFC2253) < 0) return {};
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

std::optional<std::int64_t> time_ms(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
  using namespace std::chrono;
  const year_month_day day{year{tm.tm_year + 1900}, month{static_cast<unsigned>(tm.tm_mon + 1)},
                           std::chrono::day{static_cast<unsigned>(tm.tm_mday)}};
  if (!day.ok()) return std::nullopt;
  const auto secs = sys_days{day}.time_since_epoch() + hours{tm.tm_hour} + minutes{tm.tm_min} + seconds{tm.tm_sec};
  return duration_cast<milliseconds>(secs).count();
}

// Printable ASCII as is, anything else as '?': SAN text ends up in the UI and in logs.
std::string printable(const unsigned char* data, int len) {
  std::string out;
  for (int i = 0; i < len && i < 1024; ++i) out += (data[i] >= 0x20 && data[i] < 0x7f) ? static_cast<char>(data[i]) : '?';
  return out;
}

std::vector<std::string> san_list(X509* cert) {
  std::vector<std::string> out;
  names_ptr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      out.push_back(printable(ASN1_STRING_get0_data(g->d.dNSName), ASN1_STRING_length(g->d.dNSName)));
    } else if (g->type == GEN_IPADD) {
      const unsigned char* b = ASN1_STRING_get0_data(g->d.iPAddress);
      int n = ASN1_STRING_length(g->d.iPAddress);
      if (n == 4) {
        out.push_back(ip::address_v4(ip::address_v4::bytes_type{b[0], b[1], b[2], b[3]}).to_string());
      } else if (n == 16) {
        ip::address_v6::bytes_type v6;
        std::copy(b, b + 16, v6.begin());
        out.push_back(ip::address_v6(v6).to_string());
      }
    }
  }
  return out;
}

// `parent`'s name and key made `child`: the names chain (X509_check_issued also looks at the key
// identifiers and the issuer's key usage) and the signature verifies.
bool issued_by(X509* child, X509* parent) {
  if (X509_check_issued(parent, child) != X509_V_OK) return false;
  EVP_PKEY* key = X509_get0_pubkey(parent);
  return key && X509_verify(child, key) == 1;
}

bool self_signed(X509* cert) {
  if (X509_NAME_cmp(X509_get_issuer_name(cert), X509_get_subject_name(cert)) != 0) return false;
  EVP_PKEY* key = X509_get0_pubkey(cert);
  return key && X509_verify(cert, key) == 1;
}

// The system trust store, loaded once: reading the default paths costs tens of ms and the set
// does not change while we run. Lookups are locked inside OpenSSL, so threads may share it.
X509_STORE* system_store() {
  static X509_STORE* store = [] {
    X509_STORE* s = X509_STORE_new();
    if (s && X509_STORE_set_default_paths(s) != 1) ERR_clear_error();  // a host without a store trusts nothing
    return s;
  }();
  return store;
}

bool issuer_is_trusted(X509* cert) {
  X509_STORE* store = system_store();
  if (!store) return false;
  store_ctx_ptr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store, cert, nullptr) != 1) return false;
  X509* issuer = nullptr;
  if (X509_STORE_CTX_get1_issuer(&issuer, ctx.get(), cert) != 1 || !issuer) return false;
  x509_ptr owned(issuer);
  EVP_PKEY* key = X509_get0_pubkey(issuer);
  return key && X509_verify(cert, key) == 1;
}

// The rule in the header: walk up from the leaf through what was sent.
bool chain_complete(const std::vector<x509_ptr>& chain) {
  X509* current = chain.front().get();
  // Each step moves to another sent certificate, so a loop in the names ends after size() steps.
  for (std::size_t steps = 0; steps <= chain.size(); ++steps) {
    if (self_signed(current)) return true;
    X509* next = nullptr;
    for (const auto& c : chain)
      if (c.get() != current && issued_by(current, c.get())) {
        next = c.get();
        break;
      }
    if (!next) return issuer_is_trusted(current);
    current = next;
  }
  return false;
}

std::string key_type_of(const EVP_PKEY* key) {
  switch (EVP_PKEY_get_base_id(key)) {
    case EVP_PKEY_RSA:
    case EVP_PKEY_RSA_PSS: return "rsa";
    case EVP_PKEY_EC: return "ec";
    case EVP_PKEY_ED25519: return "ed25519";
    case EVP_PKEY_ED448: return "ed448";
    case EVP_PKEY_DSA: return "dsa";
    default: return "unknown";
  }
}

bool weak(const std::string& type, int bits) {
  if (type == "rsa" || type == "dsa") return bits < 2048;
  if (type == "ec") return bits < 256;
  return false;  // Ed25519/Ed448 have one size; an unknown key is not judged
}

bool deprecated(std::string_view protocol) {
  return protocol == "SSLv2" || protocol == "SSLv3" || protocol == "TLSv1" || protocol == "TLSv1.0" || protocol == "TLSv1.1";
}

bool name_matches(X509* leaf, std::string_view expected) {
  std::string_view name = expected;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  if (auto a = parse_ip(name)) return X509_check_ip_asc(leaf, a->to_string().c_str(), 0) == 1;
  std::string host = lower(name);
  if (!host.empty() && host.back() == '.') host.pop_back();
  // SANs only (CAs have put names there for twenty years; browsers ignore the CN), and a
  // wildcard stands for one whole left-most label.
  const unsigned flags = X509_CHECK_FLAG_NEVER_CHECK_SUBJECT | X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS;
  return X509_check_host(leaf, host.data(), host.size(), flags, nullptr) == 1;
}

}  // namespace

result<chain_assessment> assess_chain(const std::vector<std::string>& chain_der, std::string_view expected_name,
                                      std::string_view negotiated_protocol, std::int64_t now_ms, int expiring_days) {
  clear_errors_on_exit clear;
  if (chain_der.empty()) return bad("chain[0]", "the endpoint sent no certificate");
  std::vector<x509_ptr> chain;
  for (std::size_t i = 0; i < chain_der.size(); ++i) {
    const auto& der = chain_der[i];
    if (der.size() > static_cast<std::size_t>(std::numeric_limits<long>::max()))
      return bad(field_at("chain", i), "certificate is too large");
    const auto* p = reinterpret_cast<const unsigned char*>(der.data());
    x509_ptr cert(d2i_X509(nullptr, &p, static_cast<long>(der.size())));
    if (!cert || p != reinterpret_cast<const unsigned char*>(der.data()) + der.size())
      return bad(field_at("chain", i), field_at("chain", i) + " is not one DER-encoded X.509 certificate");
    chain.push_back(std::move(cert));
  }
  X509* leaf = chain.front().get();

  chain_assessment a;
  a.chain_length = chain.size();
  a.sha256 = fingerprint_sha256(leaf);
  a.subject = name_text(X509_get_subject_name(leaf));
  a.issuer = name_text(X509_get_issuer_name(leaf));
  a.sans = san_list(leaf);
  auto nb = time_ms(X509_get0_notBefore(leaf));
  auto na = time_ms(X509_get0_notAfter(leaf));
  if (!nb || !na) return bad("chain[0]", "the certificate's validity dates do not parse");
  a.not_before_ms = *nb;
  a.not_after_ms = *na;
  if (EVP_PKEY* key = X509_get0_pubkey(leaf)) {
    a.key_type = key_type_of(key);
    a.key_bits = EVP_PKEY_get_bits(key);
  } else {
    a.key_type = "unknown";
  }

  std::set<finding> found;
  if (a.not_after_ms < now_ms) found.insert(finding::expired);
  else if (a.not_after_ms - now_ms <= std::int64_t{std::max(expiring_days, 0)} * 86'400'000) found.insert(finding::expiring);
  if (self_signed(leaf)) found.insert(finding::self_signed);
  if (!expected_name.empty() && !name_matches(leaf, expected_name)) found.insert(finding::name_mismatch);
  if (!chain_complete(chain)) found.insert(finding::incomplete_chain);
  if (weak(a.key_type, a.key_bits)) found.insert(finding::weak_key);
  if (deprecated(negotiated_protocol)) found.insert(finding::deprecated_protocol);
  for (const auto& row : finding_table)
    if (found.count(row.id)) a.findings.emplace_back(row.name);
  return a;
}

}  // namespace certfleet::net
