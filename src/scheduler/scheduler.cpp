#include "certfleet/scheduler/scheduler.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/maintenance.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <functional>
#include <limits>

#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/lifecycle/msca_jobs.hpp"
#include "certfleet/distribution/certificates.hpp"
#include "certfleet/distribution/engine.hpp"

namespace certfleet::scheduler {

namespace asio = boost::asio;
inline constexpr std::string_view lease_name = "scheduler";

namespace {
// The sweeps, one table: name and what it does (docs/scheduler.md lists them).
struct sweep_def {
  std::string_view name;
  std::string_view doc;
};
constexpr std::array<sweep_def, 7> sweeps{{
    {"lost_leases", "active jobs past their lease with no attempts left become dead (terminal hooks run)"},
    {"distributions", "re-triggers running distribution runs whose jobs are gone (an execute aborted before its jobs "
                      "were stored): their targets without a job or a result are enqueued again; and opens the run "
                      "owed to a certificate's new version by an auto_execute distribution that was running when "
                      "the version was stored"},
    {"fanout_reconcile", "reports finished distribution children missing from their run's count and completes runs "
                         "whose batches have all reported"},
    {"acme_renewal", "enqueues renew_certificate (key renew:<certificate>:<expires_at_unix>) for each auto-renewing "
                     "ACME certificate due: at its point in the CA's renewal information window (RFC 9773) when "
                     "the CA offers it, else in the last third of its lifetime"},
    {"acme_dns_cleanup", "enqueues cleanup_dns (key cleanup_dns:<job>:<fence>) for each job attempt that is over and "
                         "left DNS-01 challenge TXT records in a zone (a crash between presenting and removing them, "
                         "or a removal that failed)"},
    {"msca_policy", "fetches the enrollment policy again for each AD CS CA whose cached policy is older than the "
                    "policy's nextUpdateHours (8 h when it names none), so templates, key sizes and CES URLs stay "
                    "current; a CA that cannot be reached keeps its cached policy and the sweep logs why"},
    {"retention", "completed and cancelled jobs (and their logs) older than job_retention_s, and audit entries older "
                  "than audit_retention_s, are deleted in batches"},
}};
}  // namespace

struct scheduler::impl : std::enable_shared_from_this<impl> {
  asio::any_io_executor ex;
  store::store& st;
  queue::queue_service& q;
  const clock_source& clock;
  scheduler_options opt;
  scheduler_stats stats;
  bool stopping = false;
  bool running = false;
  asio::steady_timer timer;

  impl(asio::any_io_executor e, store::store& s, queue::queue_service& qs, const clock_source& c, scheduler_options o)
      : ex(e), st(s), q(qs), clock(c), opt(std::move(o)), timer(e) {
    if (opt.holder_id.empty()) opt.holder_id = queue::make_worker_id();
  }

  asio::awaitable<void> run() {
    auto self = shared_from_this();
    running = true;
    while (!stopping) {
      co_await tick();
      timer.expires_after(std::chrono::milliseconds(std::max<time_ms>(opt.lease_ttl_ms / 3, 50)));
      co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    running = false;
  }

  asio::awaitable<void> tick() {
    auto now = clock.now_ms();
    auto lease = co_await st.leases().acquire(std::string(lease_name), opt.holder_id, now, opt.lease_ttl_ms);
    if (!lease) {
      // Without a confirmed lease this process must act as a follower.
      if (stats.leader) spdlog::warn("scheduler {}: lease renewal failed ({}); stepping down", opt.holder_id, lease.error().message);
      stats.leader = false;
      co_return;
    }
    if (!lease->held) {
      if (stats.leader)
        spdlog::warn("scheduler {}: deposed by {} (epoch {}); stopping sweeps", opt.holder_id, lease->holder, lease->epoch);
      stats.leader = false;
      co_return;
    }
    if (!stats.leader) {
      ++stats.terms;
      spdlog::info("scheduler {}: leader (epoch {})", opt.holder_id, lease->epoch);
    }
    stats.leader = true;
    stats.epoch = lease->epoch;
    // Only act while the lease is certainly ours: it was renewed at `now` for a full TTL, and the
    // enqueues below take far less. A late one is harmless: each key exists once per cycle.
    const std::int64_t cycle = now / opt.interval_ms;
    for (const auto& sw : sweeps) {
      if (clock.now_ms() >= lease->expires_at) co_return;
      queue::enqueue_request r;
      r.project_id = system_project;
      r.type = queue::job_names::maintenance_sweep;
      r.payload = fmt::format(R"({{"name":"{}","cycle":{},"epoch":{}}})", sw.name, cycle, lease->epoch);
      r.idempotency_key = fmt::format("sweep:{}:{}", sw.name, cycle);
      r.triggered_by = queue::scheduler_trigger(opt.holder_id);
      auto out = co_await q.enqueue(std::move(r), queue::caller::system);
      if (!out) spdlog::warn("scheduler: enqueue of sweep {} failed: {}", sw.name, out.error().message);
      else if (out->created) ++stats.sweeps_enqueued;
    }
    // The hourly checks, once per hour whatever the cycle: a restart within the hour finds the
    // hour's key taken.
    const std::pair<std::string_view, std::string> hourly[] = {
        {queue::job_names::certificate_expiration_check, distribution::expiration_check_key(now)},
        {queue::job_names::revocation_check, checks::revocation_check_key(now)},
        {queue::job_names::domain_expiration_check, checks::domain_check_key(now)},
    };
    for (const auto& [type, key] : hourly) {
      if (clock.now_ms() >= lease->expires_at) co_return;
      queue::enqueue_request r;
      r.project_id = system_project;
      r.type = type;
      r.idempotency_key = key;
      r.triggered_by = queue::scheduler_trigger(opt.holder_id);
      auto out = co_await q.enqueue(std::move(r), queue::caller::system);
      if (!out) spdlog::warn("scheduler: enqueue of {} failed: {}", type, out.error().message);
    }
    // Discovery sources with a schedule: one scan per source and period, in the source's project.
    store::read_value_fn<std::vector<store::catalog_object>> read = [](store::catalog_read& rd) {
      return rd.objects_by_not_after(store::kind_discovery_source, std::numeric_limits<time_ms>::max(), 100'000);
    };
    auto sources = co_await store::read_value(st.catalog(), std::move(read));
    if (!sources) {
      spdlog::warn("scheduler: cannot read discovery sources: {}", sources.error().message);
      co_return;
    }
    for (const auto& src : *sources) {
      const auto spec = checks::parse_discovery_source_doc(src);
      if (!checks::discovery_scan_due(src, spec.schedule_s, now)) continue;
      if (clock.now_ms() >= lease->expires_at) co_return;
      queue::enqueue_request r;
      r.project_id = src.project_id;
      r.type = queue::job_names::discovery_execute;
      r.payload = checks::discovery_payload_json(src.id);
      r.idempotency_key = checks::discovery_schedule_key(src.id, spec.schedule_s, now);
      r.triggered_by = queue::scheduler_trigger(opt.holder_id);
      auto out = co_await q.enqueue(std::move(r), queue::caller::system);
      if (!out) spdlog::warn("scheduler: enqueue of discovery for source {} failed: {}", src.id, out.error().message);
    }
  }

  std::string system_project;
};

scheduler::scheduler(asio::any_io_executor ex, store::store& s, queue::queue_service& q, const clock_source& clock,
                     scheduler_options o)
    : impl_(std::make_shared<impl>(ex, s, q, clock, std::move(o))) {}

scheduler::~scheduler() = default;

void scheduler::start() {
  auto i = impl_;
  asio::co_spawn(
      i->ex,
      [i]() -> asio::awaitable<void> {
        // Sweeps are system work: they live in the `default` project, where operators see them.
        auto p = co_await i->st.projects().ensure("default", i->clock.now_ms());
        if (!p) {
          spdlog::error("scheduler: cannot read the default project: {}", p.error().message);
          co_return;
        }
        i->system_project = p->first.id;
        co_await i->run();
      },
      report_unexpected("scheduler"));
}

asio::awaitable<void> scheduler::stop() {
  auto i = impl_;
  i->stopping = true;
  i->timer.cancel();
  asio::steady_timer t(i->ex);
  for (int n = 0; n < 500 && i->running; ++n) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  if (i->stats.leader) {
    co_await i->st.leases().release(std::string(lease_name), i->opt.holder_id, i->stats.epoch);
    i->stats.leader = false;
  }
}

const scheduler_stats& scheduler::stats() const { return impl_->stats; }
const std::string& scheduler::holder_id() const { return impl_->opt.holder_id; }

namespace {

constexpr int batch_size = 500;
using batch_op = std::function<store::task<int>()>;

// Runs `op` (one bounded batch, its own short transaction, so writers never wait long) until a
// batch comes back short, at most 1000 times; checks for cancellation between batches. Returns
// how many rows the batches handled.
asio::awaitable<result<int>> in_batches(queue::job_context& ctx, batch_op op) {
  int total = 0;
  for (int batch = 0; batch < 1000; ++batch) {
    ctx.checkpoint();
    auto n = co_await op();
    if (!n) co_return std::move(n).error();
    total += *n;
    if (*n < batch_size) break;
  }
  co_return total;
}

}  // namespace

void register_sweep_handler(queue::handler_registry& r, time_ms retention_ms, time_ms audit_retention_ms,
                            asio::thread_pool* cpu, std::string ca_pem, const kek* key) {
  auto acme = std::make_shared<lifecycle::acme_job_options>();
  acme->cpu = cpu;
  acme->ca_pem = ca_pem;
  auto msca = std::make_shared<lifecycle::msca_job_options>();
  msca->key = key;
  msca->cpu = cpu;
  msca->ca_pem = std::move(ca_pem);
  r.add(
      std::string(queue::job_names::maintenance_sweep),
      [retention_ms, audit_retention_ms, acme, msca](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
        auto p = json::object_reader::parse(ctx.payload(), "payload");
        if (!p) co_return queue::outcome::permanent_failure(p.error());
        auto name = p->required_string("name");
        if (!name) co_return queue::outcome::permanent_failure(name.error());
        if (*name == "lost_leases") {
          batch_op reap = [&ctx] { return ctx.store().jobs().reap_expired(ctx.clock().now_ms(), batch_size); };
          auto total = co_await in_batches(ctx, std::move(reap));
          if (!total) co_return queue::outcome::failure(total.error());
          co_await ctx.log("info", fmt::format("lost_leases: {} expired jobs with no attempts left are now dead", *total));
          co_return queue::outcome::ok();
        }
        if (*name == "distributions") {
          auto n = co_await distribution::retrigger_lost(ctx.store(), ctx.clock());
          if (!n) co_return queue::outcome::failure(n.error());
          auto line = fmt::format("distributions: {} runs with lost jobs re-triggered or closed", *n);
          co_await ctx.log("info", std::move(line));
          auto owed = co_await distribution::run_pending_auto_executes(ctx.store(), ctx.clock());
          if (!owed) co_return queue::outcome::failure(owed.error());
          auto line2 = fmt::format("distributions: {} runs opened for a certificate's new version", *owed);
          co_await ctx.log("info", std::move(line2));
          co_return queue::outcome::ok();
        }
        if (*name == "fanout_reconcile") {
          auto n = co_await distribution::reconcile(ctx.store(), ctx.clock());
          if (!n) co_return queue::outcome::failure(n.error());
          auto line = fmt::format("fanout_reconcile: {} distribution runs reported or completed", *n);
          co_await ctx.log("info", std::move(line));
          co_return queue::outcome::ok();
        }
        if (*name == "acme_renewal") {
          lifecycle::sweep_logger log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
            co_await ctx.log(std::move(level), std::move(message));
          };
          auto n = co_await lifecycle::enqueue_due_renewals(ctx.store(), ctx.clock(), acme.get(), std::move(log));
          if (!n) co_return queue::outcome::failure(n.error());
          co_await ctx.log("info", fmt::format("acme_renewal: {} renew_certificate jobs enqueued", *n));
          co_return queue::outcome::ok();
        }
        if (*name == "msca_policy") {
          lifecycle::sweep_logger log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
            co_await ctx.log(std::move(level), std::move(message));
          };
          auto n = co_await lifecycle::refresh_stale_msca_policies(ctx.store(), ctx.clock(), *msca, std::move(log));
          if (!n) co_return queue::outcome::failure(n.error());
          co_await ctx.log("info", fmt::format("msca_policy: {} CA policies fetched again", *n));
          co_return queue::outcome::ok();
        }
        if (*name == "acme_dns_cleanup") {
          lifecycle::sweep_logger log = [&ctx](std::string level, std::string message) -> asio::awaitable<void> {
            co_await ctx.log(std::move(level), std::move(message));
          };
          auto n = co_await lifecycle::enqueue_dns_cleanups(ctx.store(), ctx.clock(), std::move(log));
          if (!n) co_return queue::outcome::failure(n.error());
          co_await ctx.log("info", fmt::format("acme_dns_cleanup: {} cleanup_dns jobs enqueued", *n));
          co_return queue::outcome::ok();
        }
        if (*name == "retention") {
          auto before = ctx.clock().now_ms() - retention_ms;
          batch_op jobs = [&ctx, before] { return ctx.store().maintenance().purge_finished(before, batch_size); };
          auto total = co_await in_batches(ctx, std::move(jobs));
          if (!total) co_return queue::outcome::failure(total.error());
          auto audit_before = ctx.clock().now_ms() - audit_retention_ms;
          batch_op entries = [&ctx, audit_before] { return ctx.store().maintenance().purge_audit(audit_before, batch_size); };
          auto audit = co_await in_batches(ctx, std::move(entries));
          if (!audit) co_return queue::outcome::failure(audit.error());
          // An expired token stays listed (status expired) as long as a finished job does.
          batch_op expired = [&ctx, before] { return ctx.store().maintenance().purge_expired_tokens(before, batch_size); };
          auto tokens = co_await in_batches(ctx, std::move(expired));
          if (!tokens) co_return queue::outcome::failure(tokens.error());
          co_await ctx.log("info", fmt::format("retention: deleted {} completed/cancelled jobs finished before {}, {} "
                                               "audit entries written before {} and {} tokens expired before {}",
                                               *total, format_iso8601(before), *audit, format_iso8601(audit_before),
                                               *tokens, format_iso8601(before)));
          co_return queue::outcome::ok();
        }
        co_return queue::outcome::permanent_failure(fmt::format("unknown sweep \"{}\"", *name));
      },
      [](const std::string& payload) -> result<void> {
        auto p = json::object_reader::parse(payload, "payload");
        if (!p) return std::move(p).error();
        auto name = p->required_string("name");
        if (!name) return std::move(name).error();
        for (const auto& s : sweeps)
          if (s.name == *name) return {};
        return make_error(errc::invalid_argument, fmt::format("unknown sweep \"{}\"", *name), "payload.name");
      });
}

}  // namespace certfleet::scheduler
