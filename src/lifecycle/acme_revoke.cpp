// revoke_certificate: revokeCert at the CA (RFC 8555 §7.6), the certificate marked revoked.
#include "certfleet/lifecycle/acme_jobs.hpp"

#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/acme/keys.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"
#include "lifecycle/acme_job_common.hpp"

namespace certfleet::lifecycle::detail {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {
struct revoke_inputs {
  store::catalog_object cert, account;
  catalog::certificate_doc doc;
  acme_account_spec account_spec;
};

}  // namespace

// revokeCert (RFC 8555 §7.6) signed with the certificate's account key, for the current
// version; then, in one transaction, the certificate marked revoked and certificate.revoked fired.
// A CA that answers alreadyRevoked has the same state as one that just revoked: the certificate
// is marked all the same (a retried job whose first attempt revoked and then lost its lease).
asio::awaitable<queue::outcome> run_revoke(queue::job_context& ctx, const acme_job_options& opt) {
  auto p = parse_revoke_job_payload(ctx.payload());
  if (!p) co_return queue::outcome::permanent_failure(p.error());
  if (!opt.key) co_return queue::outcome::failure("no key-encryption key is loaded in this worker: secrets cannot be opened");
  const std::string project = ctx.job().project_id, cert_id = p->certificate_id;
  store::read_value_fn<revoke_inputs> read = [project, cert_id](store::catalog_read& rd) -> result<revoke_inputs> {
    revoke_inputs in;
    auto got = catalog::read_certificate(rd, project, cert_id);
    if (!got) return std::move(got).error();
    in.cert = std::move(got->object);
    in.doc = std::move(got->doc);
    if (in.doc.source != "acme" || !in.doc.acme)
      return make_error(errc::invalid_argument,
                        fmt::format("certificate {} was uploaded, not obtained from an ACME CA: certfleet revokes only the "
                                    "certificates it issued through ACME (revoke this one with the CA that issued it)",
                                    cert_id),
                        "certificate_id");
    if (in.doc.version == 0)
      return make_error(errc::invalid_argument, fmt::format("certificate {} has no issued version to revoke", cert_id),
                        "certificate_id");
    auto a = rd.get_object(project, store::kind_acme_account, in.doc.acme->acme_account_id);
    if (!a)
      return make_error(errc::invalid_argument,
                        fmt::format("the ACME account {} of certificate {} no longer exists: only the account that "
                                    "ordered a certificate (or its private key's holder) can revoke it",
                                    in.doc.acme->acme_account_id, cert_id),
                        "acme_account_id");
    in.account = std::move(*a);
    auto as = parse_acme_account_doc(in.account);
    if (!as) return std::move(as).error();
    in.account_spec = std::move(*as);
    return in;
  };
  auto in = co_await store::read_value(ctx.store().catalog(), std::move(read));
  if (!in) {
    if (in.error().is(errc::not_found) || in.error().is(errc::invalid_argument))
      co_return queue::outcome::permanent_failure(in.error());
    co_return queue::outcome::failure(in.error());
  }
  const std::string serial = in->doc.serial;
  if (!p->serial.empty() && p->serial != serial)
    co_return queue::outcome::permanent_failure(fmt::format(
        "certificate {} is at version {} (serial {}) now, not the version with serial {} this revocation was asked "
        "for: nothing was revoked; ask again to revoke the current version",
        cert_id, in->doc.version, serial, p->serial));
  if (in->doc.status == "revoked" && in->doc.revocation && in->doc.revocation->serial == serial) {
    co_await ctx.log("info", fmt::format("certificate {} (serial {}) is already revoked: nothing to do", cert_id, serial));
    co_return queue::outcome::ok();
  }
  const std::string reason_name = p->reason ? std::string(acme::revocation_reason_name(*p->reason)) : std::string();
  // Named first: GCC 12 and ?: inside a co_await expression.
  const std::string why = reason_name.empty() ? std::string(", no reason given")
                                              : fmt::format(", reason {} ({})", reason_name, *p->reason);
  auto line = fmt::format("revoking version {} (serial {}) of certificate {} ({}) at {} with ACME account {}{}",
                          in->doc.version, serial, in->cert.name, cert_id, in->account_spec.directory_url,
                          in->account.name, why);
  co_await ctx.log("info", std::move(line));

  auto secret = open_acme_account_secret(*opt.key, in->account);
  if (!secret) co_return queue::outcome::permanent_failure(fmt::format("ACME account {}: {}", in->account.name, secret.error().message));
  auto akey = acme::account_key::from_pem(secret->account_key_pem);
  if (!akey) co_return queue::outcome::permanent_failure(fmt::format("ACME account {}: {}", in->account.name, akey.error().message));
  auto der = acme::certificate_der(in->doc.cert_pem, "cert_pem");
  if (!der) co_return queue::outcome::permanent_failure(fmt::format("certificate {}: {}", cert_id, der.error().message));

  auto revoke_settings = co_await store::read_settings(ctx.store());
  const auto allow = acme_allow_list_of(revoke_settings);
  acme::client client(client_options_for(in->account_spec, opt, ctx, allow), *akey);
  auto dir = co_await client.get_directory();
  if (!dir) co_return from_failure(dir.failure());
  if (in->account_spec.account_url.empty()) {
    acme::account_request req(in->account_spec.contact, in->account_spec.terms_agreed, std::nullopt, true);
    auto acct = co_await client.new_account(std::move(req));
    if (!acct) co_return from_failure(acct.failure());
  } else {
    client.set_account_url(in->account_spec.account_url);
  }
  ctx.checkpoint();
  auto revoked = co_await client.revoke(std::move(*der), p->reason);
  if (!revoked) {
    const auto& f = revoked.failure();
    if (!f.problem || f.problem->acme_type() != "alreadyRevoked") co_return from_failure(f);
    co_await ctx.log("warn", fmt::format("the CA says serial {} is already revoked ({}): marking the certificate revoked",
                                         serial, f.problem->text()));
  }

  auto now = ctx.clock().now_ms();
  const std::string job_id = ctx.job().id, name = in->cert.name;
  auto marked = std::make_shared<bool>(false);
  store::tx_fn write = [=](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, project, cert_id);
    if (!got) return std::move(got).error();
    auto* cert = &got->object;
    auto* doc = &got->doc;
    // A renewal stored a newer version while the CA revoked this one: that one is not revoked.
    if (doc->serial != serial) return {};
    doc->status = "revoked";
    doc->revocation = catalog::certificate_revocation{serial, reason_name, now, job_id};
    if (auto u = tx.update_object_doc(cert_id, catalog::certificate_doc_json(*doc)); !u) return u;
    notify::fired_event e;
    e.project_id = project;
    e.event = notify::event_names::certificate_revoked;
    e.event_id = distribution::certificate_event_id(e.event, cert_id, serial);
    e.data = json::object{{"certificate_id", cert_id}, {"name", cert->name},  {"serial", serial},
                          {"reason", reason_name},     {"revoked_at", now},   {"source", "request"}};
    e.key_base = e.event_id;
    e.source.certificate_id = cert_id;
    e.source.parent_job_id = job_id;
    e.source.triggered_by = queue::triggers::revoke_certificate;
    auto fired = notify::fire_event(tx, e, now);
    if (!fired) return std::move(fired).error();
    *marked = true;
    return {};
  };
  if (auto w = co_await ctx.store().catalog().transact(std::move(write)); !w)
    co_return queue::outcome::failure(fmt::format("the CA revoked serial {}, but recording it failed: {}", serial,
                                                  w.error().message));
  if (*marked)
    co_await ctx.log("info", fmt::format("certificate {} ({}) marked revoked: serial {}", name, cert_id, serial));
  else
    co_await ctx.log("warn", fmt::format("serial {} was revoked at the CA, but certificate {} has a newer version now, "
                                         "which stays active",
                                         serial, cert_id));
  co_return queue::outcome::ok();
}

}  // namespace certfleet::lifecycle::detail
