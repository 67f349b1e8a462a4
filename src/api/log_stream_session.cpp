#include "log_stream_session.hpp"

#include "certfleet/api/requests.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/api/log_cursor.hpp"
#include "queued_socket.hpp"
#include "server_state.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/websocket.hpp>
#include <fmt/format.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace certfleet::api {

namespace asio = boost::asio;
namespace websocket = beast::websocket;
using steady = std::chrono::steady_clock;

namespace {

struct ws_conn {
  ws_conn(queued_socket&& s, std::int64_t after) : ws(std::move(s)), cursor(after) {}
  websocket::stream<queued_socket> ws;
  bool closed = false;   // the read side ended: the connection is gone or closed
  bool closing = false;  // a close was started
  log_cursor cursor;     // the lines sent
};

frame_header header_of(const log_frame& f) {
  return frame_header{f.first_seq, f.last_seq, f.end, f.sync, f.text ? f.text->size() : 0};
}

template <class Stream>
asio::awaitable<void> reject_upgrade(server_state& s, Stream& stream, const reply& r, const request_t& req,
                                     const std::string& client, const std::string& request_id) {
  auto res = make_response(r, req.version(), false, request_id);
  set_hsts(res, std::is_same_v<Stream, tls_stream>, s.opt.hsts_max_age_s);
  beast::get_lowest_layer(stream).expires_after(s.opt.write_timeout);
  co_await http::async_write(stream, res, tuple_awaitable);
  const std::string_view route = "/api/v1/projects/{p}/jobs/{id}/logs/stream";
  s.metrics.request(route, r.status, 0);
  log_request({std::string_view(req.method_string().data(), req.method_string().size()),
               std::string_view(req.target().data(), req.target().size()), r.status, r.body.size(), 0, client,
               request_id, route},
              r.internal_error);
}

// Starts a close handshake; the socket is closed outright when the peer does not finish it in
// time (a stalled peer whose receive window is full never reads our close frame).
void start_close(const std::shared_ptr<server_state>& self, const std::shared_ptr<ws_conn>& c, websocket::close_code code,
                 std::string reason) {
  if (c->closing) return;
  c->closing = true;
  asio::co_spawn(
      self->ex,
      [self, c, code, reason = std::move(reason)]() -> asio::awaitable<void> {
        asio::steady_timer deadline(self->ex, std::chrono::seconds(2));
        deadline.async_wait([c](boost::system::error_code ec) {
          if (!ec && !c->closed) {
            boost::system::error_code ignored;
            beast::get_lowest_layer(c->ws).shutdown(tcp::socket::shutdown_both, ignored);
            beast::get_lowest_layer(c->ws).close(ignored);
          }
        });
        co_await c->ws.async_close(websocket::close_reason(code, reason), tuple_awaitable);
        // Done or failed; the deadline still guards the read side finishing.
        if (c->closed) deadline.cancel();
      },
      report_unexpected("live log stream close handshake"));
}

// The session's own sends (backlog, catch-up, merged frames, the end): queued behind whatever
// the hub sent directly, then paced by the peer — the next one waits until the connection holds
// at most ws_send_low_water bytes, so a long backlog never piles up in memory.
constexpr std::size_t ws_send_low_water = 256 * 1024;
constexpr int ws_send_buffer = 1 << 20;
// The kernel takes at most this much beyond what the peer has acknowledged: without it, the 1 MiB
// send buffer plus the peer's receive window absorbed a 10,000-line backlog from a client that
// never reads, so the server paged, serialized and wrote every line for nobody (issue 28). With
// it, the queue above holds what the kernel refuses and the next page waits until the peer reads.
constexpr int ws_not_sent_low_water = 128 * 1024;

// One live stream counted against ws_streams_per_token and ws_streams_per_client from the
// upgrade to the end of the session, however it ends.
class stream_slot {
 public:
  stream_slot(server_state& s, std::string token, std::string client)
      : s_(&s), token_(std::move(token)), client_(std::move(client)) {
    ++s_->streams_per_token[token_];
    ++s_->streams_per_client[client_];
  }
  stream_slot(const stream_slot&) = delete;
  stream_slot& operator=(const stream_slot&) = delete;
  ~stream_slot() {
    release(s_->streams_per_token, token_);
    release(s_->streams_per_client, client_);
  }

 private:
  static void release(std::unordered_map<std::string, int>& m, const std::string& k) {
    if (auto it = m.find(k); it != m.end() && --it->second <= 0) m.erase(it);
  }
  server_state* s_;
  std::string token_, client_;
};

// A stream in the credential watch from its upgrade to its end, however it ends.
class watched_stream {
 public:
  watched_stream(const std::shared_ptr<server_state>& s, stream_credential c, std::function<void(std::string)> end)
      : s_(s.get()), id_(watch_stream(s, std::move(c), std::move(end))) {}
  watched_stream(const watched_stream&) = delete;
  watched_stream& operator=(const watched_stream&) = delete;
  ~watched_stream() { unwatch_stream(*s_, id_); }

 private:
  server_state* s_;
  std::uint64_t id_;
};

int open_streams(const std::unordered_map<std::string, int>& m, const std::string& k) {
  auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

// The caps' refusal, or nullopt when the caller may open one more stream.
std::optional<error> stream_cap_refusal(const server_state& s, const std::string& token, const std::string& client) {
  const auto refuse = [](std::string msg) {
    auto e = make_error(errc::rate_limited, std::move(msg), "stream");
    e.retry_after_s = 5;
    return e;
  };
  if (open_streams(s.streams_per_token, token) >= s.opt.ws_streams_per_token)
    return refuse(fmt::format("this token already has {} live log streams open, the most allowed "
                              "(ws_streams_per_token); close one and retry",
                              s.opt.ws_streams_per_token));
  if (open_streams(s.streams_per_client, client) >= s.opt.ws_streams_per_client)
    return refuse(fmt::format("this client address already has {} live log streams open, the most allowed "
                              "(ws_streams_per_client); close one and retry",
                              s.opt.ws_streams_per_client));
  return std::nullopt;
}
asio::awaitable<bool> ws_send(const std::shared_ptr<ws_conn>& c, const std::string& text) {
  if (c->closing || c->closed) co_return false;
  c->ws.text(true);
  auto [ec, n] = co_await c->ws.async_write(asio::buffer(text), tuple_awaitable);
  if (ec) co_return false;
  co_return co_await c->ws.next_layer().wait_below(ws_send_low_water);
}

// One stream's turn at preparing a backlog page (server_state::backlog_gate); given back when it
// is released or destroyed, waking the first stream waiting for one.
class backlog_turn {
 public:
  explicit backlog_turn(server_state& s) noexcept : s_(&s) {}
  backlog_turn(backlog_turn&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  backlog_turn(const backlog_turn&) = delete;
  backlog_turn& operator=(const backlog_turn&) = delete;
  backlog_turn& operator=(backlog_turn&&) = delete;
  ~backlog_turn() { release(); }
  void release() noexcept {
    if (!s_) return;
    auto& g = s_->backlog;
    ++g.free;
    if (!g.waiting.empty()) {
      g.waiting.front()->cancel();
      g.waiting.pop_front();
    }
    s_ = nullptr;
  }

 private:
  server_state* s_;
};

asio::awaitable<backlog_turn> take_backlog_turn(server_state& s) {
  while (s.backlog.free == 0) {
    auto t = std::make_shared<asio::steady_timer>(s.ex, asio::steady_timer::time_point::max());
    s.backlog.waiting.push_back(t);
    co_await t->async_wait(tuple_awaitable);
  }
  --s.backlog.free;
  co_return backlog_turn(s);
}

// Sends the store's lines after the cursor up to `upto` (0: to the end); returns false on a
// failure that ends the session; sets `ended` when the job is over and all is sent.
asio::awaitable<bool> ws_catch_up(const std::shared_ptr<server_state>& s, const std::shared_ptr<ws_conn>& c,
                                  const std::string& job_id, std::int64_t upto, bool& ended) {
  for (;;) {
    const int limit = c->cursor.page_limit(upto);
    if (limit == 0) co_return true;
    // The page is read, serialized and queued under a turn; the wait for the peer to read it is
    // not (a stalled peer must not hold a turn).
    auto turn = co_await take_backlog_turn(*s);
    auto w = co_await s->timed("log_watch", s->st.observe().watch_logs(job_id, c->cursor.sent(), limit));
    if (!w) {
      start_close(s, c, websocket::close_code::internal_error, "log read failed: " + w.error().message.substr(0, 80));
      co_return false;
    }
    if (!w->lines.empty()) {
      if (c->closing || c->closed) co_return false;
      c->ws.text(true);
      const auto text = lines_frame_text(w->lines, 0, w->lines.size());
      auto [ec, n] = co_await c->ws.async_write(asio::buffer(text), tuple_awaitable);
      if (ec) co_return false;
      c->cursor.advance(w->lines.back().seq);
      turn.release();
      if (!co_await c->ws.next_layer().wait_below(ws_send_low_water)) co_return false;
    }
    turn.release();
    // One page at a time on the loop: with many streams catching up at once, requests and other
    // streams get their turn between pages (a ready wait_below does not suspend).
    co_await asio::post(s->ex, asio::use_awaitable);
    switch (c->cursor.after_page(upto, limit, w->lines.size(), store::is_terminal(w->status), w->last_seq)) {
      case page_step::more: continue;
      case page_step::end:
        if (!co_await ws_send(c, end_frame_text(w->status))) co_return false;
        ended = true;
        co_return true;
      case page_step::done: co_return true;
    }
  }
}

// The connection under the WebSocket: the TCP socket, or the TLS stream with its session.
queued_socket take_connection(beast::tcp_stream& stream) { return queued_socket(stream.release_socket()); }
queued_socket take_connection(tls_stream& stream) { return queued_socket(std::move(stream)); }

}  // namespace

template <class Stream>
asio::awaitable<void> run_log_stream(std::shared_ptr<server_state> self, Stream stream, request_t req, route_match m,
                                     std::string query_view, std::uint64_t conn_id, std::string client) {
  server_state& s = *self;
  auto t0 = steady::now();
  const auto rid = request_id_of(req);
  auto q = parse_query(query_view);
  if (!q) co_return co_await reject_upgrade(s, stream, error_reply(q.error()), req, client, rid);
  if (!s.opt.serve_api)
    co_return co_await reject_upgrade(s, stream, error_reply(errc::not_found, "this process does not serve the API", "path"),
                                      req, client, rid);
  auto c = co_await authorize(s, credentials_of(req), m);
  if (!c) co_return co_await reject_upgrade(s, stream, error_reply(c.error()), req, client, rid);
  auto lq = parse_log_query(*q, true);
  if (!lq) co_return co_await reject_upgrade(s, stream, error_reply(lq.error()), req, client, rid);
  if (!is_object_id(m.id))
    co_return co_await reject_upgrade(s, stream, error_reply(errc::invalid_argument, "id must be a 24-character hex object id", "id"),
                                      req, client, rid);
  auto job = co_await s.timed("job_get", s.st.jobs().get(c->project->id, m.id));
  if (!job) co_return co_await reject_upgrade(s, stream, error_reply(job.error()), req, client, rid);
  if (s.stopping)
    co_return co_await reject_upgrade(s, stream, error_reply(errc::shutting_down, "the server is shutting down"), req, client, rid);
  auto credential = stream_credential_of(credentials_of(req), *c);
  const std::string token_key = c->token ? c->token->id : std::string("-");
  if (auto refusal = stream_cap_refusal(s, token_key, client)) {
    s.metrics.stream_refused();
    co_return co_await reject_upgrade(s, stream, error_reply(*refusal), req, client, rid);
  }
  stream_slot slot(s, token_key, client);

  beast::get_lowest_layer(stream).expires_never();  // the WebSocket timeouts take over
  {
    // A burst is one large message per subscriber: the default 16 KiB send buffer (grown only
    // by sustained traffic) would take it in pieces, a wait for writability each.
    boost::system::error_code ignored;
    auto& sock = beast::get_lowest_layer(stream).socket();
    sock.set_option(asio::socket_base::send_buffer_size(ws_send_buffer), ignored);
    sock.set_option(asio::detail::socket_option::integer<IPPROTO_TCP, TCP_NOTSENT_LOWAT>(ws_not_sent_low_water),
                    ignored);
  }
  auto conn = std::make_shared<ws_conn>(take_connection(stream), lq->after);
  websocket::stream_base::timeout to{};
  to.handshake_timeout = std::chrono::seconds(10);
  to.idle_timeout = s.opt.ws_idle_timeout;
  to.keep_alive_pings = true;
  conn->ws.set_option(to);
  conn->ws.set_option(websocket::stream_base::decorator(
      [rid, hsts = std::is_same_v<Stream, tls_stream> ? s.opt.hsts_max_age_s : 0](websocket::response_type& res) {
        res.set(http::field::server, server_name);
        res.set("X-Request-Id", rid);
        set_hsts(res, hsts > 0, hsts);
      }));
  conn->ws.read_message_max(64 * 1024);
  // One frame per message: Beast would otherwise split a message into 4 KiB frames, a write
  // each, multiplied by every subscriber.
  conn->ws.auto_fragment(false);
  auto [aec] = co_await conn->ws.async_accept(req, tuple_awaitable);
  const unsigned upgrade_status = aec ? 400 : 101;
  const double upgrade_seconds = std::chrono::duration<double>(steady::now() - t0).count();
  s.metrics.request(std::string(m.route->pattern), upgrade_status, upgrade_seconds);
  log_request({"GET", std::string_view(req.target().data(), req.target().size()), upgrade_status, 0, upgrade_seconds,
               client, rid, m.route->pattern});
  if (aec) co_return;

  auto sub = std::make_shared<log_subscriber>(s.ex, s.opt.ws_queue_frames, s.opt.ws_queue_bytes);
  std::weak_ptr<ws_conn> weak = conn;
  sub->on_overflow = [self, weak, max = s.opt.ws_queue_frames] {
    if (auto cc = weak.lock()) {
      self->metrics.subscriber_dropped();
      cc->ws.next_layer().drop_unsent();  // the close frame goes next, not behind megabytes
      start_close(self, cc, websocket::close_code::try_again_later,
                  fmt::format("too slow: more than {} frames queued; reconnect with after={}", max, cc->cursor.sent()));
    }
  };
  // Ends with its credential (stream_watch.hpp): a revoke or sign-out anywhere closes it within a second.
  std::weak_ptr<log_subscriber> weak_sub = sub;
  const watched_stream watched(self, std::move(credential), [self, weak, weak_sub](std::string why) {
    if (auto cc = weak.lock()) start_close(self, cc, websocket::close_code::policy_error, std::move(why));
    if (auto sb = weak_sub.lock()) sb->notify();
  });
  if (auto it = s.conns.find(conn_id); it != s.conns.end())
    it->second.close_ws = [self, weak] {
      if (auto cc = weak.lock()) start_close(self, cc, websocket::close_code::going_away, "server shutting down");
    };
  // The read side: answers pings, notices the peer's close; client messages are ignored.
  asio::co_spawn(
      s.ex,
      [conn, sub]() -> asio::awaitable<void> {
        beast::flat_buffer b;
        for (;;) {
          auto [ec, n] = co_await conn->ws.async_read(b, tuple_awaitable);
          if (ec) break;
          b.consume(b.size());
        }
        conn->closed = true;
        sub->notify();
      },
      report_unexpected("live log stream reader"));

  sub->direct = [weak](const log_frame& f) {
    auto cc = weak.lock();
    if (!cc || cc->closing || cc->closed || !cc->cursor.continues(f.first_seq)) return false;
    auto& out = cc->ws.next_layer();
    // Behind (the kernel has not taken all we wrote): the frame waits in the subscriber's
    // bounded queue, and the session sends what gathered there as one message.
    if (out.queued_bytes() != 0) return false;
    if (!out.send_frame(f.wire)) return false;
    cc->cursor.advance(f.last_seq);
    return true;
  };
  const std::string job_id = m.id;
  s.hub.subscribe(job_id, sub);  // first, so no line falls between the backlog and the live frames
  bool ended = false;
  bool ok = co_await ws_catch_up(self, conn, job_id, 0, ended);
  while (ok && !ended && !conn->closed && !conn->closing && !sub->overflowed()) {
    if (sub->empty()) {
      sub->live = true;  // caught up: the hub may send straight to the socket
      co_await sub->wait();
      sub->live = false;
      continue;
    }
    auto f = sub->pop();
    const auto step = conn->cursor.next(header_of(f));
    if (step == frame_step::skip) continue;
    if (step == frame_step::catch_up) {
      ok = co_await ws_catch_up(self, conn, job_id, f.last_seq, ended);
      continue;
    }
    if (step == frame_step::end) {
      ok = co_await ws_send(conn, *f.text);
      ended = true;
      break;
    }
    // Behind by several frames: send them as one message.
    std::vector<log_frame> batch;
    std::size_t bytes = f.text->size();
    while (const auto* next = sub->peek()) {
      if (!log_cursor::joins(batch.empty() ? f.last_seq : batch.back().last_seq, bytes, header_of(*next))) break;
      bytes += next->text->size();
      batch.push_back(sub->pop());
    }
    if (batch.empty()) {
      ok = co_await ws_send(conn, *f.text);
      if (ok) conn->cursor.advance(f.last_seq);
    } else {
      std::vector<const std::string*> texts{f.text.get()};
      for (const auto& b : batch) texts.push_back(b.text.get());
      ok = co_await ws_send(conn, merge_lines_frames(texts));
      if (ok) conn->cursor.advance(batch.back().last_seq);
    }
  }
  s.hub.unsubscribe(job_id, sub.get());
  sub->direct = nullptr;
  if (ended) start_close(self, conn, websocket::close_code::normal, "job finished");
  // An overflowed subscriber is closed by on_overflow, with the reason.
  else if (!sub->overflowed() && !conn->closing && !conn->closed)
    start_close(self, conn, websocket::close_code::going_away, "stream ended");
  // Wait for the read side to finish (close handshake or hard close by start_close's deadline).
  asio::steady_timer t(s.ex);
  for (int i = 0; i < 400 && !conn->closed; ++i) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(tuple_awaitable);
  }
  if (!conn->closed) {
    boost::system::error_code ignored;
    beast::get_lowest_layer(conn->ws).close(ignored);
  }
}

template asio::awaitable<void> run_log_stream(std::shared_ptr<server_state>, beast::tcp_stream, request_t, route_match,
                                              std::string, std::uint64_t, std::string);
template asio::awaitable<void> run_log_stream(std::shared_ptr<server_state>, tls_stream, request_t, route_match,
                                              std::string, std::uint64_t, std::string);

}  // namespace certfleet::api
