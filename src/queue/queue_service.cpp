#include "certfleet/queue/queue_service.hpp"

#include "certfleet/core/log.hpp"

#include "certfleet/queue/job_types.hpp"

#include <fmt/format.h>

#include <set>

namespace certfleet::queue {

queue_service::queue_service(store::store& s, const handler_registry& handlers, const clock_source& clock,
                             int retry_per_minute)
    : store_(s), handlers_(handlers), clock_(clock), retry_per_minute_(retry_per_minute) {}

result<store::new_job> queue_service::prepare(const enqueue_request& r, caller who) const {
  return make_job(r, who, &handlers_);
}

void queue_service::jobs_created(std::span<const store::enqueue_outcome> jobs) const {
  std::set<std::string_view> lanes;
  for (const auto& j : jobs) {
    if (!j.created) continue;
    lanes.insert(j.job.lane);
    // Debug: sweeps enqueue every cycle, and a job's end is what an operator reads.
    log::write(spdlog::level::debug,
               {.job_id = j.job.id, .event = "enqueued", .type = j.job.type, .project = j.job.project_id},
               "job {} ({}) enqueued on lane {}", j.job.id, j.job.type, j.job.lane);
  }
  if (!on_enqueued) return;
  for (auto lane : lanes) on_enqueued(lane);
}

store::task<store::enqueue_outcome> queue_service::enqueue(enqueue_request r, caller who) {
  auto j = prepare(r, who);
  if (!j) co_return std::move(j).error();
  auto out = co_await store_.jobs().enqueue(std::move(*j), clock_.now_ms());
  if (out) jobs_created({&*out, 1});
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
