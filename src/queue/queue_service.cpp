#include "certfleet/queue/queue_service.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/queue/job_types.hpp"

#include <fmt/format.h>

namespace certfleet::queue {

queue_service::queue_service(store::store& s, const handler_registry& handlers, const clock_source& clock,
                             int retry_per_minute)
    : store_(s), handlers_(handlers), clock_(clock), retry_per_minute_(retry_per_minute) {}

result<store::new_job> queue_service::prepare(const enqueue_request& r, caller who) const {
  const job_type* t = find_job_type(r.type);
  if (!t)
    return make_error(errc::unknown_job_type, fmt::format("unknown job type \"{}\"", r.type.substr(0, 100)), "type");
  if (!handlers_.find(r.type))
    return make_error(errc::unknown_job_type,
                      fmt::format("job type {} has no handler in this build of certfleet; it is refused rather "
                                  "than stored where nothing would run it",
                                  r.type),
                      "type");
  if (who == caller::user && !t->user_triggerable)
    return make_error(errc::invalid_argument,
                      fmt::format("job type {} cannot be enqueued through the jobs API; it is started by its own "
                                  "routes",
                                  r.type),
                      "type");
  if (auto ok = json::check_object(r.payload, "payload"); !ok) return std::move(ok).error();
  if (const auto* v = handlers_.validator(r.type); v && *v)
    if (auto ok = (*v)(r.payload); !ok) return std::move(ok).error();
  if (r.idempotency_key) {
    const auto& k = *r.idempotency_key;
    if (k.empty()) return make_error(errc::invalid_argument, "idempotency_key must not be empty", "idempotency_key");
    if (k.size() > max_idempotency_key)
      return make_error(errc::invalid_argument,
                        fmt::format("idempotency_key is {} characters; the limit is {}", k.size(), max_idempotency_key),
                        "idempotency_key");
    for (unsigned char c : k)
      if (c < 0x20 || c == 0x7f)
        return make_error(errc::invalid_argument, "idempotency_key must not contain control characters",
                          "idempotency_key");
  }
  if (r.run_at < 0) return make_error(errc::invalid_argument, "run_at must not be negative", "run_at");
  if (r.max_attempts < 0 || r.max_attempts > 100)
    return make_error(errc::invalid_argument, "max_attempts must be from 1 to 100", "max_attempts");
  if (r.project_id.empty()) return make_error(errc::invalid_argument, "project is required", "project");

  store::new_job j;
  j.project_id = r.project_id;
  j.type = r.type;
  j.lane = std::string(t->lane);
  j.payload = r.payload;
  j.max_attempts = r.max_attempts ? r.max_attempts : t->max_attempts;
  j.run_at = r.run_at;
  j.held = r.held;
  j.idempotency_key = r.idempotency_key.value_or("");
  j.parent_job_id = r.parent_job_id;
  j.certificate_id = r.certificate_id;
  j.distribution_id = r.distribution_id;
  j.triggered_by = r.triggered_by;
  return j;
}

store::task<store::enqueue_outcome> queue_service::enqueue(enqueue_request r, caller who) {
  auto j = prepare(r, who);
  if (!j) co_return std::move(j).error();
  auto out = co_await store_.jobs().enqueue(std::move(*j), clock_.now_ms());
  if (out && out->created && on_enqueued) on_enqueued(out->job.lane);
  co_return out;
}

store::task<store::cancel_outcome> queue_service::cancel(std::string project_id, std::string id) {
  auto out = co_await store_.jobs().cancel(std::move(project_id), std::move(id), clock_.now_ms());
  if (out && !out->immediate && on_cancel_requested) on_cancel_requested(out->job.id);
  co_return out;
}

store::task<store::job_record> queue_service::retry(std::string project_id, std::string id) {
  // A distribution's jobs are re-driven through the distribution, which opens a new run over
  // its failed targets; re-running one job would deliver outside any run. The type's owner
  // words the refusal (it knows how); without one, the queue's own words.
  auto job = co_await store_.jobs().get(project_id, id);
  if (job && driven_by_distribution(job->type)) {
    if (const auto* refuse = handlers_.refusal(job->type); refuse && *refuse) co_return (*refuse)(*job);
    co_return make_error(errc::conflict,
                         fmt::format("job {} is driven by distribution {}: it is re-run through its distribution, "
                                     "not retried alone",
                                     id, job->distribution_id),
                         "id");
  }
  auto out = co_await store_.jobs().retry(std::move(project_id), std::move(id), clock_.now_ms(), retry_per_minute_);
  if (out && on_enqueued) on_enqueued(out->lane);
  co_return out;
}

}  // namespace certfleet::queue
