#pragma once
// The JSON documents and headers an ACME server answers with (RFC 8555 §7.1, RFC 7807 problems,
// RFC 9773 renewal information lives in renewal_info.hpp), parsed into plain structs. Pure: no
// I/O, no clock. Every parser of a CA's answer names the bad field ("order.status",
// "authorization.challenges[1].url"); members this client does not use are ignored, as RFC 8555
// asks of clients (servers may add fields).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/core/time_text.hpp"  // parse_retry_after, parse_rfc3339: the client reads both

namespace certfleet::acme {

// The largest ACME JSON document this client reads (directories, orders with 100 names and
// their authorization URLs are a few KiB).
inline constexpr std::size_t max_document_bytes = 256 * 1024;

struct identifier {
  std::string type;   // "dns" (or "ip", which this client never asks for)
  std::string value;  // "example.com", "*.example.com" in an order; authorizations drop the "*."
};

// ---- problems (RFC 8555 §6.7, RFC 7807) -------------------------------------------------------

inline constexpr std::string_view acme_error_prefix = "urn:ietf:params:acme:error:";

struct problem {
  std::string type;    // as sent: "urn:ietf:params:acme:error:rateLimited", or another URI
  std::string detail;  // as sent (may be empty)
  int status = 0;      // the document's "status" member (0: absent)
  std::optional<identifier> ident;  // on a subproblem: the identifier it is about
  std::vector<problem> subproblems;  // one level (a subproblem's own subproblems are ignored)

  // "rateLimited" for an ACME URN, else the type as sent ("" when the CA sent no type: RFC 7807
  // reads that as "about:blank").
  std::string_view acme_type() const;
  // The CA's words, verbatim, on one line: "<type>: <detail>" then, for each subproblem,
  // "; <identifier type> <value>: <type>: <detail>". What the job error and the log show.
  std::string text() const;
};

// A problem document. Errors name "problem.<member>".
result<problem> parse_problem(std::string_view json);

// What a job does with a failure: permanent ones end it at once (a retry would get the same
// answer), transient ones are retried with backoff (after retry_after when the CA gave one).
enum class failure_class { permanent, transient };
std::string_view failure_class_name(failure_class c) noexcept;  // "permanent" | "transient"

// By the problem's type. Permanent: rejectedIdentifier, unauthorized, malformed, badCSR,
// externalAccountRequired, unsupportedIdentifier, caa, accountDoesNotExist, badPublicKey,
// badSignatureAlgorithm, badRevocationReason, alreadyRevoked, invalidContact,
// unsupportedContact, userActionRequired, orderNotReady, the validation failures (dns,
// connection, incorrectResponse, tls) and any non-ACME type with a 4xx status. Transient:
// rateLimited, serverInternal, badNonce (once the client's retries are spent), and an unknown
// type with a 5xx status or none. `compound` is permanent when any subproblem is, else transient.
failure_class classify_problem(const problem& p) noexcept;

// ---- the directory (§7.1.1) ------------------------------------------------------------------

struct directory_profile {
  std::string name;
  std::string description;  // the CA's words (may be a URL)
};

struct directory {
  std::string new_nonce, new_account, new_order, revoke_cert;  // required
  std::string key_change;    // "" when absent
  std::string new_authz;     // "" when absent (pre-authorization)
  std::string renewal_info;  // RFC 9773; "" when the CA offers no ACME Renewal Information
  struct meta_t {
    std::string terms_of_service;  // URL; "" when absent
    std::string website;
    std::vector<std::string> caa_identities;
    bool external_account_required = false;
    std::vector<directory_profile> profiles;  // draft-ietf-acme-profiles: name → description
  } meta;
};

// Requires newNonce, newAccount, newOrder, revokeCert as absolute http(s) URLs; errors name
// "directory.<member>". A document that is not a JSON object at all says so ("directory: …
// is not JSON"), so an operator who typed a web page's URL sees why.
result<directory> parse_directory(std::string_view json);

// ---- accounts (§7.1.2) -----------------------------------------------------------------------

struct account {
  std::string status;  // "valid" | "deactivated" | "revoked"
  std::vector<std::string> contact;
  std::string orders;  // URL, "" when absent
};
result<account> parse_account(std::string_view json);

// ---- orders (§7.1.3) -------------------------------------------------------------------------

enum class order_status { pending, ready, processing, valid, invalid };
std::string_view order_status_name(order_status s) noexcept;

struct order {
  order_status status = order_status::pending;
  std::string expires;  // RFC 3339 as sent; "" when absent
  std::vector<identifier> identifiers;
  std::vector<std::string> authorizations;  // URLs
  std::string finalize;                      // URL
  std::string certificate;                   // URL, once valid
  std::optional<problem> error;              // why it went invalid
  std::string replaces;                      // RFC 9773 certID, when the order names one
  std::string profile;
};
// Requires status, identifiers, authorizations (may be empty once valid), finalize; a valid
// order must name its certificate. Errors name "order.<member>".
result<order> parse_order(std::string_view json);

// ---- authorizations and challenges (§7.1.4, §8) ----------------------------------------------

enum class authorization_status { pending, valid, invalid, deactivated, expired, revoked };
std::string_view authorization_status_name(authorization_status s) noexcept;

enum class challenge_status { pending, processing, valid, invalid };
std::string_view challenge_status_name(challenge_status s) noexcept;

struct challenge {
  std::string type;  // "dns-01", "http-01", …
  std::string url;
  challenge_status status = challenge_status::pending;
  std::string token;  // base64url, ≥ 128 bits (checked for the types this client answers)
  std::string validated;
  std::optional<problem> error;
};
result<challenge> parse_challenge(std::string_view json);

struct authorization {
  identifier ident;
  authorization_status status = authorization_status::pending;
  std::string expires;
  std::vector<challenge> challenges;
  bool wildcard = false;

  // The first challenge of that type, or nullptr.
  const challenge* find(std::string_view type) const;
};
// Errors name "authorization.<member>" ("authorization.challenges[2].token").
result<authorization> parse_authorization(std::string_view json);

// ---- requests ------------------------------------------------------------------------------

// The revokeCert payload (RFC 8555 §7.6): {"certificate": base64url(DER)[, "reason": code]}.
// Errors (invalid_argument): an empty certificate ("certificate"), a reason that is not an
// RFC 5280 code in use, 0-10 without 7 ("reason").
result<std::string> revoke_cert_payload(std::string_view cert_der, std::optional<int> reason);

// ---- headers of an answer ------------------------------------------------------------------

// The targets of Link header values with the given rel (RFC 8288), e.g. rel="alternate" chains
// or rel="up" issuer URLs; relative references are returned as written.
std::vector<std::string> link_targets(const std::vector<std::string>& link_values, std::string_view rel);

}  // namespace certfleet::acme
