// The ACME client's operations (client.hpp, RFC 8555): account, order, authorizations and
// challenges, finalize, certificate, revocation. Each is a POST through client.cpp's post(), which
// owns the nonces, the JWS and the transport's failures.
#include "certfleet/acme/client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>

#include "certfleet/core/allow_list.hpp"  // valid_dns_name
#include "certfleet/net/http.hpp"
#include "client_common.hpp"

namespace certfleet::acme {

namespace asio = boost::asio;
using asio::awaitable;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

using namespace detail;

namespace {

constexpr std::size_t max_domains = 100;
// Polls without a Retry-After: 250 ms doubling to 2 s. A CA that validates in a few seconds is
// seen within 2 s of it (with a 5 s cap one that took 4 s was seen at 7.75 s: the benchmark's
// single issuance against pebble's simulated validation delay took 7.8 s instead of ~4); the
// 2-minute poll limit then means at most ~60 requests per authorization.
constexpr milliseconds first_poll_wait{250};
constexpr milliseconds max_poll_wait{2000};

std::string ms_text(milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + " s";
  return std::to_string(d.count()) + " ms";
}

// "order https://ca/acme/order/1/2" is long in a log: the path is what identifies it.
std::string short_url(const std::string& url) {
  auto u = net::parse_url(url);
  return u ? u->target : url;
}

}  // namespace

awaitable<outcome<account_info>> client::new_account(account_request req) {
  auto dir = co_await get_directory();
  if (!dir) co_return std::move(dir).failure();
  boost::json::object payload;
  if (req.terms_agreed) payload["termsOfServiceAgreed"] = true;
  if (!req.contact.empty()) {
    boost::json::array c;
    for (std::size_t i = 0; i < req.contact.size(); ++i) {
      const auto& v = req.contact[i];
      if (v.size() > 320 || v.rfind("mailto:", 0) != 0 || v.find_first_of(",\r\n ") != std::string::npos)
        co_return bad_input("contact[" + std::to_string(i) + "]",
                            "newAccount: contact[" + std::to_string(i) + "] must be one mailto: address");
      c.emplace_back(v);
    }
    payload["contact"] = std::move(c);
  }
  if (req.only_return_existing) payload["onlyReturnExisting"] = true;
  if (req.eab) {
    auto eab = external_account_binding(key_, req.eab->kid, req.eab->hmac_key, dir->new_account);
    if (!eab) co_return bad_input(eab.error().field, "newAccount: " + eab.error().message);
    payload["externalAccountBinding"] = std::move(*eab);
  }
  auto a = co_await post(dir->new_account, "newAccount", boost::json::serialize(payload), true);
  if (!a) co_return std::move(a).failure();
  if (a->location.empty() || !net::parse_url(a->location))
    co_return no_acme_answer(failure_kind::not_acme, "newAccount", dir->new_account,
                             "newAccount: the answer has no account URL (Location)");
  auto acct = parse_account(a->body);
  if (!acct) co_return bad_document("newAccount", acct.error(), a->status, dir->new_account);
  account_info info{a->location, std::move(*acct), a->status == 201};
  account_url_ = info.url;
  {
    std::string line = std::string(info.created ? "ACME account created: " : "ACME account of this key: ") + info.url +
        " (" + info.account.status + ")";
    co_await log_line("info", std::move(line));
  }
  co_return info;
}

awaitable<outcome<order_info>> client::new_order(order_request req) {
  if (req.domains.empty()) co_return bad_input("domains", "newOrder: domains must name at least one DNS name");
  if (req.domains.size() > max_domains)
    co_return bad_input("domains", "newOrder: domains may have at most " + std::to_string(max_domains) + " names");
  boost::json::array ids;
  for (std::size_t i = 0; i < req.domains.size(); ++i) {
    std::string_view d = req.domains[i];
    std::string_view base = d.substr(0, 2) == "*." ? d.substr(2) : d;
    if (!valid_dns_name(base) || base.find('*') != std::string_view::npos)
      co_return bad_input("domains[" + std::to_string(i) + "]",
                          "newOrder: domains[" + std::to_string(i) + "] is not a DNS name (a wildcard only as a leading \"*.\")");
    ids.push_back(boost::json::object{{"type", "dns"}, {"value", req.domains[i]}});
  }
  boost::json::object payload{{"identifiers", std::move(ids)}};
  if (!req.replaces.empty()) payload["replaces"] = req.replaces;
  if (!req.profile.empty()) payload["profile"] = req.profile;
  auto dir = co_await get_directory();
  if (!dir) co_return std::move(dir).failure();
  if (!req.profile.empty() && !dir->meta.profiles.empty() &&
      std::none_of(dir->meta.profiles.begin(), dir->meta.profiles.end(), [&](const auto& p) { return p.name == req.profile; })) {
    std::string names;
    for (const auto& p : dir->meta.profiles) names += (names.empty() ? "" : "|") + p.name;
    co_return bad_input("profile", "newOrder: the CA offers no profile \"" + req.profile + "\" (it offers " + names + ")");
  }
  auto a = co_await post(dir->new_order, "newOrder", boost::json::serialize(payload), false);
  if (!a) co_return std::move(a).failure();
  if (a->location.empty() || !net::parse_url(a->location))
    co_return no_acme_answer(failure_kind::not_acme, "newOrder", dir->new_order, "newOrder: the answer has no order URL (Location)");
  auto o = parse_order(a->body);
  if (!o) co_return bad_document("newOrder", o.error(), a->status, dir->new_order);
  {
    std::string line = "ACME order " + short_url(a->location) + ": " + std::string(order_status_name(o->status)) + ", " +
        std::to_string(o->authorizations.size()) + " authorization(s) for " +
        std::to_string(o->identifiers.size()) + " name(s)" +
        (req.replaces.empty() ? "" : ", replaces " + req.replaces);
    co_await log_line("info", std::move(line));
  }
  co_return order_info{a->location, std::move(*o)};
}

awaitable<outcome<order_info>> client::get_order(std::string url) {
  auto a = co_await post(url, "order", std::nullopt, false);
  if (!a) co_return std::move(a).failure();
  auto o = parse_order(a->body);
  if (!o) co_return bad_document("order", o.error(), a->status, url);
  co_return order_info{std::move(url), std::move(*o)};
}

awaitable<outcome<authorization_info>> client::get_authorization(std::string url) {
  auto a = co_await post(url, "authorization", std::nullopt, false);
  if (!a) co_return std::move(a).failure();
  auto z = parse_authorization(a->body);
  if (!z) co_return bad_document("authorization", z.error(), a->status, url);
  co_return authorization_info{std::move(url), std::move(*z)};
}

awaitable<outcome<acme::challenge>> client::respond_challenge(std::string url) {
  auto a = co_await post(url, "challenge", std::string("{}"), false);
  if (!a) co_return std::move(a).failure();
  auto c = parse_challenge(a->body);
  if (!c) co_return bad_document("challenge", c.error(), a->status, url);
  {
    std::string line = "ACME challenge " + c->type + " answered: " + std::string(challenge_status_name(c->status));
    co_await log_line("info", std::move(line));
  }
  co_return std::move(*c);
}

namespace {

// Why an authorization is not valid, in the CA's words (the failed challenge's problem).
failure authorization_failure(const authorization& z) {
  std::string who = z.ident.type + " " + (z.wildcard ? "*." : "") + z.ident.value;
  auto f = make_failure(failure_kind::order_invalid,
                        "authorization for " + who + " is " + std::string(authorization_status_name(z.status)));
  for (const auto& c : z.challenges)
    if (c.error) {
      f.message += ": " + c.type + ": " + c.error->text();
      f.problem = c.error;
      break;
    }
  return f;
}

}  // namespace

awaitable<outcome<authorization_info>> client::poll_authorization(std::string url, milliseconds max_wait) {
  const auto deadline = steady::now() + max_wait;
  auto wait = first_poll_wait;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  for (;;) {
    auto a = co_await post(url, "authorization", std::nullopt, false, {}, deadline);
    if (!a) co_return std::move(a).failure();
    auto z = parse_authorization(a->body);
    if (!z) co_return bad_document("authorization", z.error(), a->status, url);
    if (z->status == authorization_status::valid) {
      {
        std::string line = "ACME authorization for " + z->ident.value + ": valid";
        co_await log_line("info", std::move(line));
      }
      co_return authorization_info{std::move(url), std::move(*z)};
    }
    if (z->status != authorization_status::pending) {
      auto f = authorization_failure(*z);
      co_await log_line("warn", f.message);
      co_return f;
    }
    auto next = wait;
    if (a->retry_after_s) {
      next = milliseconds(*a->retry_after_s * 1000);
      {
        std::string line = "ACME authorization for " + z->ident.value + " still pending: the CA asks to wait " +
            seconds_text(*a->retry_after_s) + " (Retry-After)";
        co_await log_line("info", std::move(line));
      }
    }
    if (steady::now() + next > deadline) {
      auto f = make_failure(failure_kind::timeout, "authorization for " + z->ident.value + " still pending after " +
                                                       ms_text(max_wait) + " (the CA has not validated the challenge)");
      f.retry_after_s = a->retry_after_s;
      co_return f;
    }
    timer.expires_after(next);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    wait = std::min(wait * 2, max_poll_wait);
  }
}

awaitable<outcome<order_info>> client::poll_order(std::string url, milliseconds max_wait) {
  const auto deadline = steady::now() + max_wait;
  auto wait = first_poll_wait;
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  for (;;) {
    auto a = co_await post(url, "order", std::nullopt, false, {}, deadline);
    if (!a) co_return std::move(a).failure();
    auto o = parse_order(a->body);
    if (!o) co_return bad_document("order", o.error(), a->status, url);
    if (o->status == order_status::invalid) {
      auto f = make_failure(failure_kind::order_invalid, "order " + short_url(url) + " is invalid");
      if (o->error) {
        f.message += ": " + o->error->text();
        f.problem = o->error;
      } else {
        // Not every CA says why on the order: the failed authorization does.
        for (const auto& z_url : o->authorizations) {
          auto z = co_await get_authorization(z_url);
          if (z && z->authorization.status != authorization_status::valid &&
              z->authorization.status != authorization_status::pending) {
            auto zf = authorization_failure(z->authorization);
            f.message += ": " + zf.message;
            f.problem = zf.problem;
            break;
          }
        }
      }
      co_await log_line("warn", f.message);
      co_return f;
    }
    if (o->status != order_status::pending && o->status != order_status::processing) {
      {
        std::string line = "ACME order " + short_url(url) + ": " + std::string(order_status_name(o->status));
        co_await log_line("info", std::move(line));
      }
      co_return order_info{std::move(url), std::move(*o)};
    }
    auto next = wait;
    if (a->retry_after_s) {
      next = milliseconds(*a->retry_after_s * 1000);
      {
        std::string line = "ACME order " + short_url(url) + " " + std::string(order_status_name(o->status)) +
            ": the CA asks to wait " + seconds_text(*a->retry_after_s) + " (Retry-After)";
        co_await log_line("info", std::move(line));
      }
    }
    if (steady::now() + next > deadline) {
      auto f = make_failure(failure_kind::timeout, "order " + short_url(url) + " still " +
                                                       std::string(order_status_name(o->status)) + " after " + ms_text(max_wait));
      f.retry_after_s = a->retry_after_s;
      co_return f;
    }
    timer.expires_after(next);
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    wait = std::min(wait * 2, max_poll_wait);
  }
}

awaitable<outcome<order_info>> client::finalize(const order_info& o, std::string csr_der) {
  if (csr_der.empty()) co_return bad_input("csr", "finalize: the CSR is empty");
  boost::json::object payload{{"csr", base64url_encode(csr_der)}};
  auto a = co_await post(o.order.finalize, "finalize", boost::json::serialize(payload), false);
  if (!a) co_return std::move(a).failure();
  auto next = parse_order(a->body);
  if (!next) co_return bad_document("finalize", next.error(), a->status, o.order.finalize);
  if (next->status == order_status::invalid) {
    auto f = make_failure(failure_kind::order_invalid, "finalize: order " + short_url(o.url) + " is invalid");
    if (next->error) {
      f.message += ": " + next->error->text();
      f.problem = next->error;
    }
    co_return f;
  }
  {
    std::string line = "ACME finalize: order " + short_url(o.url) + " " + std::string(order_status_name(next->status));
    co_await log_line("info", std::move(line));
  }
  co_return order_info{o.url, std::move(*next)};
}

awaitable<outcome<std::string>> client::download_certificate(std::string url) {
  auto a = co_await post(url, "certificate", std::nullopt, false, "application/pem-certificate-chain");
  if (!a) co_return std::move(a).failure();
  if (a->body.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    std::string why = "certificate: the answer holds no PEM certificate";
    if (!a->content_type.empty()) why += " (Content-Type " + a->content_type + ")";
    co_return no_acme_answer(failure_kind::not_acme, "certificate", url, std::move(why));
  }
  std::size_t count = 0;
  for (std::size_t p = 0; (p = a->body.find("-----BEGIN CERTIFICATE-----", p)) != std::string::npos; ++p) ++count;
  auto alternates = link_targets(a->links, "alternate");
  {
    std::string line = "ACME certificate downloaded: " + std::to_string(count) + " certificate(s)" +
        (alternates.empty() ? "" : ", " + std::to_string(alternates.size()) + " alternate chain(s) offered");
    co_await log_line("info", std::move(line));
  }
  co_return std::move(a->body);
}

awaitable<outcome<void>> client::revoke(std::string cert_der, std::optional<int> reason) {
  auto payload = revoke_cert_payload(cert_der, reason);
  if (!payload) co_return bad_input(payload.error().field, "revokeCert: " + payload.error().message);
  auto dir = co_await get_directory();
  if (!dir) co_return std::move(dir).failure();
  auto a = co_await post(dir->revoke_cert, "revokeCert", std::move(*payload), false);
  if (!a) co_return std::move(a).failure();
  {
    std::string line = "ACME certificate revoked" + (reason ? " (reason " + std::to_string(*reason) + ")" : std::string());
    co_await log_line("info", std::move(line));
  }
  co_return outcome<void>();
}

}  // namespace certfleet::acme
