#pragma once
// Runs SQLite work off the event loop. One writer thread owns the only write connection and
// commits the operations queued while it was busy together in one transaction (group commit),
// each inside its own savepoint so every operation stays atomic on its own and one failing
// changes nothing of the others. Reader threads each own a read connection.
// The result comes back on the awaiting coroutine's executor.
#include "db.hpp"
#include "job_count_deltas.hpp"

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace certfleet::store::sqlite {

namespace asio = boost::asio;

class write_task {
 public:
  virtual ~write_task() = default;
  // Runs the operation inside the open transaction; never throws.
  virtual void execute(db& d) = 0;
  // After COMMIT (ok) or a failed BEGIN/COMMIT (the error replaces the result).
  virtual void complete(const std::optional<error>& txn_failure) = 0;
};

class read_task {
 public:
  virtual ~read_task() = default;
  virtual void run(db& d) = 0;  // never throws
  virtual void abandon() = 0;   // the pool is closed
};

class writer {
 public:
  // `init` runs on the connection before the thread starts (schema migrations). A read_only
  // writer leaves the file's journal mode alone and fails every write it is given.
  writer(const std::string& path, int busy_timeout_ms, bool synchronous_full,
         const std::function<void(db&)>& init, int max_batch = 512, bool read_only = false);
  ~writer();
  void submit(std::unique_ptr<write_task> t);
  void close();
  // Set when a write failed for a full disk; cleared by the next commit that writes something.
  bool disk_full() const noexcept { return disk_full_.load(std::memory_order_relaxed); }
  // Operations refused for a full disk since the start.
  std::int64_t disk_full_refusals() const noexcept { return disk_full_refusals_.load(std::memory_order_relaxed); }

 private:
  void loop();
  std::atomic<bool> disk_full_{false};
  std::atomic<std::int64_t> disk_full_refusals_{0};
  job_count_deltas job_counts_;  // outlives db_: declared first
  std::unique_ptr<db> db_;
  int max_batch_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<write_task>> q_;
  bool stop_ = false;
  std::thread thread_;
};

class reader_pool {
 public:
  reader_pool(const std::string& path, int threads, int busy_timeout_ms, bool read_only = false);
  ~reader_pool();
  void submit(std::unique_ptr<read_task> t);
  void close();

 private:
  void loop(db& d);
  std::vector<std::unique_ptr<db>> dbs_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<read_task>> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

namespace detail {

// The work guard travels with the completion and ends on the caller's executor: released on the
// store thread (when the op is destroyed there), it could touch an io_context that the resumed
// caller had already finished and destroyed.
template <class R, class Handler, class Work>
void deliver(Handler&& h, Work&& work, std::exception_ptr ep, std::optional<R>&& r) {
  auto ex = asio::get_associated_executor(h);
  asio::post(ex, [h = std::move(h), w = std::move(work), ep, r = std::move(r)]() mutable {
    std::move(h)(ep, std::move(r));
    w.reset();
  });
}

// R is result<T>: an error converts into it.
template <class R, class F, class Handler>
class write_op final : public write_task {
 public:
  write_op(F f, Handler h) : f_(std::move(f)), h_(std::move(h)), work_(asio::get_associated_executor(h_)) {}
  void execute(db& d) override {
    // SQLite rolls the whole transaction back on some errors (a full disk): a later operation
    // must not run on its own in autocommit, committed while COMMIT then fails for the batch.
    if (sqlite3_get_autocommit(d.handle())) {
      r_.emplace(make_error(errc::store_failure, "the store's transaction was rolled back by an earlier error"));
      return;
    }
    try {
      d.prepare("SAVEPOINT op")->run();
    } catch (const db_error& e) {
      r_.emplace(to_error(d, e));
      return;
    }
    try {
      r_.emplace(f_(d));
      if (r_->has_value()) {
        d.prepare("RELEASE op")->run();
        if (auto* counts = d.job_counts()) counts->keep_op();
        return;
      }
    } catch (const db_error& e) {
      r_.emplace(to_error(d, e));
    } catch (...) {
      ep_ = std::current_exception();
    }
    if (auto* counts = d.job_counts()) counts->drop_op();
    try {
      d.prepare("ROLLBACK TO op")->run();
      d.prepare("RELEASE op")->run();
    } catch (...) {
      // The transaction is broken: COMMIT fails and reports it for every operation.
    }
  }
  void complete(const std::optional<error>& txn_failure) override {
    if (txn_failure && !ep_) r_.emplace(*txn_failure);
    if (!r_ && !ep_) r_.emplace(make_error(errc::shutting_down, "the store is closed"));
    deliver<R>(std::move(h_), std::move(work_), ep_, std::move(r_));
  }

 private:
  F f_;
  Handler h_;
  asio::executor_work_guard<asio::associated_executor_t<Handler>> work_;
  std::optional<R> r_;
  std::exception_ptr ep_;
};

template <class R, class F, class Handler>
class read_op final : public read_task {
 public:
  read_op(F f, Handler h) : f_(std::move(f)), h_(std::move(h)), work_(asio::get_associated_executor(h_)) {}
  void run(db& d) override {
    std::optional<R> r;
    std::exception_ptr ep;
    try {
      r.emplace(f_(d));
    } catch (const db_error& e) {
      r.emplace(to_error(e));
    } catch (...) {
      ep = std::current_exception();
    }
    deliver<R>(std::move(h_), std::move(work_), ep, std::move(r));
  }
  void abandon() override {
    deliver<R>(std::move(h_), std::move(work_), nullptr, std::optional<R>(make_error(errc::shutting_down, "the store is closed")));
  }

 private:
  F f_;
  Handler h_;
  asio::executor_work_guard<asio::associated_executor_t<Handler>> work_;
};

}  // namespace detail

// co_await run_write<result<T>>(w, [..](db& d) -> result<T> {...})
template <class R, class F>
asio::awaitable<R> run_write(writer& w, F f) {
  auto out = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr, std::optional<R>)>(
      [&w](auto handler, F fn) {
        w.submit(std::make_unique<detail::write_op<R, F, decltype(handler)>>(std::move(fn), std::move(handler)));
      },
      asio::use_awaitable, std::move(f));
  co_return std::move(*out);
}

template <class R, class F>
asio::awaitable<R> run_read(reader_pool& p, F f) {
  auto out = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr, std::optional<R>)>(
      [&p](auto handler, F fn) {
        p.submit(std::make_unique<detail::read_op<R, F, decltype(handler)>>(std::move(fn), std::move(handler)));
      },
      asio::use_awaitable, std::move(f));
  co_return std::move(*out);
}

}  // namespace certfleet::store::sqlite
