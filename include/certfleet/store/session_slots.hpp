#pragma once
// Per-destination session slots (issue 20): at most N SSH sessions to one host:port, counted
// across every job of every process that shares the store. A slot belongs to one attempt of one
// job (job id + fence) and is live until it is released, until its expiry passes without a renewal,
// or at once when that attempt is over — the job finished, was reaped (its worker stopped
// heartbeating: a SIGKILLed worker's slots come back with its job's lease) or runs under a new
// fence. Dead slots are freed by the next acquire of their destination.
#include "certfleet/store/store.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace certfleet::store {

// The job attempt that holds a slot.
struct slot_holder {
  std::string job_id;
  std::int64_t fence = 0;
};

struct slot_grant {
  std::int64_t slot_id = 0;  // 0: not granted (every slot is taken)
  std::int64_t in_use = 0;   // live slots of the destination after the call, the caller's included
  bool granted() const noexcept { return slot_id != 0; }
};

class session_slot_store {
 public:
  virtual ~session_slot_store() = default;
  // One atomic write: frees the destination's dead slots, then takes one for `holder` until
  // now + ttl when fewer than `limit` are live (limit >= 1).
  virtual task<slot_grant> acquire(std::string destination, slot_holder holder, int limit, time_ms now,
                                   time_ms ttl) = 0;
  // Extends every slot `holder` has to now + ttl; returns how many it has.
  virtual task<int> renew(slot_holder holder, time_ms now, time_ms ttl) = 0;
  // Gives the slot back at once (only when `holder` has it).
  virtual task<void> release(std::int64_t slot_id, slot_holder holder) = 0;
  // The live slots per destination at `now`, by destination (operators, tests).
  virtual task<std::vector<std::pair<std::string, std::int64_t>>> live(time_ms now) = 0;
};

}  // namespace certfleet::store
