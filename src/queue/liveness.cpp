#include "certfleet/queue/liveness.hpp"

#include "certfleet/core/spawn.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

namespace certfleet::queue {

namespace asio = boost::asio;

namespace {

std::string first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

host_identity read_host_identity() {
  host_identity h;
  std::array<char, 256> name{};
  gethostname(name.data(), name.size() - 1);
  h.host = name.data();
  // The pid namespace: two containers on one kernel share the boot id, not the namespace.
  std::array<char, 128> ns{};
  const auto n = readlink("/proc/self/ns/pid", ns.data(), ns.size() - 1);
  const std::string pid_ns = n > 0 ? std::string(ns.data(), static_cast<std::size_t>(n)) : "";
  h.host_key = fmt::format("{}|{}|{}", h.host, first_line("/proc/sys/kernel/random/boot_id"), pid_ns);
  return h;
}

}  // namespace

const host_identity& this_host() {
  static const host_identity h = read_host_identity();
  return h;
}

std::string process_start_of(std::int64_t pid) {
  if (pid <= 0) return "";
  std::ifstream f(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(f, stat)) return "";
  // "pid (comm) state ppid …": comm may hold spaces and parentheses; the fields after the last
  // ')' are plain. starttime is field 22 overall, the 20th after the comm.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 1));
  std::string field;
  for (int i = 0; i < 20 && rest >> field; ++i) {
    // A zombie (killed, not yet reaped by its parent) runs nothing any more.
    if (i == 0 && (field == "Z" || field == "X")) return "";
  }
  return rest ? field : "";
}

liveness_verdict judge_worker(const store::worker_presence& w, const host_identity& here, time_ms dead_after_ms,
                              const std::function<std::string(std::int64_t)>& start_of) {
  if (w.dead_at > 0) return {liveness_state::declared_dead, w.dead_reason};
  if (!w.host_key.empty() && w.host_key == here.host_key) {
    const auto started = start_of(w.pid);
    if (started.empty())
      return {liveness_state::dead_process, fmt::format("worker {}: process {} on {} is gone", w.id, w.pid, w.host)};
    if (started != w.proc_start)
      return {liveness_state::dead_process,
              fmt::format("worker {}: pid {} on {} now belongs to another process", w.id, w.pid, w.host)};
  }
  if (w.age_ms > dead_after_ms)
    return {liveness_state::dead_heartbeat,
            fmt::format("worker {} stopped heartbeating {} s ago", w.id, (w.age_ms + 500) / 1000)};
  return {};
}

const char* liveness_state_name(liveness_state s) noexcept {
  switch (s) {
    case liveness_state::alive: return "alive";
    case liveness_state::dead_process:
    case liveness_state::dead_heartbeat: return "dead (being reclaimed)";
    case liveness_state::declared_dead: return "dead";
  }
  return "dead";
}

int fair_share(std::int64_t waiting, std::int64_t running, int mine, int live_workers, int free) {
  if (free <= 0 || waiting <= 0) return 0;
  const std::int64_t workers = std::max(live_workers, 1);
  const std::int64_t total = waiting + std::max<std::int64_t>(running, mine);
  std::int64_t share = (total + workers - 1) / workers - mine;
  if (share <= 0) share = mine == 0 ? 1 : 0;
  return static_cast<int>(std::min<std::int64_t>({share, waiting, free}));
}

struct liveness_monitor::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, store::store& s, const clock_source& c, liveness_options o)
      : ex(e), st(s), clock(c), opt(o), timer(e) {}

  asio::any_io_executor ex;
  store::store& st;
  const clock_source& clock;
  liveness_options opt;
  asio::steady_timer timer;
  liveness_stats stats;
  bool stopping = false;
  bool running = false;
  time_ms last_prune = 0;

  asio::awaitable<void> check() {
    ++stats.checks;
    const auto now = clock.now_ms();
    auto workers = co_await st.workers().list_workers(now);
    if (!workers) {
      spdlog::warn("liveness: reading the worker registry failed: {}", workers.error().message);
      co_return;
    }
    std::int64_t alive = 0;
    time_ms freshest = -1;
    for (const auto& w : *workers) {
      const auto v = judge_worker(w, this_host(), opt.dead_after_ms, process_start_of);
      if (v.state == liveness_state::alive) {
        ++alive;
        freshest = freshest < 0 ? w.age_ms : std::min(freshest, w.age_ms);
        continue;
      }
      if (!v.dead()) continue;
      // By heartbeat age the store re-checks the age in the same write (a beat that arrived
      // since the read wins); a vanished process is dead whatever its last beat says.
      const time_ms min_age = v.state == liveness_state::dead_heartbeat ? opt.dead_after_ms : 0;
      auto released = co_await st.workers().declare_dead(w.id, v.reason, min_age, clock.now_ms());
      if (!released) {
        if (!released.error().is(errc::conflict))
          spdlog::warn("liveness: declaring worker {} dead failed: {}", w.id, released.error().message);
        continue;
      }
      ++stats.declared_dead;
      stats.reclaimed_jobs += *released;
      spdlog::warn("liveness: {}; declared dead, {} of its jobs released to other workers", v.reason, *released);
    }
    stats.workers_alive = alive;
    stats.last_worker_seen_age_ms = freshest;
    if (now - last_prune >= 3'600'000) {
      last_prune = now;
      auto pruned = co_await st.workers().prune_workers(now - opt.forget_after_ms);
      if (!pruned) spdlog::warn("liveness: pruning the worker registry failed: {}", pruned.error().message);
    }
  }

  asio::awaitable<void> loop() {
    auto self = shared_from_this();
    running = true;
    while (!stopping) {
      co_await check();
      if (stopping) break;
      timer.expires_after(std::chrono::milliseconds(opt.beat_ms));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    running = false;
  }
};

liveness_monitor::liveness_monitor(asio::any_io_executor ex, store::store& st, const clock_source& clock,
                                   liveness_options o)
    : impl_(std::make_shared<impl>(ex, st, clock, o)) {}

liveness_monitor::~liveness_monitor() = default;

void liveness_monitor::start() {
  asio::co_spawn(impl_->ex, impl_->loop(), report_unexpected("liveness monitor"));
}

asio::awaitable<void> liveness_monitor::stop() {
  auto self = impl_;
  self->stopping = true;
  self->timer.cancel();
  asio::steady_timer t(self->ex);
  for (int i = 0; i < 500 && self->running; ++i) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

asio::awaitable<void> liveness_monitor::check_once() { co_await impl_->check(); }
const liveness_stats& liveness_monitor::stats() const { return impl_->stats; }
const liveness_options& liveness_monitor::options() const { return impl_->opt; }

}  // namespace certfleet::queue
