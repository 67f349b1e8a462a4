// revocation_check (DESIGN §12): is any managed certificate revoked without our knowing? For each
// active certificate's current version: the CRL of its distribution points first (Let's Encrypt
// ended OCSP in 2025, so CRLs are what public CAs publish), OCSP when no CRL gave an answer. A
// revoked certificate is marked `revoked` and fires certificate.revoked in the same transaction;
// a CRL or responder that cannot be reached or trusted is a warning on the certificate, never a
// revocation.
#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/net/revocation.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/store.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <limits>
#include <map>
#include <mutex>
#include <random>

namespace certfleet::checks {

void register_domain_check(queue::handler_registry& r, std::shared_ptr<const check_options> options);  // domains.cpp

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// CRLs by URL, kept until their nextUpdate: a CA's CRL covers all its certificates, so one
// download per CA and period serves every certificate it issued, in this job and the next ones.
// Only bytes that passed check_crl once are kept; each certificate is still checked against them
// (its own issuer, its own serial).
class crl_cache {
 public:
  std::optional<std::string> find(const std::string& url, time_ms now) {
    std::lock_guard lock(m_);
    auto it = entries_.find(url);
    if (it == entries_.end()) return std::nullopt;
    if (it->second.next_update <= now) {
      entries_.erase(it);
      return std::nullopt;
    }
    return it->second.bytes;
  }
  void put(const std::string& url, std::string bytes, time_ms next_update) {
    std::lock_guard lock(m_);
    // Bounded: a fleet has a handful of CAs; a flood of distinct URLs only evicts.
    if (entries_.size() >= 256) entries_.erase(entries_.begin());
    entries_[url] = entry{std::move(bytes), next_update};
  }

 private:
  struct entry {
    std::string bytes;
    time_ms next_update = 0;
  };
  std::mutex m_;
  std::map<std::string, entry> entries_;
};

// The first certificate of a PEM chain: the leaf's issuer, as chains are stored leaf→root.
std::string first_pem(std::string_view chain) {
  constexpr std::string_view end_marker = "-----END CERTIFICATE-----";
  auto b = chain.find("-----BEGIN CERTIFICATE-----");
  if (b == std::string_view::npos) return {};
  auto e = chain.find(end_marker, b);
  if (e == std::string_view::npos) return {};
  return std::string(chain.substr(b, e + end_marker.size() - b)) + "\n";
}

std::string random_nonce() {
  std::random_device rd;
  std::string n(16, '\0');
  for (auto& c : n) c = static_cast<char>(rd() & 0xff);
  return n;
}

struct check_answer {
  catalog::revocation_check_info info;
  std::optional<net::revocation_verdict> revoked;  // set when revoked
};

struct check_limits {
  std::chrono::milliseconds timeout{15000};
  std::size_t crl_max_bytes = net::default_max_crl_bytes;
  const egress_policy* egress = nullptr;
  asio::thread_pool* pool = nullptr;
};

// One certificate: CRL URLs in order, then OCSP responders; the first trustworthy answer wins.
// Every refusal on the way is kept for the detail, so an operator reads why nothing answered.
asio::awaitable<check_answer> check_one(const catalog::certificate_doc& doc, crl_cache& cache, const check_limits& lim,
                                        time_ms now) {
  check_answer a;
  a.info.serial = doc.serial;
  a.info.checked_at = now;
  const std::string issuer = first_pem(doc.chain_pem);
  auto points = net::revocation_points_of(doc.cert_pem);
  if (!points) {
    a.info.status = "error";
    a.info.detail = points.error().message;
    co_return a;
  }
  if (points->crl_urls.empty() && points->ocsp_urls.empty()) {
    a.info.status = "unknown";
    a.info.detail = "the certificate names no CRL distribution point and no OCSP responder: its CA publishes no "
                    "revocation for it (common for private CAs)";
    co_return a;
  }
  if (issuer.empty()) {
    a.info.status = "error";
    a.info.detail = "no issuer certificate in the chain: a CRL or OCSP answer cannot be verified without it (upload "
                    "the certificate again with chain_pem)";
    co_return a;
  }
  std::vector<std::string> problems;
  auto named = [](std::string why) { return with_allow_list_named(std::move(why), "check_allow_list"); };
  auto settle = [&](const net::revocation_verdict& v, std::string_view source) {
    a.info.status = net::revocation_status_name(v.status);
    a.info.source = std::string(source);
    a.info.next_update = v.next_update_ms;
    a.info.detail.clear();
    if (v.status == net::revocation_status::revoked) a.revoked = v;
  };
  for (const auto& url : points->crl_urls) {
    auto bytes = cache.find(url, now);
    bool fresh = false;
    if (!bytes) {
      auto got = co_await net::fetch_crl(url, lim.timeout, lim.crl_max_bytes, lim.egress, lim.pool);
      if (!got) {
        problems.push_back(fmt::format("CRL {}: {}", url, named(got.error().message)));
        continue;
      }
      bytes = std::move(*got);
      fresh = true;
    }
    auto v = net::check_crl(*bytes, issuer, doc.cert_pem, now, lim.crl_max_bytes);
    if (!v) {
      problems.push_back(fmt::format("CRL {}: {}", url, v.error().message));
      continue;
    }
    if (fresh) cache.put(url, std::move(*bytes), v->next_update_ms);
    settle(*v, "crl");
    co_return a;
  }
  for (const auto& url : points->ocsp_urls) {
    const auto nonce = random_nonce();
    auto req = net::ocsp_request_der(doc.cert_pem, issuer, nonce);
    if (!req) {
      problems.push_back(fmt::format("OCSP {}: {}", url, req.error().message));
      continue;
    }
    auto resp = co_await net::query_ocsp(url, std::move(*req), lim.timeout, lim.egress, lim.pool);
    if (!resp) {
      problems.push_back(fmt::format("OCSP {}: {}", url, named(resp.error().message)));
      continue;
    }
    auto v = net::check_ocsp_response(*resp, doc.cert_pem, issuer, nonce, now);
    if (!v) {
      problems.push_back(fmt::format("OCSP {}: {}", url, v.error().message));
      continue;
    }
    settle(*v, "ocsp");
    if (v->status == net::revocation_status::unknown)
      a.info.detail = fmt::format("the OCSP responder {} does not know this certificate", url);
    co_return a;
  }
  a.info.status = "error";
  std::string detail;
  for (const auto& p : problems) detail += (detail.empty() ? "" : "; ") + p;
  a.info.detail = std::move(detail);
  co_return a;
}

// Records the answer on the certificate, if it is still the version that was checked; a
// revocation also marks it and fires certificate.revoked, in the same transaction.
asio::awaitable<result<void>> record_answer(store::store& st, const store::catalog_object& cert,
                                            const check_answer& a, std::string job_id, time_ms now) {
  store::tx_fn fn = [cert, a, job_id, now](store::catalog_tx& tx) -> result<void> {
    auto got = catalog::read_certificate(tx, cert.project_id, cert.id);
    if (!got) return got.error().is(errc::not_found) ? result<void>{} : result<void>(std::move(got).error());
    auto& doc = got->doc;
    if (doc.serial != a.info.serial || doc.status == "revoked") return {};  // renewed or revoked meanwhile
    doc.revocation_check = a.info;
    if (!a.revoked) return tx.update_object_doc(cert.id, catalog::certificate_doc_json(doc));
    doc.status = "revoked";
    catalog::certificate_revocation rv;
    rv.serial = doc.serial;
    rv.reason = a.revoked->reason;
    rv.revoked_at = a.revoked->revoked_at_ms;
    rv.source = a.info.source;
    doc.revocation = rv;
    if (auto u = tx.update_object_doc(cert.id, catalog::certificate_doc_json(doc)); !u) return u;
    notify::fired_event e;
    e.project_id = cert.project_id;
    e.event = notify::event_names::certificate_revoked;
    // The id a revocation through certfleet uses too: one notification per serial, whoever saw it.
    e.event_id = distribution::certificate_event_id(e.event, cert.id, doc.serial);
    e.data = json::object{{"certificate_id", cert.id}, {"name", got->object.name},
                          {"serial", doc.serial},      {"reason", rv.reason},
                          {"revoked_at", rv.revoked_at}, {"source", rv.source}};
    e.key_base = e.event_id;
    e.source.certificate_id = cert.id;
    e.source.parent_job_id = job_id;
    e.source.triggered_by = queue::triggers::revocation_check;
    auto fired = notify::fire_event(tx, e, now);
    if (!fired) return std::move(fired).error();
    return {};
  };
  co_return co_await st.catalog().transact(std::move(fn));
}

asio::awaitable<queue::outcome> run_revocation_check(queue::job_context& ctx, std::shared_ptr<const check_options> opt,
                                                     std::shared_ptr<crl_cache> cache) {
  if (!ctx.payload().empty() && ctx.payload() != "{}") {
    if (auto ok = certfleet::json::check_object(ctx.payload(), "payload"); !ok)
      co_return queue::outcome::permanent_failure(ok.error());
  }
  auto settings = co_await store::read_settings(ctx.store());
  auto allow = parse_egress_allow_list(settings.text("check_allow_list"), "check_allow_list");
  if (!allow) co_return queue::outcome::permanent_failure(allow.error());
  check_limits lim;
  lim.timeout = std::chrono::seconds(settings.integer("check_fetch_timeout_s"));
  lim.crl_max_bytes = static_cast<std::size_t>(settings.integer("revocation_crl_max_bytes"));
  lim.egress = &*allow;
  lim.pool = opt->cpu;

  // The scheduler's hourly job checks every project; a user's job only its own.
  const auto& job = ctx.job();
  const bool every_project = queue::from_scheduler(job.triggered_by);
  std::string project = job.project_id;
  store::read_value_fn<std::vector<store::catalog_object>> read =
      [project, every_project](store::catalog_read& rd) -> result<std::vector<store::catalog_object>> {
    auto all = rd.objects_by_not_after(store::kind_certificate, std::numeric_limits<time_ms>::max(), 100'000);
    if (!all || every_project) return all;
    std::erase_if(*all, [&](const store::catalog_object& o) { return o.project_id != project; });
    return all;
  };
  auto certs = co_await store::read_value(ctx.store().catalog(), std::move(read));
  if (!certs) co_return queue::outcome::failure(certs.error());

  std::int64_t examined = 0, revoked = 0, errors = 0, unknown = 0, done = 0;
  const auto total = static_cast<std::int64_t>(certs->size());
  co_await ctx.progress(0, total);
  for (const auto& cert : *certs) {
    ctx.checkpoint();
    auto doc = catalog::parse_certificate_doc(cert);
    const auto now = ctx.clock().now_ms();
    // Only what is served today: not an unissued, expired or already revoked certificate.
    if (!doc || doc->status != "active" || doc->not_after <= now) {
      co_await ctx.progress(++done, total);
      continue;
    }
    ++examined;
    auto a = co_await check_one(*doc, *cache, lim, now);
    // Each line is built before it is awaited: GCC 12 mishandles temporaries inside co_await.
    std::string level = "info", line;
    if (a.revoked) {
      ++revoked;
      level = "warn";
      const auto when = certfleet::json::time_value(a.revoked->revoked_at_ms);
      const std::string reason = a.revoked->reason.empty() ? std::string("not given") : a.revoked->reason;
      line = fmt::format("certificate {} ({}): REVOKED per {} at {}, reason {}", cert.name, cert.id, a.info.source,
                         when.is_string() ? std::string(when.as_string()) : std::string("an unknown time"), reason);
    } else if (a.info.status == "error") {
      ++errors;
      level = "warn";
      line = fmt::format("certificate {} ({}): revocation not checked: {}", cert.name, cert.id, a.info.detail);
    } else if (a.info.status == "unknown") {
      ++unknown;
      line = fmt::format("certificate {} ({}): unknown: {}", cert.name, cert.id, a.info.detail);
    } else {
      line = fmt::format("certificate {} ({}): good per {}", cert.name, cert.id, a.info.source);
    }
    // The scheduler's job lives in the default project, whose viewers must not read other
    // projects' names: those are counted in the summary only.
    if (cert.project_id == job.project_id) co_await ctx.log(std::move(level), std::move(line));
    const auto recorded_at = ctx.clock().now_ms();
    if (auto w = co_await record_answer(ctx.store(), cert, a, job.id, recorded_at); !w)
      co_return queue::outcome::failure(w.error());
    co_await ctx.progress(++done, total);
  }
  auto summary = fmt::format("examined {} certificates: {} revoked, {} good, {} unknown, {} not checked", examined,
                             revoked, examined - revoked - errors - unknown, unknown, errors);
  co_await ctx.log("info", std::move(summary));
  if (examined > 0 && errors == examined)
    co_return queue::outcome::failure(
        fmt::format("revocation could not be checked for any of the {} certificates: no CRL or OCSP responder answered "
                    "(see the log)", examined));
  if (errors > 0) {
    // A partial result keeps no error text on the job: its log says what the partial was.
    auto why = fmt::format("revocation could not be checked for {} of {} certificates: CRL or OCSP unreachable or "
                           "refused (the lines above name each URL and why)", errors, examined);
    co_await ctx.log("warn", why);
    co_return queue::outcome::partial(std::move(why));
  }
  co_return queue::outcome::ok();
}

}  // namespace

void register_check_handlers(queue::handler_registry& r, std::shared_ptr<const check_options> options) {
  auto cache = std::make_shared<crl_cache>();
  auto validate = [](const std::string& payload) -> result<void> {
    if (payload.empty()) return {};
    auto rd = certfleet::json::object_reader::parse(payload, "payload");
    if (!rd) return std::move(rd).error();
    return rd->only({});
  };
  r.add(std::string(queue::job_names::revocation_check),
        [options, cache](queue::job_context& ctx) { return run_revocation_check(ctx, options, cache); }, validate);
  register_domain_check(r, options);
}

}  // namespace certfleet::checks
