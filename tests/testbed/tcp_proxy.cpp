#include "tcp_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <atomic>
#include <string>
#include <thread>

namespace testbed {

namespace asio = boost::asio;
using asio::ip::tcp;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

struct tcp_proxy::impl {
  mode m;
  std::uint16_t upstream;
  std::uint64_t limit;
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::atomic<std::uint64_t> conns{0}, resets{0};
  std::thread thread;

  struct conn {
    tcp::socket client, server;
    std::uint64_t sent = 0;  // client -> server
    bool dead = false;
    conn(asio::io_context& io) : client(io), server(io) {}
    void reset() {
      if (dead) return;
      dead = true;
      boost::system::error_code ec;
      // SO_LINGER 0: close() sends RST, which is what a crashed middlebox or peer looks like.
      for (auto* s : {&client, &server}) {
        if (!s->is_open()) continue;
        s->set_option(asio::socket_base::linger(true, 0), ec);
        s->close(ec);
      }
    }
  };

  // Server -> client shaping for coalesce and byte_split: returns false when the client is gone.
  asio::awaitable<bool> shaped_write(tcp::socket& from, tcp::socket& to, const char* data, std::size_t n) {
    if (m == mode::byte_split) {
      for (std::size_t i = 0; i < n; ++i) {
        auto [wec, wn] = co_await asio::async_write(to, asio::buffer(data + i, 1), tuple_awaitable);
        if (wec) co_return false;
      }
      co_return true;
    }
    // coalesce: keep reading while more arrives within the quiet gap, then write it all at once.
    std::string held(data, n);
    asio::steady_timer quiet(ioc);
    for (;;) {
      boost::system::error_code ec;
      std::size_t avail = from.available(ec);
      if (ec) break;
      if (avail == 0) {
        quiet.expires_after(std::chrono::milliseconds(20));
        co_await quiet.async_wait(tuple_awaitable);
        avail = from.available(ec);
        if (ec || avail == 0) break;
      }
      std::size_t old = held.size();
      held.resize(old + avail);
      auto got = from.read_some(asio::buffer(held.data() + old, avail), ec);
      held.resize(old + got);
      if (ec) break;
    }
    auto [wec, wn] = co_await asio::async_write(to, asio::buffer(held), tuple_awaitable);
    co_return !wec;
  }

  asio::awaitable<void> pump(std::shared_ptr<conn> c, bool upward) {
    auto& from = upward ? c->client : c->server;
    auto& to = upward ? c->server : c->client;
    char buf[16384];
    for (;;) {
      auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), tuple_awaitable);
      if (ec || c->dead) break;
      if (!upward && (m == mode::coalesce || m == mode::byte_split)) {
        if (!co_await shaped_write(from, to, buf, n)) break;
        continue;
      }
      std::size_t give = n;
      bool cut = false;
      if (upward && m == mode::reset_after) {
        if (c->sent + n >= limit) {
          give = static_cast<std::size_t>(limit - c->sent);
          cut = true;
        }
        c->sent += give;
      }
      if (give > 0) {
        auto [wec, wn] = co_await asio::async_write(to, asio::buffer(buf, give), tuple_awaitable);
        if (wec) break;
      }
      if (cut) {
        resets.fetch_add(1);
        c->reset();
        co_return;
      }
    }
    if (!c->dead) {
      // Half-close toward the other side, as a real path would.
      boost::system::error_code ec;
      to.shutdown(tcp::socket::shutdown_send, ec);
      from.close(ec);
    }
  }

  asio::awaitable<void> serve(std::shared_ptr<conn> c) {
    if (m == mode::blackhole) {
      char buf[4096];
      for (;;) {
        auto [ec, n] = co_await c->client.async_read_some(asio::buffer(buf), tuple_awaitable);
        if (ec) co_return;
      }
    }
    auto [ec] = co_await c->server.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), upstream), tuple_awaitable);
    if (ec) {
      c->reset();
      co_return;
    }
    if (m == mode::byte_split) {
      // One byte per segment: Nagle would merge them again.
      c->client.set_option(tcp::no_delay(true), ec);
    }
    asio::co_spawn(ioc, pump(c, true), asio::detached);
    asio::co_spawn(ioc, pump(c, false), asio::detached);
  }

  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto c = std::make_shared<conn>(ioc);
      auto [ec] = co_await acceptor.async_accept(c->client, tuple_awaitable);
      if (ec) co_return;
      conns.fetch_add(1);
      asio::co_spawn(ioc, serve(c), asio::detached);
    }
  }
};

tcp_proxy::tcp_proxy(mode m, std::uint16_t upstream_port, std::uint64_t reset_after_bytes) : p_(new impl()) {
  p_->m = m;
  p_->upstream = upstream_port;
  p_->limit = reset_after_bytes;
  tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
  p_->acceptor.open(ep.protocol());
  p_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  p_->acceptor.bind(ep);
  p_->acceptor.listen();
  asio::co_spawn(p_->ioc, p_->accept_loop(), asio::detached);
  p_->thread = std::thread([this] { p_->ioc.run(); });
}

tcp_proxy::~tcp_proxy() {
  p_->ioc.stop();
  if (p_->thread.joinable()) p_->thread.join();
}

std::uint16_t tcp_proxy::port() const { return p_->acceptor.local_endpoint().port(); }
std::uint64_t tcp_proxy::connections() const { return p_->conns.load(); }
std::uint64_t tcp_proxy::resets() const { return p_->resets.load(); }

}  // namespace testbed
