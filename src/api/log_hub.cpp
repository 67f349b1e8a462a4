#include "log_hub.hpp"

#include "certfleet/core/log.hpp"
#include "certfleet/api/ws_frame.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/store/auth.hpp"

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace certfleet::api {

namespace asio = boost::asio;

namespace {
constexpr int poll_batch = 1000;
}

std::string lines_frame_text(const std::vector<store::log_line>& lines, std::size_t from, std::size_t to) {
  boost::json::array arr;
  arr.reserve(to - from);
  for (std::size_t i = from; i < to; ++i) arr.push_back(queue::to_json(lines[i]));
  return boost::json::serialize(boost::json::object{{"type", "lines"}, {"lines", std::move(arr)}});
}

namespace {
constexpr std::string_view lines_prefix = R"({"type":"lines","lines":[)";
constexpr std::string_view lines_suffix = "]}";
}  // namespace

std::string merge_lines_frames(const std::vector<const std::string*>& texts) {
  std::size_t n = lines_prefix.size() + lines_suffix.size();
  for (const auto* t : texts) n += t->size() - lines_prefix.size() - lines_suffix.size() + 1;
  std::string out;
  out.reserve(n);
  out.append(lines_prefix);
  bool first = true;
  for (const auto* t : texts) {
    std::string_view inner(*t);
    inner.remove_prefix(lines_prefix.size());
    inner.remove_suffix(lines_suffix.size());
    if (inner.empty()) continue;
    if (!first) out.push_back(',');
    out.append(inner);
    first = false;
  }
  out.append(lines_suffix);
  return out;
}

std::string end_frame_text(store::job_status status) {
  return boost::json::serialize(boost::json::object{{"type", "end"}, {"status", std::string(store::to_string(status))}});
}

log_subscriber::log_subscriber(asio::any_io_executor ex, std::size_t max_frames, std::size_t max_bytes)
    : max_frames_(max_frames), max_bytes_(max_bytes), signal_(ex, asio::steady_timer::time_point::max()) {}

void log_subscriber::mark_overflowed() {
  if (overflowed_) return;
  overflowed_ = true;
  q_.clear();
  bytes_ = 0;
  signal_.cancel();
  if (on_overflow) asio::post(signal_.get_executor(), [cb = on_overflow] { cb(); });
}

void log_subscriber::push(const log_frame& f) {
  if (overflowed_) return;
  if (live && q_.empty() && direct && f.wire && direct(f)) return;
  std::size_t sz = f.text ? f.text->size() : 0;
  // An end frame always fits: it is the last one and tells the client the job is over.
  if (!f.end && !f.sync && (q_.size() >= max_frames_ || bytes_ + sz > max_bytes_)) {
    mark_overflowed();
    return;
  }
  bytes_ += sz;
  q_.push_back(f);
  signal_.cancel();
}

log_frame log_subscriber::pop() {
  auto f = std::move(q_.front());
  q_.pop_front();
  bytes_ -= f.text ? f.text->size() : 0;
  return f;
}

asio::awaitable<void> log_subscriber::wait() {
  signal_.expires_at(asio::steady_timer::time_point::max());
  co_await signal_.async_wait(asio::as_tuple(asio::use_awaitable));
}

struct log_hub::topic {
  explicit topic(asio::any_io_executor ex, std::string id) : job_id(std::move(id)), timer(ex), flush_timer(ex) {}
  std::string job_id;
  std::int64_t last_seq = -1;  // highest seq broadcast; -1 until the poller's first read
  std::vector<std::shared_ptr<log_subscriber>> subs;
  std::vector<store::log_line> pending;  // published here, not yet broadcast (one loop turn)
  bool flush_posted = false;
  bool stopped = false;
  asio::steady_timer timer;
  asio::steady_timer flush_timer;
};

log_hub::log_hub(asio::any_io_executor ex, store::store& st, std::chrono::milliseconds poll_interval,
                 std::chrono::milliseconds coalesce)
    : ex_(ex), st_(st), poll_interval_(poll_interval), coalesce_(coalesce) {}

log_hub::~log_hub() { stop(); }

std::size_t log_hub::subscribers() const {
  std::size_t n = 0;
  for (const auto& [_, t] : topics_) n += t->subs.size();
  return n;
}

void log_hub::subscribe(const std::string& job_id, const std::shared_ptr<log_subscriber>& s) {
  auto it = topics_.find(job_id);
  if (it == topics_.end()) {
    auto t = std::make_shared<topic>(ex_, job_id);
    it = topics_.emplace(job_id, t).first;
    asio::co_spawn(ex_, poll(t), report_unexpected(fmt::format("log stream poller for job {}", job_id)));
  }
  it->second->subs.push_back(s);
  if (it->second->last_seq >= 0) {
    log_frame sync;
    sync.sync = true;
    sync.last_seq = it->second->last_seq;
    s->push(sync);
  }
}

void log_hub::unsubscribe(const std::string& job_id, const log_subscriber* s) {
  auto it = topics_.find(job_id);
  if (it == topics_.end()) return;
  auto& subs = it->second->subs;
  subs.erase(std::remove_if(subs.begin(), subs.end(), [s](const auto& p) { return p.get() == s; }), subs.end());
  if (subs.empty()) {
    // Nobody watches: the poller stops and the topic goes.
    it->second->stopped = true;
    it->second->timer.cancel();
    topics_.erase(it);
  }
}

void log_hub::stop() {
  stopped_ = true;
  for (auto& [_, t] : topics_) {
    t->stopped = true;
    t->timer.cancel();
    t->flush_timer.cancel();
  }
  topics_.clear();
}

void log_hub::broadcast(topic& t, const log_frame& f) {
  // Copy: a subscriber's push never changes the list, but keep iteration independent of it anyway.
  for (const auto& s : t.subs) s->push(f);
}

void log_hub::emit_lines(topic& t, const std::vector<store::log_line>& lines) {
  // Only lines that continue the topic's sequence: no duplicate, no gap.
  std::size_t from = 0;
  while (from < lines.size() && lines[from].seq <= t.last_seq) ++from;
  if (from == lines.size() || lines[from].seq != t.last_seq + 1) return;
  std::size_t to = from + 1;
  while (to < lines.size() && lines[to].seq == lines[to - 1].seq + 1) ++to;
  log_frame f;
  f.first_seq = lines[from].seq;
  f.last_seq = lines[to - 1].seq;
  f.text = std::make_shared<const std::string>(lines_frame_text(lines, from, to));
  f.wire = std::make_shared<const std::string>(ws_text_frame(*f.text));
  t.last_seq = f.last_seq;
  broadcast(t, f);
}

void log_hub::flush(topic& t) {
  t.flush_posted = false;
  if (t.stopped || t.pending.empty()) return;
  auto lines = std::move(t.pending);
  t.pending.clear();
  emit_lines(t, lines);
}

void log_hub::publish(const std::string& job_id, const store::log_line& line) {
  auto it = topics_.find(job_id);
  if (it == topics_.end()) return;  // nobody watches this job
  auto& t = *it->second;
  if (t.last_seq < 0) return;  // the poller's first read will include it
  std::int64_t expected = (t.pending.empty() ? t.last_seq : t.pending.back().seq) + 1;
  if (line.seq < expected) return;  // already known
  if (line.seq > expected) {
    // A line this process did not see (another writer): let the poller read the gap now.
    t.timer.cancel();
    return;
  }
  t.pending.push_back(line);
  if (!t.flush_posted) {
    // Lines appended in the same loop turn, or within the coalescing window, share one frame.
    t.flush_posted = true;
    auto w = std::weak_ptr<topic>(it->second);
    if (coalesce_.count() <= 0) {
      asio::post(ex_, [this, w] {
        if (auto p = w.lock()) flush(*p);
      });
    } else {
      // The window grows with the audience once a broadcast round could outlast it (5 µs a
      // subscriber — about one direct sendmsg each — at most 40 ms): a loop busy writing every
      // line to thousands of sockets would starve the very handler producing them. Up to 1,000
      // subscribers it stays at the floor: a longer window only let bursts pile up into messages
      // too large to reach a thousand sockets in time (ws_fanout: p99 60 ms at 20 µs, 14 ms at 5).
      auto window = std::max<std::chrono::microseconds>(
          coalesce_, std::min<std::chrono::microseconds>(std::chrono::microseconds(5) * t.subs.size(),
                                                          std::chrono::milliseconds(40)));
      t.flush_timer.expires_after(window);
      t.flush_timer.async_wait([this, w](boost::system::error_code) {
        if (auto p = w.lock()) flush(*p);
      });
    }
  }
}

asio::awaitable<void> log_hub::poll(std::shared_ptr<topic> t) {
  while (!t->stopped) {
    bool first = t->last_seq < 0;
    auto w = co_await st_.observe().watch_logs(t->job_id, std::max<std::int64_t>(t->last_seq, 0), first ? 0 : poll_batch);
    if (t->stopped) break;
    if (!w) {
      if (w.error().is(errc::not_found)) {
        // The job is gone: tell the subscribers, as an end without a status they can act on.
        log_frame f;
        f.end = true;
        f.text = std::make_shared<const std::string>(R"({"type":"end","status":"not_found"})");
        broadcast(*t, f);
        break;
      }
      log::write(spdlog::level::warn, {.job_id = t->job_id}, "log stream of job {}: store read failed: {}", t->job_id, w.error().message);
    } else {
      if (first) {
        t->last_seq = w->last_seq;
        log_frame sync;
        sync.sync = true;
        sync.last_seq = t->last_seq;
        broadcast(*t, sync);
        flush(*t);
      } else {
        if (!t->pending.empty()) flush(*t);
        emit_lines(*t, w->lines);
      }
      if (store::is_terminal(w->status) && t->last_seq >= w->last_seq) {
        log_frame f;
        f.end = true;
        f.text = std::make_shared<const std::string>(end_frame_text(w->status));
        broadcast(*t, f);
        break;
      }
      if (static_cast<int>(w->lines.size()) == poll_batch) continue;  // more are waiting
    }
    t->timer.expires_after(poll_interval_);
    co_await t->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  // Ended: later subscribers get a fresh topic (which sees the end at its first read).
  if (!t->stopped) {
    t->stopped = true;
    auto it = topics_.find(t->job_id);
    if (it != topics_.end() && it->second == t) topics_.erase(it);
  }
}

}  // namespace certfleet::api
