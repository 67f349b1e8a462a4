// The service's catalog objects (service.hpp): create (by each kind's creator row), get, list and
// remove of every kind, and an SSH target's host-key scan; the helpers every part shares.
#include "certfleet/service/service.hpp"
#include "certfleet/service/kinds.hpp"

#include "service/service_common.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <array>
#include <memory>

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

namespace detail {

new_object blank_object(const create_context& c, std::string_view kind) {
  new_object out;
  out.obj.id = c.id;
  out.obj.project_id = c.project_id;
  out.obj.kind = std::string(kind);
  out.obj.created_at = c.now;
  return out;
}

}  // namespace detail

namespace {

// The creator of each kind POST …/<kind> makes: one row per kind, its function in the resource's
// file (service_common.hpp).
struct kind_creator {
  std::string_view kind;
  creator create;
};
constexpr std::array<kind_creator, 10> creators{{
    {store::kind_certificate, create_certificate},
    {store::kind_acme_account, create_acme_account},
    {store::kind_msca_ca, create_msca_ca},
    {store::kind_dns_provider, create_dns_provider},
    {store::kind_credential, create_credential},
    {store::kind_target, create_target},
    {store::kind_channel, create_channel},
    {store::kind_rule, create_rule},
    {store::kind_discovery_source, create_discovery_source},
    {store::kind_domain, create_domain},
}};

}  // namespace

op<json::value> service::create(std::string_view kind_view, std::string project_id, std::string body, requester who) {
  const kind_creator* row = nullptr;
  for (const auto& c : creators)
    if (c.kind == kind_view) row = &c;
  if (!row) co_return make_error(errc::not_found, fmt::format("no object kind {}", kind_view), "kind");
  const create_context ctx{st_, key_, cpu_, ca_pem_, who, new_object_id(), project_id, clock_.now_ms()};
  auto made = co_await row->create(ctx, std::move(body));
  if (!made) co_return std::move(made).error();
  auto obj = std::make_shared<new_object>(std::move(*made));
  store::tx_fn insert = [obj](store::catalog_tx& tx) -> result<void> {
    if (obj->check_in_tx)
      if (auto ok = obj->check_in_tx(tx); !ok) return ok;
    auto ins = tx.insert_object(obj->obj);
    if (!ins) return std::move(ins).error();
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(insert));
  if (!w) co_return std::move(w).error();
  co_return json::value(object_view(obj->obj));
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
