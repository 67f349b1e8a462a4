#pragma once
// The queue's front door: validates and enqueues jobs, and applies the operator's cancel/retry.
// The API, the CLI and other modules enqueue through it, never through the store directly.
#include "certfleet/core/clock.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/store.hpp"

#include <functional>
#include <optional>
#include <string>

namespace certfleet::queue {

inline constexpr std::size_t max_idempotency_key = 200;

struct enqueue_request {
  std::string project_id;
  std::string type;
  std::string payload = "{}";
  std::optional<std::string> idempotency_key;
  time_ms run_at = 0;  // 0: now
  std::string triggered_by;
  int max_attempts = 0;  // 0: the type table's default
  // Set by modules, never by the generic jobs API.
  bool held = false;
  std::string parent_job_id;
  std::string certificate_id;
  std::string distribution_id;
};

enum class caller { user, system };

class queue_service {
 public:
  queue_service(store::store& s, const handler_registry& handlers, const clock_source& clock, int retry_per_minute = 20);

  // Checks the request and turns it into what the store inserts; nothing is stored.
  result<store::new_job> prepare(const enqueue_request& r, caller who) const;
  store::task<store::enqueue_outcome> enqueue(enqueue_request r, caller who);
  store::task<store::cancel_outcome> cancel(std::string project_id, std::string id);
  store::task<store::job_record> retry(std::string project_id, std::string id);
  void set_retry_per_minute(int n) { retry_per_minute_ = n; }

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
