// One SOAP call to an AD CS service (msca_client.hpp).
#include "lifecycle/msca_client.hpp"

#include "lifecycle/acme_job_common.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/net/http.hpp"
#include "certfleet/net/kerberos.hpp"
#include "certfleet/net/resolve.hpp"

#include <openssl/crypto.h>

#include <fmt/format.h>

namespace certfleet::lifecycle::detail {

namespace asio = boost::asio;
using msca::failure_class;

namespace {

// WS-Addressing wants a URI per message; two object ids make the 32 hex digits of a UUID shape.
std::string message_id() {
  const auto hex = new_object_id() + new_object_id();
  return fmt::format("urn:uuid:{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4), hex.substr(16, 4),
                     hex.substr(20, 12));
}

msca_failure fail(failure_class cls, std::string_view text, bool permanent, std::string code = {}) {
  auto f = msca_fail(cls, text, permanent);
  f.error_code = std::move(code);
  return f;
}

// A refusal's class decides whether another attempt can help: the CA being away can pass; the
// rest is the operator's (or a certificate manager's) to change.
bool permanent_class(failure_class c) {
  return c != failure_class::ca_unavailable && c != failure_class::other && c != failure_class::pending;
}

msca_failure from_fault(const msca::soap_fault& f, std::string_view what) {
  const auto cls = msca::classify_fault(f);
  std::string text = fmt::format("{} refused: {}", what, f.reason.empty() ? f.code : f.reason);
  std::string code;
  if (f.error_code) {
    code = msca::hresult_text(*f.error_code);
    text += fmt::format(" (HRESULT {})", code);
  }
  if (!f.request_id.empty()) text += fmt::format(", request {}", f.request_id);
  auto out = fail(cls, std::move(text), permanent_class(cls), std::move(code));
  out.request_id = f.request_id;
  return out;
}

// The HTTP exchange's own failures, before any SOAP: the service away, TLS, a status that is no
// SOAP answer.
std::optional<msca_failure> transport_failure(const net::http_response& res, const msca_connection& c,
                                              std::string_view what) {
  if (!res.ok()) {
    if (res.phase == "egress" || res.phase == "check")
      return fail(failure_class::other, fmt::format("{}: {}", what, res.error), true);
    // A client certificate the service does not accept ends the handshake.
    if (res.cls == net::error_class::auth || (res.phase == "tls" && c.ca->auth_kind == "client_certificate"))
      return fail(failure_class::auth, fmt::format("{}: TLS: {}", what, res.error), true);
    return fail(failure_class::ca_unavailable, fmt::format("{}: {}", what, res.error), false);
  }
  if (res.status == 401 || res.status == 403)
    return fail(failure_class::auth,
                fmt::format("{} answered HTTP {}: the service did not accept the credentials{}", what, res.status,
                            c.ca->auth_kind == "kerberos"
                                ? " (the KDC issued a ticket the service cannot read: its keytab or SPN "
                                  "HTTP/<host> is out of date, or the clocks differ by more than 5 minutes)"
                                : ""),
                true);
  if (!res.body_complete)
    return fail(failure_class::ca_unavailable,
                fmt::format("{} answered HTTP {} but the answer broke off or is larger than {} bytes", what, res.status,
                            msca::max_answer_bytes),
                false);
  // SOAP 1.2 faults come with 500 (and some stacks send 400); both carry the envelope.
  if (res.status != 200 && res.status != 500 && res.status != 400)
    return fail(failure_class::ca_unavailable,
                fmt::format("{} answered HTTP {}, not a SOAP answer (is the URL the service's .svc endpoint?)", what,
                            res.status),
                res.status == 404);
  return std::nullopt;
}

// "[2001:db8::1]:88" or "192.0.2.1:88".
std::string host_port(const boost::asio::ip::address& a, std::uint16_t port) {
  return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), port) : fmt::format("{}:{}", a.to_string(), port);
}

// `host` resolved within the call's deadline (an IP literal as itself) and, one by one, the
// addresses msca_allow_list admits: what the KDC and the service are held to before Kerberos
// asks anything of either. A resolver failure is the CA (or its KDC) unavailable.
struct admitted {
  std::vector<boost::asio::ip::address> addresses;
  std::optional<msca_failure> failure;
};
// `what` names it in the failure ("the KDC dc01:88").
asio::awaitable<admitted> admitted_addresses(const msca_connection& c, const std::string& host, std::uint16_t port,
                                             const std::string& what) {
  admitted out;
  auto r = co_await net::resolve_host(host, port, c.cpu, c.timeout);
  if (!r.ok()) {
    out.failure = fail(failure_class::ca_unavailable, fmt::format("{}: {}", what, r.error), false);
    co_return out;
  }
  for (const auto& ep : r.endpoints) {
    const std::vector<boost::asio::ip::address> one{ep.address()};
    if (!c.egress || net::egress_allows(*c.egress, host, one)) out.addresses.push_back(ep.address());
  }
  co_return out;
}

// The KDC a Kerberos CA names, held to msca_allow_list like the services: the library is given
// the address checked, never the name to resolve again.
asio::awaitable<std::optional<msca_failure>> checked_kdc(const msca_connection& c, std::string& address) {
  const std::string& kdc = c.ca->kdc;
  const auto colon = kdc.rfind(':');
  std::string host = kdc.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  const auto port = static_cast<std::uint16_t>(std::stoi(kdc.substr(colon + 1)));
  const std::string what = "the KDC " + kdc;
  auto a = co_await admitted_addresses(c, host, port, what);
  if (!a.failure && a.addresses.empty())
    a.failure = fail(failure_class::other,
                     fmt::format("the KDC {} resolves only to addresses msca_allow_list does not allow", kdc), true);
  if (a.failure) {
    a.failure->field = "auth.kdc";
    co_return a.failure;
  }
  address = host_port(a.addresses.front(), port);
  co_return std::nullopt;
}

// The Authorization header a Kerberos CA's request to `url` carries: a fresh login and service
// ticket for HTTP/<url's host>, on the cpu pool (the KDC exchanges block).
asio::awaitable<std::optional<msca_failure>> negotiate(const msca_connection& c, const std::string& url,
                                                       std::string& header) {
  auto u = net::parse_url(url);
  if (!u) co_return fail(failure_class::other, u.error().message, true);
  // The service's own address is held to msca_allow_list before the KDC is asked for a ticket to
  // it: a URL outside the list must not make certfleet announce it to the realm.
  if (c.egress) {
    auto a = co_await admitted_addresses(c, u->host, u->port, u->host);
    if (a.failure) co_return a.failure;
    if (a.addresses.empty()) co_return fail(failure_class::other, "msca_allow_list does not allow " + u->host, true);
  }
  net::kerberos_login login;
  login.principal = c.ca->principal;
  login.realm = c.ca->realm;
  login.password = c.secret->password;
  login.keytab = c.secret->keytab;
  login.timeout = c.timeout;
  if (!c.ca->kdc.empty())
    if (auto f = co_await checked_kdc(c, login.kdc)) co_return f;
  const std::string host = u->host;
  auto r = co_await on_cpu<net::negotiate_result>(c.cpu, [&login, &host] { return net::negotiate_header(login, host); });
  OPENSSL_cleanse(login.password.data(), login.password.size());
  OPENSSL_cleanse(login.keytab.data(), login.keytab.size());
  switch (r.failure) {
    case net::kerberos_failure::none:
      header = std::move(r.header);
      co_return std::nullopt;
    case net::kerberos_failure::credentials:
    case net::kerberos_failure::service_unknown:
      co_return fail(failure_class::auth, "Kerberos: " + r.error, true);
    case net::kerberos_failure::kdc_unreachable:
      co_return fail(failure_class::ca_unavailable, "Kerberos: " + r.error, false);
    case net::kerberos_failure::other:
      break;
  }
  co_return fail(failure_class::other, "Kerberos: " + r.error, false);
}

// The exchange, or (kerberos) the login before it failed.
struct posted {
  net::http_response res;
  std::optional<msca_failure> failure;
};

asio::awaitable<posted> post(const msca_connection& c, const std::string& url, const msca::soap_request& m) {
  posted out;
  net::http_request req;
  req.method = net::http_method::post;
  req.url = url;
  req.headers = {{"Content-Type", msca::soap_content_type(m.action)}, {"Accept", "application/soap+xml"}};
  req.body = m.envelope;
  // The envelope may carry the password (UsernameToken).
  req.cleanse_body = true;
  req.timeout = c.timeout;
  req.egress = c.egress;
  req.egress_setting = "msca_allow_list";
  req.ca_pem = trust_anchors(c.ca->ca_bundle_pem, c.extra_ca_pem);
  req.resolve_pool = c.cpu;
  req.max_body = msca::max_answer_bytes;
  if (c.ca->auth_kind == "client_certificate") {
    req.client_cert_pem = c.ca->client_cert_pem;
    req.client_key_pem = c.secret->client_key_pem;
  }
  if (c.ca->auth_kind == "kerberos") {
    std::string header;
    if ((out.failure = co_await negotiate(c, url, header))) co_return out;
    req.headers.emplace_back("Authorization", std::move(header));
  }
  out.res = co_await net::http_exchange(std::move(req));
  co_return out;
}

msca::message_security security_of(const msca_connection& c) {
  msca::message_security s;
  if (c.ca->auth_kind == "username_password") {
    s.username = c.ca->username;
    s.password = c.secret->password;
  }
  return s;
}

}  // namespace

std::string msca_message(failure_class c, std::string_view text) {
  return fmt::format("AD CS [{}]: {}", msca::failure_class_name(c), text);
}

msca_failure msca_fail(failure_class c, std::string_view text, bool permanent) {
  msca_failure f;
  f.cls = c;
  f.message = msca_message(c, text);
  f.permanent = permanent;
  return f;
}

asio::awaitable<msca_answer<msca::enrollment_policy>> msca_get_policies(const msca_connection& c) {
  msca_answer<msca::enrollment_policy> out;
  const std::string what = fmt::format("the policy service {}", c.ca->cep_url);
  auto m = msca::get_policies_request(c.ca->cep_url, message_id(), security_of(c));
  const std::string url = c.ca->cep_url;
  auto sent = co_await post(c, url, m);
  if (sent.failure) {
    out.failure = std::move(*sent.failure);
    co_return out;
  }
  auto& res = sent.res;
  if (auto f = transport_failure(res, c, what)) {
    out.failure = std::move(*f);
    co_return out;
  }
  if (res.status != 200) {
    // A SOAP fault is the same envelope from either service: read it as the enrollment parser does.
    if (auto f = msca::parse_enrollment_response(res.body); f && f->status == msca::disposition::refused) {
      out.failure = from_fault(f->fault, what);
      co_return out;
    }
  }
  auto p = msca::parse_get_policies_response(res.body);
  if (!p) {
    out.failure = fail(failure_class::other, fmt::format("{}: {}", what, p.error().message), true);
    co_return out;
  }
  out.value = std::move(*p);
  co_return out;
}

asio::awaitable<msca_answer<msca::enroll_response>> msca_enroll(const msca_connection& c, const std::string& ces_url,
                                                                const msca::enroll_request& r) {
  msca_answer<msca::enroll_response> out;
  const std::string what = fmt::format("the enrollment service {}", ces_url);
  auto m = msca::enrollment_request(ces_url, message_id(), r, security_of(c));
  auto sent = co_await post(c, ces_url, m);
  if (sent.failure) {
    out.failure = std::move(*sent.failure);
    co_return out;
  }
  auto& res = sent.res;
  if (auto f = transport_failure(res, c, what)) {
    out.failure = std::move(*f);
    co_return out;
  }
  auto a = msca::parse_enrollment_response(res.body);
  if (!a) {
    out.failure = fail(failure_class::other, fmt::format("{}: {}", what, a.error().message), false);
    co_return out;
  }
  if (a->status == msca::disposition::refused) out.failure = from_fault(a->fault, what);
  out.value = std::move(*a);
  co_return out;
}

}  // namespace certfleet::lifecycle::detail
