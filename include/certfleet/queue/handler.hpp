#pragma once
// What a job handler is given and what it returns. Handlers are coroutines
// `awaitable<outcome>(job_context&)`; they call checkpoint() between steps so a cancel request,
// a lost lease or a shutdown stops them promptly.
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace certfleet::store {
class store;
}

namespace certfleet::queue {

struct outcome {
  enum class kind { ok, partial, failed, failed_permanently };
  kind k = kind::ok;
  std::string error;
  // failed: the next attempt waits at least this long (a peer's Retry-After), even when the
  // backoff alone would be shorter.
  std::chrono::milliseconds not_before{0};
  // Stored with the error (store::job_record): its errc name, when it came from an `error`, and
  // the hint-table class the raising module knows it to be. Left empty, the worker classifies the
  // text once, when it stores it (queue/error_hint.hpp).
  std::string_view error_code = {};
  std::string_view error_class = {};

  static outcome ok() { return {kind::ok, {}}; }
  static outcome partial(std::string why = {}) { return {kind::partial, std::move(why)}; }
  // Retried with backoff while attempts remain.
  static outcome failure(std::string why, std::chrono::milliseconds not_before = {}) {
    return {kind::failed, std::move(why), not_before};
  }
  static outcome failure(const certfleet::error& e, std::chrono::milliseconds not_before = {}) {
    return {kind::failed, e.message, not_before, errc_name(e.value())};
  }
  // Dead at once: retrying cannot help.
  static outcome permanent_failure(std::string why) { return {kind::failed_permanently, std::move(why)}; }
  static outcome permanent_failure(const certfleet::error& e) {
    return {kind::failed_permanently, e.message, {}, errc_name(e.value())};
  }
  // The same outcome, its error of the hint-table class `cls`.
  outcome of_class(std::string_view cls) && {
    error_class = cls;
    return std::move(*this);
  }
};

enum class interrupt_reason { none, cancel_requested, lease_lost, shutdown };

// Thrown by checkpoint()/sleep() once the job must stop; the worker catches it.
class job_interrupted : public std::exception {
 public:
  explicit job_interrupted(interrupt_reason r) : r_(r) {}
  interrupt_reason reason() const noexcept { return r_; }
  const char* what() const noexcept override { return "job interrupted"; }

 private:
  interrupt_reason r_;
};

// Receives every job log line this process appends (the live log stream's in-process hub).
using log_publisher = std::function<void(const std::string& job_id, const store::log_line& line)>;

class job_context {
 public:
  job_context(boost::asio::any_io_executor ex, store::job_record job, std::string worker_id, store::store& s,
              const clock_source& clock, const log_publisher* publish = nullptr);

  const store::job_record& job() const noexcept { return job_; }
  const std::string& payload() const noexcept { return job_.payload; }
  store::lease_ref lease() const { return {job_.id, job_.fence}; }
  store::store& store() noexcept { return store_; }
  const clock_source& clock() const noexcept { return clock_; }

  // Appends a job log line (fenced: refused once the lease is lost, which interrupts the job).
  boost::asio::awaitable<void> log(std::string level, std::string message, std::string detail = {});
  boost::asio::awaitable<void> progress(std::int64_t current, std::int64_t total);
  // Throws job_interrupted when the job must stop.
  void checkpoint() const;
  // Sleeps, waking early (and throwing job_interrupted) when the job is interrupted.
  boost::asio::awaitable<void> sleep(std::chrono::milliseconds d);

  // Worker side.
  void interrupt(interrupt_reason r);
  interrupt_reason interrupted() const noexcept { return reason_; }

 private:
  store::job_record job_;
  std::string worker_id_;
  store::store& store_;
  const clock_source& clock_;
  const log_publisher* publish_;
  interrupt_reason reason_ = interrupt_reason::none;
  boost::asio::steady_timer wake_;
};

using handler_fn = std::function<boost::asio::awaitable<outcome>(job_context&)>;
// Checks a payload at enqueue time, so a job that cannot run is refused, not stored.
using payload_validator = std::function<result<void>(const std::string& payload)>;
// Words the refusal to retry one job of a type its distribution drives (the job-type table's
// driven_by_distribution): the owner of the type knows how such a job is re-driven instead.
using retry_refusal = std::function<error(const store::job_record& job)>;

class handler_registry {
 public:
  void add(std::string type, handler_fn handler, payload_validator validate = {}, retry_refusal refuse = {});
  const handler_fn* find(std::string_view type) const;
  const payload_validator* validator(std::string_view type) const;
  const retry_refusal* refusal(std::string_view type) const;

 private:
  struct entry {
    handler_fn handler;
    payload_validator validate;
    retry_refusal refuse;
  };
  std::map<std::string, entry, std::less<>> entries_;
};

// The diagnostic `noop` type: sleeps payload.ms, fails the first payload.fail_times attempts.
void register_noop(handler_registry& r);

}  // namespace certfleet::queue
