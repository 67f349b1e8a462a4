// The ACME jobs' registration (issue_certificate, renew_certificate, validate_manual_dns:
// acme_order_job.cpp; revoke_certificate: acme_revoke.cpp; cleanup_dns: acme_cleanup.cpp), what
// they share (acme_job_common.hpp), and an account's registration at its CA.
#include "certfleet/lifecycle/acme_jobs.hpp"

#include "lifecycle/acme_job_common.hpp"
#include "lifecycle/acme_order_job.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/queue/job_types.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
namespace json = boost::json;
using detail::acme_allow_list_of;
using detail::run_cleanup;
using detail::run_revoke;
using detail::acme_job;
using detail::on_cpu;
using detail::trust_anchors;

namespace detail {

std::string trust_anchors(const std::string& account_ca, const std::string& extra) {
  if (account_ca.empty()) return extra;
  if (extra.empty()) return account_ca;
  return account_ca + "\n" + extra;
}

queue::outcome from_failure(const acme::failure& f) {
  if (f.permanent()) return queue::outcome::permanent_failure(f.message);
  auto wait = std::chrono::seconds(std::clamp<std::int64_t>(f.retry_after_s.value_or(0), 0, retry_after_cap_s));
  return queue::outcome::failure(f.message, std::chrono::duration_cast<std::chrono::milliseconds>(wait));
}

// acme_allow_list: the one egress policy of every CA URL and DNS-01 server (docs/acme.md). A
// value that no longer parses cannot be stored (the settings table validates it, and a stale
// one reads as the default), so this fails only on a bug; it then refuses everything.
net::egress_policy acme_allow_list_of(const settings_map& settings) {
  auto p = net::parse_egress_allow_list(settings.text("acme_allow_list"), "acme_allow_list");
  return p ? std::move(*p) : net::egress_policy{};
}

acme::client_options client_options_for(const acme_account_spec& account, const acme_job_options& opt,
                                        queue::job_context& ctx, const net::egress_policy& allow) {
  acme::client_options co;
  co.directory_url = account.directory_url;
  co.ca_pem = trust_anchors(account.ca_bundle_pem, opt.ca_pem);
  co.resolve_pool = opt.cpu;
  co.egress = &allow;
  co.log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
    co_await ctx.log(std::move(level), std::move(message));
  };
  return co;
}

}  // namespace detail

std::string acme_job_payload(std::string_view certificate_id, std::int64_t version) {
  json::object o{{"certificate_id", certificate_id}};
  if (version > 0) o["version"] = version;
  return json::serialize(o);
}

result<void> check_certificate_job_payload(const std::string& payload) {
  auto p = certfleet::json::object_reader::parse(payload, "payload");
  if (!p) return std::move(p).error();
  if (auto ok = p->only({"certificate_id", "version"}); !ok) return ok;
  auto id = p->required_string("certificate_id");
  if (!id) return std::move(id).error();
  auto version = p->optional_int("version");
  if (!version) return std::move(version).error();
  if (*version && **version < 1) return make_error(errc::invalid_argument, "payload.version must be >= 1", "payload.version");
  return {};
}

asio::awaitable<result<void>> register_acme_account(new_acme_account& account, const acme_job_options& opt) {
  auto key = co_await on_cpu<result<acme::account_key>>(opt.cpu, [] { return acme::account_key::generate(); });
  if (!key) co_return std::move(key).error();
  // The caller read acme_allow_list; without it, the setting's default (never loopback).
  net::egress_policy allow;
  if (opt.acme_allow_list) {
    auto parsed = net::parse_egress_allow_list(*opt.acme_allow_list, "acme_allow_list");
    if (!parsed) co_return std::move(parsed).error();
    allow = std::move(*parsed);
  } else {
    allow = acme_allow_list_of(settings_map{});
  }
  acme::client_options co;
  co.directory_url = account.spec.directory_url;
  co.ca_pem = trust_anchors(account.spec.ca_bundle_pem, opt.ca_pem);
  co.resolve_pool = opt.cpu;
  co.egress = &allow;
  acme::client client(std::move(co), *key);
  std::optional<acme::eab_credentials> eab;
  if (!account.spec.eab_kid.empty()) eab = acme::eab_credentials{account.spec.eab_kid, account.secret.eab_hmac_key};
  acme::account_request req(account.spec.contact, account.spec.terms_agreed, std::move(eab));
  auto registered = co_await client.new_account(std::move(req));
  if (!registered) {
    // A failure without an ACME answer has the client's uniform message (its cause went to the
    // server's log): the same answer for a closed port, a TLS error or a page that is not JSON.
    auto e = registered.failure().to_error();
    if (e.field.empty()) e.field = "directory_url";
    // Nor a Retry-After that only some non-ACME service would have sent.
    if (!registered.failure().detail.empty()) e.retry_after_s = 0;
    co_return e;
  }
  account.secret.account_key_pem = key->private_pem();
  account.spec.account_url = registered->url;
  account.spec.status = registered->account.status.empty() ? std::string("valid") : registered->account.status;
  co_return result<void>{};
}

void register_acme_handlers(queue::handler_registry& r, std::shared_ptr<const acme_job_options> options) {
  r.add(std::string(queue::job_names::revoke_certificate),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          co_return co_await run_revoke(ctx, *options);
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_revoke_job_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
  r.add(std::string(queue::job_names::cleanup_dns),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          co_return co_await run_cleanup(ctx, *options);
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_cleanup_dns_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
  for (bool renewal : {false, true}) {
    r.add(std::string(renewal ? queue::job_names::renew_certificate : queue::job_names::issue_certificate),
          [options, renewal](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
            acme_job job(ctx, *options, renewal ? acme_job::mode::renew : acme_job::mode::issue);
            co_return co_await job.run();
          },
          check_certificate_job_payload);
  }
  r.add(std::string(queue::job_names::validate_manual_dns),
        [options](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
          acme_job job(ctx, *options, acme_job::mode::validate_manual);
          co_return co_await job.run();
        },
        [](const std::string& payload) -> result<void> {
          auto p = parse_validate_dns_payload(payload);
          if (!p) return std::move(p).error();
          return {};
        });
}

}  // namespace certfleet::lifecycle
