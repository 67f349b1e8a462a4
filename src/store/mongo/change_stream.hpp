#pragma once
// Wakes this process's workers when another process makes a job claimable: a change stream on
// the jobs collection (inserts with a lane, updates that put a job back in line), read by one
// thread with its own pooled client. When the deployment cannot give a change stream, it says so
// once and backs off; the workers' poll is the fallback and stays on in any case.
#include "client.hpp"

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

namespace certfleet::store::mongo {

// The aggregation pipeline of the watch, as sent (the wire test asserts it).
doc claimable_pipeline();

class claimable_watcher {
 public:
  claimable_watcher(connection& c, std::function<void(std::string_view lane)> on_claimable,
                    std::int32_t max_await_ms = 500);
  ~claimable_watcher();
  claimable_watcher(const claimable_watcher&) = delete;
  claimable_watcher& operator=(const claimable_watcher&) = delete;

  // Events delivered so far (for /metrics and tests).
  std::int64_t events() const noexcept { return events_.load(); }

 private:
  void loop();
  connection& c_;
  std::function<void(std::string_view)> on_claimable_;
  std::int32_t max_await_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> events_{0};
  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace certfleet::store::mongo
