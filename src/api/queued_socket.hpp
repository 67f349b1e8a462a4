#pragma once
// The TCP layer under a live-log WebSocket: every byte written goes through one ordered queue,
// drained with at most one wait for writability at a time. Two writers share it — Beast (the
// handshake reply, pings, pongs, close frames) and the log hub, which frames a batch of lines
// once and hands the same bytes to every subscriber (a server's frames are unmasked, so they are
// identical for all). The hub's path is a `sendmsg` straight from the broadcast loop: no
// coroutine wakes, no handler is posted per subscriber, which is what a burst to a thousand
// subscribers costs otherwise. Frames never interleave because both paths append whole frames.
//
// A write "completes" when queued; the owner keeps the queue short (the hub writes only to an
// empty one, the session waits in wait_below). Not thread-safe: one event loop, like everything else.
//
// Over TLS (a listener with tls_cert_file or tls_certificate) the queue holds the same plaintext
// frames and drains through the TLS stream instead: one write in flight at a time, small frames
// gathered into records of up to 16 KiB. A frame still counts as queued until its record is on
// the wire, so the hub's "write only to an empty queue" and wait_below pace TLS peers alike.
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>

namespace certfleet::api {

using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

namespace detail {
struct queued_state;
// The socket under the queue (a TLS stream's TCP socket over TLS).
boost::asio::ip::tcp::socket& lowest_socket(queued_state& st);
tls_stream* tls_of(queued_state& st);  // null: plain TCP
// For the teardown below, which may outlive nothing but the state.
void flush_now(queued_state& st);
bool drained_or_failed(const queued_state& st);
void shutdown_and_close(queued_state& st);
}  // namespace detail

class queued_socket {
 public:
  using tcp = boost::asio::ip::tcp;
  using executor_type = tcp::socket::executor_type;

  explicit queued_socket(tcp::socket s);
  // A connection whose TLS handshake is done (its tcp_stream's timeouts must be off).
  explicit queued_socket(tls_stream s);
  ~queued_socket();
  queued_socket(queued_socket&&) noexcept = default;
  queued_socket& operator=(queued_socket&&) noexcept = default;

  executor_type get_executor() noexcept;
  // Beast's get_lowest_layer() finds the socket here (its timeouts close it).
  tcp::socket& next_layer() noexcept;

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [](auto handler, queued_socket* self, const MutableBuffers& b) {
          if (auto* tls = detail::tls_of(*self->st_)) tls->async_read_some(b, std::move(handler));
          else self->next_layer().async_read_some(b, std::move(handler));
        },
        token, this, buffers);
  }

  // Beast's writes: copied into the queue; the handler is posted, never called from here.
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code, std::size_t)>(
        [](auto handler, queued_socket* self, const ConstBuffers& b) {
          std::string bytes;
          bytes.reserve(boost::asio::buffer_size(b));
          for (auto it = boost::asio::buffer_sequence_begin(b); it != boost::asio::buffer_sequence_end(b); ++it) {
            boost::asio::const_buffer one(*it);
            bytes.append(static_cast<const char*>(one.data()), one.size());
          }
          const auto n = bytes.size();
          auto ec = self->append_copy(std::move(bytes));
          auto ex = boost::asio::get_associated_executor(handler, self->get_executor());
          boost::asio::post(ex, [h = std::move(handler), ec, n]() mutable { std::move(h)(ec, ec ? 0 : n); });
        },
        token, this, buffers);
  }

  // The hub's path: a whole, already framed WebSocket data frame, shared with other subscribers.
  // False when no data frame may go any more (a close frame was queued, or the socket failed).
  bool send_frame(std::shared_ptr<const std::string> frame);
  // Bytes queued and not yet taken by the kernel.
  std::size_t queued_bytes() const noexcept;
  bool failed() const noexcept;
  // Drops the frames not yet started (the subscriber is being closed as too slow); a frame
  // partly written stays, so the close frame that follows still parses.
  void drop_unsent();
  // Waits until at most `bytes` are queued; false when the socket failed or closed meanwhile.
  boost::asio::awaitable<bool> wait_below(std::size_t bytes);

  const std::shared_ptr<detail::queued_state>& state() const noexcept { return st_; }

 private:
  boost::system::error_code append_copy(std::string bytes);
  std::shared_ptr<detail::queued_state> st_;
};

// Beast's close handshake ends by tearing the connection down: first give the queue (our close
// frame is in it) up to a second to drain, then close.
template <class Handler>
struct queued_socket_teardown_op {
  std::shared_ptr<detail::queued_state> st;
  queued_socket::executor_type ex;
  std::unique_ptr<boost::asio::steady_timer> timer;
  int rounds_left;
  Handler handler;

  void operator()(boost::system::error_code = {}) {
    detail::flush_now(*st);
    if (detail::drained_or_failed(*st) || rounds_left-- <= 0) {
      detail::shutdown_and_close(*st);
      auto hex = boost::asio::get_associated_executor(handler, ex);
      boost::asio::post(hex, [h = std::move(handler)]() mutable { std::move(h)(boost::system::error_code{}); });
      return;
    }
    timer->expires_after(std::chrono::milliseconds(10));
    auto& t = *timer;
    t.async_wait(std::move(*this));
  }
};

template <class TeardownHandler>
void async_teardown(boost::beast::role_type, queued_socket& socket, TeardownHandler&& handler) {
  queued_socket_teardown_op<std::decay_t<TeardownHandler>> op{
      socket.state(), socket.get_executor(), std::make_unique<boost::asio::steady_timer>(socket.get_executor()), 100,
      std::forward<TeardownHandler>(handler)};
  op();
}

void teardown(boost::beast::role_type, queued_socket& socket, boost::system::error_code& ec);

}  // namespace certfleet::api
