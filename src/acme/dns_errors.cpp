// The DNS failure table (dns.hpp): each dns_errc's name, whether retrying can help, and what the
// operator should do. docs/acme-dns.md explains each row at length.
#include <array>

#include "certfleet/acme/dns.hpp"

namespace certfleet::acme::dns {

namespace {

struct errc_row {
  dns_errc code;
  std::string_view name;
  bool permanent;
  std::string_view hint;
};

constexpr std::array<errc_row, 12> table{{
    {dns_errc::tsig_rejected, "tsig_rejected", true,
     "make the provider's TSIG key name, algorithm (hmac-sha256) and secret match the DNS server's key, and allow "
     "that key to update the zone (knot: the zone's acl with action update; BIND: update-policy)"},
    {dns_errc::not_authoritative, "not_authoritative", true,
     "point the provider at a server that serves the zone (its primary), or correct the provider's zone"},
    {dns_errc::refused, "refused", true,
     "the server's policy refuses this request: allow updates (or queries) for the zone from certfleet's address"},
    {dns_errc::zone_not_found, "zone_not_found", true,
     "set the provider's zone explicitly, or point it at a server that serves the domain's zone"},
    {dns_errc::name_error, "name_error", true, "check the provider's zone name: the server says it does not exist"},
    {dns_errc::update_failed, "update_failed", true, "the server refused the update's content: read its RCODE in the error"},
    {dns_errc::bad_answer_signature, "bad_answer_signature", true,
     "the answer's TSIG signature does not verify: check the provider's server address (is it the server that holds "
     "the key?) and anything rewriting DNS between certfleet and it"},
    {dns_errc::server_failure, "server_failure", false,
     "the server could not answer (SERVFAIL): check that it has loaded the zone; certfleet retries"},
    {dns_errc::timeout, "timeout", false,
     "check that the DNS server runs and that certfleet can reach its address and port (UDP and TCP); certfleet retries"},
    {dns_errc::network, "network", false,
     "check the server's address: its name must resolve and its port accept TCP; certfleet retries"},
    {dns_errc::malformed_answer, "malformed_answer", false,
     "the answer did not parse or did not match the question: check that the address is a DNS server; certfleet retries"},
    {dns_errc::not_allowed, "not_allowed", true,
     "a system admin lists the server's address in acme_allow_list (loopback, link-local and metadata addresses only "
     "by address, e.g. 127.0.0.1), or the provider names a server the list allows"},
}};

const errc_row* row(dns_errc e) noexcept {
  for (const auto& r : table)
    if (r.code == e) return &r;
  return nullptr;
}

class category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "certfleet.dns"; }
  std::string message(int v) const override {
    const auto* r = row(static_cast<dns_errc>(v));
    return r ? std::string(r->name) : "unknown DNS error";
  }
};

}  // namespace

const std::error_category& dns_category() noexcept {
  static const category_impl instance;
  return instance;
}

std::string_view dns_errc_name(dns_errc e) noexcept {
  const auto* r = row(e);
  return r ? r->name : "unknown";
}

bool dns_errc_permanent(dns_errc e) noexcept {
  const auto* r = row(e);
  return r && r->permanent;
}

std::string_view dns_errc_hint(dns_errc e) noexcept {
  const auto* r = row(e);
  return r ? r->hint : "";
}

std::optional<dns_errc> dns_error_code(const error& e) noexcept {
  if (e.code.category() != dns_category()) return std::nullopt;
  return static_cast<dns_errc>(e.code.value());
}

bool dns_permanent(const error& e) noexcept {
  if (auto c = dns_error_code(e)) return dns_errc_permanent(*c);
  return e.is(errc::invalid_argument);
}

}  // namespace certfleet::acme::dns
