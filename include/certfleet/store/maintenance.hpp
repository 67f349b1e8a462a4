#pragma once
// Store operations of the scheduler: the leader lease, retention, backup.
#include "certfleet/store/store.hpp"

namespace certfleet::store {

struct leader_lease {
  std::string name;
  std::string holder;
  std::int64_t epoch = 0;  // +1 each time the lease changes hands: the leader's fencing token
  time_ms expires_at = 0;
  bool held = false;  // by the caller, after this call
};

class lease_store {
 public:
  virtual ~lease_store() = default;
  // Takes the named lease for `holder` until now + ttl when it is free, expired or already the
  // holder's (then it is renewed, same epoch); otherwise returns the current holder, held=false.
  // One atomic write. Time comes from the caller's clock: the embedded store has no clock of
  // its own, and every process sharing it runs on one machine.
  virtual task<leader_lease> acquire(std::string name, std::string holder, time_ms now, time_ms ttl) = 0;
  // Gives the lease up at once (graceful stop), only if `holder` still has it at `epoch`.
  virtual task<void> release(std::string name, std::string holder, std::int64_t epoch) = 0;
};

class maintenance_store {
 public:
  virtual ~maintenance_store() = default;
  // Deletes up to `limit` completed and cancelled jobs that finished before `before`, with their
  // log lines (dead and failed jobs stay until retried or deleted). Returns how many.
  virtual task<int> purge_finished(time_ms before, int limit) = 0;
  // Deletes up to `limit` of the oldest audit entries written before `before`. Returns how many.
  virtual task<int> purge_audit(time_ms before, int limit) = 0;
  // Deletes up to `limit` tokens that expired before `before`, with their UI sessions. Returns
  // how many. (Revoked tokens stay: the audit log names them.)
  virtual task<int> purge_expired_tokens(time_ms before, int limit) = 0;
  // A consistent copy of the whole store, taken online, written to `path` (which must not exist).
  virtual task<void> backup_to(std::string path) = 0;
};

}  // namespace certfleet::store
