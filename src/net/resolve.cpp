// The one resolver (resolve.hpp): getaddrinfo on a pool thread, the loop waiting on a timer.
#include "certfleet/net/resolve.hpp"

#include <netdb.h>
#include <netinet/in.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>
#include <memory>

namespace certfleet::net {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

asio::thread_pool& default_resolve_pool() {
  // Two threads: resolution is rare (once per target) and getaddrinfo blocks for seconds only
  // when DNS is slow, which a second thread keeps from serializing a whole fleet behind it.
  static asio::thread_pool pool(2);
  return pool;
}

struct resolve_state {
  explicit resolve_state(asio::any_io_executor ex) : timer(ex) {}
  asio::steady_timer timer;
  std::vector<tcp::endpoint> eps;
  int rc = 0;
  int sys_errno = 0;
  bool done = false;
};

}  // namespace

asio::awaitable<resolve_result> resolve_host(std::string host, std::uint16_t port, asio::thread_pool* pool,
                                             std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  auto st = std::make_shared<resolve_state>(ex);
  st->timer.expires_after(timeout);
  auto& runner = pool ? *pool : default_resolve_pool();
  // getaddrinfo cannot be cancelled: the deadline is the loop-side timer; the work guard keeps
  // the loop alive until the pool thread has handed its (possibly late) answer back.
  asio::post(runner, [st, host, port, guard = asio::make_work_guard(ex)]() mutable {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string service = std::to_string(port);
    int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
    int err = errno;
    std::vector<tcp::endpoint> eps;
    if (rc == 0) {
      for (auto* a = res; a; a = a->ai_next) {
        if (a->ai_family != AF_INET && a->ai_family != AF_INET6) continue;
        tcp::endpoint e;
        std::memcpy(e.data(), a->ai_addr, a->ai_addrlen);
        eps.push_back(e);
      }
      freeaddrinfo(res);
    }
    // The state (and its timer) moves to the loop: this pool task must not hold the last
    // reference, or the timer would be destroyed here, possibly after its io_context.
    asio::post(guard.get_executor(), [st = std::move(st), rc, err, eps = std::move(eps)]() mutable {
      st->rc = rc;
      st->sys_errno = err;
      st->eps = std::move(eps);
      st->done = true;
      st->timer.cancel();
    });
    guard.reset();
  });
  co_await st->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  resolve_result out;
  if (!st->done) {
    out.cls = classify(cause_kind::deadline);
    out.error = "resolving " + host + " took longer than " + std::to_string(timeout.count()) + " ms";
  } else if (st->rc != 0) {
    cause c{cause_kind::resolver, st->rc};
    std::string why = st->rc == EAI_SYSTEM ? describe({cause_kind::posix_errno, st->sys_errno}) : describe(c);
    out.cls = classify(c);
    out.error = "cannot resolve " + host + ": " + why;
  } else if (st->eps.empty()) {
    out.cls = error_class::network;
    out.error = "cannot resolve " + host + ": no address";
  } else {
    out.endpoints = std::move(st->eps);
  }
  co_return out;
}

}  // namespace certfleet::net
