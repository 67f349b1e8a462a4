#pragma once
// The lock a delivery takes on a target path or a distribution (private to src/distribution): a
// row of the store's lease table named for it, held by "job:fence", waited for while another
// attempt holds it, taken over from an attempt that is over.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "certfleet/core/log.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/store/maintenance.hpp"  // lease_store

namespace certfleet::distribution::detail {

namespace asio = boost::asio;
using queue::job_context;

// A named lock in the lease table, waited for while another holder has it.
class named_lock {
 public:
  named_lock(job_context& ctx, std::string name, const engine_options& opt)
      : ctx_(ctx), name_(std::move(name)), holder_(fmt::format("{}:{}", ctx.job().id, ctx.job().fence)), opt_(opt) {}

  asio::awaitable<bool> acquire(bool& logged_wait) {
    while (true) {
      auto l = co_await ctx_.store().leases().acquire(name_, holder_, ctx_.clock().now_ms(), opt_.lock_ttl.count());
      if (l && l->held) {
        epoch_ = l->epoch;
        held_ = true;
        renewed_at_ = ctx_.clock().now_ms();
        co_return true;
      }
      if (ctx_.interrupted() != queue::interrupt_reason::none) co_return false;
      // The holder is "job:fence". A holder whose attempt is over (its worker died and the job
      // was reaped, or retried with a new fence) will never release it: take it over now.
      if (l && co_await holder_gone(l->holder)) {
        (void)co_await ctx_.store().leases().release(name_, l->holder, l->epoch);
        continue;
      }
      if (!logged_wait && l) {
        logged_wait = true;
        co_await ctx_.log("info", fmt::format("waiting for the lock {} held by job {}", name_, l->holder));
      }
      asio::steady_timer t(co_await asio::this_coro::executor, opt_.lock_poll);
      co_await t.async_wait(asio::use_awaitable);
    }
  }

  asio::awaitable<bool> holder_gone(std::string holder) {
    auto colon = holder.rfind(':');
    if (colon == std::string::npos) co_return false;
    std::string job_id = holder.substr(0, colon);
    std::int64_t fence = std::atoll(holder.c_str() + colon + 1);
    auto gone = std::make_shared<bool>(false);
    store::tx_fn fn = [job_id, fence, gone](store::catalog_tx& tx) -> result<void> {
      auto j = tx.get_job(job_id);
      *gone = !j || j->fence != fence || j->status != store::job_status::active;
      return {};
    };
    auto r = co_await ctx_.store().catalog().transact(std::move(fn));
    co_return r && *gone;
  }

  // Extends the lock while the job holds it, at most every ttl/3 (a long run keeps it).
  asio::awaitable<void> renew_if_due() {
    auto now = ctx_.clock().now_ms();
    if (!held_ || now - renewed_at_ < opt_.lock_ttl.count() / 3) co_return;
    renewed_at_ = now;
    auto l = co_await ctx_.store().leases().acquire(name_, holder_, now, opt_.lock_ttl.count());
    if (l && !l->held) log::write(spdlog::level::warn, {.job_id = ctx_.job().id}, "job {}: lost the lock {} to {}", ctx_.job().id, name_, l->holder);
  }

  asio::awaitable<void> release() {
    if (!held_) co_return;
    held_ = false;
    (void)co_await ctx_.store().leases().release(name_, holder_, epoch_);
  }

 private:
  job_context& ctx_;
  std::string name_;
  std::string holder_;
  const engine_options& opt_;
  std::int64_t epoch_ = 0;
  time_ms renewed_at_ = 0;
  bool held_ = false;
};

}  // namespace certfleet::distribution::detail
