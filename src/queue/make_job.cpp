#include "certfleet/queue/make_job.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/store/store.hpp"

#include <fmt/format.h>

namespace certfleet::queue {

result<store::new_job> make_job(const enqueue_request& r, caller who, const handler_registry* handlers) {
  const job_type* t = find_job_type(r.type);
  if (!t)
    return make_error(errc::unknown_job_type, fmt::format("unknown job type \"{}\"", r.type.substr(0, 100)), "type");
  if (handlers && !handlers->find(r.type))
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
  if (const auto* v = handlers ? handlers->validator(r.type) : nullptr; v && *v)
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

result<store::enqueue_outcome> enqueue_in(store::job_tx& tx, const enqueue_request& r, time_ms now) {
  auto j = make_job(r, caller::system, nullptr);
  if (!j) return std::move(j).error();
  return tx.enqueue(*j, now);
}

}  // namespace certfleet::queue
