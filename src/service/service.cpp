// The service's catalog objects (service.hpp): create, get, list and remove of every kind, a
// channel's test message and an SSH target's host-key scan; the helpers every part shares.
#include "certfleet/service/service.hpp"
#include "certfleet/service/kinds.hpp"

#include "service/service_common.hpp"

#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/net/tls_probe.hpp"
#include "certfleet/core/allow_list.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/notify/channel.hpp"
#include "certfleet/notify/send.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

namespace certfleet::service {

namespace json = boost::json;
using store::catalog_object;
using namespace detail;

namespace detail {

boost::asio::awaitable<result<net::egress_policy>> read_ssh_allow_list(store::store& st) {
  auto settings = co_await store::read_settings(st);
  auto allow = net::parse_egress_allow_list(settings.text("ssh_allow_list"), "ssh_allow_list");
  if (!allow) co_return std::move(allow).error();
  co_return std::move(*allow);
}

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

}  // namespace detail

service::service(store::store& st, queue::queue_service& queue, const clock_source& clock, const kek* key,
                 boost::asio::thread_pool* cpu, std::string ca_pem)
    : st_(st), queue_(queue), clock_(clock), key_(key), cpu_(cpu), ca_pem_(std::move(ca_pem)) {}

op<json::value> service::test_channel(std::string project_id, std::string channel_id) {
  notify::notify_options opt;
  opt.key = key_;
  opt.cpu = cpu_;
  opt.ca_pem = ca_pem_;
  auto r = co_await notify::send_test_message(st_, project_id, channel_id, std::move(opt), clock_.now_ms());
  if (!r) co_return std::move(r).error();
  co_return json::value(notify::send_report_view(*r, channel_id));
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
  std::optional<catalog::target_spec> target;  // a target: its credential is checked in the transaction
  bool templated_rule = false;       // a rule with a template: its channel must render one
  if (kind == store::kind_certificate) {
    if (!key_) co_return no_key();
    auto c = catalog::parse_certificate_request(body, now);
    if (!c) co_return std::move(c).error();
    auto o = catalog::make_certificate_object(*c, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_acme_account) {
    if (!key_) co_return no_key();
    auto a = lifecycle::parse_acme_account_request(body);
    if (!a) co_return std::move(a).error();
    // Registration is synchronous (DESIGN §9): the CA's refusal is the answer, nothing stored.
    lifecycle::acme_job_options ao;
    ao.key = key_;
    ao.cpu = cpu_;
    ao.ca_pem = ca_pem_;
    auto acme_settings = co_await store::read_settings(st_);
    ao.acme_allow_list = acme_settings.text("acme_allow_list");
    auto reg = co_await lifecycle::register_acme_account(*a, ao);
    if (!reg) co_return std::move(reg).error();
    auto o = lifecycle::make_acme_account_object(*a, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_msca_ca) {
    if (!key_) co_return no_key();
    auto o = co_await make_msca_ca(st_, *key_, cpu_, ca_pem_, body, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_dns_provider) {
    if (!key_) co_return no_key();
    auto p = lifecycle::parse_dns_provider_request(body);
    if (!p) co_return std::move(p).error();
    if (p->spec.exec()) {
      if (!who.system_admin)
        co_return make_error(errc::forbidden,
                             "exec DNS providers run a program on the worker host as certfleet's user: only a "
                             "system-admin token may create one",
                             "kind");
      p->spec.created_by_system_admin = who.actor.empty() ? std::string("system") : who.actor;
    }
    auto o = lifecycle::make_dns_provider_object(*p, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_credential) {
    if (!key_) co_return no_key();
    auto c = catalog::parse_credential_request(body);
    if (!c) co_return std::move(c).error();
    auto o = catalog::make_credential_object(*c, *key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
  } else if (kind == store::kind_target) {
    auto t = catalog::parse_target_request(body);
    if (!t) co_return std::move(t).error();
    std::vector<std::string> base_dirs;
    if (t->spec.module == delivery::module_kind::file && who.system_admin) {
      auto settings = co_await store::read_settings(st_);
      auto dirs = parse_base_dirs(settings.text("file_target_base_dirs"));
      if (!dirs) co_return std::move(dirs).error();
      base_dirs = std::move(*dirs);
    }
    auto doc = admit_target(*t, who, base_dirs);
    if (!doc) co_return std::move(doc).error();
    obj->id = id;
    obj->name = t->name;
    obj->doc = std::move(*doc);
    if (t->spec.module == delivery::module_kind::ssh) {
      auto allow = co_await read_ssh_allow_list(st_);
      if (!allow) co_return std::move(allow).error();
      auto so = ssh_dial_options(cpu_, *allow);
      // Named arguments: GCC 12 mishandles temporaries built inside a co_await expression.
      std::string host = t->spec.ssh.host, field = "ssh.host";
      auto ok = co_await delivery::check_ssh_destination(host, t->spec.ssh.port, field, so);
      if (!ok) co_return std::move(ok).error();
    }
    obj->ref_id = t->spec.credential_id;
    target = std::move(t->spec);
  } else if (kind == store::kind_channel) {
    auto c = notify::parse_channel_request(body);
    if (!c) co_return std::move(c).error();
    if (!c->secret.empty() && !key_) co_return no_key();
    auto o = notify::make_channel_object(*c, key_, id, project_id, now);
    if (!o) co_return std::move(o).error();
    *obj = std::move(*o);
    refs.emplace_back(std::string(store::kind_credential), c->spec.secret_credential_id);
    ref_fields.push_back("secret_credential_id");
  } else if (kind == store::kind_rule) {
    auto r = notify::parse_rule_request(body);
    if (!r) co_return std::move(r).error();
    obj->id = id;
    obj->name = notify::rule_object_name(r->event, r->channel_id);  // one rule per event and channel
    obj->doc = notify::rule_doc_json(*r);
    obj->ref_id = r->channel_id;
    refs.emplace_back(std::string(store::kind_channel), r->channel_id);
    ref_fields.push_back("channel_id");
    templated_rule = !r->template_override.is_null();
  } else if (kind == store::kind_discovery_source) {
    auto req = checks::parse_discovery_source_request(body);
    if (!req) co_return std::move(req).error();
    auto settings = co_await store::read_settings(st_);
    auto plan = net::parse_discovery_spec(req->spec.endpoints, req->spec.cidrs, req->spec.ports, req->spec.sni,
                                               static_cast<std::uint64_t>(settings.integer("discovery_max_addresses")));
    if (!plan) co_return std::move(plan).error();
    auto allow = parse_egress_allow_list(settings.text("discovery_allow_list"), "discovery_allow_list");
    if (!allow) co_return std::move(allow).error();
    // Nothing the operator did not allow is ever scanned: a range reaching outside is refused whole.
    if (auto ok = net::check_discovery_egress(*plan, *allow); !ok)
      co_return make_error(errc::invalid_argument, checks::with_allow_list_named(ok.error().message, "discovery_allow_list"),
                           ok.error().field);
    obj->id = id;
    obj->name = req->name;
    obj->doc = checks::discovery_source_doc_json(req->spec, plan->size());
  } else if (kind == store::kind_domain) {
    auto name = checks::parse_domain_request(body);
    if (!name) co_return std::move(name).error();
    obj->id = id;
    obj->name = *name;
    obj->doc = checks::domain_doc_json({});
  } else {
    co_return make_error(errc::not_found, fmt::format("no object kind {}", kind), "kind");
  }
  store::tx_fn op1 = [obj, refs, ref_fields, project_id, target,
                      templated_rule](store::catalog_tx& tx) -> result<void> {
    for (std::size_t i = 0; i < refs.size(); ++i)
      if (auto r = check_ref(tx, project_id, refs[i].first, refs[i].second, ref_fields[i]); !r) return r;
    if (templated_rule) {
      auto ch = tx.get_object(project_id, store::kind_channel, obj->ref_id);
      if (!ch) return std::move(ch).error();
      auto spec = notify::parse_channel_doc(*ch);
      if (spec && spec->kind == notify::channel_kind::webhook)
        return make_error(errc::invalid_argument,
                          fmt::format("channel {} is a webhook channel: it receives the event as JSON, so a template "
                                      "has nothing to shape (templates are for email, slack and teams channels)",
                                      obj->ref_id),
                          "template");
    }
    if (target)
      if (auto ok = check_target_credential(tx, project_id, *target); !ok) return ok;
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
    if (const auto* k = find_catalog_kind(kind)) {
      for (auto by : k->used_by)
        if (auto u = in_use(by); !u) return u;
      if (k->before_delete)
        if (auto ok = k->before_delete(tx, *o); !ok) return ok;
    }
    return tx.delete_object(project_id, kind, id);
  };
  auto r = co_await st_.catalog().transact(std::move(op4));
  if (!r) co_return std::move(r).error();
  co_return json::value(json::object{{"id", id}, {"deleted", true}});
}

op<json::value> service::scan_host_key(std::string project_id, std::string target_id) {
  store::read_value_fn<catalog_object> op12 = [=](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_target, target_id);
  };
  auto obj = co_await store::read_value(st_.catalog(), std::move(op12));
  if (!obj) co_return std::move(obj).error();
  auto spec = catalog::parse_target_doc(*obj);
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

}  // namespace certfleet::service
