#include "queued_socket.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <optional>

namespace certfleet::api {

namespace asio = boost::asio;
using boost::system::error_code;

namespace detail {

// The first n buffers of an array, as a buffer sequence for one gathering sendmsg.
struct buffer_span {
  const asio::const_buffer* first;
  std::size_t n;
  const asio::const_buffer* begin() const noexcept { return first; }
  const asio::const_buffer* end() const noexcept { return first + n; }
};

struct queued_state : std::enable_shared_from_this<queued_state> {
  explicit queued_state(asio::ip::tcp::socket s) : plain(std::move(s)), sock(*plain), progress(sock.get_executor()) {}
  explicit queued_state(tls_stream s)
      : tls(std::make_unique<tls_stream>(std::move(s))), sock(tls->next_layer().socket()), progress(sock.get_executor()) {}

  struct chunk {
    std::shared_ptr<const std::string> data;
    std::size_t offset = 0;
  };

  std::optional<asio::ip::tcp::socket> plain;
  std::unique_ptr<tls_stream> tls;
  asio::ip::tcp::socket& sock;  // plain's, or the TLS stream's TCP socket
  std::deque<chunk> q;
  std::size_t bytes = 0;
  bool waiting_writable = false;
  bool failed = false;
  // A close frame is queued: RFC 6455 §5.5.1, no data frame may follow it.
  bool data_closed = false;
  int progress_waiters = 0;
  asio::steady_timer progress;  // cancelled when the queue shrinks or the socket fails

  void append(std::shared_ptr<const std::string> data) {
    bytes += data->size();
    q.push_back({std::move(data), 0});
    drain();
  }

  void fail() {
    failed = true;
    q.clear();
    q.shrink_to_fit();
    bytes = 0;
    error_code ignored;
    // The reading side (Beast) sees the end and the session winds down.
    if (sock.is_open()) sock.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    if (progress_waiters) progress.cancel();
  }

  // The socket may be closed under us without a call here (Beast closes the lowest layer on a
  // timeout): then the queue is dead too.
  bool usable() {
    if (!failed && !sock.is_open()) fail();
    return !failed;
  }

  // Takes `written` bytes off the front of the queue.
  void consume(std::size_t written) {
    bytes -= written;
    while (written > 0) {
      auto& c = q.front();
      auto left = c.data->size() - c.offset;
      if (written < left) {
        c.offset += written;
        written = 0;
      } else {
        written -= left;
        q.pop_front();
      }
    }
  }

  // TLS: one write in flight; the frames at the front gathered into one record (at most 16 KiB,
  // TLS's record size), so a burst of small frames is not a record and a write each.
  std::string staging;
  void drain_tls() {
    if (waiting_writable || failed || q.empty()) return;
    constexpr std::size_t record = 16 * 1024;
    staging.clear();
    for (auto it = q.begin(); it != q.end() && staging.size() < record; ++it) {
      auto n = std::min(it->data->size() - it->offset, record - staging.size());
      staging.append(it->data->data() + it->offset, n);
    }
    waiting_writable = true;
    tls->async_write_some(asio::buffer(staging), [self = shared_from_this()](error_code ec, std::size_t n) {
      self->waiting_writable = false;
      if (ec || self->failed) {
        self->fail();
        return;
      }
      self->consume(n);
      if (self->progress_waiters) self->progress.cancel();
      self->drain_tls();
    });
  }

  // Writes while the kernel takes bytes; when it does not, waits for writability (one wait at a
  // time) and goes on from there.
  void drain() {
    if (tls) return drain_tls();
    if (waiting_writable || failed) return;
    const auto before = bytes;
    while (!q.empty()) {
      std::array<asio::const_buffer, 64> iov;
      std::size_t n = 0;
      for (auto it = q.begin(); it != q.end() && n < iov.size(); ++it, ++n)
        iov[n] = asio::buffer(*it->data) + it->offset;
      error_code ec;
      std::size_t written = sock.write_some(buffer_span{iov.data(), n}, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        waiting_writable = true;
        sock.async_wait(asio::ip::tcp::socket::wait_write, [self = shared_from_this()](error_code wec) {
          self->waiting_writable = false;
          // Any error ends the queue, also operation_aborted: it means someone closed the socket
          // (Beast's idle timeout, the close deadline, the destructor), and a closed socket never
          // drains. Marking only "progress" here left a session in wait_below for good, holding
          // its connection slot and the megabytes queued.
          if (wec) {
            self->fail();
            return;
          }
          self->drain();
        });
        break;
      }
      if (ec) {
        fail();
        return;
      }
      consume(written);
    }
    if (bytes < before && progress_waiters) progress.cancel();
  }
};

asio::ip::tcp::socket& lowest_socket(queued_state& st) { return st.sock; }
tls_stream* tls_of(queued_state& st) { return st.tls.get(); }

void flush_now(queued_state& st) { st.drain(); }

bool drained_or_failed(const queued_state& st) { return st.failed || st.q.empty() || !st.sock.is_open(); }

void shutdown_and_close(queued_state& st) {
  error_code ignored;
  st.sock.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  st.sock.close(ignored);
  st.failed = true;
  st.q.clear();
  st.bytes = 0;
  if (st.progress_waiters) st.progress.cancel();
}

}  // namespace detail

queued_socket::queued_socket(tcp::socket s) : st_(std::make_shared<detail::queued_state>(std::move(s))) {
  error_code ignored;
  // Writes must report "would block" instead of blocking the loop.
  st_->sock.non_blocking(true, ignored);
}

queued_socket::queued_socket(tls_stream s) : st_(std::make_shared<detail::queued_state>(std::move(s))) {}

queued_socket::~queued_socket() {
  if (!st_) return;
  error_code ignored;
  // Cancels a pending wait for writability: its handler holds the state, not this object.
  st_->sock.close(ignored);
}

queued_socket::executor_type queued_socket::get_executor() noexcept { return st_->sock.get_executor(); }

queued_socket::tcp::socket& queued_socket::next_layer() noexcept { return st_->sock; }

error_code queued_socket::append_copy(std::string bytes) {
  if (!st_->usable()) return asio::error::broken_pipe;
  // Beast writes each frame in one call; a close frame starts with FIN + opcode 8 (0x88), and an
  // HTTP response (the handshake reply, also written here) never does.
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x88) st_->data_closed = true;
  st_->append(std::make_shared<const std::string>(std::move(bytes)));
  return {};
}

bool queued_socket::send_frame(std::shared_ptr<const std::string> frame) {
  if (!st_->usable() || st_->data_closed) return false;
  st_->append(std::move(frame));
  return !st_->failed;
}

std::size_t queued_socket::queued_bytes() const noexcept { return st_->bytes; }
bool queued_socket::failed() const noexcept { return st_->failed || !st_->sock.is_open(); }

void queued_socket::drop_unsent() {
  auto& q = st_->q;
  // Keep the frame partly written (offset > 0), drop every frame after it.
  std::size_t keep = (!q.empty() && q.front().offset > 0) ? 1 : 0;
  while (q.size() > keep) {
    st_->bytes -= q.back().data->size() - q.back().offset;
    q.pop_back();
  }
}

asio::awaitable<bool> queued_socket::wait_below(std::size_t bytes) {
  auto st = st_;
  while (st->usable() && st->bytes > bytes) {
    ++st->progress_waiters;
    st->progress.expires_at(asio::steady_timer::time_point::max());
    co_await st->progress.async_wait(asio::as_tuple(asio::use_awaitable));
    --st->progress_waiters;
  }
  co_return !st->failed;
}

void teardown(boost::beast::role_type, queued_socket& socket, error_code& ec) {
  ec = {};
  detail::flush_now(*socket.state());
  detail::shutdown_and_close(*socket.state());
}

}  // namespace certfleet::api
