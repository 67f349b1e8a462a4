#include "certfleet/distribution/service.hpp"

#include "certfleet/distribution/checks.hpp"
#include "certfleet/distribution/discovery.hpp"
#include "certfleet/net/tls_probe.hpp"
#include "certfleet/core/allow_list.hpp"

#include "certfleet/core/crash.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/distribution/acme_catalog.hpp"
#include "certfleet/distribution/acme_jobs.hpp"
#include "certfleet/distribution/acme_workflow.hpp"
#include "certfleet/distribution/catalog.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/distribution/checks.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/distribution/events.hpp"
#include "certfleet/distribution/notify.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/approval.hpp"
#include "certfleet/distribution/redrive.hpp"
#include "certfleet/distribution/runs.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace certfleet::distribution {

namespace json = boost::json;
using store::catalog_object;

namespace {

// The stored ssh_allow_list, for a route that contacts an SSH target (the create check,
// scan-host-key): a value that no longer parses is the caller's error (a job refuses every
// destination instead).
boost::asio::awaitable<result<net::egress_policy>> read_ssh_allow_list(store::store& st) {
  auto settings = co_await store::read_settings(st);
  auto allow = net::parse_egress_allow_list(settings.text("ssh_allow_list"), "ssh_allow_list");
  if (!allow) co_return std::move(allow).error();
  co_return std::move(*allow);
}

// `allow` must outlive the options.
delivery::ssh_options ssh_dial_options(boost::asio::thread_pool* cpu, const net::egress_policy& allow) {
  delivery::ssh_options so;
  so.resolve_pool = cpu;
  so.allow = &allow;
  return so;
}

error no_key() {
  return make_error(errc::shutting_down, "no key-encryption key is loaded in this process: secrets cannot be sealed or opened",
                    "key_file");
}

json::object page_view(json::array items, int page, int page_size, std::int64_t total) {
  return json::object{{"items", std::move(items)}, {"page", page}, {"page_size", page_size}, {"total", total}};
}

json::object result_view(const store::target_result& r) {
  json::object o{{"target_id", r.target_id},         {"status", r.status},         {"retry_attempt", r.retry_attempt},
                 {"job_id", r.job_id},               {"started_at", certfleet::json::time_value(r.started_at)}, {"finished_at", certfleet::json::time_value(r.finished_at)},
                 {"hash_skipped", r.hash_skipped}};
  if (!r.error_class.empty()) o["error_class"] = r.error_class;
  if (!r.error.empty()) o["error"] = r.error;
  if (!r.fingerprint_sha256.empty()) o["fingerprint_sha256"] = r.fingerprint_sha256;
  if (r.files_from_run) o["files_from_run"] = r.files_from_run;
  boost::system::error_code ec;
  auto detail = json::parse(r.detail, ec);
  if (!ec && detail.is_object()) {
    const auto& d = detail.as_object();
    if (auto* t = d.if_contains("timings_ms")) o["timings_ms"] = *t;
    if (auto* w = d.if_contains("session_wait_ms")) o["session_wait_ms"] = *w;
    if (auto* c = d.if_contains("reused_connection")) o["reused_connection"] = *c;
    // Admins only: the results route drops it for lower roles (strip_admin_detail).
    if (auto* e = d.if_contains("error_detail")) o["error_detail"] = *e;
  }
  return o;
}

// A kind's missing referenced object is bad input naming the field that referenced it. A webhook
// signing secret must be a password credential: anything else would send unsigned requests.
result<void> check_ref(store::catalog_read& rd, const std::string& project, std::string_view kind,
                       const std::string& id, std::string field) {
  if (id.empty()) return {};
  auto o = rd.get_object(project, kind, id);
  if (!o) {
    if (o.error().is(errc::not_found))
      return make_error(errc::invalid_argument, fmt::format("unknown {} {}", kind, id), std::move(field));
    return std::move(o).error();
  }
  if (field.find("secret_credential_id") != std::string::npos && o->doc.find(R"("kind":"password")") == std::string::npos)
    return make_error(errc::invalid_argument,
                      fmt::format("credential {} is not a password credential: a webhook secret must be one", id),
                      std::move(field));
  return {};
}

// Enqueues a certificate's ACME job (issue, renew, revoke) inside the caller's transaction, with
// the job type's attempts from the type table.
result<store::enqueue_outcome> enqueue_certificate_job(store::catalog_tx& tx, const std::string& project_id,
                                                       const std::string& certificate_id, std::string_view type,
                                                       std::string payload, std::string key, const std::string& actor,
                                                       time_ms now) {
  queue::enqueue_request j;
  j.project_id = project_id;
  j.type = std::string(type);
  j.payload = std::move(payload);
  j.idempotency_key = std::move(key);
  j.certificate_id = certificate_id;
  j.triggered_by = actor;
  return queue::enqueue_in(tx.jobs(), j, now);
}

}  // namespace

service::service(store::store& st, queue::queue_service& queue, const clock_source& clock, const kek* key,
                 boost::asio::thread_pool* cpu, std::string ca_pem)
    : st_(st), queue_(queue), clock_(clock), key_(key), cpu_(cpu), ca_pem_(std::move(ca_pem)) {}

op<json::value> service::test_channel(std::string project_id, std::string channel_id) {
  notify_options opt;
  opt.key = key_;
  opt.cpu = cpu_;
  opt.ca_pem = ca_pem_;
  auto r = co_await send_test_message(st_, project_id, channel_id, std::move(opt), clock_.now_ms());
  if (!r) co_return std::move(r).error();
  co_return json::value(send_report_view(*r, channel_id));
}

op<json::value> service::create(std::string_view kind_view, std::string project_id, std::string body, requester who) {
  std::string kind(kind_view);
  auto now = clock_.now_ms();
  auto obj = std::make_shared<catalog_object>();
  obj->project_id = project_id;
  obj->kind = kind;
  obj->created_at = now;
  auto id = new_object_id();
  std::vector<std::pair<std::string, std::string>> refs;  // (kind, id) -> field checked inside the transaction
  std::vector<std::string> ref_fields;
  std::string want_credential_kind;  // ssh targets: the kind ssh.auth needs
  bool templated_rule = false;       // a rule with a template: its channel must render one
  if (kind == store::kind_certificate) {
    if (!key_) co_return no_key();
    auto c = parse_certificate_request(body, now);
    if (!c) co_return std::move(c).error();
    auto o = make_certificate_object(*c, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_acme_account) {
    if (!key_) co_return no_key();
    auto a = parse_acme_account_request(body);
    if (!a) co_return std::move(a).error();
    // Registration is synchronous (DESIGN §9): the CA's refusal is the answer, nothing stored.
    acme_job_options ao;
    ao.key = key_;
    ao.cpu = cpu_;
    ao.ca_pem = ca_pem_;
    auto acme_settings = co_await store::read_settings(st_);
    ao.acme_allow_list = acme_settings.text("acme_allow_list");
    auto reg = co_await register_acme_account(*a, ao);
    if (!reg) co_return std::move(reg).error();
    auto o = make_acme_account_object(*a, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_dns_provider) {
    if (!key_) co_return no_key();
    auto p = parse_dns_provider_request(body);
    if (!p) co_return std::move(p).error();
    if (p->spec.exec()) {
      if (!who.system_admin)
        co_return make_error(errc::forbidden,
                             "exec DNS providers run a program on the worker host as certfleet's user: only a "
                             "system-admin token may create one",
                             "kind");
      p->spec.created_by_system_admin = who.actor.empty() ? std::string("system") : who.actor;
    }
    auto o = make_dns_provider_object(*p, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_credential) {
    if (!key_) co_return no_key();
    auto c = parse_credential_request(body);
    if (!c) co_return std::move(c).error();
    auto o = make_credential_object(*c, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_target) {
    auto t = parse_target_request(body);
    if (!t) co_return std::move(t).error();
    obj->id = id;
    obj->name = t->name;
    obj->doc = t->doc;
    if (t->spec.module == delivery::module_kind::file) {
      if (!who.system_admin)
        co_return make_error(errc::forbidden,
                             "file targets write files and run a command on the worker host as certfleet's user: only a "
                             "system-admin token may create one",
                             "module");
      auto settings = co_await store::read_settings(st_);
      auto dirs = parse_base_dirs(settings.text("file_target_base_dirs"));
      if (!dirs) co_return std::move(dirs).error();
      if (auto ok = delivery::check_file_target_paths(t->spec.file, *dirs); !ok) co_return std::move(ok).error();
      obj->doc = stamp_file_grant(t->doc, who.actor.empty() ? std::string("system") : who.actor);
    }
    if (t->spec.module == delivery::module_kind::ssh) {
      // A new target says how it logs in; left out, it is "key" (stored, so the view shows it).
      if (t->spec.ssh.auth == delivery::ssh_auth::derived) {
        t->spec.ssh.auth = delivery::ssh_auth::key;
        obj->doc = stamp_ssh_auth(obj->doc, "key");
      }
      want_credential_kind = t->spec.ssh.auth == delivery::ssh_auth::key ? "ssh_key" : "password";
      auto allow = co_await read_ssh_allow_list(st_);
      if (!allow) co_return std::move(allow).error();
      auto so = ssh_dial_options(cpu_, *allow);
      // Named arguments: GCC 12 mishandles temporaries built inside a co_await expression.
      std::string host = t->spec.ssh.host, field = "ssh.host";
      auto ok = co_await delivery::check_ssh_destination(host, t->spec.ssh.port, field, so);
      if (!ok) co_return std::move(ok).error();
    }
    obj->ref_id = t->spec.credential_id;
    refs.emplace_back(std::string(store::kind_credential), t->spec.credential_id);
    ref_fields.push_back(t->spec.module == delivery::module_kind::ssh ? "ssh.credential_id" : "webhook.secret_credential_id");
  } else if (kind == store::kind_channel) {
    auto c = parse_channel_request(body);
    if (!c) co_return std::move(c).error();
    if (!c->secret.empty() && !key_) co_return no_key();
    auto o = make_channel_object(*c, key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
    refs.emplace_back(std::string(store::kind_credential), c->spec.secret_credential_id);
    ref_fields.push_back("secret_credential_id");
  } else if (kind == store::kind_rule) {
    auto r = parse_rule_request(body);
    if (!r) co_return std::move(r).error();
    obj->id = id;
    obj->name = rule_object_name(r->event, r->channel_id);  // one rule per event and channel
    obj->doc = rule_doc_json(*r);
    obj->ref_id = r->channel_id;
    refs.emplace_back(std::string(store::kind_channel), r->channel_id);
    ref_fields.push_back("channel_id");
    templated_rule = !r->template_override.is_null();
  } else if (kind == store::kind_discovery_source) {
    auto req = parse_discovery_source_request(body);
    if (!req) co_return std::move(req).error();
    auto settings = co_await store::read_settings(st_);
    auto plan = net::parse_discovery_spec(req->spec.endpoints, req->spec.cidrs, req->spec.ports, req->spec.sni,
                                               static_cast<std::uint64_t>(settings.integer("discovery_max_addresses")));
    if (!plan) co_return std::move(plan).error();
    auto allow = parse_egress_allow_list(settings.text("discovery_allow_list"), "discovery_allow_list");
    if (!allow) co_return std::move(allow).error();
    // Nothing the operator did not allow is ever scanned: a range reaching outside is refused whole.
    if (auto ok = net::check_discovery_egress(*plan, *allow); !ok)
      co_return make_error(errc::invalid_argument, with_allow_list_named(ok.error().message, "discovery_allow_list"),
                           ok.error().field);
    obj->id = id;
    obj->name = req->name;
    obj->doc = discovery_source_doc_json(req->spec, plan->size());
  } else if (kind == store::kind_domain) {
    auto name = parse_domain_request(body);
    if (!name) co_return std::move(name).error();
    obj->id = id;
    obj->name = *name;
    obj->doc = domain_doc_json({});
  } else {
    co_return make_error(errc::not_found, fmt::format("no object kind {}", kind), "kind");
  }
  store::tx_fn op1 = [obj, refs, ref_fields, project_id, want_credential_kind,
                      templated_rule](store::catalog_tx& tx) -> result<void> {
    for (std::size_t i = 0; i < refs.size(); ++i)
      if (auto r = check_ref(tx, project_id, refs[i].first, refs[i].second, ref_fields[i]); !r) return r;
    if (templated_rule) {
      auto ch = tx.get_object(project_id, store::kind_channel, obj->ref_id);
      if (!ch) return std::move(ch).error();
      auto spec = parse_channel_doc(*ch);
      if (spec && spec->kind == channel_kind::webhook)
        return make_error(errc::invalid_argument,
                          fmt::format("channel {} is a webhook channel: it receives the event as JSON, so a template "
                                      "has nothing to shape (templates are for email, slack and teams channels)",
                                      obj->ref_id),
                          "template");
    }
    if (!want_credential_kind.empty()) {
      auto cred = tx.get_object(project_id, store::kind_credential, obj->ref_id);
      if (!cred) return std::move(cred).error();
      if (cred->doc.find(fmt::format(R"("kind":"{}")", want_credential_kind)) == std::string::npos)
        return make_error(errc::invalid_argument,
                          want_credential_kind == "ssh_key"
                              ? fmt::format("ssh.auth is \"key\" (the default) but credential {} is a password credential: "
                                            "set ssh.auth to \"password\" to log in with a password", obj->ref_id)
                              : fmt::format("ssh.auth is \"password\" but credential {} is an ssh_key credential", obj->ref_id),
                          "ssh.auth");
    }
    auto ins = tx.insert_object(*obj);
    if (!ins) return std::move(ins).error();
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op1));
  if (!w) co_return std::move(w).error();
  co_return json::value(object_view(*obj));
}

op<json::value> service::get(std::string_view kind_view, std::string project_id, std::string id) {
  std::string kind(kind_view);
  store::read_value_fn<catalog_object> op2 = [=](store::catalog_read& rd) {
    return rd.get_object(project_id, kind, id);
  };
  auto o = co_await store::read_value(st_.catalog(), std::move(op2));
  if (!o) co_return std::move(o).error();
  co_return json::value(object_view(*o));
}

op<json::value> service::list(std::string_view kind_view, std::string project_id, int page, int page_size) {
  std::string kind(kind_view);
  store::read_value_fn<store::object_page> op3 = [=](store::catalog_read& rd) {
    return rd.list_objects(project_id, kind, page, page_size);
  };
  auto out = co_await store::read_value(st_.catalog(), std::move(op3));
  if (!out) co_return std::move(out).error();
  json::array items;
  for (const auto& o : out->items) {
    auto v = object_view(o);
    v.erase("cert_pem");
    v.erase("chain_pem");
    items.push_back(std::move(v));
  }
  co_return json::value(page_view(std::move(items), page, page_size, out->total));
}

op<json::value> service::remove(std::string_view kind_view, std::string project_id, std::string id) {
  std::string kind(kind_view);
  store::tx_fn op4 = [=](store::catalog_tx& tx) -> result<void> {
    auto o = tx.get_object(project_id, kind, id);
    if (!o) return std::move(o).error();
    auto in_use = [&](std::string_view by_kind) -> result<void> {
      auto users = tx.objects_referencing(project_id, by_kind, id);
      if (!users) return std::move(users).error();
      if (!users->empty())
        return make_error(errc::conflict, fmt::format("{} {} is used by {} {} ({}); delete or change those first", kind,
                                                      id, users->size(), by_kind, users->front().id), "id");
      return {};
    };
    if (kind == store::kind_credential) {
      if (auto u = in_use(store::kind_target); !u) return u;
      if (auto u = in_use(store::kind_channel); !u) return u;
    }
    if (kind == store::kind_channel)
      if (auto u = in_use(store::kind_rule); !u) return u;
    if (kind == store::kind_acme_account)
      if (auto u = in_use(store::kind_certificate); !u) return u;
    if (kind == store::kind_dns_provider) {
      // Certificates name their provider in their document: read them (a project has few).
      for (int page = 1;; ++page) {
        auto certs = tx.list_objects(project_id, store::kind_certificate, page, 200);
        if (!certs) return std::move(certs).error();
        for (const auto& c : certs->items) {
          auto d = parse_certificate_doc(c, true);
          if (d && d->acme && d->acme->dns_provider_id == id)
            return make_error(errc::conflict,
                              fmt::format("dns_provider {} is used by certificate {}; delete or change it first", id, c.id),
                              "id");
        }
        if (certs->items.size() < 200) break;
      }
    }
    if (kind == store::kind_certificate) {
      auto d = tx.distributions_using(project_id, id);
      if (!d) return std::move(d).error();
      if (!d->empty())
        return make_error(errc::conflict, fmt::format("certificate {} is used by distribution {}", id, d->front()), "id");
      // An issue or renewal still to run would fail on a certificate that is gone (a dead job and
      // its alert for nothing): it ends first.
      if (auto doc = parse_certificate_doc(*o, true); doc && doc->acme && !doc->acme->last_job_id.empty()) {
        auto j = tx.get_job(doc->acme->last_job_id);
        if (!j && !j.error().is(errc::not_found)) return std::move(j).error();
        using store::job_status;
        if (j && (j->status == job_status::pending || j->status == job_status::active || j->status == job_status::failed))
          return make_error(errc::conflict,
                            fmt::format("certificate {} has its {} job {} {}: cancel it (POST …/jobs/{}/cancel) or let "
                                        "it end, then delete",
                                        id, j->type, j->id,
                                        j->status == job_status::failed ? std::string_view("waiting to retry")
                                                                         : store::to_string(j->status),
                                        j->id),
                            "id");
      }
      // Its earlier versions go with it.
      auto versions = tx.objects_referencing(project_id, store::kind_certificate_version, id);
      if (!versions) return std::move(versions).error();
      for (const auto& v : *versions)
        if (auto del = tx.delete_object(project_id, store::kind_certificate_version, v.id); !del) return del;
    }
    // A target may go while distributions name it: their next run skips it.
    return tx.delete_object(project_id, kind, id);
  };
  auto r = co_await st_.catalog().transact(std::move(op4));
  if (!r) co_return std::move(r).error();
  co_return json::value(json::object{{"id", id}, {"deleted", true}});
}

json::object distribution_view(const store::distribution_record& d, const std::vector<store::target_result>& outs,
                               const std::vector<store::finalized_child>& finalized) {
  json::array targets;
  for (const auto& t : d.target_ids) targets.emplace_back(t);
  json::object v{{"id", d.id},
                 {"name", d.name},
                 {"status", d.status},
                 {"run_no", d.run_no},
                 {"certificate_id", d.certificate_id},
                 {"target_ids", std::move(targets)},
                 {"canary", d.canary},
                 {"failure_tolerance", d.failure_tolerance},
                 {"fail_fast", d.fail_fast},
                 {"auto_execute", d.auto_execute},
                 {"created_at", certfleet::json::time_value(d.created_at)},
                 {"updated_at", certfleet::json::time_value(d.updated_at)}};
  if (d.run_no > 0) {
    v["mode"] = d.mode;
    v["run_started_at"] = certfleet::json::time_value(d.run_started_at);
    if (d.run_finished_at) v["run_finished_at"] = certfleet::json::time_value(d.run_finished_at);
    v["run_certificate_version"] = d.run_certificate_version;
    v["run_redrives"] = d.run_redrives;  // retry-targets calls in this run (each re-ends it)
    if (!d.run_trigger.empty()) v["run_trigger"] = d.run_trigger;
    if (!d.error.empty()) v["error"] = d.error;
    json::array jobs;
    for (const auto& j : d.job_ids) jobs.emplace_back(j);
    v["job_ids"] = std::move(jobs);
    auto s = summarize(d.run_target_ids, outs);
    v["summary"] = json::object{{"targets", s.targets},     {"succeeded", s.succeeded}, {"failed", s.failed},
                                {"skipped", s.skipped},     {"cancelled", s.cancelled}, {"pending", s.pending}};
    v["long_tail"] = long_tail_json(compute_long_tail(outs));
    if (d.mode == "fan_out") {
      json::array fin;
      // The counters count batch and retry children alike; the same finalized set, by kind.
      json::object batches{{"total", d.fan_out_total}, {"finished", 0}, {"succeeded", 0},
                           {"failed", 0},              {"partial", 0},  {"cancelled", 0}};
      json::object retries{{"finished", 0}, {"running", d.fan_out_retrying}, {"succeeded", 0},
                           {"failed", 0},   {"partial", 0},                  {"cancelled", 0}};
      for (const auto& f : finalized) {
        fin.push_back(json::object{{"job_id", f.job_id},
                                   {"outcome", f.outcome},
                                   {"kind", f.batch ? "batch" : "retry"},
                                   {"job", fmt::format("jobs/{}", f.job_id)}});
        auto& kind = f.batch ? batches : retries;
        kind["finished"] = kind["finished"].as_int64() + 1;
        if (auto* n = kind.if_contains(f.outcome)) *n = n->as_int64() + 1;
      }
      v["fan_out"] = json::object{{"total", d.fan_out_total},         {"succeeded", d.fan_out_succeeded},
                                  {"failed", d.fan_out_failed},       {"partial", d.fan_out_partial},
                                  {"cancelled", d.fan_out_cancelled}, {"retrying", d.fan_out_retrying},
                                  {"retry_wave", d.fan_out_retry_wave}, {"fail_fast_fired", d.fail_fast_fired},
                                  {"batches", std::move(batches)},    {"retry_jobs", std::move(retries)},
                                  {"finalized_jobs", std::move(fin)}};
    }
  }
  return v;
}

op<json::value> service::create_distribution(std::string project_id, std::string body) {
  bool auto_execute_given = false;
  auto d = parse_distribution_request(body, &auto_execute_given);
  if (!d) co_return std::move(d).error();
  d->project_id = project_id;
  d->created_at = clock_.now_ms();
  auto rec = std::make_shared<store::distribution_record>(std::move(*d));
  store::tx_fn op5 = [rec, auto_execute_given](store::catalog_tx& tx) -> result<void> {
    if (auto r = check_ref(tx, rec->project_id, store::kind_certificate, rec->certificate_id, "certificate_id"); !r) return r;
    if (!auto_execute_given) {
      // Left out: a certificate that renews itself (ACME) delivers each new version by itself.
      auto cert = tx.get_object(rec->project_id, store::kind_certificate, rec->certificate_id);
      if (!cert) return std::move(cert).error();
      auto doc = parse_certificate_doc(*cert, true);
      rec->auto_execute = doc && doc->source == "acme";
    }
    auto found = tx.objects_by_ids(rec->project_id, store::kind_target, rec->target_ids);
    if (!found) return std::move(found).error();
    if (found->size() != rec->target_ids.size()) {
      std::set<std::string> have;
      for (const auto& o : *found) have.insert(o.id);
      for (const auto& t : rec->target_ids)
        if (!have.count(t)) return make_error(errc::invalid_argument, fmt::format("unknown target {}", t), "target_ids");
    }
    auto ins = tx.insert_distribution(*rec);
    if (!ins) return std::move(ins).error();
    *rec = std::move(*ins);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op5));
  if (!w) co_return std::move(w).error();
  co_return json::value(distribution_view(*rec, {}, {}));
}

op<json::value> service::get_distribution(std::string project_id, std::string id) {
  auto d = std::make_shared<store::distribution_record>();
  auto outs = std::make_shared<std::vector<store::target_result>>();
  auto fin = std::make_shared<std::vector<store::finalized_child>>();
  store::read_fn op6 = [=](store::catalog_read& rd) -> result<void> {
    auto x = rd.get_distribution(project_id, id);
    if (!x) return std::move(x).error();
    *d = std::move(*x);
    auto o = rd.run_outcomes(id, d->run_no);
    if (!o) return std::move(o).error();
    *outs = std::move(*o);
    auto f = rd.finalized_children(id, d->run_no);
    if (!f) return std::move(f).error();
    *fin = std::move(*f);
    return {};
  };
  auto r = co_await st_.catalog().read(std::move(op6));
  if (!r) co_return std::move(r).error();
  co_return json::value(distribution_view(*d, *outs, *fin));
}

op<json::value> service::list_distributions(std::string project_id, int page, int page_size) {
  store::read_value_fn<store::distribution_page> op7 = [=](store::catalog_read& rd) {
    return rd.list_distributions(project_id, page, page_size);
  };
  auto out = co_await store::read_value(st_.catalog(), std::move(op7));
  if (!out) co_return std::move(out).error();
  json::array items;
  for (const auto& d : out->items) {
    auto v = distribution_view(d, {}, {});
    v.erase("summary");
    v.erase("long_tail");
    items.push_back(std::move(v));
  }
  co_return json::value(page_view(std::move(items), page, page_size, out->total));
}

op<json::value> service::remove_distribution(std::string project_id, std::string id) {
  store::tx_fn op8 = [=](store::catalog_tx& tx) -> result<void> {
    auto d = tx.get_distribution(project_id, id);
    if (!d) return std::move(d).error();
    if (d->status == "running")
      return make_error(errc::conflict, "the distribution is running: cancel it first", "status");
    return tx.delete_distribution(project_id, id);
  };
  auto r = co_await st_.catalog().transact(std::move(op8));
  if (!r) co_return std::move(r).error();
  co_return json::value(json::object{{"id", id}, {"deleted", true}});
}

op<json::value> service::execute(std::string project_id, std::string id, std::string actor) {
  return open_run(std::move(project_id), std::move(id), std::move(actor), run_kind::execute, 0);
}

op<json::value> service::add_certificate_version(std::string project_id, std::string id, std::string body,
                                                 std::string actor) {
  if (!key_) co_return no_key();
  auto now = clock_.now_ms();
  auto next = parse_certificate_version_request(body, now);
  if (!next) co_return std::move(next).error();
  auto rs = run_settings_from(co_await store::read_settings(st_));
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  const kek* key = key_;
  auto material = std::make_shared<new_certificate>(std::move(*next));
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* cert = &got->object;
    auto* doc = &got->doc;
    if (doc->source != "uploaded")
      return make_error(errc::conflict,
                        fmt::format("certificate {} is renewed by ACME: its versions come from the CA (renew it instead)", id),
                        "id");
    auto stored = store_new_version(tx, *key, *cert, *material, rs, now, actor);
    if (!stored) return std::move(stored).error();
    auto fresh = tx.get_object(project_id, store::kind_certificate, id);
    if (!fresh) return std::move(fresh).error();
    *out = certificate_view(*fresh);
    json::array opened, deferred;
    for (const auto& d : stored->runs_opened) opened.emplace_back(d);
    for (const auto& d : stored->runs_deferred) deferred.emplace_back(d);
    (*out)["auto_execute"] = json::object{{"runs_opened", std::move(opened)}, {"runs_deferred", std::move(deferred)}};
    *created = std::move(stored->jobs);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

namespace {
// The project's settings object (approval.hpp), or none while nothing was ever set.
result<std::optional<catalog_object>> project_settings_object(store::catalog_read& rd, const std::string& project_id) {
  auto found = rd.objects_named(project_id, store::kind_project_settings, project_settings_name, 1);
  if (!found) return std::move(found).error();
  if (found->empty()) return std::optional<catalog_object>{};
  return std::optional<catalog_object>(std::move(found->front()));
}

// The project's settings, read in the caller's transaction.
result<std::map<std::string, std::string, std::less<>>> read_project_settings(store::catalog_read& rd,
                                                                              const std::string& project_id) {
  auto o = project_settings_object(rd, project_id);
  if (!o) return std::move(o).error();
  return project_settings_from_doc(*o ? std::string_view((*o)->doc) : std::string_view());
}

// The issue_certificate job of a certificate (key issue:<id>), recorded as its last ACME job: an
// issue request's, or an approval's.
result<store::enqueue_outcome> enqueue_issue(store::catalog_tx& tx, const std::string& project_id,
                                             const std::string& certificate_id, const std::string& actor, time_ms now) {
  auto e = enqueue_certificate_job(tx, project_id, certificate_id, queue::job_names::issue_certificate,
                                   acme_job_payload(certificate_id), issue_job_key(certificate_id), actor, now);
  if (!e) return e;
  if (auto r = record_acme_job(tx, project_id, certificate_id, e->job.id); !r) return std::move(r).error();
  return e;
}

result<int> fire_approval_event(store::catalog_tx& tx, const catalog_object& cert, const certificate_doc& doc,
                                std::string_view event, const std::string& job_id, const std::string& actor,
                                time_ms now) {
  fired_event e;
  e.project_id = cert.project_id;
  e.event = event;
  e.event_id = fmt::format("{}:{}", event, cert.id);  // each happens once per certificate
  e.data = approval_event_data(cert.id, cert.name, doc, job_id);
  e.key_base = e.event_id;
  e.source.certificate_id = cert.id;
  e.source.triggered_by = actor;
  return fire_event(tx, e, now);
}
}  // namespace

op<json::value> service::issue_certificate(std::string project_id, std::string body, std::string actor) {
  auto req = parse_acme_issue_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto cert = std::make_shared<catalog_object>(make_unissued_acme_certificate(*req, new_object_id(), project_id, now));
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  auto waits = std::make_shared<bool>(false);
  store::tx_fn op = [cert, actor, now, created, waits](store::catalog_tx& tx) -> result<void> {
    auto doc = parse_certificate_doc(*cert, true);
    if (!doc) return std::move(doc).error();
    if (auto r = check_ref(tx, cert->project_id, store::kind_acme_account, doc->acme->acme_account_id, "acme_account_id"); !r)
      return r;
    if (auto r = check_ref(tx, cert->project_id, store::kind_dns_provider, doc->acme->dns_provider_id, "dns_provider_id"); !r)
      return r;
    // Read in this transaction: a request made after the setting is turned on waits.
    auto settings = read_project_settings(tx, cert->project_id);
    if (!settings) return std::move(settings).error();
    *waits = issuance_requires_approval(*settings);
    if (*waits) {
      doc->status = "awaiting_approval";
      doc->acme->approval = approval_request(actor, now);
      cert->doc = certificate_doc_json(*doc);
    }
    auto ins = tx.insert_object(*cert);
    if (!ins) return std::move(ins).error();
    if (*waits) {
      auto fired = fire_approval_event(tx, *cert, *doc, event_names::certificate_approval_requested, "", actor, now);
      if (!fired) return std::move(fired).error();
      return {};
    }
    auto e = enqueue_issue(tx, cert->project_id, cert->id, actor, now);
    if (!e) return std::move(e).error();
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  if (*waits)
    co_return json::value(json::object{{"certificate_id", cert->id}, {"job_id", nullptr}, {"status", "awaiting_approval"}});
  queue_.jobs_created(*created);
  co_return json::value(
      json::object{{"certificate_id", cert->id}, {"job_id", created->front().job.id}, {"status", "pending"}});
}

op<json::value> service::approve_certificate(std::string project_id, std::string id, std::string actor) {
  auto now = clock_.now_ms();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto& doc = got->doc;
    if (auto ok = check_approval_decision(doc, id, actor); !ok) return ok;
    approve_issuance(doc, actor, now);
    if (auto u = tx.update_object_doc(id, certificate_doc_json(doc)); !u) return u;
    auto e = enqueue_issue(tx, project_id, id, actor, now);
    if (!e) return std::move(e).error();
    auto fired = fire_approval_event(tx, got->object, doc, event_names::certificate_approved, e->job.id, actor, now);
    if (!fired) return std::move(fired).error();
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(json::object{{"certificate_id", id}, {"job_id", created->front().job.id}, {"status", "pending"}});
}

op<json::value> service::reject_certificate(std::string project_id, std::string id, std::string body,
                                            std::string actor) {
  auto reason = parse_reject_request(body);
  if (!reason) co_return std::move(reason).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  store::tx_fn op = [=, reason = std::move(*reason)](store::catalog_tx& tx) -> result<void> {
    auto got = read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto& doc = got->doc;
    if (auto ok = check_approval_decision(doc, id, actor); !ok) return ok;
    reject_issuance(doc, actor, reason, now);
    if (auto u = tx.update_object_doc(id, certificate_doc_json(doc)); !u) return u;
    auto fired = fire_approval_event(tx, got->object, doc, event_names::certificate_rejected, "", actor, now);
    if (!fired) return std::move(fired).error();
    auto fresh = tx.get_object(project_id, store::kind_certificate, id);
    if (!fresh) return std::move(fresh).error();
    *out = certificate_view(*fresh);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*out));
}

op<json::value> service::project_settings(std::string project_id) {
  store::read_value_fn<std::map<std::string, std::string, std::less<>>> read = [project_id](store::catalog_read& rd) {
    return read_project_settings(rd, project_id);
  };
  auto values = co_await store::read_value(st_.catalog(), std::move(read));
  if (!values) co_return std::move(values).error();
  json::object o;
  for (const auto& [k, v] : *values) o[k] = v;
  co_return json::value(std::move(o));
}

op<json::value> service::put_project_settings(std::string project_id, std::map<std::string, std::string> values) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto found = project_settings_object(tx, project_id);
    if (!found) return std::move(found).error();
    auto merged = project_settings_from_doc(*found ? std::string_view((*found)->doc) : std::string_view());
    for (const auto& [k, v] : values) merged[k] = v;
    const auto doc = project_settings_doc(merged);
    if (!*found) {
      catalog_object o;
      o.id = new_object_id();
      o.project_id = project_id;
      o.kind = std::string(store::kind_project_settings);
      o.name = std::string(project_settings_name);
      o.doc = doc;
      o.created_at = now;
      auto ins = tx.insert_object(std::move(o));
      if (!ins) return std::move(ins).error();
    } else if (auto u = tx.update_object_doc((*found)->id, doc); !u) {
      return u;
    }
    for (const auto& [k, v] : merged) (*out)[k] = v;
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*out));
}

namespace {
// Why a certificate cannot be renewed over ACME, or nullopt when it can.
std::optional<std::string> not_renewable(const certificate_doc& doc, std::string_view id) {
  if (doc.source != "acme" || !doc.acme)
    return fmt::format("certificate {} was uploaded: only ACME certificates are renewed (upload a new version with "
                       "POST …/certificates/{}/versions)", id, id);
  if (doc.version == 0)
    return fmt::format("certificate {} has no issued version yet: its issue_certificate job issues it", id);
  return std::nullopt;
}

result<store::enqueue_outcome> enqueue_renewal(store::catalog_tx& tx, const std::string& project_id, const std::string& id,
                                               const certificate_doc& doc, const std::string& actor, time_ms now) {
  auto e = enqueue_certificate_job(tx, project_id, id, queue::job_names::renew_certificate, acme_job_payload(id, doc.version),
                                   renew_job_key(id, doc.not_after), actor, now);
  if (!e) return e;
  if (auto r = record_acme_job(tx, project_id, id, e->job.id); !r) return std::move(r).error();
  return e;
}
}  // namespace

op<json::value> service::renew_certificates(std::string project_id, std::string body, std::string actor) {
  auto req = parse_bulk_renew_request(body);
  if (!req) co_return std::move(req).error();
  const auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=, request = std::move(*req)](store::catalog_tx& tx) -> result<void> {
    std::vector<certificate_with_doc> renew;
    json::array skipped;
    if (request.expiring_within_days == 0) {
      for (std::size_t i = 0; i < request.certificate_ids.size(); ++i) {
        const auto& id = request.certificate_ids[i];
        const auto field = fmt::format("certificate_ids[{}]", i);
        auto got = read_certificate(tx, project_id, id);
        if (!got) {
          auto e = std::move(got).error();
          if (e.is(errc::not_found)) return make_error(errc::not_found, fmt::format("{}: no certificate {} in this project", field, id), field);
          return e;
        }
        if (auto why = not_renewable(got->doc, id)) return make_error(errc::conflict, fmt::format("{}: {}", field, *why), field);
        renew.push_back(std::move(*got));
      }
    } else {
      const time_ms before = now + static_cast<time_ms>(request.expiring_within_days) * 86'400'000;
      for (int page = 1;; ++page) {
        auto p = tx.list_objects(project_id, store::kind_certificate, page, 500);
        if (!p) return std::move(p).error();
        for (auto& o : p->items) {
          if (o.not_after == 0 || o.not_after > before) continue;
          auto doc = parse_certificate_doc(o, true);
          if (!doc) return std::move(doc).error();
          if (auto why = not_renewable(*doc, o.id)) {
            skipped.emplace_back(json::object{{"certificate_id", o.id}, {"name", o.name}, {"reason", *why}});
            continue;
          }
          renew.push_back(certificate_with_doc{std::move(o), std::move(*doc)});
        }
        if (p->items.size() < 500) break;
      }
      if (renew.size() > bulk_renew_max)
        return make_error(errc::invalid_argument,
                          fmt::format("{} certificates expire within {} days, more than {} per call: renew a shorter window "
                                      "first, or by certificate_ids",
                                      renew.size(), request.expiring_within_days, bulk_renew_max),
                          "expiring_within_days");
    }
    json::array jobs;
    std::vector<store::enqueue_outcome> made;
    for (const auto& c : renew) {
      auto e = enqueue_renewal(tx, project_id, c.object.id, c.doc, actor, now);
      if (!e) return std::move(e).error();
      jobs.emplace_back(json::object{{"certificate_id", c.object.id}, {"name", c.object.name}, {"job_id", e->job.id},
                                     {"created", e->created}});
      made.push_back(std::move(*e));
    }
    const auto new_jobs = std::count_if(made.begin(), made.end(), [](const auto& e) { return e.created; });
    *out = json::object{{"requested", jobs.size()}, {"created", new_jobs}, {"jobs", std::move(jobs)},
                        {"skipped", std::move(skipped)}};
    *created = std::move(made);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::renew_certificate(std::string project_id, std::string id, std::string actor) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    if (auto why = not_renewable(*doc, id)) return make_error(errc::conflict, *why, "id");
    auto e = enqueue_renewal(tx, project_id, id, *doc, actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::check_domain(std::string project_id, std::string id, std::string actor) {
  const auto now = clock_.now_ms();
  store::read_value_fn<store::catalog_object> read = [project_id, id](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_domain, id);
  };
  auto domain = co_await store::read_value(st_.catalog(), std::move(read));
  if (!domain) co_return std::move(domain).error();
  queue::enqueue_request r;
  r.project_id = project_id;
  r.type = queue::job_names::domain_expiration_check;
  r.payload = domain_check_payload_json(id);
  // One per domain and minute: a double click is one lookup, the registry's rate limit is spared.
  r.idempotency_key = domain_check_now_key(id, now);
  r.triggered_by = actor;
  auto out = co_await queue_.enqueue(std::move(r), queue::caller::system);
  if (!out) co_return std::move(out).error();
  co_return json::value(json::object{{"job_id", out->job.id}, {"created", out->created}});
}

op<json::value> service::run_discovery(std::string project_id, std::string id, std::string actor) {
  const auto now = clock_.now_ms();
  store::read_value_fn<store::catalog_object> read = [project_id, id](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_discovery_source, id);
  };
  auto source = co_await store::read_value(st_.catalog(), std::move(read));
  if (!source) co_return std::move(source).error();
  queue::enqueue_request r;
  r.project_id = project_id;
  r.type = queue::job_names::discovery_execute;
  r.payload = discovery_payload_json(id);
  r.idempotency_key = discovery_run_key(id, now);  // a double click is one scan
  r.triggered_by = actor;
  auto out = co_await queue_.enqueue(std::move(r), queue::caller::system);
  if (!out) co_return std::move(out).error();
  co_return json::value(json::object{{"job_id", out->job.id}, {"created", out->created}});
}

op<json::value> service::list_discovered(std::string project_id, std::string source, std::string finding, int page,
                                         int page_size) {
  if (auto ok = check_discovered_filter(source, finding); !ok) co_return std::move(ok).error();
  // Filters need the documents: read the project's discovered certificates and page after them.
  store::read_value_fn<store::object_page> read = [project_id](store::catalog_read& rd) {
    return rd.list_objects(project_id, store::kind_discovered_certificate, 1, 1'000'000);
  };
  auto all = co_await store::read_value(st_.catalog(), std::move(read));
  if (!all) co_return std::move(all).error();
  json::array items;
  std::int64_t total = 0;
  const std::int64_t first = static_cast<std::int64_t>(page - 1) * page_size;
  for (const auto& o : all->items) {
    if (!discovered_matches(o, source, finding)) continue;
    if (total >= first && total < first + page_size) items.push_back(discovered_certificate_view(o));
    ++total;
  }
  co_return json::value(page_view(std::move(items), page, page_size, total));
}

op<json::value> service::import_discovered(std::string project_id, std::string id, std::string body, requester who) {
  auto in = certfleet::json::object_reader::parse(body);
  if (!in) co_return std::move(in).error();
  if (auto ok = in->only({"name", "key_pem", "chain_pem"}); !ok) co_return std::move(ok).error();
  store::read_value_fn<store::catalog_object> read = [project_id, id](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_discovered_certificate, id);
  };
  auto found = co_await store::read_value(st_.catalog(), std::move(read));
  if (!found) co_return std::move(found).error();
  boost::system::error_code ec;
  auto doc = json::parse(found->doc, ec);
  if (ec || !doc.is_object()) co_return make_error(errc::store_failure, "the discovered certificate's document is unreadable", "id");
  auto& d = doc.as_object();
  if (auto* m = d.if_contains("managed_certificate_id"); m && m->is_string() && !m->as_string().empty())
    co_return make_error(errc::conflict,
                         fmt::format("discovered certificate {} was imported already as certificate {}", id,
                                     std::string_view(m->as_string())),
                         "id");
  // The upload path does every check (the key matches the leaf, the chain links, not expired).
  json::object upload{{"cert_pem", d.contains("cert_pem") ? d.at("cert_pem") : json::value("")}};
  for (const char* k : {"name", "key_pem", "chain_pem"}) {
    auto v = in->optional_string(k);
    if (!v) co_return std::move(v).error();
    if (*v) upload[k] = **v;
  }
  if (!upload.contains("chain_pem") && d.contains("chain_pem") && !d.at("chain_pem").as_string().empty())
    upload["chain_pem"] = d.at("chain_pem");
  auto made = co_await create(store::kind_certificate, project_id, json::serialize(upload), who);
  if (!made) co_return std::move(made).error();
  const std::string cert_id(made->as_object().at("id").as_string());
  store::tx_fn mark = [project_id, id, cert_id](store::catalog_tx& tx) -> result<void> {
    auto o = tx.get_object(project_id, store::kind_discovered_certificate, id);
    if (!o) return std::move(o).error();
    boost::system::error_code ec2;
    auto v = json::parse(o->doc, ec2);
    if (ec2 || !v.is_object()) return make_error(errc::store_failure, "unreadable document", "id");
    v.as_object()["managed_certificate_id"] = cert_id;
    o->doc = json::serialize(v);
    return tx.update_object(*o);
  };
  if (auto w = co_await st_.catalog().transact(std::move(mark)); !w) co_return std::move(w).error();
  co_return std::move(*made);
}

op<json::value> service::validate_manual_dns(std::string project_id, std::string job_id, std::string actor) {
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto e = enqueue_manual_validation(tx, project_id, job_id, actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::job_workflow(store::job_record job) {
  if (!has_acme_workflow(job.type)) co_return json::value(nullptr);
  store::read_value_fn<json::object> read = [job = std::move(job)](store::catalog_read& rd) {
    return acme_workflow_view(rd, job);
  };
  auto w = co_await store::read_value(st_.catalog(), std::move(read));
  if (!w) co_return std::move(w).error();
  co_return json::value(std::move(*w));
}

op<json::value> service::revoke_certificate(std::string project_id, std::string id, std::string body, std::string actor) {
  auto req = parse_revoke_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  const std::optional<int> reason = req->reason;
  store::tx_fn op = [=](store::catalog_tx& tx) -> result<void> {
    auto got = read_certificate(tx, project_id, id);
    if (!got) return std::move(got).error();
    auto* doc = &got->doc;
    if (doc->source != "acme" || !doc->acme)
      return make_error(errc::conflict,
                        fmt::format("certificate {} was uploaded, not obtained from an ACME CA: certfleet revokes only the "
                                    "certificates it issued through ACME (revoke this one with the CA that issued it)",
                                    id),
                        "id");
    if (doc->version == 0)
      return make_error(errc::conflict, fmt::format("certificate {} has no issued version to revoke", id), "id");
    if (doc->status == "revoked")
      return make_error(errc::conflict,
                        fmt::format("certificate {} (serial {}) is already revoked{}", id, doc->serial,
                                    doc->revocation ? fmt::format(" since {}", format_iso8601(doc->revocation->revoked_at))
                                                    : std::string()),
                        "id");
    auto e = enqueue_certificate_job(tx, project_id, id, queue::job_names::revoke_certificate,
                                     revoke_job_payload(revoke_job{id, doc->serial, reason}),
                                     revoke_job_key(id, doc->version), actor, now);
    if (!e) return std::move(e).error();
    *out = json::object{{"job_id", e->job.id}, {"created", e->created}};
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::retry_failed(std::string project_id, std::string id, std::string actor) {
  return open_run(std::move(project_id), std::move(id), std::move(actor), run_kind::retry_failed, 0);
}

op<json::value> service::retry_targets(std::string project_id, std::string id, std::string body, std::string actor) {
  auto req = parse_redrive_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  store::tx_fn op = [=, req = std::move(*req)](store::catalog_tx& tx) -> result<void> {
    created->clear();  // a transaction run again starts over
    auto dr = tx.get_distribution(project_id, id);
    if (!dr) return std::move(dr).error();
    auto& d = *dr;
    auto results = tx.run_results(d.id, d.run_no);
    if (!results) return std::move(results).error();
    auto r = plan_redrive(d, *results, req);
    if (!r) return std::move(r).error();
    queue::enqueue_request j;
    j.project_id = project_id;
    j.type = queue::job_names::distribution_execute;
    j.payload = to_payload(r->plan);
    j.idempotency_key = r->key;
    j.parent_job_id = r->parent_job_id;
    j.certificate_id = d.certificate_id;
    j.distribution_id = d.id;
    j.triggered_by = actor;
    auto e = queue::enqueue_in(tx.jobs(), j, now);
    if (!e) return std::move(e).error();
    // The key and run_redrives move in one transaction; a job already under the key means a store
    // changed by hand, and counting it would leave the run waiting for a report long made.
    if (!e->created)
      return make_error(errc::conflict,
                        fmt::format("re-drive {} of run {} exists already as job {}: the store's run_redrives is behind its jobs",
                                    d.run_redrives + 1, d.run_no, e->job.id),
                        "status");
    reopen_for_redrive(d, *r, now);
    if (auto u = tx.update_distribution(d); !u) return u;
    *created = {*e};
    json::array ids;
    for (const auto& t : r->plan.target_ids) ids.emplace_back(t);
    *out = json::object{{"distribution_id", d.id},
                        {"run_no", d.run_no},
                        {"job_id", e->job.id},
                        {"retry_attempt", r->plan.retry_attempt},
                        {"redrive", d.run_redrives},
                        {"target_ids", std::move(ids)}};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::rollback(std::string project_id, std::string id, std::string body, std::string actor) {
  std::int64_t run = 0;
  if (!body.empty()) {
    auto parsed = certfleet::json::parse_value(body, "body", 8);
    if (!parsed) co_return std::move(parsed).error();
    auto& v = *parsed;
    if (!v.is_object())
      co_return make_error(errc::invalid_argument, "body must be a JSON object like {\"run_no\": 3}", "body");
    for (const auto& [k, val] : v.as_object()) {
      if (k != "run_no") co_return make_error(errc::invalid_argument, fmt::format("unknown field \"{}\"", std::string_view(k)), std::string(k));
      if (!val.is_int64() || val.as_int64() < 1)
        co_return make_error(errc::invalid_argument, "run_no must be a run number (1 or more)", "run_no");
      run = val.as_int64();
    }
  }
  co_return co_await open_run(std::move(project_id), std::move(id), std::move(actor), run_kind::rollback, run);
}

op<json::value> service::open_run(std::string project_id, std::string id, std::string actor, run_kind kind,
                                  std::int64_t rollback_of) {
  auto rs = run_settings_from(co_await store::read_settings(st_));
  auto now = clock_.now_ms();
  auto out = std::make_shared<json::object>();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  run_request req{std::move(project_id), std::move(id), std::move(actor), kind, rollback_of, {}};
  store::tx_fn op9 = [=](store::catalog_tx& tx) -> result<void> {
    created->clear();  // a transaction run again starts over
    auto opened = distribution::open_run(tx, req, rs, now, created.get());
    if (!opened) return std::move(opened).error();
    *out = std::move(*opened);
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op9));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(std::move(*out));
}

op<json::value> service::cancel(std::string project_id, std::string id) {
  auto now = clock_.now_ms();
  auto asked = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<json::object>();
  store::tx_fn op10 = [=](store::catalog_tx& tx) -> result<void> {
    auto dr = tx.get_distribution(project_id, id);
    if (!dr) return std::move(dr).error();
    auto& d = *dr;
    if (d.status != "running")
      return make_error(errc::conflict, fmt::format("the distribution is not running (status {})", d.status), "status");
    d.cancel_requested = true;
    d.updated_at = now;
    if (auto u = tx.update_distribution(d); !u) return u;
    auto prefix = run_key_prefix(id, d.run_no);
    auto cancelled = tx.cancel_waiting_children(id, prefix, now);
    if (!cancelled) return std::move(cancelled).error();
    // The engine's own cancellations do not pass the terminal hook: report each here; each
    // report reads and writes the distribution itself.
    for (const auto& c : *cancelled)
      if (auto r = report_child(tx, c, now); !r) return r;
    auto req = tx.request_cancel_children(id, prefix);
    if (!req) return std::move(req).error();
    *asked = *req;
    auto again = tx.get_distribution(project_id, id);
    if (!again) return std::move(again).error();
    d = std::move(*again);
    if (req->empty()) {
      auto done = try_complete(tx, d, now);
      if (!done) return std::move(done).error();
    }
    *out = json::object{{"distribution_id", id},
                        {"run_no", d.run_no},
                        {"cancelled_jobs", static_cast<std::int64_t>(cancelled->size())},
                        {"stop_requested_jobs", static_cast<std::int64_t>(req->size())},
                        {"status", d.status}};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op10));
  if (!w) co_return std::move(w).error();
  if (queue_.on_cancel_requested)
    for (const auto& j : *asked) queue_.on_cancel_requested(j);
  co_return json::value(std::move(*out));
}

op<json::value> service::results(std::string project_id, std::string id, std::int64_t run_no, int page, int page_size,
                                 result_filter filter) {
  auto outs = std::make_shared<std::vector<store::target_result>>();
  auto run = std::make_shared<std::int64_t>(run_no);
  auto targets = std::make_shared<std::vector<std::string>>();
  store::read_fn op11 = [=](store::catalog_read& rd) -> result<void> {
    auto d = rd.get_distribution(project_id, id);
    if (!d) return std::move(d).error();
    if (*run == 0) *run = d->run_no;
    if (*run < 0 || *run > d->run_no) return make_error(errc::invalid_argument, "run is not a run of this distribution", "run");
    auto o = rd.run_outcomes(id, *run);
    if (!o) return std::move(o).error();
    *outs = std::move(*o);
    if (*run == d->run_no) *targets = d->run_target_ids;
    return {};
  };
  auto r = co_await st_.catalog().read(std::move(op11));
  if (!r) co_return std::move(r).error();
  // Targets of the current run with no result yet show as pending.
  std::set<std::string> have;
  for (const auto& o : *outs) have.insert(o.target_id);
  for (const auto& t : *targets)
    if (!have.count(t)) {
      store::target_result p;
      p.target_id = t;
      p.status = "pending";
      outs->push_back(std::move(p));
    }
  std::sort(outs->begin(), outs->end(), [](const auto& a, const auto& b) { return a.target_id < b.target_id; });
  std::vector<const store::target_result*> matching;
  for (const auto& o : *outs)
    if (filter.matches(o)) matching.push_back(&o);
  json::array items;
  auto begin = static_cast<std::size_t>(page - 1) * static_cast<std::size_t>(page_size);
  for (std::size_t i = begin; i < matching.size() && i < begin + static_cast<std::size_t>(page_size); ++i)
    items.push_back(result_view(*matching[i]));
  auto v = page_view(std::move(items), page, page_size, static_cast<std::int64_t>(matching.size()));
  v["run"] = *run;
  v["targets"] = static_cast<std::int64_t>(outs->size());
  v["facets"] = facets_json(facet_counts(*outs));
  v["long_tail"] = long_tail_json(compute_long_tail(*outs));
  co_return json::value(std::move(v));
}

op<json::value> service::scan_host_key(std::string project_id, std::string target_id) {
  store::read_value_fn<catalog_object> op12 = [=](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_target, target_id);
  };
  auto obj = co_await store::read_value(st_.catalog(), std::move(op12));
  if (!obj) co_return std::move(obj).error();
  auto spec = parse_target_doc(*obj);
  if (!spec) co_return std::move(spec).error();
  if (spec->module != delivery::module_kind::ssh) co_return make_error(errc::invalid_argument, "only ssh targets have host keys", "module");
  auto allow = co_await read_ssh_allow_list(st_);
  if (!allow) co_return std::move(allow).error();
  auto so = ssh_dial_options(cpu_, *allow);
  std::string host = spec->ssh.host;
  auto keys = co_await delivery::scan_host_key(host, spec->ssh.port, so);
  if (!keys) co_return std::move(keys).error();
  json::array arr;
  for (const auto& k : *keys) arr.push_back(json::object{{"line", k.line}, {"fingerprint", k.fingerprint}});
  co_return json::value(json::object{{"target_id", target_id},
                                     {"host", host},
                                     {"port", spec->ssh.port},
                                     {"pinned", spec->ssh.pinned.to_line()},
                                     {"offered", std::move(arr)},
                                     {"trusted", false},
                                     {"note", "compare the fingerprint out of band before pinning a key"}});
}

}  // namespace certfleet::distribution
