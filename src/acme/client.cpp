// The ACME client (client.hpp) over delivery's HTTP client: the directory, nonces, the signed
// POST every operation goes through, renewal information, and the failures they are said in.
// The operations themselves (account, order, authorizations, finalize, certificate, revocation)
// are client_operations.cpp's.
#include "certfleet/acme/client.hpp"

#include <algorithm>

#include "certfleet/core/log.hpp"
#include "certfleet/net/http.hpp"
#include "client_common.hpp"

namespace certfleet::acme {

namespace asio = boost::asio;
using asio::awaitable;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

using namespace detail;

namespace {

constexpr std::size_t max_answer_bytes = 1024 * 1024;  // a certificate chain or a document
constexpr std::size_t max_pooled_nonces = 8;

std::string endpoint_of(const std::string& url);

}  // namespace

namespace detail {

failure make_failure(failure_kind kind, std::string message) {
  failure f;
  f.kind = kind;
  switch (kind) {
    case failure_kind::network:
    case failure_kind::timeout:
      f.cls = failure_class::transient;
      break;
    default:
      f.cls = failure_class::permanent;
  }
  f.message = std::move(message);
  return f;
}

failure bad_input(std::string field, std::string message) {
  auto f = make_failure(failure_kind::bad_input, std::move(message));
  f.field = std::move(field);
  return f;
}

failure no_acme_answer(failure_kind kind, std::string_view step, const std::string& url, std::string detail) {
  auto f = make_failure(kind, step == "directory" ? "directory_url: could not fetch an ACME directory from " + endpoint_of(url)
                                                  : std::string(step) + ": no ACME answer from " + endpoint_of(url));
  f.message += " (the cause is in the certfleet server's log)";
  f.cls = failure_class::transient;
  f.detail = std::move(detail);
  spdlog::warn("acme client: {}: {}", f.message, f.detail);
  return f;
}

std::string seconds_text(std::int64_t s) { return std::to_string(s) + " s"; }

failure bad_document(const std::string& step, const certfleet::error& e, int status, const std::string& url) {
  return no_acme_answer(failure_kind::not_acme, step, url,
                        step + ": HTTP " + std::to_string(status) + ", not a valid ACME document: " + e.message);
}

}  // namespace detail

namespace {

// A nonce is base64url (§6.5.1); anything else is not sent back (it would go into our JWS).
bool valid_nonce(std::string_view n) {
  if (n.empty() || n.size() > 256) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool is_json_type(std::string_view content_type) {
  auto t = lower(content_type);
  return t.find("json") != std::string::npos;
}

// A Location may be relative (RFC 9110 §10.2.2): resolved against the request URL.
std::string absolute(const std::string& location, const std::string& request_url) {
  if (location.empty() || location.find("://") != std::string::npos) return location;
  auto u = net::parse_url(request_url);
  if (!u) return location;
  std::string base = u->scheme + "://" + u->authority();
  if (location.front() == '/') return base + location;
  auto slash = u->target.rfind('/');
  return base + u->target.substr(0, slash + 1) + location;
}

constexpr std::string_view allow_list_setting = "acme_allow_list";
constexpr std::string_view allow_list_hint =
    "loopback, link-local, unspecified and cloud metadata addresses are reached only when acme_allow_list lists them by "
    "address, e.g. 127.0.0.1; see docs/acme.md";

// HOST:PORT, the port always shown: what a uniform message names (never the path or query).
std::string endpoint_of(const std::string& url) {
  auto u = net::parse_url(url);
  if (!u) return "(an invalid URL)";
  return u->host_is_ip() && u->host.find(':') != std::string::npos ? "[" + u->host + "]:" + std::to_string(u->port)
                                                                     : u->host + ":" + std::to_string(u->port);
}

bool is_acme_problem(const acme::problem& p) { return p.type.rfind("urn:ietf:params:acme:error:", 0) == 0; }

}  // namespace

std::string_view failure_kind_name(failure_kind k) noexcept {
  switch (k) {
    case failure_kind::network: return "network";
    case failure_kind::timeout: return "timeout";
    case failure_kind::untrusted: return "untrusted";
    case failure_kind::ca_problem: return "ca_problem";
    case failure_kind::not_acme: return "not_acme";
    case failure_kind::order_invalid: return "order_invalid";
    case failure_kind::bad_input: return "bad_input";
    case failure_kind::key_mismatch: return "key_mismatch";
  }
  return "unknown";
}

certfleet::error failure::to_error() const {
  certfleet::error e;
  if (problem && problem->acme_type() == "rateLimited") {
    e = make_error(errc::rate_limited, message);
    e.retry_after_s = retry_after_s.value_or(0);
  } else if (kind == failure_kind::bad_input) {
    e = make_error(errc::invalid_argument, message, field);
  } else if (cls == failure_class::permanent) {
    e = make_error(errc::conflict, message);
  } else {
    e = make_error(errc::timeout, message);
    e.retry_after_s = retry_after_s.value_or(0);
  }
  return e;
}

namespace {

// One HTTP exchange with the client's settings; collects the Replay-Nonce of any answer.
struct exchange_result {
  net::http_response res;
  std::optional<std::int64_t> retry_after_s;
};

}  // namespace

client::client(client_options opts, const account_key& key) : opts_(std::move(opts)), key_(key) {}

// Callers build the message in a local first: GCC 12 destroys a ?: temporary inside a co_await
// full-expression twice.
awaitable<void> client::log_line(std::string level, std::string message) {
  if (opts_.log) co_await opts_.log(std::move(level), std::move(message));
}

namespace {

const net::egress_policy& default_policy() {
  static const net::egress_policy p = [] {
    auto parsed = net::parse_egress_allow_list("0.0.0.0/0, ::/0", allow_list_setting);
    return parsed ? std::move(*parsed) : net::egress_policy{};
  }();
  return p;
}

net::http_request base_request(const client_options& o, net::http_method m, std::string url,
                                    milliseconds timeout) {
  net::http_request r;
  r.method = m;
  r.url = std::move(url);
  r.timeout = timeout;
  r.egress = o.egress ? o.egress : &default_policy();
  r.egress_setting = std::string(allow_list_setting);
  r.ca_pem = o.ca_pem;
  r.resolve_pool = o.resolve_pool;
  r.max_body = max_answer_bytes;
  r.headers.emplace_back("Accept-Language", "en");
  return r;
}

// A URL the client is about to follow: https only (a directory may not send it to plain http
// on another port). The egress policy itself is applied by the HTTP client after resolution.
std::optional<failure> refuse_url(const std::string& url, std::string_view step) {
  auto u = net::parse_url(url, "directory_url");
  if (!u) return bad_input("directory_url", std::string(step) + ": " + u.error().message);
  if (!u->tls())
    return bad_input("directory_url", std::string(step) + ": http://" + u->authority() +
                                          " is not an https:// URL: the ACME client follows https:// URLs only");
  return std::nullopt;
}

// A transport failure (no answer) as the operation's failure: refused before connecting (the
// URL, acme_allow_list) is the caller's input and said as such; anything after is no_acme_answer.
failure transport_failure(const net::http_response& res, std::string_view step, const std::string& url) {
  if (res.phase == "check") return bad_input("directory_url", std::string(step) + ": " + res.error);
  if (res.phase == "egress")
    return bad_input("directory_url", std::string(step) + ": " + endpoint_of(url) + " is refused by " +
                                          std::string(allow_list_setting) + " (" + std::string(allow_list_hint) + ")");
  switch (res.cls) {
    case net::error_class::auth:
      return no_acme_answer(failure_kind::untrusted, step, url,
                            res.error + " (a private CA: give the account's ca_bundle_pem; a public CA: check the host's CA store)");
    case net::error_class::validation:
      return no_acme_answer(failure_kind::not_acme, step, url, res.error + " (is the URL an ACME server?)");
    default:
      return no_acme_answer(res.timed_out ? failure_kind::timeout : failure_kind::network, step, url, res.error);
  }
}

// The directory's URLs, before any is followed: each https, and an IP literal inside the policy
// (a name is checked when it is resolved). The error names the member.
std::optional<failure> refuse_directory(const acme::directory& d, const net::egress_policy& policy) {
  const std::pair<std::string_view, const std::string*> members[] = {
      {"newNonce", &d.new_nonce},     {"newAccount", &d.new_account}, {"newOrder", &d.new_order},
      {"revokeCert", &d.revoke_cert}, {"keyChange", &d.key_change},   {"newAuthz", &d.new_authz},
      {"renewalInfo", &d.renewal_info}};
  for (const auto& [name, url] : members) {
    if (url->empty()) continue;
    const std::string step = "directory: its " + std::string(name);
    if (auto bad = refuse_url(*url, step)) return bad;
    auto u = net::parse_url(*url);
    if (u->host_is_ip() && !net::egress_allows(policy, u->host, {}))
      return bad_input("directory_url", step + " (" + endpoint_of(*url) + ") is refused by " + std::string(allow_list_setting) +
                                            " (" + std::string(allow_list_hint) + ")");
  }
  return std::nullopt;
}

}  // namespace

const net::egress_policy& client::egress() const { return opts_.egress ? *opts_.egress : default_policy(); }

awaitable<outcome<acme::directory>> client::get_directory() {
  if (directory_) co_return *directory_;
  const std::string& url = opts_.directory_url;
  if (auto u = net::parse_url(url, "directory_url"); !u)
    co_return bad_input("directory_url", "directory_url: " + u.error().message);
  if (auto bad = refuse_url(url, "directory_url")) co_return std::move(*bad);
  auto res = co_await net::http_exchange(
      base_request(opts_, net::http_method::get, url, opts_.request_timeout));
  if (!res.ok()) {
    auto f = transport_failure(res, "directory", url);
    // The directory_url itself is the field at fault: say it once, as the API names it.
    if (f.kind == failure_kind::bad_input && f.message.rfind("directory: ", 0) == 0)
      f.message = "directory_url: " + f.message.substr(11);
    co_return f;
  }
  const std::string what = "directory " + url;
  const std::string type = res.header("Content-Type");
  if (res.status != 200) {
    // A CA that is down answers 5xx with an ACME problem: its words, and a retry may work.
    // Anything else is the wrong URL, or no CA at all: no_acme_answer.
    std::optional<acme::problem> p;
    if (is_json_type(type))
      if (auto parsed = parse_problem(res.body); parsed && is_acme_problem(*parsed)) p = std::move(*parsed);
    auto retry_after = parse_retry_after(res.header("Retry-After"), system_clock().now_ms());
    if (!p) {
      std::string detail = what + " answered HTTP " + std::to_string(res.status) +
                           (type.empty() ? std::string() : " (Content-Type " + type + ")");
      auto f = no_acme_answer(failure_kind::not_acme, "directory", url, std::move(detail));
      // A CA's maintenance page may say when to come back; honoured, never shown.
      if (res.status >= 500 || res.status == 429) f.retry_after_s = retry_after;
      co_return f;
    }
    failure f = make_failure(failure_kind::ca_problem, "directory: the CA answered HTTP " + std::to_string(res.status) + ": " +
                                                           p->text());
    f.problem = std::move(p);
    f.http_status = res.status;
    f.cls = res.status >= 500 || res.status == 429 ? failure_class::transient : failure_class::permanent;
    f.retry_after_s = retry_after;
    co_return f;
  }
  if (!res.body_complete)
    co_return no_acme_answer(failure_kind::not_acme, "directory", url, what + " sent an incomplete or oversized answer");
  auto d = parse_directory(res.body);
  if (!d) {
    std::string why = d.error().message;
    if (!type.empty() && !is_json_type(type)) why += " (Content-Type " + type + ")";
    co_return no_acme_answer(failure_kind::not_acme, "directory", url,
                             what + " is not an ACME directory: " + why + " (is directory_url the CA's ACME directory URL?)");
  }
  if (auto bad = refuse_directory(*d, egress())) {
    co_await log_line("warn", bad->message);
    co_return std::move(*bad);
  }
  directory_ = std::move(*d);
  {
    std::string line = "ACME directory " + url + ": renewalInfo " +
        (directory_->renewal_info.empty() ? "not offered" : "offered") +
        (directory_->meta.external_account_required ? ", external account binding required" : "") +
        (directory_->meta.terms_of_service.empty() ? "" : ", terms of service " + directory_->meta.terms_of_service);
    co_await log_line("info", std::move(line));
  }
  co_return *directory_;
}

awaitable<outcome<std::string>> client::take_nonce(std::string_view step) {
  if (!nonces_.empty()) {
    std::string n = std::move(nonces_.back());
    nonces_.pop_back();
    co_return n;
  }
  auto dir = co_await get_directory();
  if (!dir) co_return std::move(dir).failure();
  const std::string nonce_step = std::string(step) + " (newNonce)";
  if (auto bad = refuse_url(dir->new_nonce, nonce_step)) co_return std::move(*bad);
  auto res = co_await net::http_exchange(
      base_request(opts_, net::http_method::head, dir->new_nonce, opts_.request_timeout));
  if (!res.ok()) co_return transport_failure(res, nonce_step, dir->new_nonce);
  std::string nonce = res.header("Replay-Nonce");
  if (res.status >= 300 || !valid_nonce(nonce))
    co_return no_acme_answer(failure_kind::not_acme, nonce_step, dir->new_nonce,
                             "newNonce answered HTTP " + std::to_string(res.status) + " without a Replay-Nonce");
  co_return nonce;
}

awaitable<outcome<client::answer>> client::post(std::string url, std::string step, std::optional<std::string> payload,
                                                bool use_jwk, std::string accept,
                                                std::optional<steady::time_point> deadline) {
  if (!use_jwk && account_url_.empty())
    co_return bad_input("account_url", step + ": no account URL (register the account first)");
  if (auto bad = refuse_url(url, step)) co_return std::move(*bad);
  for (int attempt = 0;; ++attempt) {
    auto nonce = co_await take_nonce(step);
    if (!nonce) co_return std::move(nonce).failure();
    auto jws = sign_jws(key_, {url, *nonce, use_jwk ? std::string() : account_url_}, payload);
    if (!jws) co_return bad_input("account_key", step + ": " + jws.error().message);
    auto timeout = opts_.request_timeout;
    // A poll's last request ends with the poll (at least a second, so it can be answered).
    if (deadline)
      timeout = std::min(timeout, std::max(std::chrono::duration_cast<milliseconds>(*deadline - steady::now()), milliseconds(1000)));
    auto req = base_request(opts_, net::http_method::post, url, timeout);
    req.headers.emplace_back("Content-Type", "application/jose+json");
    if (!accept.empty()) req.headers.emplace_back("Accept", accept);
    req.body = std::move(*jws);
    auto res = co_await net::http_exchange(std::move(req));
    if (!res.ok()) co_return transport_failure(res, step, url);
    // Every answer carries a fresh nonce (§6.5): keep it for the next request.
    if (auto n = res.header("Replay-Nonce"); valid_nonce(n)) {
      if (nonces_.size() >= max_pooled_nonces) nonces_.erase(nonces_.begin());
      nonces_.push_back(std::move(n));
    }
    auto retry_after = parse_retry_after(res.header("Retry-After"), system_clock().now_ms());
    const std::string type = res.header("Content-Type");
    if (res.status >= 400) {
      auto p = parse_problem(res.body);
      if (p && p->acme_type() == "badNonce" && attempt < opts_.bad_nonce_retries) {
        // §6.5: the answer's Replay-Nonce (now first in the pool) is the one to use.
        {
          std::string line = step + ": the CA refused the nonce (badNonce); retrying with the nonce its answer carried (" +
              std::to_string(attempt + 1) + "/" + std::to_string(opts_.bad_nonce_retries) + ")";
          co_await log_line("warn", std::move(line));
        }
        continue;
      }
      failure f;
      if (p && is_acme_problem(*p)) {
        f.kind = failure_kind::ca_problem;
        f.cls = classify_problem(*p);
        f.message = step + ": the CA answered HTTP " + std::to_string(res.status) + ": " + p->text();
        f.problem = std::move(*p);
        f.http_status = res.status;
        if (retry_after) f.message += " (Retry-After " + seconds_text(*retry_after) + ")";
      } else {
        // Not the CA's word: a page, or a service that is not a CA.
        f = no_acme_answer(failure_kind::not_acme, step, url,
                           step + ": HTTP " + std::to_string(res.status) + " without an ACME problem document" +
                               (type.empty() ? std::string() : " (Content-Type " + type + ")"));
      }
      f.retry_after_s = retry_after;
      co_await log_line("warn", f.message);
      co_return f;
    }
    if (res.status >= 300)
      co_return no_acme_answer(failure_kind::not_acme, step, url,
                               step + ": HTTP " + std::to_string(res.status) + " (redirects are not followed)");
    if (!res.body_complete)
      co_return no_acme_answer(failure_kind::network, step, url,
                               step + ": the answer broke off or was larger than " + std::to_string(max_answer_bytes) + " bytes");
    answer a;
    a.status = res.status;
    a.body = std::move(res.body);
    a.location = absolute(res.header("Location"), url);
    a.content_type = type;
    a.retry_after_s = retry_after;
    a.links = res.header_values("Link");
    co_return a;
  }
}

awaitable<outcome<renewal_info_answer>> client::get_renewal_info(std::string cert_id) {
  auto dir = co_await get_directory();
  if (!dir) co_return std::move(dir).failure();
  if (dir->renewal_info.empty())
    co_return bad_input("renewalInfo", "renewalInfo: the CA's directory offers no renewalInfo (RFC 9773)");
  auto dot = cert_id.find('.');
  if (cert_id.empty() || cert_id.size() > 512 || dot == std::string::npos || dot == 0 || dot + 1 == cert_id.size() ||
      !base64url_decode(cert_id.substr(0, dot)) || !base64url_decode(cert_id.substr(dot + 1)))
    co_return bad_input("cert_id", "renewalInfo: the certificate ID must be base64url(AKI).base64url(serial)");
  std::string url = dir->renewal_info;
  if (url.back() != '/') url += '/';
  url += cert_id;
  if (auto bad = refuse_url(url, "renewalInfo")) co_return std::move(*bad);
  auto res = co_await net::http_exchange(base_request(opts_, net::http_method::get, url, opts_.request_timeout));
  if (!res.ok()) co_return transport_failure(res, "renewalInfo", url);
  auto retry_after = parse_retry_after(res.header("Retry-After"), system_clock().now_ms());
  if (res.status != 200) {
    auto p = parse_problem(res.body);
    failure f;
    if (p && is_acme_problem(*p)) {
      f.kind = failure_kind::ca_problem;
      f.cls = classify_problem(*p);
      f.message = "renewalInfo: the CA answered HTTP " + std::to_string(res.status) + ": " + p->text();
      f.problem = std::move(*p);
      f.http_status = res.status;
    } else {
      f = no_acme_answer(failure_kind::not_acme, "renewalInfo", url, "renewalInfo: HTTP " + std::to_string(res.status));
    }
    f.retry_after_s = retry_after;
    co_return f;
  }
  if (!res.body_complete)
    co_return no_acme_answer(failure_kind::network, "renewalInfo", url, "renewalInfo: the answer broke off");
  auto info = parse_renewal_info(res.body);
  if (!info) co_return bad_document("renewalInfo", info.error(), res.status, url);
  {
    std::string line = "ACME renewal information: window " + format_iso8601(info->suggested_window.start) + " to " +
        format_iso8601(info->suggested_window.end) +
        (retry_after ? ", ask again in " + seconds_text(*retry_after) : std::string()) +
        (info->explanation_url.empty() ? "" : ", explanation " + info->explanation_url);
    co_await log_line("info", std::move(line));
  }
  co_return renewal_info_answer{std::move(*info), retry_after};
}

}  // namespace certfleet::acme
