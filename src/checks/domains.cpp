// Domain objects and the domain expiration check (DESIGN §12). A lookup asks RDAP first (the
// registry's server from IANA's bootstrap file) and WHOIS when RDAP cannot answer; the expiry it
// finds is the object's not_after, so the check visits unknown and soonest-expiring domains first.
// Each domain is one transaction: its document and its notification jobs commit together.
#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/net/domain_registry.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/store.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace certfleet::checks {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {
constexpr time_ms day_ms = 86'400'000;
constexpr std::string_view thresholds_setting = "domain_expiry_thresholds_days";

std::string str(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
std::int64_t num(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_int64() ? v->as_int64() : 0;
}
}  // namespace

result<std::string> parse_domain_request(std::string_view body) {
  auto r = certfleet::json::object_reader::parse(body);
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"name"}); !ok) return std::move(ok).error();
  auto name = r->required_string("name");
  if (!name) return std::move(name).error();
  std::string n = *name;
  if (!n.empty() && n.back() == '.') n.pop_back();
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!valid_dns_name(n) || n.find('.') == std::string::npos || n.find('_') != std::string::npos)
    return make_error(errc::invalid_argument,
                      fmt::format("name must be a registered domain name like example.com (letters, digits and '-' in "
                                  "dot-separated labels; IDNs in their xn-- form), got \"{}\"",
                                  std::string_view(*name).substr(0, 100)),
                      "name");
  return n;
}

domain_doc parse_domain_doc(const store::catalog_object& o) {
  domain_doc d;
  boost::system::error_code ec;
  auto v = json::parse(o.doc, ec);
  if (ec || !v.is_object()) return d;
  const auto& doc = v.as_object();
  d.expires_at = num(doc, "expires_at");
  d.registrar = str(doc, "registrar");
  if (auto* s = doc.if_contains("statuses"); s && s->is_array())
    for (const auto& x : s->as_array())
      if (x.is_string()) d.statuses.emplace_back(x.as_string());
  d.source = str(doc, "source");
  d.server = str(doc, "server");
  d.checked_at = num(doc, "checked_at");
  d.last_error = str(doc, "last_error");
  if (auto* s = doc.if_contains("notified_days"); s && s->is_array())
    for (const auto& x : s->as_array())
      if (x.is_int64()) d.notified_days.push_back(x.as_int64());
  return d;
}

std::string domain_doc_json(const domain_doc& d) {
  json::array statuses, notified;
  for (const auto& s : d.statuses) statuses.emplace_back(s);
  for (auto n : d.notified_days) notified.emplace_back(n);
  return json::serialize(json::object{{"expires_at", d.expires_at},
                                      {"registrar", d.registrar},
                                      {"statuses", std::move(statuses)},
                                      {"source", d.source},
                                      {"server", d.server},
                                      {"checked_at", d.checked_at},
                                      {"last_error", d.last_error},
                                      {"notified_days", std::move(notified)}});
}

json::object domain_view(const store::catalog_object& o) {
  auto d = parse_domain_doc(o);
  std::string_view state = "unknown";
  if (d.expires_at != 0) state = d.notified_days.empty() ? "ok" : "expiring";
  else if (!d.last_error.empty()) state = "error";
  json::array statuses;
  for (const auto& s : d.statuses) statuses.emplace_back(s);
  return json::object{{"id", o.id},
                      {"name", o.name},
                      {"created_at", certfleet::json::time_value(o.created_at)},
                      {"state", state},
                      {"expires_at", certfleet::json::time_value(d.expires_at)},
                      {"registrar", certfleet::json::text_value(d.registrar)},
                      {"statuses", std::move(statuses)},
                      {"source", certfleet::json::text_value(d.source)},
                      {"server", certfleet::json::text_value(d.server)},
                      {"checked_at", certfleet::json::time_value(d.checked_at)},
                      {"last_error", certfleet::json::text_value(d.last_error)}};
}

domain_expiry_step plan_domain_expiry(const domain_doc& before, time_ms expires_at, time_ms now,
                                      const std::vector<std::int64_t>& thresholds) {
  domain_expiry_step s;
  s.renewed = before.expires_at != 0 && expires_at > before.expires_at;
  auto notified = [&](std::int64_t t) {
    return !s.renewed &&
           std::find(before.notified_days.begin(), before.notified_days.end(), t) != before.notified_days.end();
  };
  // Thresholds come largest first: the last one crossed is the tightest.
  for (auto t : thresholds)
    if (expires_at - now <= t * day_ms && !notified(t)) s.newly_crossed.push_back(t);
  if (!s.newly_crossed.empty()) s.notify_days = s.newly_crossed.back();
  return s;
}

std::string with_allow_list_named(std::string message, std::string_view setting) {
  constexpr std::string_view generic = "egress_allow_list";
  if (auto at = message.find(generic); at != std::string::npos) message.replace(at, generic.size(), setting);
  return message;
}

std::string revocation_check_key(time_ms now) { return fmt::format("rev_check:{}", now / 3'600'000); }
std::string domain_check_key(time_ms now) { return fmt::format("domain_check:{}", now / 3'600'000); }
std::string domain_check_now_key(std::string_view domain_id, time_ms now) {
  return fmt::format("domain_check:{}:{}", domain_id, now / 60'000);
}

result<domain_check_payload> parse_domain_check_payload(std::string_view payload) {
  domain_check_payload p;
  if (payload.empty()) return p;
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"domain_id"}); !ok) return std::move(ok).error();
  auto id = r->optional_string("domain_id");
  if (!id) return std::move(id).error();
  if (*id) {
    const auto& v = **id;
    if (v.empty() || v.size() > 64 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }))
      return make_error(errc::invalid_argument, "payload.domain_id must be a domain's id", "payload.domain_id");
    p.domain_id = v;
  }
  return p;
}

std::string domain_check_payload_json(std::string_view domain_id) {
  return json::serialize(json::object{{"domain_id", domain_id}});
}

namespace {

// The bootstrap table for this check: the operator's file when rdap_bootstrap_file names one,
// else the snapshot in the binary. A file that cannot be read or parsed fails the job naming the
// setting: silently using the old snapshot would hide that the operator's update did not apply.
result<net::rdap_bootstrap> bootstrap_for(const check_options& o) {
  if (o.rdap_bootstrap_file.empty()) return net::shipped_rdap_bootstrap();
  std::ifstream in(o.rdap_bootstrap_file, std::ios::binary);
  if (!in)
    return make_error(errc::config_invalid,
                      fmt::format("rdap_bootstrap_file {} cannot be read", o.rdap_bootstrap_file), "rdap_bootstrap_file");
  std::ostringstream text;
  text << in.rdbuf();
  auto table = net::parse_rdap_bootstrap(text.str());
  if (!table)
    return make_error(errc::config_invalid,
                      fmt::format("rdap_bootstrap_file {}: {}", o.rdap_bootstrap_file, table.error().message),
                      "rdap_bootstrap_file");
  return table;
}

// Records one lookup's answer (or failure) on the domain, and its notification, in one
// transaction. Returns the notifications enqueued.
asio::awaitable<result<int>> record_lookup(store::store& st, const store::catalog_object& domain,
                                           const result<net::domain_registration>& found,
                                           std::vector<std::int64_t> thresholds, time_ms now) {
  auto sent = std::make_shared<int>(0);
  std::optional<net::domain_registration> reg;
  std::string failure;
  if (found) reg = *found;
  else failure = found.error().message;
  failure = with_allow_list_named(std::move(failure), "check_allow_list");
  store::tx_fn fn = [domain, reg, failure, thresholds, now, sent](store::catalog_tx& tx) -> result<void> {
    // Re-read inside the transaction: an overlapping check may have recorded a threshold.
    auto fresh = tx.get_object(domain.project_id, store::kind_domain, domain.id);
    if (!fresh) return {};  // deleted meanwhile
    auto d = parse_domain_doc(*fresh);
    d.checked_at = now;
    if (!reg) {
      // The last good answer stays: a registry that is down says nothing about the expiry.
      d.last_error = failure;
      fresh->doc = domain_doc_json(d);
      return tx.update_object(*fresh);
    }
    d.last_error.clear();
    d.source = reg->source;
    d.server = reg->server;
    d.registrar = reg->registrar;
    d.statuses = reg->statuses;
    if (reg->expires_at_ms) {
      auto step = plan_domain_expiry(d, *reg->expires_at_ms, now, thresholds);
      if (step.renewed) d.notified_days.clear();
      d.expires_at = *reg->expires_at_ms;
      for (auto t : step.newly_crossed) d.notified_days.push_back(t);
      if (step.notify_days) {
        notify::fired_event e;
        e.project_id = domain.project_id;
        e.event = notify::event_names::domain_expiring;
        e.event_id = fmt::format("{}:{}:{}:{}", e.event, domain.id, d.expires_at / 1000, *step.notify_days);
        e.data = json::object{{"domain_id", domain.id},
                              {"name", domain.name},
                              {"expires_at", d.expires_at},
                              {"days_threshold", *step.notify_days},
                              {"registrar", d.registrar}};
        e.key_base = fmt::format("domain_expiring:{}:{}:{}", domain.id, d.expires_at / 1000, *step.notify_days);
        e.source.triggered_by = queue::triggers::domain_expiration_check;
        auto fired = notify::fire_event(tx, e, now);
        if (!fired) return std::move(fired).error();
        *sent += *fired;
      }
    } else {
      d.last_error = fmt::format("the {} answer for {} gives no expiration date", reg->source, domain.name);
    }
    fresh->doc = domain_doc_json(d);
    fresh->not_after = d.expires_at;
    return tx.update_object(*fresh);
  };
  if (auto w = co_await st.catalog().transact(std::move(fn)); !w) co_return std::move(w).error();
  co_return *sent;
}

asio::awaitable<queue::outcome> run_domain_check(queue::job_context& ctx, std::shared_ptr<const check_options> opt) {
  auto payload = parse_domain_check_payload(ctx.payload());
  if (!payload) co_return queue::outcome::permanent_failure(payload.error());
  auto settings = co_await store::read_settings(ctx.store());
  auto thresholds = parse_expiry_thresholds(settings.text(thresholds_setting), thresholds_setting);
  if (!thresholds) co_return queue::outcome::permanent_failure(thresholds.error());
  auto bootstrap = bootstrap_for(*opt);
  if (!bootstrap) co_return queue::outcome::failure(bootstrap.error());
  auto allow = parse_egress_allow_list(settings.text("check_allow_list"), "check_allow_list");
  if (!allow) co_return queue::outcome::permanent_failure(allow.error());

  // Which domains: the one asked for; every project's for the scheduler's hourly job; else the
  // job's own project (a user's job never reads another project's objects).
  const auto& job = ctx.job();
  const bool every_project = payload->domain_id.empty() && queue::from_scheduler(job.triggered_by);
  std::string project = job.project_id, only = payload->domain_id;
  store::read_value_fn<std::vector<store::catalog_object>> read =
      [project, only, every_project](store::catalog_read& rd) -> result<std::vector<store::catalog_object>> {
    if (!only.empty()) {
      auto o = rd.get_object(project, store::kind_domain, only);
      if (!o) return std::move(o).error();
      return std::vector<store::catalog_object>{*o};
    }
    auto all = rd.objects_by_not_after(store::kind_domain, std::numeric_limits<time_ms>::max(), 100'000);
    if (!all || every_project) return all;
    std::erase_if(*all, [&](const store::catalog_object& o) { return o.project_id != project; });
    return all;
  };
  auto domains = co_await store::read_value(ctx.store().catalog(), std::move(read));
  if (!domains) {
    if (domains.error().is(errc::not_found))
      co_return queue::outcome::permanent_failure(fmt::format("domain {} does not exist (deleted?)", only));
    co_return queue::outcome::failure(domains.error());
  }

  net::registration_options lo;
  lo.bootstrap = &*bootstrap;
  lo.rdap_timeout = lo.whois_timeout = std::chrono::seconds(settings.integer("check_fetch_timeout_s"));
  lo.egress = &*allow;
  lo.resolve_pool = opt->cpu;
  lo.rdap_ca_pem = opt->ca_pem;
  lo.max_referrals = 2;  // IANA → registry → registrar
  if (auto whois = settings.text("domain_whois_server"); !whois.empty()) {
    auto colon = whois.rfind(':');  // the setting's validator guarantees HOST:PORT
    lo.whois_server = whois.substr(0, colon);
    lo.whois_port = static_cast<std::uint16_t>(std::stoi(whois.substr(colon + 1)));
  } else {
    lo.whois_fallback = false;
  }

  const auto total = static_cast<std::int64_t>(domains->size());
  std::int64_t done = 0, failed = 0, notifications = 0;
  co_await ctx.progress(0, total);
  for (const auto& d : *domains) {
    ctx.checkpoint();
    std::string name = d.name;
    auto found = co_await net::lookup_domain_registration(std::move(name), lo);
    const auto now = ctx.clock().now_ms();
    // Built before it is awaited: GCC 12 mishandles temporaries inside co_await.
    std::string level = "info", line;
    if (found) {
      const auto when = found->expires_at_ms ? certfleet::json::time_value(*found->expires_at_ms) : json::value(nullptr);
      const std::string expires = when.is_string() ? std::string(when.as_string()) : std::string("unknown");
      const std::string registrar = found->registrar.empty() ? std::string("not named") : found->registrar;
      line = fmt::format("{}: expires {} (registrar {}; {} from {})", d.name, expires, registrar, found->source,
                         found->server);
    } else {
      ++failed;
      level = "warn";
      auto why = with_allow_list_named(found.error().message, "check_allow_list");
      line = fmt::format("{}: lookup failed: {}", d.name, why);
    }
    // The scheduler's job lives in the default project, whose viewers must not read other
    // projects' names: those are counted in the summary only.
    if (d.project_id == job.project_id) co_await ctx.log(std::move(level), std::move(line));
    auto rec = co_await record_lookup(ctx.store(), d, found, *thresholds, now);
    if (!rec) co_return queue::outcome::failure(rec.error());
    notifications += *rec;
    co_await ctx.progress(++done, total);
  }
  auto summary = fmt::format("checked {} domains: {} looked up, {} failed, {} notifications enqueued", total,
                             total - failed, failed, notifications);
  co_await ctx.log("info", std::move(summary));
  if (total > 0 && failed == total)
    co_return queue::outcome::failure(fmt::format("no registry answered for any of the {} domains (see the log)", total));
  if (failed > 0) {
    // A partial result keeps no error text on the job: its log says what the partial was.
    auto why = fmt::format("{} of {} domains could not be looked up (the lines above say why)", failed, total);
    co_await ctx.log("warn", why);
    co_return queue::outcome::partial(std::move(why));
  }
  co_return queue::outcome::ok();
}

}  // namespace

void register_domain_check(queue::handler_registry& r, std::shared_ptr<const check_options> options) {
  auto validate = [](const std::string& payload) -> result<void> {
    auto p = parse_domain_check_payload(payload);
    if (!p) return std::move(p).error();
    return {};
  };
  r.add(std::string(queue::job_names::domain_expiration_check),
        [options](queue::job_context& ctx) { return run_domain_check(ctx, options); }, validate);
}

}  // namespace certfleet::checks
