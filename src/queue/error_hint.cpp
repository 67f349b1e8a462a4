#include "certfleet/queue/error_hint.hpp"

#include <array>
#include <cctype>

namespace certfleet::queue {

namespace {

struct row {
  error_hint hint;
  std::string_view only_type;  // empty: any job type
  std::array<std::string_view, 6> words;  // any one of them, lowercase; empty ones unused
};

// The words come from our own error texts (delivery's classifier, the SSH session, the engine) and
// the system's (getaddrinfo, errno). More specific rows first: a host-key refusal also says "ssh".
constexpr std::array<row, 24> rows{{
    // AD CS (DESIGN §13): the msca jobs tag their errors with the failure's class
    // ("AD CS [msca_auth]: …", msca/protocol.hpp's failure_class_name).
    {{"msca_auth",
      "The AD CS enrollment services did not accept the CA's credentials: a wrong or expired password, a locked "
      "account, or a client certificate they do not trust or that has expired. Check the account in Active Directory, "
      "then create the CA again with the right credentials (docs/msca.md, Authentication)."},
     "", {"[msca_auth]", "", "", "", "", ""}},
    {{"msca_template_not_allowed",
      "The CA's account may not enroll for this certificate template, or the CA does not issue it. In the Certificate "
      "Templates console give the account Read and Enroll on the template and publish it on the CA; then GET "
      "…/msca-cas/{id}/templates?refresh=1 and enroll again (docs/msca.md, Templates)."},
     "", {"[msca_template_not_allowed]", "", "", "", "", ""}},
    {{"msca_denied",
      "The CA denied the request: its policy module refused it, or a certificate manager denied it. The error carries "
      "the CA's own message and HRESULT; read the request in the Certification Authority console (Failed Requests) "
      "before enrolling again (docs/msca.md, Denied requests)."},
     "", {"[msca_denied]", "", "", "", "", ""}},
    {{"msca_pending",
      "The request waited for a certificate manager longer than msca_poll_give_up_h and was given up. Approve it in the "
      "Certification Authority console (Pending Requests) and enroll again, or raise msca_poll_give_up_h "
      "(docs/msca.md, Pending approval)."},
     "", {"[msca_pending]", "", "", "", "", ""}},
    {{"msca_ca_unavailable",
      "The CA or its enrollment web service could not be reached or answered that the CA is down (RPC server "
      "unavailable). The job retries; check that the CA service runs and that the CES host reaches it "
      "(docs/msca.md, CA unavailable)."},
     "", {"[msca_ca_unavailable]", "", "", "", "", ""}},
    {{"msca_bad_request",
      "The CA refused the request's content: the subject, a DNS name, the key size or the template's rules. Check the "
      "enrollment's subject and sans against the template (docs/msca.md, Bad requests) and enroll again."},
     "", {"[msca_bad_request]", "", "", "", "", ""}},
    {{"host_key",
      "The server's SSH host key is not the one pinned on the target. If the host was reinstalled on purpose, scan its "
      "key again (POST …/targets/{id}/scan-host-key) and compare the fingerprint out of band; otherwise treat it as a "
      "possible interception and do not re-pin."},
     "", {"host key", "host_key"}},
    // The lifecycle jobs' own refusals, before the generic DNS and CA rows that their texts may
    // also match.
    {{"revoke_not_acme",
      "Only a certificate certfleet obtained through ACME (source acme) and issued at least once can be revoked here. "
      "Revoke an uploaded certificate with the CA that issued it, then upload its replacement (POST "
      "…/certificates/{id}/versions)."},
     "revoke_certificate", {"not obtained from an acme ca", "no issued version to revoke", "", "", "", ""}},
    {{"revoke_version_moved",
      "A renewal stored a newer version after the revocation was asked, and nothing was revoked: the revocation acts "
      "on the version that was current when it was asked. If the newer version must be revoked too, ask again "
      "(POST …/certificates/{id}/revoke)."},
     "revoke_certificate", {"this revocation was asked for", "", "", "", "", ""}},
    {{"dns_cleanup",
      "A challenge TXT record a certificate workflow put into DNS could not be removed; the error names each record, its "
      "zone and the DNS server's answer. Fix what the answer says (the provider's server, TSIG key or zone ACL), then "
      "retry this job; or delete the record by hand with nsupdate (docs/acme.md, Cleaning up DNS records)."},
     "cleanup_dns", {"not removed", "", "", "", "", ""}},
    // The manual DNS path, before the provider row (its errors name the _acme-challenge record).
    {{"manual_dns",
      "A manual DNS provider's record is not in place yet, or its order can no longer be validated. Create each TXT "
      "record exactly as the error (and the job's Manual DNS Challenges panel) shows it, wait until the provider "
      "serves it, then press Validate DNS on the job (POST …/jobs/{id}/validate-dns). If the CA refused the order, "
      "renew the certificate to get a new one (docs/acme.md, The manual path)."},
     "", {"dns (manual)", "no manual dns order", "cannot be validated any more", "", "", ""}},
    // The checks (DESIGN §12), before the generic network rows their texts may also match.
    {{"revocation_check",
      "No CRL or OCSP responder named by these certificates gave an answer that could be trusted; the log names each "
      "URL and why (refused, timeout, bad signature, stale). The certificates stay active: this is a warning, not a "
      "revocation. Check that check_allow_list admits the CA's CRL host and that the worker reaches it "
      "(docs/checks.md, Revocation)."},
     "revocation_check", {"revocation could not be checked", "", "", "", "", ""}},
    {{"domain_check",
      "No registry answered for these domains: RDAP and WHOIS both failed; the log names each domain and why. Check "
      "check_allow_list, domain_whois_server and, for a TLD missing from IANA's bootstrap file, rdap_bootstrap_file "
      "(docs/checks.md, Domains)."},
     "domain_expiration_check", {"no registry answered", "could not be looked up", "", "", "", ""}},
    {{"discovery",
      "No endpoint of the discovery source completed a TLS handshake; the log names each endpoint and why (refused: "
      "nothing listens; timeout: filtered or stalled; not_allowed: outside discovery_allow_list). Check the ports, "
      "discovery_allow_list and discovery_endpoint_timeout_ms (docs/discovery.md)."},
     "discovery_execute", {"no endpoint of source", "outside discovery_allow_list", "discovery_allow_list decides", "", "", ""}},
    // DNS-01 before "dns" and "timeout": a provider's server that refuses or never shows the
    // record is a provider setting to fix, not a resolver problem.
    {{"dns_provider",
      "The DNS-01 step failed at the DNS provider's server; the error names the server, the zone and what it answered. "
      "Check the provider's server address, zone and TSIG key (name, hmac-sha256, secret) against the DNS server's "
      "configuration, and that its authoritative servers are reachable from this worker. An exec provider: the job log "
      "shows its program's output tail; run the program by hand as certfleet's user with the same arguments "
      "(docs/acme-dns.md)."},
     "", {"tsig", "(notauth)", "(notzone)", "_acme-challenge", "dns provider", ""}},
    {{"acme_ca",
      "The certificate authority refused the request; its problem type and detail are in the error. rateLimited: wait "
      "for the time it names; unauthorized or incorrectResponse: the CA did not see the challenge record; caa: a CAA "
      "record forbids this CA; externalAccountRequired: the account needs its EAB key (docs/acme-client.md)."},
     "", {"urn:ietf:params:acme:error", "acme problem", "", "", "", ""}},
    {{"dns",
      "The host name did not resolve. Check the target's host for typos and that this worker's resolver can resolve it "
      "(getent hosts HOST on the worker host)."},
     "", {"name or service not known", "could not resolve", "host not found", "getaddrinfo", "resolve", "nxdomain"}},
    {{"egress_refused",
      "The destination is outside its allow-list in Settings: ssh_allow_list (SSH targets), egress_allow_list "
      "(webhooks, notifications), acme_allow_list (ACME CAs and DNS-01 servers). Add its address or name there if "
      "it is meant to be reached; loopback and link-local addresses must be listed by address."},
     "", {"allow-list", "allow list", "allow_list"}},
    {{"credentials",
      "The server refused the credentials. Check the credential's user name and key, and that its public key is in "
      "~/.ssh/authorized_keys of that user on the host."},
     "", {"authentication", "auth failed", "publickey", "permission denied (", "credential", "[auth]"}},
    {{"ssh_unreachable",
      "The worker could not open a TCP connection to the host: check the host and port, that sshd runs there, and that "
      "firewalls between this worker and the host let the port through (nc -vz HOST PORT from the worker host)."},
     "", {"connection refused", "no route to host", "network is unreachable", "connection reset", "econnrefused",
      "ehostunreach"}},
    {{"timeout",
      "A step did not finish within its deadline: the host or the network is slow or a firewall drops packets silently. "
      "Check the host's load and the path to it; the job's log says which step timed out."},
     "", {"timed out", "timeout", "deadline", "", "", ""}},
    {{"lease_lost",
      "The worker that ran this job stopped heartbeating (it was stopped, killed or stalled) and lost the job's lease; "
      "another worker takes the job over on its next attempt."},
     "", {"lease", "worker_lost", "", "", "", ""}},
    {{"remote_permission",
      "The remote user may not write the certificate paths or run the post command. Check the paths' owners and modes "
      "on the host, and the sudo rules of the post command."},
     "", {"permission denied", "eacces", "read-only file system", "", "", ""}},
    {{"on_purpose", "This noop job fails on purpose (its payload's fail_times): nothing is wrong."},
     "noop", {"failing on purpose", "", "", "", "", ""}},
}};

bool contains_lower(std::string_view text, std::string_view word) noexcept {
  if (word.empty() || word.size() > text.size()) return false;
  for (std::size_t i = 0; i + word.size() <= text.size(); ++i) {
    std::size_t k = 0;
    while (k < word.size() && std::tolower(static_cast<unsigned char>(text[i + k])) == word[k]) ++k;
    if (k == word.size()) return true;
  }
  return false;
}

constexpr auto hints = [] {
  std::array<error_hint, rows.size()> out{};
  for (std::size_t i = 0; i < rows.size(); ++i) out[i] = rows[i].hint;
  return out;
}();

}  // namespace

std::span<const error_hint> all_error_hints() noexcept { return hints; }

std::optional<error_hint> hint_for(std::string_view job_type, std::string_view error) noexcept {
  if (error.empty()) return std::nullopt;
  // Long texts are cut: a hint needs the first words, and the scan stays cheap on a list page.
  if (error.size() > 2000) error = error.substr(0, 2000);
  for (const auto& r : rows) {
    if (!r.only_type.empty() && r.only_type != job_type) continue;
    for (auto w : r.words)
      if (contains_lower(error, w)) return r.hint;
  }
  return std::nullopt;
}

std::optional<error_hint> hint_of_class(std::string_view error_class) noexcept {
  if (error_class.empty()) return std::nullopt;
  for (const auto& r : rows)
    if (r.hint.error_class == error_class) return r.hint;
  return std::nullopt;
}

std::optional<error_hint> hint_of_job(std::string_view job_type, std::string_view error_class,
                                      std::string_view error_code, std::string_view error) noexcept {
  if (!error_class.empty()) {
    if (auto h = hint_of_class(error_class)) return h;
    return error_hint{error_class, {}};
  }
  if (!error_code.empty()) return std::nullopt;  // classified when stored: no row fits
  return hint_for(job_type, error);
}

}  // namespace certfleet::queue
