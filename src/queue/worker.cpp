#include "certfleet/queue/worker.hpp"

#include "certfleet/core/log.hpp"
#include "certfleet/core/crash.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/queue/backoff.hpp"
#include "certfleet/queue/error_hint.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/store/workers.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

namespace certfleet::queue {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

std::string make_worker_id() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return fmt::format("{}:{}:{}", host, getpid(), new_object_id().substr(16));
}

namespace {
std::uint32_t micros_since(steady::time_point t0) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - t0).count();
  return static_cast<std::uint32_t>(std::min<long long>(us, UINT32_MAX));
}
constexpr std::size_t max_samples = 2'000'000;

// A handler that threw: a bug, caught at the job boundary.
constexpr std::string_view handler_error_code = "handler_error";

// The failure as it is stored: its text, its code, and its class, which the raising module names
// or, when it did not, the hint table reads from the text once, here, so nothing reads the words
// again later.
void stored_error(store::finish_request& req, std::string_view type, const outcome& out) {
  req.error = out.error;
  req.error_code = std::string(out.error_code);
  if (!out.error_class.empty()) {
    req.error_class = std::string(out.error_class);
  } else if (auto hint = hint_for(type, out.error)) {
    req.error_class = std::string(hint->error_class);
  }
}
}  // namespace

struct worker::impl : std::enable_shared_from_this<impl> {
  struct lane_state {
    std::string name;
    int concurrency;
    int running = 0;
    bool wake_pending = false;
    asio::steady_timer timer;
  };
  struct running_job {
    std::shared_ptr<job_context> ctx;
    lane_state* lane;
    bool finishing = false;
    steady::time_point claimed_at;
  };
  struct pending_finish {
    std::string id;
    store::finish_request req;
  };

  asio::any_io_executor ex;
  store::store& st;
  const handler_registry& handlers;
  const clock_source& clock;
  worker_options opt;
  log_publisher publish;
  std::vector<std::unique_ptr<lane_state>> lanes;
  std::unordered_map<std::string, running_job> active;
  std::vector<pending_finish> finish_queue;
  bool flushing = false;
  bool stopping = false;
  bool loops_stopped = false;
  int dispatchers = 0;
  asio::steady_timer maintenance_timer;  // heartbeat and reaper sleep on it; cancelled at stop
  asio::steady_timer presence_timer;     // the registry heartbeat sleeps on it; cancelled at stop
  bool presence_running = false;
  bool beating = false;                  // a registry heartbeat is in flight
  steady::time_point last_beat_ok = steady::now();
  worker_stats stats;
  const time_ms started_at;

  impl(asio::any_io_executor e, store::store& s, const handler_registry& h, const clock_source& c, worker_options o)
      : ex(e), st(s), handlers(h), clock(c), opt(std::move(o)), maintenance_timer(e), presence_timer(e),
        started_at(c.now_ms()) {
    if (opt.worker_id.empty()) opt.worker_id = make_worker_id();
    if (opt.heartbeat_ms <= 0) opt.heartbeat_ms = std::min<time_ms>(opt.lease_ms / 3, 5'000);
    if (opt.reap_ms <= 0) opt.reap_ms = std::max<time_ms>(opt.lease_ms / 2, 100);
    lanes.push_back(std::make_unique<lane_state>(lane_state{std::string(lane_main), opt.main_concurrency, 0, false, asio::steady_timer(e)}));
    lanes.push_back(std::make_unique<lane_state>(lane_state{std::string(lane_dist), opt.dist_concurrency, 0, false, asio::steady_timer(e)}));
  }

  void spawn(asio::awaitable<void> a, const char* what) {
    asio::co_spawn(ex, std::move(a), report_unexpected(fmt::format("worker {}", what)));
  }

  void wake(lane_state& l) {
    l.wake_pending = true;
    l.timer.cancel();
  }

  // Waits for a wake-up (a job enqueued here, a slot freed) or the poll interval. A wake-up that
  // came while the dispatcher was busy is consumed here, so it is never lost and never spins.
  asio::awaitable<void> idle(lane_state& l, time_ms ms) {
    if (stopping) co_return;
    if (l.wake_pending) {
      l.wake_pending = false;
      co_return;
    }
    l.timer.expires_after(milliseconds(ms));
    co_await l.timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }

  asio::awaitable<void> dispatch(lane_state& l) {
    auto self = shared_from_this();
    ++dispatchers;
    time_ms failure_pause = opt.poll_ms;
    while (!stopping) {
      int free = l.concurrency - l.running;
      if (free > 0) {
        int want = std::min(free, opt.claim_batch);
        // The dist lane spreads one run's children over the live workers (issue 34): a worker
        // that claimed all twelve children of a run in one transaction froze the run when it died.
        // Silent for a while (a pause, SIGSTOP): a peer may have declared this worker dead and
        // released its jobs. Learn that (and take a new id) before claiming under the old one,
        // whose jobs would otherwise wait out their lease.
        if (opt.presence_ms > 0 && steady::now() - last_beat_ok > milliseconds(opt.dead_after_ms / 2)) {
          co_await beat_once();
          if (stopping) break;
        }
        bool limited = false;
        if (l.name == lane_dist && stats.live_dist_workers > 1) {
          auto load = co_await st.jobs().load_of_lane(l.name, clock.now_ms());
          if (load) {
            const int share = fair_share(load->waiting, load->running, l.running,
                                         static_cast<int>(stats.live_dist_workers), want);
            limited = share < want;
            want = share;
          }
          if (want == 0) {
            co_await idle(l, opt.poll_ms);
            continue;
          }
        }
        l.wake_pending = false;
        auto t0 = steady::now();
        auto claimed = co_await st.jobs().claim(l.name, opt.worker_id, clock.now_ms(), opt.lease_ms, want);
        ++stats.claim_calls;
        if (opt.record_latency && stats.claim_us.size() < max_samples) stats.claim_us.push_back(micros_since(t0));
        if (!claimed) {
          spdlog::warn("worker {}: claim on lane {} failed: {}", opt.worker_id, l.name, claimed.error().message);
          co_await idle(l, failure_pause);
          failure_pause = std::min<time_ms>(failure_pause * 2, 10'000);
          continue;
        }
        failure_pause = opt.poll_ms;
        auto claimed_at = steady::now();
        for (auto& j : *claimed) start_job(l, std::move(j), claimed_at);
        // There may be more ready now — unless this was a share: the rest is for the peers.
        if (static_cast<int>(claimed->size()) == want && !limited) continue;
      }
      co_await idle(l, free > 0 ? opt.poll_ms : 60'000);
    }
    --dispatchers;
  }

  void start_job(lane_state& l, store::job_record j, steady::time_point claimed_at) {
    ++stats.claimed;
    ++l.running;
    auto ctx = std::make_shared<job_context>(ex, std::move(j), opt.worker_id, st, clock, &publish);
    auto id = ctx->job().id;
    const auto& job = ctx->job();
    log::write(spdlog::level::debug, {.job_id = id, .event = "claimed", .type = job.type, .project = job.project_id},
               "job {} ({}) claimed by worker {}, attempt {}", id, job.type, opt.worker_id, job.attempts);
    active.emplace(id, running_job{ctx, &l, false, claimed_at});
    // Claimed while stopping: give it straight back.
    if (stopping) ctx->interrupt(interrupt_reason::shutdown);
    spawn(run_job(ctx), "job");
  }

  asio::awaitable<void> run_job(std::shared_ptr<job_context> ctx) {
    auto self = shared_from_this();
    const auto& job = ctx->job();
    {
      auto it = active.find(job.id);
      if (opt.record_latency && it != active.end() && stats.claim_to_start_us.size() < max_samples)
        stats.claim_to_start_us.push_back(micros_since(it->second.claimed_at));
    }
    crash_point("job_started");
    std::optional<outcome> out;
    interrupt_reason why = interrupt_reason::none;
    if (const auto* h = handlers.find(job.type); !h) {
      out = outcome::permanent_failure(fmt::format("no handler for job type {} in this build", job.type));
    } else {
      try {
        ctx->checkpoint();
        out = co_await (*h)(*ctx);
      } catch (const job_interrupted& e) {
        why = e.reason();
      } catch (const std::exception& e) {
        log::write(spdlog::level::err, {.job_id = job.id}, "job {} ({}): handler threw: {}", job.id, job.type, e.what());
        out = outcome::failure(fmt::format("handler error: {}", e.what()));
        out->error_code = handler_error_code;
      } catch (...) {
        out = outcome::failure("handler error: unknown exception");
        out->error_code = handler_error_code;
      }
    }
    crash_point("before_finish");
    if (why == interrupt_reason::lease_lost) {
      log::write(spdlog::level::warn, {.job_id = job.id}, "job {}: lease lost; another worker owns it now", job.id);
      ++stats.lost;
      done(job.id);
      co_return;
    }
    store::finish_request req;
    req.lease = ctx->lease();
    req.worker_id = opt.worker_id;
    if (why == interrupt_reason::cancel_requested) {
      req.kind = store::finish_kind::cancelled;
    } else if (why == interrupt_reason::shutdown) {
      req.kind = store::finish_kind::released;
    } else {
      switch (out->k) {
        case outcome::kind::ok:
          req.kind = store::finish_kind::completed;
          req.result_status = "ok";
          break;
        case outcome::kind::partial:
          req.kind = store::finish_kind::completed;
          req.result_status = "partial";
          break;
        case outcome::kind::failed:
          req.kind = store::finish_kind::failed;
          req.retry_at = clock.now_ms() + std::max<time_ms>(backoff_ms(job.attempts), out->not_before.count());
          stored_error(req, job.type, *out);
          break;
        case outcome::kind::failed_permanently:
          req.kind = store::finish_kind::dead;
          stored_error(req, job.type, *out);
          break;
      }
    }
    submit_finish(job.id, std::move(req));
  }

  // The job's slot is free again (its end is stored, or it is no longer ours).
  void done(const std::string& id) {
    auto it = active.find(id);
    if (it == active.end()) return;
    auto* l = it->second.lane;
    active.erase(it);
    --l->running;
    wake(*l);
  }

  void submit_finish(const std::string& id, store::finish_request req) {
    auto it = active.find(id);
    if (it == active.end() || it->second.finishing) return;
    it->second.finishing = true;
    finish_queue.push_back(pending_finish{id, std::move(req)});
    if (!flushing) {
      flushing = true;
      spawn(flush(), "finisher");
    }
  }

  asio::awaitable<void> flush() {
    auto self = shared_from_this();
    while (!finish_queue.empty()) {
      auto batch = std::move(finish_queue);
      finish_queue.clear();
      std::vector<store::finish_request> reqs;
      reqs.reserve(batch.size());
      for (auto& p : batch) reqs.push_back(p.req);
      for (int attempt = 0;; ++attempt) {
        auto r = co_await st.jobs().finish(reqs, clock.now_ms());
        if (r) {
          for (std::size_t i = 0; i < batch.size(); ++i) account(batch[i], (*r)[i]);
          break;
        }
        // Keep the requests: they stay valid (fenced) until the lease expires.
        spdlog::warn("worker {}: storing {} job results failed (try {}): {}", opt.worker_id, reqs.size(), attempt + 1,
                     r.error().message);
        if (stopping && attempt >= 20) {
          for (auto& p : batch) done(p.id);
          break;
        }
        asio::steady_timer t(ex, milliseconds(std::min(50 << std::min(attempt, 6), 3'000)));
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      }
    }
    flushing = false;
  }

  // One line per stored end, at a level an operator can filter on: a failed attempt that will be
  // retried is a warning, a dead job an error. Type and project come from the job as claimed
  // (`claimed`): the stored end `j` may carry only what finish changed.
  static void log_end(const store::job_record& claimed, const store::job_record& j) {
    auto f = [&](std::string_view event) {
      return log::fields{.job_id = claimed.id, .event = event, .type = claimed.type, .project = claimed.project_id};
    };
    switch (j.status) {
      case store::job_status::completed:
        log::write(spdlog::level::info, f("finished"), "job {} ({}) finished: {}", claimed.id, claimed.type, j.result_status);
        break;
      case store::job_status::failed:
        log::write(spdlog::level::warn, f("retried"), "job {} ({}) attempt {} of {} failed, retried: {}", claimed.id, claimed.type,
                   j.attempts, j.max_attempts, std::string_view(j.error).substr(0, 500));
        break;
      case store::job_status::dead:
        log::write(spdlog::level::err, f("dead"), "job {} ({}) dead after {} attempts: {}", claimed.id, claimed.type, j.attempts,
                   std::string_view(j.error).substr(0, 500));
        break;
      case store::job_status::cancelled:
        log::write(spdlog::level::info, f("cancelled"), "job {} ({}) cancelled", claimed.id, claimed.type);
        break;
      case store::job_status::pending:
        log::write(spdlog::level::info, f("released"), "job {} ({}) released for another worker (shutdown)", claimed.id, claimed.type);
        break;
      case store::job_status::active: break;
    }
  }

  void account(const pending_finish& p, const result<store::job_record>& r) {
    if (!r) {
      ++stats.lost;
      log::write(spdlog::level::warn, {.job_id = p.id}, "job {}: result refused: {}", p.id, r.error().message);
    } else {
      if (auto it = active.find(p.id); it != active.end()) log_end(it->second.ctx->job(), *r);
      switch (r->status) {
        case store::job_status::completed: ++stats.completed; break;
        case store::job_status::failed: ++stats.failed; break;
        case store::job_status::dead: ++stats.dead; break;
        case store::job_status::cancelled: ++stats.cancelled; break;
        case store::job_status::pending: ++stats.released; break;
        case store::job_status::active: break;
      }
    }
    done(p.id);
  }

  asio::awaitable<void> heartbeat_loop() {
    auto self = shared_from_this();
    while (!loops_stopped) {
      maintenance_timer.expires_after(milliseconds(opt.heartbeat_ms));
      co_await maintenance_timer.async_wait(asio::as_tuple(asio::use_awaitable));
      if (loops_stopped) break;
      // Jobs whose end is waiting to be stored are heartbeated too: if the store is slow to take
      // the result, the lease must not lapse meanwhile.
      std::vector<store::lease_ref> leases;
      for (auto& [id, rj] : active) leases.push_back(rj.ctx->lease());
      if (leases.empty()) continue;
      auto r = co_await st.jobs().heartbeat(std::move(leases), opt.worker_id, clock.now_ms(), opt.lease_ms);
      if (!r) {
        spdlog::warn("worker {}: heartbeat failed: {}", opt.worker_id, r.error().message);
        continue;
      }
      for (const auto& h : *r) {
        auto it = active.find(h.id);
        if (it == active.end()) continue;
        if (h.state == store::lease_state::lost) it->second.ctx->interrupt(interrupt_reason::lease_lost);
        if (h.state == store::lease_state::cancel_requested) it->second.ctx->interrupt(interrupt_reason::cancel_requested);
      }
    }
  }

  asio::awaitable<void> reaper_loop() {
    auto self = shared_from_this();
    asio::steady_timer t(ex);
    while (!loops_stopped) {
      auto r = co_await st.jobs().reap_expired(clock.now_ms(), 500);
      if (!r) spdlog::warn("worker {}: reaping expired leases failed: {}", opt.worker_id, r.error().message);
      else {
        stats.reaped += *r;
        if (*r > 0) spdlog::info("worker {}: {} jobs whose worker was lost are now dead or cancelled", opt.worker_id, *r);
        if (*r == 500) continue;
      }
      reap_timer = &t;
      t.expires_after(milliseconds(opt.reap_ms));
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      reap_timer = nullptr;
    }
  }
  asio::steady_timer* reap_timer = nullptr;

  store::worker_presence presence() const {
    store::worker_presence p;
    p.id = opt.worker_id;
    p.host = this_host().host;
    p.host_key = this_host().host_key;
    p.pid = getpid();
    p.proc_start = process_start_of(p.pid);
    p.version = opt.version;
    std::string lane_names;
    for (const auto& l : lanes) {
      if (l->concurrency <= 0) continue;
      if (!lane_names.empty()) lane_names += ",";
      lane_names += l->name;
    }
    p.lanes = lane_names;
    p.started_at = started_at;
    int n = 0;
    for (const auto& l : lanes) n += l->running;
    p.running = n;
    return p;
  }

  // One registry heartbeat (issue 34), and the count of live dist workers the dispatcher splits a
  // run's children by. One at a time: a caller that finds one in flight waits for it.
  asio::awaitable<void> beat_once() {
    if (beating) {
      asio::steady_timer t(ex);
      while (beating) {
        t.expires_after(milliseconds(10));
        co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
      }
      co_return;
    }
    beating = true;
    for (int tries = 0; tries < 2; ++tries) {
      auto beat = co_await st.workers().beat(presence(), clock.now_ms());
      if (!beat && beat.error().is(errc::lease_lost)) {
        // This process was declared dead while it could not beat (paused past the window): its
        // jobs went to others and its heartbeats and finishes of them are refused. It carries on
        // under a new id, as a new worker (registered by the next try).
        ++stats.declared_dead;
        const auto old_id = opt.worker_id;
        opt.worker_id = make_worker_id();
        spdlog::error("worker {}: declared dead by a peer (no heartbeat within worker_dead_after_ms); its jobs were "
                      "released; carrying on as worker {}",
                      old_id, opt.worker_id);
        continue;
      }
      if (beat) last_beat_ok = steady::now();
      else spdlog::warn("worker {}: registry heartbeat failed: {}", opt.worker_id, beat.error().message);
      break;
    }
    if (auto all = co_await st.workers().list_workers(clock.now_ms())) {
      std::int64_t live = 0;
      for (const auto& w : *all)
        if (w.lanes.find(lane_dist) != std::string::npos &&
            judge_worker(w, this_host(), opt.dead_after_ms, process_start_of).state == liveness_state::alive)
          ++live;
      stats.live_dist_workers = std::max<std::int64_t>(live, 1);
    }
    beating = false;
  }

  asio::awaitable<void> presence_loop() {
    auto self = shared_from_this();
    presence_running = true;
    while (!loops_stopped && !stopping) {
      co_await beat_once();
      if (loops_stopped || stopping) break;
      presence_timer.expires_after(milliseconds(opt.presence_ms));
      co_await presence_timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    presence_running = false;
  }

  void start() {
    for (auto& l : lanes) spawn(dispatch(*l), "dispatcher");
    spawn(heartbeat_loop(), "heartbeat");
    spawn(reaper_loop(), "reaper");
    if (opt.presence_ms > 0) spawn(presence_loop(), "presence");
  }

  asio::awaitable<void> stop() {
    auto self = shared_from_this();
    if (stopping) co_return;
    stopping = true;
    for (auto& l : lanes) wake(*l);
    for (auto& [id, rj] : active) rj.ctx->interrupt(interrupt_reason::shutdown);
    auto deadline = steady::now() + milliseconds(opt.grace_ms);
    asio::steady_timer t(ex);
    auto running_handlers = [&] {
      int n = 0;
      for (auto& [id, rj] : active) n += rj.finishing ? 0 : 1;
      return n;
    };
    while (running_handlers() > 0 && steady::now() < deadline) {
      t.expires_after(milliseconds(20));
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    // Handlers that did not reach a checkpoint in time: their jobs go back to pending anyway
    // (fenced, so if such a handler ever finishes, its result is refused).
    std::vector<std::pair<std::string, store::lease_ref>> left;
    for (auto& [id, rj] : active)
      if (!rj.finishing) left.emplace_back(id, rj.ctx->lease());
    for (auto& [id, lease] : left) {
      log::write(spdlog::level::warn, {.job_id = id}, "job {}: handler did not stop within the grace period; releasing it", id);
      store::finish_request req;
      req.lease = lease;
      req.worker_id = opt.worker_id;
      req.kind = store::finish_kind::released;
      submit_finish(id, std::move(req));
    }
    while ((flushing || !active.empty() || dispatchers > 0) && steady::now() < deadline + std::chrono::seconds(10)) {
      t.expires_after(milliseconds(10));
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    loops_stopped = true;
    maintenance_timer.cancel();
    presence_timer.cancel();
    if (reap_timer) reap_timer->cancel();
    while (presence_running) {
      t.expires_after(milliseconds(10));
      co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    // Gone for good: the registry says so at once (anything still held goes back now, not at a
    // peer's next look).
    if (opt.presence_ms > 0) {
      auto r = co_await st.workers().declare_dead(opt.worker_id, fmt::format("worker {} stopped", opt.worker_id), 0,
                                                  clock.now_ms());
      if (!r && !r.error().is(errc::conflict))
        spdlog::warn("worker {}: leaving the registry failed: {}", opt.worker_id, r.error().message);
    }
  }
};

worker::worker(asio::any_io_executor ex, store::store& s, const handler_registry& handlers, const clock_source& clock,
               worker_options options)
    : impl_(std::make_shared<impl>(ex, s, handlers, clock, std::move(options))) {}

void worker::set_log_publisher(log_publisher p) { impl_->publish = std::move(p); }

worker::~worker() = default;

void worker::start() { impl_->start(); }
asio::awaitable<void> worker::stop() { return impl_->stop(); }

void worker::wake(std::string_view lane) {
  for (auto& l : impl_->lanes)
    if (l->name == lane) impl_->wake(*l);
}

void worker::request_cancel(const std::string& job_id) {
  auto it = impl_->active.find(job_id);
  if (it != impl_->active.end()) it->second.ctx->interrupt(interrupt_reason::cancel_requested);
}

const std::string& worker::id() const { return impl_->opt.worker_id; }
const worker_stats& worker::stats() const { return impl_->stats; }
int worker::concurrency(std::string_view lane) const {
  if (lane == lane_main) return impl_->opt.main_concurrency;
  if (lane == lane_dist) return impl_->opt.dist_concurrency;
  return 0;
}

int worker::running() const {
  int n = 0;
  for (auto& l : impl_->lanes) n += l->running;
  return n;
}

}  // namespace certfleet::queue
