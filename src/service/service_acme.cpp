// ACME accounts and DNS providers as the service creates them (service_common.hpp's creators):
// an account is registered at its CA before it is stored, and an exec provider, which runs a
// program on the worker host, needs a system admin.
#include "service/service_common.hpp"

#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/store/settings.hpp"

namespace certfleet::service::detail {

boost::asio::awaitable<result<new_object>> create_acme_account(const create_context& ctx, std::string body) {
  if (!ctx.key) co_return no_key();
  auto a = lifecycle::parse_acme_account_request(body);
  if (!a) co_return std::move(a).error();
  // Registration is synchronous (DESIGN §9): the CA's refusal is the answer, nothing stored.
  lifecycle::acme_job_options ao;
  ao.key = ctx.key;
  ao.cpu = ctx.cpu;
  ao.ca_pem = ctx.ca_pem;
  auto acme_settings = co_await store::read_settings(ctx.st);
  ao.acme_allow_list = acme_settings.text("acme_allow_list");
  auto reg = co_await lifecycle::register_acme_account(*a, ao);
  if (!reg) co_return std::move(reg).error();
  auto o = lifecycle::make_acme_account_object(*a, *ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  co_return new_object{std::move(*o), {}};
}

boost::asio::awaitable<result<new_object>> create_dns_provider(const create_context& ctx, std::string body) {
  if (!ctx.key) co_return no_key();
  auto p = lifecycle::parse_dns_provider_request(body);
  if (!p) co_return std::move(p).error();
  if (p->spec.exec()) {
    if (!ctx.who.system_admin)
      co_return make_error(errc::forbidden,
                           "exec DNS providers run a program on the worker host as certfleet's user: only a "
                           "system-admin token may create one",
                           "kind");
    p->spec.created_by_system_admin = ctx.who.actor.empty() ? std::string("system") : ctx.who.actor;
  }
  auto o = lifecycle::make_dns_provider_object(*p, *ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  co_return new_object{std::move(*o), {}};
}

}  // namespace certfleet::service::detail
