#pragma once
// What the listener, the sessions and the route handlers share: the store, the queue, the
// distribution service, the clock, the options, the caches and the counters. One per server,
// on the one event loop (no locks); sessions hold it by shared_ptr.
#include "certfleet/api/server.hpp"
#include "certfleet/api/tls.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/distribution/phase_metrics.hpp"
#include "certfleet/service/service.hpp"
#include "certfleet/store/store.hpp"
#include "auth.hpp"
#include "log_hub.hpp"
#include "metrics.hpp"
#include "stream_watch.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace boost::asio::ssl {
class context;
}

namespace certfleet::api {

struct server_state : std::enable_shared_from_this<server_state> {
  using steady = std::chrono::steady_clock;

  server_state(boost::asio::any_io_executor e, store::store& s, queue::queue_service& q, const clock_source& c,
               server_options o);

  boost::asio::any_io_executor ex;
  store::store& st;
  queue::queue_service& queue;
  const clock_source& clock;
  server_options opt;
  bool stopping = false;
  const queue::worker* worker = nullptr;
  const queue::liveness_monitor* liveness = nullptr;  // the worker registry's watcher (issue 34)
  const distribution::delivery_phase_metrics* delivery_phases = nullptr;
  std::function<std::pair<bool, std::int64_t>()> scheduler_probe;
  log_hub hub;
  api_metrics metrics;
  service::service catalog;

  // Open connections, so stop() can end them and the limits can count them.
  struct conn {
    // While an HTTP session owns the socket: cancel its pending operation / close it.
    std::function<void()> cancel_http;
    std::function<void()> close_http;
    bool idle = false;                  // waiting for the next request
    std::function<void()> close_ws;     // while a WebSocket session owns it
    // For evicting the oldest idle connection of the heaviest address at the global cap
    // (http_session.cpp): whose it is (client_key; empty: a health reserve slot) and since when idle.
    std::string client;
    steady::time_point idle_since{};
  };
  std::uint64_t next_conn = 0;
  std::unordered_map<std::uint64_t, conn> conns;
  std::unordered_map<std::string, int> conns_per_client;  // by client_key()
  // Live log streams open, by token id and by client_key(): ws_streams_per_token/_per_client.
  std::unordered_map<std::string, int> streams_per_token;
  std::unordered_map<std::string, int> streams_per_client;
  // Streams preparing a backlog page (a store read and its serialization) at once: the others
  // wait their turn, so a request never queues on the loop behind more than this many pages
  // (issue 28: 32 streams catching up at once held /healthz for hundreds of milliseconds).
  struct backlog_gate {
    int free = 2;
    std::deque<std::shared_ptr<boost::asio::steady_timer>> waiting;
  } backlog;

  auth_caches auth;
  // Each open live log stream's credential, rechecked so a revoke or sign-out ends it.
  stream_watch stream_credentials;

  // The API listener's TLS (issue 19): the context new connections get, replaced when the
  // certificate changes; a connection keeps the context it began with.
  struct tls_state {
    std::shared_ptr<boost::asio::ssl::context> context;  // null: plain HTTP
    tls_identity identity;
    std::string source;  // for log lines: the file, or "certificate PROJECT/ID"
    std::uint64_t reloads = 0, reload_failures = 0;
    std::string last_failure;  // logged once, not at every poll
    std::function<void()> wake;  // the managed-certificate watcher looks now (null: none runs)
  } tls;

  // Token names by id, for a job's "Triggered By" (tokens are never renamed; a new one is found
  // by reading them again, at most once per refresh interval).
  std::unordered_map<std::string, std::string> token_names;
  steady::time_point token_names_read{};
  void remember_token_name(const store::token_record& t);

  settings_map system_settings;
  steady::time_point settings_loaded{};
  bool settings_valid = false;

  template <class T>
  boost::asio::awaitable<result<T>> timed(std::string_view op, store::task<T> t) {
    auto t0 = steady::now();
    auto r = co_await std::move(t);
    metrics.store_call(op, std::chrono::duration<double>(steady::now() - t0).count());
    co_return r;
  }

  boost::asio::awaitable<std::int64_t> setting_int(std::string_view name);

  // string_view parameters: GCC 12 rejects string literals for by-value std::string coroutine
  // parameters; the callers' arguments live until their co_await ends.
  boost::asio::awaitable<void> audit(const caller& c, std::string_view action, std::string_view object,
                                     std::string_view outcome, std::string_view detail = {});
};

}  // namespace certfleet::api
