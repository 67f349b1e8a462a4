#include "certfleet/distribution/target_queue.hpp"

#include <map>

namespace certfleet::distribution {

target_queue::target_queue(std::vector<queued_target> targets) : targets_(std::move(targets)) {
  for (std::size_t i = 0; i < targets_.size(); ++i) put_back(i);
}

void target_queue::put_back(std::size_t i) {
  if (!pending_.insert(i).second) return;
  const auto& k = targets_.at(i).connection_key;
  if (!k.empty()) by_key_[k].insert(i);
}

std::optional<std::size_t> target_queue::take_reusing(const std::string& connection_key) {
  if (connection_key.empty()) return std::nullopt;
  auto it = by_key_.find(connection_key);
  if (it == by_key_.end() || it->second.empty()) return std::nullopt;
  auto i = *it->second.begin();
  it->second.erase(it->second.begin());
  if (it->second.empty()) by_key_.erase(it);
  pending_.erase(i);
  return i;
}

std::optional<std::size_t> target_queue::take_next(const std::function<bool(const std::string&)>& startable) {
  std::map<std::string, bool> asked;
  for (auto i : pending_) {
    const auto& d = targets_[i].destination;
    if (!d.empty()) {
      auto [it, fresh] = asked.emplace(d, false);
      if (fresh) it->second = startable(d);
      if (!it->second) continue;
    }
    pending_.erase(i);
    const auto& k = targets_[i].connection_key;
    if (!k.empty()) {
      auto b = by_key_.find(k);
      b->second.erase(i);
      if (b->second.empty()) by_key_.erase(b);
    }
    return i;
  }
  return std::nullopt;
}

std::optional<std::size_t> target_queue::first_pending() const {
  if (pending_.empty()) return std::nullopt;
  return *pending_.begin();
}

}  // namespace certfleet::distribution
