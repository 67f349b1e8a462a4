// The MSCA Workflow of an AD CS job's detail (msca_jobs.hpp): the step reached, what was skipped,
// the template, request, poll count, renewal mode, subject and terminal reason, read from the job,
// its certificate, the CA and the held request.
#include "certfleet/lifecycle/msca_jobs.hpp"

#include "lifecycle/msca_common.hpp"
#include "lifecycle/workflow_head.hpp"

#include "certfleet/catalog/catalog.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_types.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace certfleet::lifecycle {

namespace json = boost::json;

namespace detail {

std::string subject_summary(const catalog::certificate_msca& m) {
  if (!m.subject.empty()) return m.subject;
  return m.sans.empty() ? std::string() : fmt::format("DNS:{}", fmt::join(m.sans, ", DNS:"));
}

}  // namespace detail

namespace {
constexpr const auto& steps = detail::msca_steps;
}  // namespace

std::span<const std::string_view> msca_workflow_steps() noexcept { return steps; }

bool has_msca_workflow(std::string_view job_type) noexcept {
  return job_type == queue::job_names::msca_issue_certificate || job_type == queue::job_names::msca_renew_certificate ||
         job_type == queue::job_names::msca_poll_pending;
}

result<json::object> msca_workflow_view(store::catalog_read& rd, const store::job_record& j) {
  std::size_t at = 0;
  json::object w = detail::workflow_head("msca", steps, j, at);
  const bool failed = w.contains("failed_step");
  // A request issued at once never waits or retrieves; a poll starts at the wait.
  json::array skipped;
  const bool poll = j.type == queue::job_names::msca_poll_pending;
  if (poll) {
    skipped.emplace_back("fetching_policy");
    skipped.emplace_back("generating_key");
    skipped.emplace_back("submitting");
  } else if (j.status == store::job_status::completed && steps[at] == "completed") {
    skipped.emplace_back("pending_approval");
    skipped.emplace_back("retrieving");
  }
  w["skipped_steps"] = std::move(skipped);
  std::string template_name, subject, request_id, renewal_mode, last_error, disposition;
  std::int64_t polls = 0;
  if (poll)
    if (auto t = parse_msca_poll_payload(j.payload)) {
      request_id = t->request_id;
      polls = t->n;
    }
  if (!j.certificate_id.empty()) {
    auto cert = rd.get_object(j.project_id, store::kind_certificate, j.certificate_id);
    if (cert) {
      auto doc = catalog::parse_certificate_doc(*cert, true);
      if (doc && doc->msca) {
        template_name = doc->msca->template_name;
        subject = detail::subject_summary(*doc->msca);
        if (request_id.empty()) request_id = doc->msca->request_id;
        last_error = doc->msca->last_error;
        disposition = doc->msca->disposition;
        if (auto ca = rd.get_object(j.project_id, store::kind_msca_ca, doc->msca->msca_ca_id))
          if (auto spec = parse_msca_ca_doc(*ca)) renewal_mode = spec->renewal_mode;
        if (!request_id.empty() && polls == 0)
          if (auto o = rd.objects_named(j.project_id, store::kind_msca_request,
                                        fmt::format("{}:{}", j.certificate_id, request_id), 1);
              o && !o->empty())
            if (auto d = parse_msca_request_doc(o->front())) polls = d->polls;
        // Issued since: the held request is gone, its count went onto the certificate.
        if (polls == 0 && !request_id.empty() && request_id == doc->msca->request_id) polls = doc->msca->polls;
      }
    } else if (!cert.error().is(errc::not_found)) {
      return std::move(cert).error();
    }
  }
  w["template"] = template_name;
  w["request_id"] = certfleet::json::text_value(request_id);
  w["poll_count"] = polls;
  w["renewal_mode"] = j.type == queue::job_names::msca_issue_certificate ? std::string("new_key")
                      : renewal_mode.empty()                            ? std::string("new_key")
                                                                         : renewal_mode;
  w["subject"] = subject;
  std::string terminal;
  if (failed) terminal = j.error.empty() ? last_error : j.error;
  else if (j.status == store::job_status::completed)
    terminal = steps[at] == "completed" ? std::string("issued")
               : steps[at] == "pending_approval" ? std::string("pending approval at the CA")
                                                 : std::string();
  w["terminal_reason"] = certfleet::json::text_value(terminal);
  w["started_at"] = certfleet::json::time_value(j.started_at);
  return w;
}

}  // namespace certfleet::lifecycle
