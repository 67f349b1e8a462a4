#pragma once
// The live job-log hub. Per watched job, one topic: it learns new lines from this process's
// worker at once (publish) and from one store poller (lines another process wrote, and the end
// of the job), at most one poll interval behind. Each frame is serialized once and shared by every
// subscriber; each subscriber has a bounded queue and is dropped, never buffered without bound,
// when it falls too far behind. Everything runs on the one event loop: no locks.
#include "certfleet/store/store.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace certfleet::api {

struct log_frame {
  std::int64_t first_seq = 0;  // lines first_seq..last_seq, contiguous; 0/0 for an end frame
  std::int64_t last_seq = 0;
  bool end = false;
  // No text: "the topic continues after last_seq". A subscriber behind it reads the difference
  // from the store first, so a line the topic counted before this subscriber joined is never lost.
  bool sync = false;
  std::shared_ptr<const std::string> text;
  // For a lines frame: `text` as one whole WebSocket frame (header + payload), built once and
  // written as-is to every subscriber that is caught up (see log_subscriber::direct).
  std::shared_ptr<const std::string> wire;
};

// {"type":"lines","lines":[…]} and {"type":"end","status":"completed"}
std::string lines_frame_text(const std::vector<store::log_line>& lines, std::size_t from, std::size_t to);
// The lines of consecutive lines frames as one frame: a subscriber that fell behind catches up
// in one write instead of one per frame (fewer syscalls exactly when the loop is busiest).
std::string merge_lines_frames(const std::vector<const std::string*>& texts);
std::string end_frame_text(store::job_status status);

class log_subscriber {
 public:
  log_subscriber(boost::asio::any_io_executor ex, std::size_t max_frames, std::size_t max_bytes);
  // Queues a frame; past the bounds, marks the subscriber overflowed (the session closes it).
  void push(const log_frame& f);
  bool overflowed() const noexcept { return overflowed_; }
  bool empty() const noexcept { return q_.empty(); }
  log_frame pop();
  const log_frame* peek() const { return q_.empty() ? nullptr : &q_.front(); }
  // Waits until a frame is queued, the queue overflows or notify() is called.
  boost::asio::awaitable<void> wait();
  void notify() { signal_.cancel(); }
  std::function<void()> on_overflow;  // called once, on the loop
  // The fast path: while the session is caught up and waiting (`live`), a lines frame goes
  // straight to the connection through `direct` — no queueing, no wake-up. `direct` returns
  // false when it cannot take the frame (a gap, a closing connection, a connection still
  // holding bytes the kernel has not taken): it is queued here as usual and sent merged.
  std::function<bool(const log_frame&)> direct;
  bool live = false;

 private:
  // Past the bounds: drops what is queued and has on_overflow called once, on the loop.
  void mark_overflowed();

  std::deque<log_frame> q_;
  std::size_t bytes_ = 0;
  std::size_t max_frames_;
  std::size_t max_bytes_;
  bool overflowed_ = false;
  boost::asio::steady_timer signal_;
};

class log_hub {
 public:
  // Lines published within `coalesce` of the first unsent one share one frame: with many
  // subscribers the cost is per frame (one write each), so a burst must not be one frame a line.
  log_hub(boost::asio::any_io_executor ex, store::store& st, std::chrono::milliseconds poll_interval,
          std::chrono::milliseconds coalesce = std::chrono::milliseconds(5));
  ~log_hub();

  // The worker in this process appended a line (called on the loop).
  void publish(const std::string& job_id, const store::log_line& line);
  void subscribe(const std::string& job_id, const std::shared_ptr<log_subscriber>& s);
  void unsubscribe(const std::string& job_id, const log_subscriber* s);
  void stop();

  std::size_t subscribers() const;
  std::size_t watched_jobs() const { return topics_.size(); }

 private:
  struct topic;
  boost::asio::awaitable<void> poll(std::shared_ptr<topic> t);
  void broadcast(topic& t, const log_frame& f);
  void flush(topic& t);
  void emit_lines(topic& t, const std::vector<store::log_line>& lines);

  boost::asio::any_io_executor ex_;
  store::store& st_;
  std::chrono::milliseconds poll_interval_;
  std::chrono::milliseconds coalesce_;
  std::unordered_map<std::string, std::shared_ptr<topic>> topics_;
  bool stopped_ = false;
};

}  // namespace certfleet::api
