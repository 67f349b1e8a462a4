#include "listener.hpp"

#include "http_session.hpp"
#include "server_state.hpp"

#include "certfleet/core/spawn.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

namespace certfleet::api {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

result<std::pair<std::string, unsigned short>> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return make_error(errc::invalid_argument, fmt::format("listen must be ADDR:PORT (got \"{}\")", listen), "listen");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  auto ps = std::string_view(listen).substr(colon + 1);
  auto [p, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), port);
  if (ec != std::errc() || p != ps.data() + ps.size() || port > 65535)
    return make_error(errc::invalid_argument, fmt::format("listen must be ADDR:PORT (got \"{}\")", listen), "listen");
  return std::pair{host, static_cast<unsigned short>(port)};
}

listener::listener(std::shared_ptr<server_state> s, std::string address, std::string setting, bool health_only,
                   std::shared_ptr<connection_reserve> reserve)
    : s_(std::move(s)), address_(std::move(address)), setting_(std::move(setting)), health_only_(health_only),
      reserve_(std::move(reserve)), acceptor_(s_->ex) {}

asio::awaitable<void> listener::accept_loop() {
  auto self = shared_from_this();
  while (!s_->stopping) {
    auto [ec, sock] = co_await acceptor_.async_accept(tuple_awaitable);
    if (ec) {
      if (s_->stopping || ec == asio::error::operation_aborted) break;
      // Out of descriptors and the like: back off instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer t(s_->ex, std::chrono::milliseconds(50));
      co_await t.async_wait(tuple_awaitable);
      continue;
    }
    sock.set_option(tcp::no_delay(true), ec);
    auto tls = health_only_ ? nullptr : s_->tls.context;
    asio::co_spawn(s_->ex, run_http_session(s_, std::move(sock), std::move(tls), health_only_, reserve_),
                   report_unexpected("HTTP session"));
  }
}

result<std::string> listener::start() {
  auto hp = parse_listen(address_);
  if (!hp) return make_error(errc::invalid_argument, fmt::format("{} must be ADDR:PORT (got \"{}\")", setting_, address_), setting_);
  boost::system::error_code ec;
  auto addr = asio::ip::make_address(hp->first == "localhost" ? "127.0.0.1" : hp->first, ec);
  if (ec)
    return make_error(errc::invalid_argument, fmt::format("{}: bad address {}: {}", setting_, hp->first, ec.message()),
                      setting_);
  tcp::endpoint ep(addr, hp->second);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(errc::invalid_argument, fmt::format("{} {}: {}", setting_, address_, ec.message()), setting_);
  bound_port_ = acceptor_.local_endpoint().port();
  asio::co_spawn(s_->ex, accept_loop(), report_unexpected(health_only_ ? "metrics accept loop" : "HTTP accept loop"));
  auto a = acceptor_.local_endpoint().address();
  return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), bound_port_) : fmt::format("{}:{}", a.to_string(), bound_port_);
}

asio::awaitable<void> listener::stop() {
  auto self = shared_from_this();
  auto& s = *s_;
  if (s.stopping) co_return;
  s.stopping = true;
  if (s.tls.wake) s.tls.wake();  // the certificate watcher ends now, not at its next poll
  recheck_streams_now(s);          // and the stream credential watch
  boost::system::error_code ec;
  acceptor_.close(ec);
  auto deadline = steady::now() + s.opt.shutdown_grace;
  asio::steady_timer t(s.ex);
  while (!s.conns.empty() && steady::now() < deadline) {
    // Idle keep-alive connections and streams go now; requests in flight finish first.
    for (auto& [id, c] : s.conns) {
      if (c.cancel_http && c.idle) c.cancel_http();
      if (c.close_ws) {
        auto f = std::move(c.close_ws);
        c.close_ws = nullptr;
        f();
      }
    }
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(tuple_awaitable);
  }
  for (auto& [id, c] : s.conns)
    if (c.close_http) c.close_http();
  s.hub.stop();
}

void listener::close() {
  boost::system::error_code ec;
  acceptor_.close(ec);
}

}  // namespace certfleet::api
