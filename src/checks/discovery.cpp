// discovery_execute (DESIGN §12): one source's targets scanned by TLS handshakes under the
// concurrency limit and the per-endpoint deadline, every address checked against
// discovery_allow_list; each certificate seen is upserted by the SHA-256 of its leaf (one
// discovered_certificate object per project and leaf), with the endpoints it was seen at and its
// findings. Some endpoints failing is a partial result; a scan where nothing answered fails.
#include "certfleet/checks/discovery.hpp"

#include "certfleet/checks/checks.hpp"

#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/base64.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/net/tls_probe.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/store.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::checks {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr std::size_t max_list_entries = 1024;     // endpoints, cidrs, ports, sni: each
constexpr std::size_t max_seen_endpoints = 100;    // where one certificate was seen, newest kept
constexpr int expiring_days = 30;

error bad(std::string field, std::string message) { return make_error(errc::invalid_argument, std::move(message), std::move(field)); }

result<std::vector<std::string>> text_list(const json::object& o, std::string_view key) {
  std::vector<std::string> out;
  auto* v = o.if_contains(key);
  if (!v || v->is_null()) return out;
  if (!v->is_array()) return bad(std::string(key), fmt::format("{} must be an array of strings", key));
  if (v->as_array().size() > max_list_entries)
    return bad(std::string(key), fmt::format("{} has more than {} entries", key, max_list_entries));
  for (std::size_t i = 0; i < v->as_array().size(); ++i) {
    const auto& x = v->as_array()[i];
    if (!x.is_string() || x.as_string().empty() || x.as_string().size() > 253)
      return bad(fmt::format("{}[{}]", key, i), fmt::format("{}[{}] must be a non-empty string", key, i));
    out.emplace_back(x.as_string());
  }
  return out;
}

std::string str(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_string() ? std::string(v->as_string()) : std::string();
}
std::int64_t num(const json::object& o, std::string_view k) {
  auto* v = o.if_contains(k);
  return v && v->is_int64() ? v->as_int64() : 0;
}
json::object doc_of(const store::catalog_object& o) {
  boost::system::error_code ec;
  auto v = json::parse(o.doc, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}
json::array strings(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

std::string pem_of(std::string_view der) {
  auto b64 = base64_encode(der);
  std::string out = "-----BEGIN CERTIFICATE-----\n";
  for (std::size_t i = 0; i < b64.size(); i += 64) out += b64.substr(i, 64) + "\n";
  return out + "-----END CERTIFICATE-----\n";
}

}  // namespace

result<discovery_source_request> parse_discovery_source_request(std::string_view body) {
  auto v = certfleet::json::parse_value(body, "body", 8);
  if (!v) return std::move(v).error();
  if (!v->is_object()) return bad("body", "the body must be a JSON object");
  const auto& o = v->as_object();
  for (const auto& kv : o)
    if (kv.key() != "name" && kv.key() != "endpoints" && kv.key() != "cidrs" && kv.key() != "ports" &&
        kv.key() != "sni" && kv.key() != "schedule_s")
      return bad(kv.key().empty() ? std::string("body") : std::string(kv.key()), fmt::format("unknown member {}; a discovery source takes name, endpoints, cidrs, "
                                                    "ports, sni, schedule_s", std::string_view(kv.key()).substr(0, 64)));
  discovery_source_request r;
  auto* name = o.if_contains("name");
  if (!name || !name->is_string() || name->as_string().empty() || name->as_string().size() > 200)
    return bad("name", "name is required: a string of 1 to 200 characters");
  r.name = std::string(name->as_string());
  for (unsigned char c : r.name)
    if (c < 0x20 || c == 0x7f) return bad("name", "name must not contain control characters");
  auto endpoints = text_list(o, "endpoints");
  if (!endpoints) return std::move(endpoints).error();
  auto cidrs = text_list(o, "cidrs");
  if (!cidrs) return std::move(cidrs).error();
  auto sni = text_list(o, "sni");
  if (!sni) return std::move(sni).error();
  r.spec.endpoints = std::move(*endpoints);
  r.spec.cidrs = std::move(*cidrs);
  r.spec.sni = std::move(*sni);
  if (auto* p = o.if_contains("ports"); p && !p->is_null()) {
    if (!p->is_array() || p->as_array().size() > max_list_entries)
      return bad("ports", fmt::format("ports must be an array of at most {} port numbers", max_list_entries));
    for (std::size_t i = 0; i < p->as_array().size(); ++i) {
      const auto& x = p->as_array()[i];
      if (!x.is_int64()) return bad(fmt::format("ports[{}]", i), fmt::format("ports[{}] must be a port number", i));
      r.spec.ports.push_back(x.as_int64());
    }
  }
  if (auto* s = o.if_contains("schedule_s"); s && !s->is_null()) {
    if (!s->is_int64() || (s->as_int64() != 0 && (s->as_int64() < min_discovery_schedule_s ||
                                                   s->as_int64() > max_discovery_schedule_s)))
      return bad("schedule_s", fmt::format("schedule_s must be 0 (run by hand only) or {} to {} seconds",
                                           min_discovery_schedule_s, max_discovery_schedule_s));
    r.spec.schedule_s = s->as_int64();
  }
  return r;
}

std::string discovery_source_doc_json(const discovery_source_spec& spec, std::uint64_t targets,
                                      const json::object& last_run) {
  json::array ports;
  for (auto p : spec.ports) ports.emplace_back(p);
  json::object doc{{"endpoints", strings(spec.endpoints)}, {"cidrs", strings(spec.cidrs)},
                   {"ports", std::move(ports)},           {"sni", strings(spec.sni)},
                   {"schedule_s", spec.schedule_s},       {"targets", targets}};
  if (!last_run.empty()) doc["last_run"] = last_run;
  return json::serialize(doc);
}

discovery_source_spec parse_discovery_source_doc(const store::catalog_object& o) {
  discovery_source_spec s;
  auto d = doc_of(o);
  auto list = [&](std::string_view k, std::vector<std::string>& out) {
    if (auto* a = d.if_contains(k); a && a->is_array())
      for (const auto& x : a->as_array())
        if (x.is_string()) out.emplace_back(x.as_string());
  };
  list("endpoints", s.endpoints);
  list("cidrs", s.cidrs);
  list("sni", s.sni);
  if (auto* a = d.if_contains("ports"); a && a->is_array())
    for (const auto& x : a->as_array())
      if (x.is_int64()) s.ports.push_back(x.as_int64());
  s.schedule_s = num(d, "schedule_s");
  return s;
}

bool discovery_scan_due(const store::catalog_object& source, std::int64_t schedule_s, time_ms now) {
  if (schedule_s <= 0) return false;
  auto d = doc_of(source);
  time_ms since = source.created_at;
  if (auto* lr = d.if_contains("last_run"); lr && lr->is_object()) since = std::max(since, num(lr->as_object(), "finished_at"));
  return now - since >= schedule_s * 1000;
}

json::object discovery_source_view(const store::catalog_object& o) {
  auto d = doc_of(o);
  json::object v{{"id", o.id}, {"name", o.name}, {"created_at", certfleet::json::time_value(o.created_at)}};
  for (const char* k : {"endpoints", "cidrs", "ports", "sni"})
    v[k] = d.contains(k) ? d.at(k) : json::value(json::array{});
  v["schedule_s"] = num(d, "schedule_s");
  v["targets"] = num(d, "targets");
  if (auto* lr = d.if_contains("last_run"); lr && lr->is_object()) {
    auto run = lr->as_object();
    run["finished_at"] = certfleet::json::time_value(num(run, "finished_at"));
    v["last_run"] = std::move(run);
  } else {
    v["last_run"] = nullptr;
  }
  return v;
}

json::object discovered_certificate_view(const store::catalog_object& o) {
  auto d = doc_of(o);
  json::array endpoints;
  if (auto* a = d.if_contains("endpoints"); a && a->is_array())
    for (const auto& x : a->as_array()) {
      if (!x.is_object()) continue;
      auto e = x.as_object();
      e["last_seen_at"] = certfleet::json::time_value(num(e, "last_seen_at"));
      endpoints.push_back(std::move(e));
    }
  json::array findings;
  if (auto* a = d.if_contains("findings"); a && a->is_array())
    for (const auto& x : a->as_array())
      if (x.is_string())
        if (const auto* row = net::find_finding(x.as_string()))
          findings.push_back(json::object{{"name", row->name}, {"severity", row->severity}, {"text", row->text}});
  auto managed = str(d, "managed_certificate_id");
  return json::object{{"id", o.id},
                      {"fingerprint_sha256", o.name},
                      {"subject", str(d, "subject")},
                      {"issuer", str(d, "issuer")},
                      {"sans", d.contains("sans") ? d.at("sans") : json::value(json::array{})},
                      {"not_before", certfleet::json::time_value(num(d, "not_before"))},
                      {"not_after", certfleet::json::time_value(num(d, "not_after"))},
                      {"key_type", str(d, "key_type")},
                      {"key_bits", num(d, "key_bits")},
                      {"chain_length", num(d, "chain_length")},
                      {"findings", std::move(findings)},
                      {"endpoints", std::move(endpoints)},
                      {"first_seen_at", certfleet::json::time_value(num(d, "first_seen_at"))},
                      {"last_seen_at", certfleet::json::time_value(num(d, "last_seen_at"))},
                      {"managed_certificate_id", certfleet::json::text_value(managed)}};
}

result<void> check_discovered_filter(std::string_view source, std::string_view finding) {
  if (!finding.empty() && !net::find_finding(finding)) {
    std::string names;
    for (const auto& row : net::finding_table) names += (names.empty() ? "" : ", ") + std::string(row.name);
    return bad("finding", fmt::format("finding must be one of {}", names));
  }
  if (!source.empty() && !std::all_of(source.begin(), source.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      }))
    return bad("source", "source must be a discovery source's id");
  return {};
}

bool discovered_matches(const store::catalog_object& o, std::string_view source, std::string_view finding) {
  if (source.empty() && finding.empty()) return true;
  auto d = doc_of(o);
  if (!finding.empty()) {
    bool has = false;
    if (auto* a = d.if_contains("findings"); a && a->is_array())
      for (const auto& x : a->as_array()) has = has || (x.is_string() && x.as_string() == finding);
    if (!has) return false;
  }
  if (!source.empty()) {
    bool seen = false;
    if (auto* a = d.if_contains("endpoints"); a && a->is_array())
      for (const auto& x : a->as_array()) seen = seen || (x.is_object() && str(x.as_object(), "source_id") == source);
    if (!seen) return false;
  }
  return true;
}

std::string discovery_payload_json(std::string_view source_id) {
  return json::serialize(json::object{{"source_id", source_id}});
}
std::string discovery_run_key(std::string_view source_id, time_ms now) {
  return fmt::format("discovery:{}:{}", source_id, now / 60'000);
}
std::string discovery_schedule_key(std::string_view source_id, std::int64_t schedule_s, time_ms now) {
  return fmt::format("discovery:{}:s{}", source_id, now / (std::max<std::int64_t>(schedule_s, 1) * 1000));
}

namespace {

result<std::string> parse_payload(std::string_view payload) {
  auto r = certfleet::json::object_reader::parse(payload, "payload");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"source_id"}); !ok) return std::move(ok).error();
  auto id = r->required_string("source_id");
  if (!id) return std::move(id).error();
  if (id->empty() || id->size() > 64 || !std::all_of(id->begin(), id->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      }))
    return bad("payload.source_id", "payload.source_id must be a discovery source's id");
  return id;
}

// One successful handshake's certificate, upserted by the leaf's SHA-256 in the source's project.
result<void> upsert_discovered(store::catalog_tx& tx, const std::string& project_id, const std::string& source_id,
                               const net::probe_target& target, const net::probe_outcome& out,
                               const net::chain_assessment& a, time_ms now) {
  auto found = tx.objects_named(project_id, store::kind_discovered_certificate, a.sha256, 1);
  if (!found) return std::move(found).error();
  store::catalog_object o;
  json::object d;
  const bool fresh = found->empty() || (*found)[0].name != a.sha256;
  if (!fresh) {
    o = (*found)[0];
    d = doc_of(o);
  } else {
    o.id = new_object_id();
    o.project_id = project_id;
    o.kind = std::string(store::kind_discovered_certificate);
    o.name = a.sha256;
    o.created_at = now;
    d["first_seen_at"] = now;
    std::string chain;
    for (std::size_t i = 1; i < out.chain_der.size(); ++i) chain += pem_of(out.chain_der[i]);
    d["cert_pem"] = pem_of(out.chain_der.at(0));
    d["chain_pem"] = chain;
  }
  d["subject"] = a.subject;
  d["issuer"] = a.issuer;
  d["sans"] = strings(a.sans);
  d["not_before"] = a.not_before_ms;
  d["not_after"] = a.not_after_ms;
  d["key_type"] = a.key_type;
  d["key_bits"] = a.key_bits;
  d["chain_length"] = static_cast<std::int64_t>(a.chain_length);
  d["findings"] = strings(a.findings);
  d["last_seen_at"] = now;
  json::array seen;
  if (auto* e = d.if_contains("endpoints"); e && e->is_array()) seen = e->as_array();
  const auto endpoint = target.endpoint_text();
  auto same = [&](const json::value& x) {
    return x.is_object() && str(x.as_object(), "source_id") == source_id && str(x.as_object(), "endpoint") == endpoint &&
           str(x.as_object(), "sni") == target.sni;
  };
  seen.erase(std::remove_if(seen.begin(), seen.end(), same), seen.end());
  seen.push_back(json::object{{"source_id", source_id}, {"endpoint", endpoint}, {"address", out.address},
                              {"sni", target.sni},     {"protocol", out.protocol}, {"last_seen_at", now}});
  if (seen.size() > max_seen_endpoints) seen.erase(seen.begin(), seen.begin() + (seen.size() - max_seen_endpoints));
  d["endpoints"] = std::move(seen);
  o.doc = json::serialize(d);
  o.not_after = a.not_after_ms;
  if (fresh) {
    auto ins = tx.insert_object(o);
    if (!ins) return std::move(ins).error();
    return {};
  }
  return tx.update_object(o);
}

asio::awaitable<queue::outcome> run_discovery(queue::job_context& ctx, std::shared_ptr<const discovery_options> opt) {
  auto source_id = parse_payload(ctx.payload());
  if (!source_id) co_return queue::outcome::permanent_failure(source_id.error());
  const std::string project = ctx.job().project_id, id = *source_id;
  store::read_value_fn<store::catalog_object> read = [project, id](store::catalog_read& rd) {
    return rd.get_object(project, store::kind_discovery_source, id);
  };
  auto source = co_await store::read_value(ctx.store().catalog(), std::move(read));
  if (!source) {
    if (source.error().is(errc::not_found))
      co_return queue::outcome::permanent_failure(fmt::format("discovery source {} does not exist (deleted?)", id));
    co_return queue::outcome::failure(source.error());
  }
  auto settings = co_await store::read_settings(ctx.store());
  auto allow = parse_egress_allow_list(settings.text("discovery_allow_list"), "discovery_allow_list");
  if (!allow) co_return queue::outcome::permanent_failure(allow.error());
  const auto spec = parse_discovery_source_doc(*source);
  auto plan = net::parse_discovery_spec(spec.endpoints, spec.cidrs, spec.ports, spec.sni,
                                             static_cast<std::uint64_t>(settings.integer("discovery_max_addresses")));
  if (!plan) co_return queue::outcome::permanent_failure(plan.error());
  // Checked again at every run: the allow-list may have been narrowed since the source was made.
  if (auto ok = net::check_discovery_egress(*plan, *allow); !ok)
    co_return queue::outcome::permanent_failure(
        fmt::format("{} (discovery_allow_list decides what may be scanned)", ok.error().message));

  const auto total = static_cast<std::int64_t>(plan->size());
  auto line = fmt::format("scanning {} targets of source {} ({} at a time, {} ms each at most)", total, source->name,
                          settings.integer("discovery_concurrency"), settings.integer("discovery_endpoint_timeout_ms"));
  co_await ctx.log("info", std::move(line));
  co_await ctx.progress(0, total);

  struct tally {
    std::int64_t done = 0, certificates = 0, logged_failures = 0, store_errors = 0;
    std::string store_error;
  };
  auto t = std::make_shared<tally>();
  net::scan_options so;
  so.concurrency = static_cast<std::size_t>(settings.integer("discovery_concurrency"));
  so.per_endpoint_timeout = std::chrono::milliseconds(settings.integer("discovery_endpoint_timeout_ms"));
  so.egress = &*allow;
  so.resolve_pool = opt->cpu;
  so.stop_requested = [&ctx, t] { return ctx.interrupted() != queue::interrupt_reason::none || t->store_errors > 0; };
  const std::string source_name = source->name;
  auto on_result = [&ctx, t, project, id, total](std::uint64_t, const net::probe_target& target,
                                                 net::probe_outcome out) -> asio::awaitable<void> {
    ++t->done;
    if (!out.ok()) {
      // Listed endpoints are few and each failure matters; a range's closed ports are the norm.
      if (t->logged_failures < 100) {
        ++t->logged_failures;
        out.error = with_allow_list_named(std::move(out.error), "discovery_allow_list");
        auto msg = fmt::format("{}: {} ({})", target.endpoint_text(), net::probe_failure_name(out.failure), out.error);
        co_await ctx.log("warn", std::move(msg));
      }
    } else {
      const auto now = ctx.clock().now_ms();
      auto a = net::assess_chain(out.chain_der, target.expected_name(), out.protocol, now, expiring_days);
      if (!a) {
        auto msg = fmt::format("{}: the certificate it sent cannot be read: {}", target.endpoint_text(), a.error().message);
        co_await ctx.log("warn", std::move(msg));
      } else {
        auto assessed = std::make_shared<net::chain_assessment>(std::move(*a));
        auto outcome = std::make_shared<net::probe_outcome>(std::move(out));
        store::tx_fn fn = [project, id, target, outcome, assessed, now](store::catalog_tx& tx) {
          return upsert_discovered(tx, project, id, target, *outcome, *assessed, now);
        };
        auto w = co_await ctx.store().catalog().transact(std::move(fn));
        if (!w) {
          ++t->store_errors;
          t->store_error = w.error().message;
        } else {
          ++t->certificates;
          std::string findings;
          for (const auto& f : assessed->findings) findings += (findings.empty() ? "" : ", ") + f;
          auto msg = fmt::format("{}: {} ({}{}{})", target.endpoint_text(), assessed->subject, outcome->protocol,
                                 findings.empty() ? "" : "; findings: ", findings);
          std::string level = findings.empty() ? "info" : "warn";  // named: GCC 12 and co_await temporaries
          co_await ctx.log(std::move(level), std::move(msg));
        }
      }
    }
    if (t->done % 64 == 0 || t->done == total) co_await ctx.progress(t->done, total);
  };
  auto counts = co_await net::scan(*plan, std::move(so), std::move(on_result));
  ctx.checkpoint();
  if (t->store_errors > 0) co_return queue::outcome::failure(t->store_error);

  const auto finished = ctx.clock().now_ms();
  json::object last_run{{"job_id", ctx.job().id},
                        {"finished_at", finished},
                        {"scanned", static_cast<std::int64_t>(counts.total - counts.skipped)},
                        {"ok", static_cast<std::int64_t>(counts.ok)},
                        {"failed", static_cast<std::int64_t>(counts.failed())},
                        {"certificates", t->certificates}};
  const std::uint64_t targets = plan->size();
  store::tx_fn record = [project, id, spec, targets, last_run](store::catalog_tx& tx) -> result<void> {
    auto o = tx.get_object(project, store::kind_discovery_source, id);
    if (!o) return o.error().is(errc::not_found) ? result<void>{} : result<void>(std::move(o).error());
    o->doc = discovery_source_doc_json(spec, targets, last_run);
    return tx.update_object(*o);
  };
  if (auto w = co_await ctx.store().catalog().transact(std::move(record)); !w) co_return queue::outcome::failure(w.error());

  auto summary = fmt::format("scanned {} targets: {} handshakes, {} refused, {} timed out, {} TLS errors, {} unreachable, "
                             "{} not allowed; {} certificates recorded",
                             counts.total, counts.ok, counts.refused, counts.timeout, counts.tls_error, counts.unreachable,
                             counts.not_allowed, t->certificates);
  co_await ctx.log("info", summary);
  if (counts.ok == 0 && counts.failed() > 0)
    co_return queue::outcome::failure(fmt::format("no endpoint of source {} completed a TLS handshake ({} tried)",
                                                  source_name, counts.failed()));
  if (counts.failed() > 0) {
    auto why = fmt::format("{} of {} endpoints did not complete a TLS handshake", counts.failed(), counts.total);
    co_await ctx.log("warn", why);
    co_return queue::outcome::partial(std::move(why));
  }
  co_return queue::outcome::ok();
}

}  // namespace

void register_discovery_handler(queue::handler_registry& r, std::shared_ptr<const discovery_options> options) {
  auto validate = [](const std::string& payload) -> result<void> {
    auto p = parse_payload(payload);
    if (!p) return std::move(p).error();
    return {};
  };
  r.add(std::string(queue::job_names::discovery_execute),
        [options](queue::job_context& ctx) { return run_discovery(ctx, options); }, validate);
}

}  // namespace certfleet::checks
