#include "certfleet/queue/handler.hpp"

#include "certfleet/core/log.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

namespace certfleet::queue {

namespace asio = boost::asio;

job_context::job_context(asio::any_io_executor ex, store::job_record job, std::string worker_id, store::store& s,
                         const clock_source& clock, const log_publisher* publish)
    : job_(std::move(job)),
      worker_id_(std::move(worker_id)),
      store_(s),
      clock_(clock),
      publish_(publish),
      wake_(ex, asio::steady_timer::time_point::max()) {}

void job_context::checkpoint() const {
  if (reason_ != interrupt_reason::none) throw job_interrupted(reason_);
}

void job_context::interrupt(interrupt_reason r) {
  if (reason_ == interrupt_reason::none) reason_ = r;
  wake_.cancel();
}

asio::awaitable<void> job_context::sleep(std::chrono::milliseconds d) {
  using namespace asio::experimental::awaitable_operators;
  checkpoint();
  asio::steady_timer t(wake_.get_executor(), d);
  co_await (t.async_wait(asio::as_tuple(asio::use_awaitable)) || wake_.async_wait(asio::as_tuple(asio::use_awaitable)));
  checkpoint();
}

asio::awaitable<void> job_context::log(std::string level, std::string message, std::string detail) {
  auto now = clock_.now_ms();
  auto r = co_await store_.jobs().append_log(job_.id, lease(), level, message, detail, now);
  if (!r) {
    if (r.error().is(errc::lease_lost)) {
      interrupt(interrupt_reason::lease_lost);
      checkpoint();
    }
    log::write(spdlog::level::warn, {.job_id = job_.id}, "job {}: log line not stored: {}", job_.id, r.error().message);
    co_return;
  }
  if (publish_ && *publish_)
    (*publish_)(job_.id, store::log_line{*r, now, std::move(level), std::move(message), std::move(detail)});
}

asio::awaitable<void> job_context::progress(std::int64_t current, std::int64_t total) {
  auto r = co_await store_.jobs().set_progress(lease(), current, total);
  if (!r && r.error().is(errc::lease_lost)) {
    interrupt(interrupt_reason::lease_lost);
    checkpoint();
  }
  job_.progress_current = current;
  job_.progress_total = total;
}

void handler_registry::add(std::string type, handler_fn handler, payload_validator validate, retry_refusal refuse) {
  entries_[std::move(type)] = entry{std::move(handler), std::move(validate), std::move(refuse)};
}

const handler_fn* handler_registry::find(std::string_view type) const {
  auto it = entries_.find(type);
  return it == entries_.end() ? nullptr : &it->second.handler;
}

const payload_validator* handler_registry::validator(std::string_view type) const {
  auto it = entries_.find(type);
  return it == entries_.end() ? nullptr : &it->second.validate;
}

const retry_refusal* handler_registry::refusal(std::string_view type) const {
  auto it = entries_.find(type);
  return it == entries_.end() ? nullptr : &it->second.refuse;
}

}  // namespace certfleet::queue
