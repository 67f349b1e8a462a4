#pragma once
// The MongoDB connection: the URI, the client pool, the store threads that run driver calls off
// the event loop (each with a client popped from the pool), and the command helpers that turn a
// driver failure into our error plus what the retry rules of DESIGN §10 need to know.
#include "bson_doc.hpp"
#include "certfleet/store/mongodb.hpp"

#include <mongoc/mongoc.h>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace certfleet::store::mongo {

namespace asio = boost::asio;

// A failed command, as the retry rules read it.
struct failure {
  error err;                 // what callers see (store_failure unless mapped)
  std::int64_t code = 0;     // the server's code (11000, 112, 91, 10107, 50 …); 0 for a client-side failure
  bool network = false;      // the outcome is unknown: the connection broke or timed out mid-operation
  bool transient_transaction = false;   // errorLabels TransientTransactionError
  bool unknown_commit_result = false;   // errorLabels UnknownTransactionCommitResult
  std::optional<doc> reply;  // the server's reply, when there was one
};

// Server codes the store acts on.
inline constexpr std::int64_t duplicate_key = 11000;
inline constexpr std::int64_t write_conflict = 112;
inline constexpr std::int64_t max_time_ms_expired = 50;
inline constexpr std::int64_t not_writable_primary = 10107;

class connection {
 public:
  static result<std::unique_ptr<connection>> open(const mongodb_options& o);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  const mongodb_options& options() const noexcept { return options_; }
  const std::string& database() const noexcept { return database_; }
  time_ms clock_offset_ms() const noexcept { return offset_ms_; }

  // A client from the pool for the duration of one store operation.
  class lease {
   public:
    lease(connection& c) : c_(c), client_(mongoc_client_pool_pop(c.pool_)) {}
    ~lease() { mongoc_client_pool_push(c_.pool_, client_); }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    mongoc_client_t* get() const noexcept { return client_; }

   private:
    connection& c_;
    mongoc_client_t* client_;
  };

  // One command on the store's database. `session` (may be null) adds lsid and, inside a
  // transaction, txnNumber; the document is sent as built: write and read concerns and maxTimeMS
  // are the caller's to spell (they differ inside a transaction).
  // On success `reply` holds the server's reply; a reply with writeErrors or a writeConcernError
  // is a failure too (the driver passes those through as ok: 1).
  std::optional<failure> command(mongoc_client_t* client, const doc& cmd, doc& reply,
                                 mongoc_client_session_t* session = nullptr) const;
  // Runs `body` in a transaction with the driver's retry rules (with_transaction: a
  // TransientTransactionError runs `body` again; an UnknownTransactionCommitResult commits
  // again), majority write and read concerns. `body` returns its failure to end the attempt
  // (labels decide whether it runs again) or nullopt to commit.
  std::optional<failure> transaction(
      mongoc_client_t* client, const std::function<std::optional<failure>(mongoc_client_session_t*)>& body) const;

  // The maxTimeMS every command carries.
  std::int32_t max_time_ms() const noexcept { return options_.operation_timeout_ms; }

 private:
  connection(const mongodb_options& o) : options_(o) {}
  mongodb_options options_;
  std::string database_;
  mongoc_uri_t* uri_ = nullptr;
  mongoc_client_pool_t* pool_ = nullptr;
  time_ms offset_ms_ = 0;
};

// What an ok: 1 reply still says failed: its first write error, or a write concern error.
std::optional<failure> reply_failure(const doc& reply);

// `writeConcern: {w: "majority", wtimeout}` for a command outside a transaction.
doc majority_write_concern(std::int32_t wtimeout_ms);
// `readConcern: {level: "majority"}`.
doc majority_read_concern();
// Turns a failure into the error callers see, saying what the store was doing.
error to_error(const failure& f, std::string_view doing);

// Store threads: each task runs on one of them with a pooled client.
class executor {
 public:
  executor(connection& c, int threads);
  ~executor();
  void submit(std::function<void(mongoc_client_t*)> work, std::function<void()> abandon);
  void close();

 private:
  struct item {
    std::function<void(mongoc_client_t*)> work;
    std::function<void()> abandon;
  };
  void loop();
  connection& c_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<item> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// co_await run<result<T>>(ex, [..](mongoc_client_t* c) -> result<T> {...}); the result comes
// back on the awaiting coroutine's executor; an exception (a bug) is rethrown there.
template <class R, class F>
asio::awaitable<R> run(executor& ex, F f) {
  auto out = co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr, std::optional<R>)>(
      [&ex](auto handler, F fn) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        auto work = std::make_shared<asio::executor_work_guard<asio::associated_executor_t<decltype(handler)>>>(
            asio::get_associated_executor(*h));
        // The guard is released on the caller's executor, after the result is delivered: released
        // here on the store thread, it could touch an io_context the resumed caller had already
        // finished and destroyed (the SQLite executor had that crash).
        auto deliver = [h, work](std::exception_ptr ep, std::optional<R> r) {
          auto e = asio::get_associated_executor(*h);
          asio::post(e, [h, work, ep, r = std::move(r)]() mutable {
            std::move(*h)(ep, std::move(r));
            work->reset();
          });
        };
        ex.submit(
            [fn = std::move(fn), deliver](mongoc_client_t* c) mutable {
              std::optional<R> r;
              std::exception_ptr ep;
              try {
                r.emplace(fn(c));
              } catch (...) {
                ep = std::current_exception();
              }
              deliver(ep, std::move(r));
            },
            [deliver] { deliver(nullptr, std::optional<R>(make_error(errc::shutting_down, "the store is closed"))); });
      },
      asio::use_awaitable, std::move(f));
  co_return std::move(*out);
}

}  // namespace certfleet::store::mongo
