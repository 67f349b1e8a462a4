#pragma once
// The ACME client (RFC 8555, RFC 9773 renewal information): coroutine methods on the caller's
// executor over the delivery module's HTTP client. Every request has a deadline; nonces come
// from newNonce and from every answer's Replay-Nonce; a `badNonce` answer is retried with the
// nonce it carries (bounded); Retry-After is honoured while polling and surfaced on failures;
// a CA's problem document reaches the caller verbatim, in the message AND structured, with the
// class a job acts on (permanent: end now; transient: retry later).
//
// One client per account and job: its methods may be awaited one after another or
// concurrently on ONE executor (the nonce pool is not locked). The protocol logger gets one line
// per step for the job log; no line carries a key, a JWS, an EAB key or a certificate body.
//
// Egress (a directory URL is a project admin's input, and the directory then names every other
// URL): every URL the client follows — directory, newNonce, newAccount, newOrder, order,
// authorization, challenge, finalize, certificate, renewalInfo, revokeCert — must be https and
// pass one egress policy (the system setting acme_allow_list), checked by the HTTP client on the
// resolved addresses before it connects. A directory that names a URL that is not https (or an
// IP literal the policy refuses) is refused when it is read, naming the directory member.
// What a project role then sees of a failure must not tell a closed port from an open one: when
// no ACME answer came (no connection, TLS failure, an untrusted certificate, an HTTP answer that
// is not ACME: a page, JSON that is not the document expected, a status without an ACME problem
// document), `failure::message` is one sentence naming the step and HOST:PORT only, the class is
// always transient, and the cause (`failure::detail`) goes to the server's log alone. An ACME
// problem document (type urn:ietf:params:acme:error:*) is the CA's word and reaches the caller
// verbatim, as before.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "certfleet/acme/documents.hpp"
#include "certfleet/acme/jose.hpp"
#include "certfleet/acme/renewal_info.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/net/egress.hpp"

namespace certfleet::acme {

// What went wrong, for the job's decision and for the operator.
enum class failure_kind {
  // The next three and not_acme are "no ACME answer": uniform message, always transient, the
  // cause in `detail` (see the top of this file).
  network,        // DNS resolution, connection refused/reset, TLS handshake failure
  timeout,        // a request's deadline passed (transient); also a polling deadline
  untrusted,      // the CA's TLS certificate is not trusted: ca_bundle_pem
  ca_problem,     // the CA answered with a problem document: `problem` holds it (class by type)
  not_acme,       // the answer is not the ACME document expected: a wrong directory URL, a proxy's
                  // page, a service that is not a CA
  order_invalid,  // the order or an authorization went invalid: `problem` holds the CA's reason
                  // (permanent: a new order is needed)
  bad_input,      // the caller's arguments: domains, CSR, EAB key, reason (permanent; `field`)
  key_mismatch,   // the CA's certificate is not for our key (permanent; for callers of read_issued_chain)
};
std::string_view failure_kind_name(failure_kind k) noexcept;

struct failure {
  failure_kind kind = failure_kind::network;
  failure_class cls = failure_class::transient;
  // For the job error: which step, against which host, what happened, and the CA's problem
  // verbatim (type, detail, subproblems) when there was one.
  std::string message;
  std::optional<acme::problem> problem;  // the CA's document, as sent
  int http_status = 0;                    // 0: no answer
  std::optional<std::int64_t> retry_after_s;  // the CA's Retry-After, when it sent one
  std::string field;                          // for bad_input: the argument at fault
  // Set when no ACME answer came (see the top of this file): `message` is then the uniform
  // "<step>: no ACME answer from HOST:PORT" (for the directory: "directory_url: could not fetch
  // an ACME directory from HOST:PORT"), and this is the cause (refused, TLS error, "not JSON",
  // HTTP 404 …), for the server's log only (the client logs it there): never show it to a
  // project role.
  std::string detail;

  bool permanent() const { return cls == failure_class::permanent; }
  // As a core error for code that carries certfleet::error, same message: rate_limited (with
  // retry_after_s) for a rateLimited problem, invalid_argument (with the field) for bad_input,
  // conflict for the other permanent failures, timeout for the other transient ones.
  certfleet::error to_error() const;
};

// A value or a failure (core's result<T> carries certfleet::error, which has no room for the
// CA's structured problem).
template <class T>
class [[nodiscard]] outcome {
 public:
  outcome(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  outcome(acme::failure f) : v_(std::in_place_index<1>, std::move(f)) {}
  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const acme::failure& failure() const& { return std::get<1>(v_); }
  acme::failure&& failure() && { return std::get<1>(std::move(v_)); }

 private:
  void check() const {
    if (!has_value()) throw bad_result_access(std::get<1>(v_).to_error());
  }
  std::variant<T, acme::failure> v_;
};

template <>
class [[nodiscard]] outcome<void> {
 public:
  outcome() = default;
  outcome(acme::failure f) : f_(std::move(f)) {}
  bool has_value() const noexcept { return !f_; }
  explicit operator bool() const noexcept { return has_value(); }
  const acme::failure& failure() const& { return *f_; }
  acme::failure&& failure() && { return std::move(*f_); }

 private:
  std::optional<acme::failure> f_;
};

// One protocol line for the job log: level "info" | "warn", the message. Awaited, so a job's
// fenced log append can stop the client when the lease is lost (it throws; the client does not
// catch it).
using protocol_logger = std::function<boost::asio::awaitable<void>(std::string level, std::string message)>;

struct client_options {
  std::string directory_url;
  // Extra trust anchors for the CA's HTTPS (an account's ca_bundle_pem; pebble's test CA). The
  // system store is always used too, and the peer always verified.
  std::string ca_pem;
  // acme_allow_list, parsed. Must outlive the client. nullptr: that setting's default
  // ("0.0.0.0/0, ::/0": public and private destinations, never loopback, link-local,
  // unspecified or cloud metadata addresses), so a caller that forgets it stays safe.
  const net::egress_policy* egress = nullptr;
  boost::asio::thread_pool* resolve_pool = nullptr;  // getaddrinfo (the cpu pool)
  std::chrono::milliseconds request_timeout{30000};  // each HTTP exchange, resolve to last byte
  int bad_nonce_retries = 10;                          // per request, each with the answer's nonce
  protocol_logger log;                                 // optional
};

struct eab_credentials {
  std::string kid;
  std::string hmac_key;  // base64url, as CAs hand it out
};

// The request types of the coroutine methods below have constructors on purpose: GCC 12
// destroys an aggregate temporary passed by value to a coroutine twice (`co_await
// c.new_order({…})` freed a string twice), which a class with a constructor is not.
struct account_request {
  std::vector<std::string> contact;  // "mailto:ops@example.com"
  bool terms_agreed = false;         // required when the directory has meta.termsOfService
  std::optional<eab_credentials> eab;
  // Only look up the account of this key (RFC 8555 §7.3.1); accountDoesNotExist when none.
  bool only_return_existing = false;

  account_request(std::vector<std::string> contact_ = {}, bool terms_agreed_ = false,
                  std::optional<eab_credentials> eab_ = std::nullopt, bool only_return_existing_ = false)
      : contact(std::move(contact_)), terms_agreed(terms_agreed_), eab(std::move(eab_)),
        only_return_existing(only_return_existing_) {}
};

struct account_info {
  std::string url;       // the account URL (Location): the "kid" of later requests
  acme::account account;
  bool created = false;  // 201 (new) vs 200 (this key already had an account)
};

struct order_request {
  std::vector<std::string> domains;  // DNS identifiers, "*.example.com" for a wildcard
  std::string replaces;              // RFC 9773 certID of the certificate this order renews
  std::string profile;               // a name from directory.meta.profiles

  order_request(std::vector<std::string> domains_ = {}, std::string replaces_ = {}, std::string profile_ = {})
      : domains(std::move(domains_)), replaces(std::move(replaces_)), profile(std::move(profile_)) {}
};

struct order_info {
  std::string url;
  acme::order order;
};

struct authorization_info {
  std::string url;
  acme::authorization authorization;
};

struct renewal_info_answer {
  acme::renewal_info info;
  std::optional<std::int64_t> retry_after_s;  // when to ask again (§4.3)
};

class client {
 public:
  // `key` signs every request and must outlive the client.
  client(client_options opts, const account_key& key);
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // The account URL ("kid") for requests that need an account; new_account sets it.
  void set_account_url(std::string url) { account_url_ = std::move(url); }
  const std::string& account_url() const { return account_url_; }

  // GET the directory (once; then cached). An answer that is not an ACME directory is
  // not_acme (uniform message, the cause in detail). Every URL it names must be https (and an
  // IP literal among them pass the egress policy): bad_input naming the member otherwise.
  boost::asio::awaitable<outcome<acme::directory>> get_directory();

  // newAccount (§7.3): terms, contact, EAB. This key's existing account answers 200 with its
  // URL (created false). Sets account_url().
  boost::asio::awaitable<outcome<account_info>> new_account(account_request req);

  // newOrder (§7.4) with dns identifiers, and `replaces` / `profile` when given.
  boost::asio::awaitable<outcome<order_info>> new_order(order_request req);
  boost::asio::awaitable<outcome<order_info>> get_order(std::string url);
  boost::asio::awaitable<outcome<authorization_info>> get_authorization(std::string url);
  // POST {} to a challenge URL (§7.5.1): "the response is ready, validate it".
  boost::asio::awaitable<outcome<acme::challenge>> respond_challenge(std::string url);

  // Poll until the authorization is no longer pending (valid → value; invalid/deactivated/
  // expired/revoked → order_invalid with the challenge's problem), at most `max_wait`, waiting
  // between polls as Retry-After says (else 250 ms doubling to 2 s).
  boost::asio::awaitable<outcome<authorization_info>> poll_authorization(std::string url,
                                                                         std::chrono::milliseconds max_wait);
  // Poll until the order is neither pending nor processing (ready or valid → value; invalid →
  // order_invalid with the order's problem), same waiting rules.
  boost::asio::awaitable<outcome<order_info>> poll_order(std::string url, std::chrono::milliseconds max_wait);

  // POST the CSR (DER) to the order's finalize URL (§7.4); the answer is the order (usually
  // processing or valid: poll_order next).
  boost::asio::awaitable<outcome<order_info>> finalize(const order_info& o, std::string csr_der);
  // POST-as-GET the certificate URL: the PEM chain (application/pem-certificate-chain).
  boost::asio::awaitable<outcome<std::string>> download_certificate(std::string url);

  // revokeCert (§7.6) signed by the account key: the certificate's DER and an RFC 5280 reason
  // code (nullopt: none sent).
  boost::asio::awaitable<outcome<void>> revoke(std::string cert_der, std::optional<int> reason);

  // GET <renewalInfo>/<certID> (RFC 9773 §4.1). bad_input when the directory has no
  // renewalInfo (callers check directory().renewal_info first and use the lifetime rule).
  boost::asio::awaitable<outcome<renewal_info_answer>> get_renewal_info(std::string cert_id);

 private:
  struct answer;
  // `deadline`: a polling loop's end; each exchange gets the earlier of it and request_timeout.
  boost::asio::awaitable<outcome<answer>> post(std::string url, std::string step,
                                               std::optional<std::string> payload, bool use_jwk,
                                               std::string accept = {},
                                               std::optional<std::chrono::steady_clock::time_point> deadline = {});
  boost::asio::awaitable<outcome<std::string>> take_nonce(std::string_view step);
  boost::asio::awaitable<void> log_line(std::string level, std::string message);
  // opts_.egress, or acme_allow_list's default.
  const net::egress_policy& egress() const;

  client_options opts_;
  const account_key& key_;
  std::string account_url_;
  std::optional<acme::directory> directory_;
  std::vector<std::string> nonces_;
};

}  // namespace certfleet::acme
