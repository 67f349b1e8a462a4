#pragma once
// Which target a job's lane delivers next (issue 20), without I/O. Targets keep their order; a
// lane that holds an open SSH connection takes the next target that can reuse it, else the first
// target whose destination may start a session now. Unit-tested apart from the engine.
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace certfleet::distribution {

struct queued_target {
  std::string destination;     // "host:port" its sessions count against; "" when it opens none (file, webhook)
  std::string connection_key;  // targets with one non-empty key may share a connection; "": never shared
};

class target_queue {
 public:
  explicit target_queue(std::vector<queued_target> targets);

  bool empty() const noexcept { return pending_.empty(); }
  std::size_t pending() const noexcept { return pending_.size(); }
  const queued_target& at(std::size_t i) const { return targets_.at(i); }

  // The first pending target (in order) with this connection key; taken out of the queue.
  std::optional<std::size_t> take_reusing(const std::string& connection_key);
  // The first pending target whose destination is "" or `startable` says may start now; taken.
  // `startable` is asked once per distinct destination.
  std::optional<std::size_t> take_next(const std::function<bool(const std::string& destination)>& startable);
  // Puts a taken target back in its place (its session could not start after all).
  void put_back(std::size_t i);
  // The first pending target, not taken (the one a waiting lane reports).
  std::optional<std::size_t> first_pending() const;

 private:
  std::vector<queued_target> targets_;
  std::set<std::size_t> pending_;
  std::map<std::string, std::set<std::size_t>> by_key_;  // pending, by connection key
};

}  // namespace certfleet::distribution
