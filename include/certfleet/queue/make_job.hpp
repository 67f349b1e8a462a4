#pragma once
// The one place a job is built (DESIGN §3 "enqueue"): a request becomes the store's new_job with
// the lane and default attempts of the job-type table. queue_service::enqueue uses it for the
// API, the CLI and module requests outside a transaction; modules that enqueue inside their own
// catalog transaction (a run's jobs, a retry wave, notifications, ACME and KEK follow-ups) call
// enqueue_in, and their caller wakes the lanes after the commit (queue_service::jobs_created).
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"

#include <cstddef>
#include <optional>
#include <string>

namespace certfleet::store {
class job_tx;
}

namespace certfleet::queue {

class handler_registry;

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

// Checks the request and builds the job; nothing is stored. The type must be in the type table
// (its lane and, unless the request gives them, its attempts come from there), a user may only
// name a user-triggerable type, the payload must be a JSON object; the key, run_at, attempts and
// project are checked, each error naming its field.
//
// With `handlers`, the type must have a handler there and its payload validator runs. Without
// (nullptr), neither check runs: that is the in-transaction path of modules (enqueue_in from
// open_run, the retry wave in the distribution's terminal hook, the lost-batch sweep,
// fire_event, the ACME issue/renew/revoke/validate/cleanup jobs, the KEK rotation batches),
// which run in handlers, sweeps and store hooks where the process's registry is not at hand.
// Each of them writes its payload with the serializer paired to the parser its own handler (and
// validator) reads, so the validator would only re-parse it; and each enqueues types whose
// handlers the same distribution module registers (were one missing, the worker that claims the
// job ends it dead, "no handler"). The API, the CLI and every queue_service::enqueue pass the
// registry, so whatever a person sends is validated.
result<store::new_job> make_job(const enqueue_request& r, caller who, const handler_registry* handlers);

// make_job (as the system, without a registry: see above), then the insert into the caller's
// write transaction. A refused request is returned as an error (for a module's own request it
// is a bug, and the transaction rolls back with it).
result<store::enqueue_outcome> enqueue_in(store::job_tx& tx, const enqueue_request& r, time_ms now);

}  // namespace certfleet::queue
