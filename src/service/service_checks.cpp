// The service's checks and discovery (service.hpp): a domain check now, a discovery run now, the
// discovered certificates and their import.
#include "certfleet/service/service.hpp"

#include "service/service_common.hpp"

#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/net/tls_probe.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_types.hpp"
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
  r.payload = checks::domain_check_payload_json(id);
  // One per domain and minute: a double click is one lookup, the registry's rate limit is spared.
  r.idempotency_key = checks::domain_check_now_key(id, now);
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
  r.payload = checks::discovery_payload_json(id);
  r.idempotency_key = checks::discovery_run_key(id, now);  // a double click is one scan
  r.triggered_by = actor;
  auto out = co_await queue_.enqueue(std::move(r), queue::caller::system);
  if (!out) co_return std::move(out).error();
  co_return json::value(json::object{{"job_id", out->job.id}, {"created", out->created}});
}

op<json::value> service::list_discovered(std::string project_id, std::string source, std::string finding, int page,
                                         int page_size) {
  if (auto ok = checks::check_discovered_filter(source, finding); !ok) co_return std::move(ok).error();
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
    if (!checks::discovered_matches(o, source, finding)) continue;
    if (total >= first && total < first + page_size) items.push_back(checks::discovered_certificate_view(o));
    ++total;
  }
  auto v = page_view(std::move(items), page, page_size, total);
  // The findings a filter may name, from the one table, so a client lists them without a copy.
  json::array table;
  for (const auto& f : net::finding_table)
    table.push_back(json::object{{"name", f.name}, {"severity", f.severity}, {"text", f.text}});
  v["finding_table"] = std::move(table);
  co_return json::value(std::move(v));
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

namespace detail {

boost::asio::awaitable<result<new_object>> create_discovery_source(const create_context& ctx, std::string body) {
  auto req = checks::parse_discovery_source_request(body);
  if (!req) co_return std::move(req).error();
  auto settings = co_await store::read_settings(ctx.st);
  auto plan = net::parse_discovery_spec(req->spec.endpoints, req->spec.cidrs, req->spec.ports, req->spec.sni,
                                        static_cast<std::uint64_t>(settings.integer("discovery_max_addresses")));
  if (!plan) co_return std::move(plan).error();
  auto allow = net::parse_egress_allow_list(settings.text("discovery_allow_list"), "discovery_allow_list");
  if (!allow) co_return std::move(allow).error();
  // Nothing the operator did not allow is ever scanned: a range reaching outside is refused whole.
  if (auto ok = net::check_discovery_egress(*plan, *allow); !ok)
    co_return make_error(errc::invalid_argument, checks::with_allow_list_named(ok.error().message, "discovery_allow_list"),
                         ok.error().field);
  auto out = blank_object(ctx, store::kind_discovery_source);
  out.obj.name = req->name;
  out.obj.doc = checks::discovery_source_doc_json(req->spec, plan->size());
  co_return std::move(out);
}

boost::asio::awaitable<result<new_object>> create_domain(const create_context& ctx, std::string body) {
  auto name = checks::parse_domain_request(body);
  if (!name) co_return std::move(name).error();
  auto out = blank_object(ctx, store::kind_domain);
  out.obj.name = *name;
  out.obj.doc = checks::domain_doc_json({});
  co_return std::move(out);
}

}  // namespace detail

}  // namespace certfleet::service
