// AD CS use cases (DESIGN §13): a CA's creation with its policy fetched, an enrollment, the
// templates view.
#include "certfleet/service/service.hpp"

#include "service/service_common.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/lifecycle/msca_jobs.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <memory>

namespace certfleet::service {

namespace json = boost::json;
using store::catalog_object;
using namespace detail;

namespace detail {

boost::asio::awaitable<result<new_object>> create_msca_ca(const create_context& ctx, std::string body) {
  if (!ctx.key) co_return no_key();
  auto c = lifecycle::parse_msca_ca_request(body, ctx.now);
  if (!c) co_return std::move(c).error();
  lifecycle::msca_job_options opt;
  opt.key = ctx.key;
  opt.cpu = ctx.cpu;
  opt.ca_pem = ctx.ca_pem;
  auto policy = co_await lifecycle::fetch_msca_policy(ctx.st, c->spec, c->secret, opt, ctx.now);
  if (!policy) co_return std::move(policy).error();
  if (!c->spec.default_template.empty() && !lifecycle::find_template(*policy, c->spec.default_template))
    co_return make_error(errc::invalid_argument,
                         fmt::format("default_template {} is not in the CA's policy (it lists {} template(s): GET "
                                     "…/msca-cas/{{id}}/templates after creating the CA without it)",
                                     c->spec.default_template, policy->templates.size()),
                         "default_template");
  c->spec.policy = std::move(*policy);
  auto o = lifecycle::make_msca_ca_object(*c, *ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  co_return new_object{std::move(*o), {}};
}

}  // namespace detail

op<json::value> service::enroll_certificate(std::string project_id, std::string body, std::string actor) {
  auto req = lifecycle::parse_msca_enroll_request(body);
  if (!req) co_return std::move(req).error();
  auto now = clock_.now_ms();
  auto created = std::make_shared<std::vector<store::enqueue_outcome>>();
  auto cert_id = std::make_shared<std::string>(new_object_id());
  store::tx_fn op = [req = std::move(*req), project_id, actor, now, created, cert_id](store::catalog_tx& tx) mutable -> result<void> {
    auto ca = tx.get_object(project_id, store::kind_msca_ca, req.msca.msca_ca_id);
    if (!ca) {
      if (ca.error().is(errc::not_found))
        return make_error(errc::invalid_argument,
                          fmt::format("msca_ca_id: no AD CS CA {} in this project", req.msca.msca_ca_id), "msca_ca_id");
      return std::move(ca).error();
    }
    auto spec = lifecycle::parse_msca_ca_doc(*ca);
    if (!spec) return std::move(spec).error();
    if (req.msca.template_name.empty()) req.msca.template_name = spec->default_template;
    if (req.msca.template_name.empty())
      return make_error(errc::invalid_argument, "template is required: this CA has no default_template", "template");
    const auto* tmpl = lifecycle::find_template(spec->policy, req.msca.template_name);
    if (!tmpl)
      return make_error(errc::invalid_argument,
                        fmt::format("template {} is not in the CA's policy (GET …/msca-cas/{}/templates?refresh=1 lists "
                                    "what the CA's account may enroll)",
                                    req.msca.template_name, ca->id),
                        "template");
    auto kt = lifecycle::msca_key_type_for(*tmpl, req.msca.key_type);
    if (!kt) return std::move(kt).error();
    req.msca.key_type = std::move(*kt);
    auto cert = lifecycle::make_unissued_msca_certificate(req, *cert_id, project_id, now);
    if (auto ins = tx.insert_object(cert); !ins) return std::move(ins).error();
    auto e = enqueue_certificate_job(tx, project_id, *cert_id, queue::job_names::msca_issue_certificate,
                                     lifecycle::acme_job_payload(*cert_id), lifecycle::issue_job_key(*cert_id), actor, now);
    if (!e) return std::move(e).error();
    if (auto r = lifecycle::record_msca_job(tx, project_id, *cert_id, e->job.id); !r) return r;
    *created = {*e};
    return {};
  };
  auto w = co_await st_.catalog().transact(std::move(op));
  if (!w) co_return std::move(w).error();
  queue_.jobs_created(*created);
  co_return json::value(json::object{{"certificate_id", *cert_id}, {"job_id", created->front().job.id}, {"status", "pending"}});
}

op<json::value> service::msca_templates(std::string project_id, std::string id, bool refresh) {
  store::read_value_fn<catalog_object> read = [project_id, id](store::catalog_read& rd) {
    return rd.get_object(project_id, store::kind_msca_ca, id);
  };
  auto ca = co_await store::read_value(st_.catalog(), std::move(read));
  if (!ca) co_return std::move(ca).error();
  auto spec = lifecycle::parse_msca_ca_doc(*ca);
  if (!spec) co_return std::move(spec).error();
  if (refresh) {
    if (!key_) co_return no_key();
    lifecycle::msca_job_options opt;
    opt.key = key_;
    opt.cpu = cpu_;
    opt.ca_pem = ca_pem_;
    auto policy = co_await lifecycle::refresh_msca_policy(st_, *ca, opt, clock_.now_ms());
    if (!policy) co_return std::move(policy).error();
    spec->policy = std::move(*policy);
  }
  co_return json::value(lifecycle::msca_templates_view(*spec));
}

}  // namespace certfleet::service
