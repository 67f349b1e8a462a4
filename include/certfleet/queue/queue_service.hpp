#pragma once
// The queue's front door: validates and enqueues jobs, and applies the operator's cancel/retry.
// The API, the CLI and other modules enqueue through it, never through the store directly; a
// module that enqueues inside its own catalog transaction uses enqueue_in (make_job.hpp) and
// then jobs_created here.
#include "certfleet/core/clock.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/store.hpp"

#include <functional>
#include <span>
#include <string>

namespace certfleet::queue {

class queue_service {
 public:
  queue_service(store::store& s, const handler_registry& handlers, const clock_source& clock, int retry_per_minute = 20);

  // make_job with this process's handlers (the type's handler and validator); nothing is stored.
  result<store::new_job> prepare(const enqueue_request& r, caller who) const;
  store::task<store::enqueue_outcome> enqueue(enqueue_request r, caller who);
  store::task<store::cancel_outcome> cancel(std::string project_id, std::string id);
  store::task<store::job_record> retry(std::string project_id, std::string id);
  void set_retry_per_minute(int n) { retry_per_minute_ = n; }
  // After a transaction that enqueued with enqueue_in commits: wakes the lane of each job it
  // created (on_enqueued), so a worker in this process claims them at once.
  void jobs_created(std::span<const store::enqueue_outcome> jobs) const;

  // Called with the lane of each job created, so a worker in this process claims it at once.
  std::function<void(std::string_view lane)> on_enqueued;
  // Called with the id of an active job whose cancel was requested (a local worker stops it now).
  std::function<void(const std::string& id)> on_cancel_requested;

 private:
  store::store& store_;
  const handler_registry& handlers_;
  const clock_source& clock_;
  int retry_per_minute_;
};

}  // namespace certfleet::queue
