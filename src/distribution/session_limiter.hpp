#pragma once
// How many SSH sessions this process opens per destination (private to src/distribution).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "certfleet/store/session_slots.hpp"
#include "certfleet/store/store.hpp"

namespace certfleet::distribution::detail {

namespace asio = boost::asio;

// The sessions this process holds per destination (issue 20), over the store's slots, which
// count every process's: a lane asks the store only for a destination this process has not
// filled itself; a refusal (other processes hold the rest) makes every lane of the process pass
// that destination over for one poll interval; a slot given back wakes the process's waiting
// lanes at once (one freed by another process is seen at the next poll). On the event loop: no
// locks.
class session_limiter {
 public:
  using steady = std::chrono::steady_clock;

  bool may_try(const std::string& destination, int limit, steady::time_point now) const {
    if (auto it = held_.find(destination); it != held_.end() && it->second >= limit) return false;
    auto r = refused_until_.find(destination);
    return r == refused_until_.end() || r->second <= now;
  }

  // A slot of `destination` for `holder`, or 0 when all are taken (or the store did not answer).
  asio::awaitable<std::int64_t> acquire(store::store& st, const std::string& destination, const store::slot_holder& holder,
                                        int limit, time_ms now, time_ms ttl, std::chrono::milliseconds poll) {
    auto g = co_await st.session_slots().acquire(destination, holder, limit, now, ttl);
    if (g && g->granted()) {
      ++held_[destination];
      co_return g->slot_id;
    }
    if (!g) spdlog::warn("session slot of {}: {}", destination, g.error().message);
    refused_until_[destination] = steady::now() + poll;
    co_return 0;
  }

  asio::awaitable<void> release(store::store& st, const std::string& destination, std::int64_t slot_id,
                                const store::slot_holder& holder) {
    // In the store first: a lane woken below must find the slot free there too.
    auto r = co_await st.session_slots().release(slot_id, holder);
    if (!r) spdlog::warn("giving back a session slot of {}: {} (it frees with the job's lease)", destination, r.error().message);
    if (auto it = held_.find(destination); it != held_.end() && --it->second <= 0) held_.erase(it);
    refused_until_.erase(destination);
    for (auto* w : waiters_) w->cancel();
  }

  // Returns after a slot of this process was given back, or after `at_most`.
  asio::awaitable<void> wait(std::chrono::milliseconds at_most) {
    asio::steady_timer t(co_await asio::this_coro::executor, at_most);
    waiters_.push_back(&t);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &t));
  }

 private:
  std::map<std::string, int> held_;
  std::map<std::string, steady::time_point> refused_until_;
  std::vector<asio::steady_timer*> waiters_;
};

}  // namespace certfleet::distribution::detail
