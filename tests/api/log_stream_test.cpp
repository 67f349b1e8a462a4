// The live job-log WebSocket: backlog, live lines (from this process's worker through the hub, and
// from "another process" through the store poller), the end message, reconnect by cursor, many
// subscribers, a stalled subscriber, keepalive pings, shutdown.
#include "api_fixture.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <malloc.h>
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CERTFLEET_TEST_ASAN 1
#include <sanitizer/allocator_interface.h>
#endif
#endif
#ifndef CERTFLEET_TEST_ASAN
#define CERTFLEET_TEST_ASAN 0
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>

using namespace api_test;
using namespace std::chrono_literals;

namespace {

class api_log_stream : public api_fixture {
 protected:
  std::string stream_path(const std::string& id, std::int64_t after = 0) {
    return job_path(id) + "/logs/stream?after=" + std::to_string(after);
  }
  // Enqueues a noop job (as admin) whose handler writes log lines as `payload` says; its id, or
  // "" (with a test failure) when refused.
  std::string enqueue_noop(const std::string& payload) {
    auto r = client().post(jobs_path(), R"({"type":"noop","payload":)" + payload + "}", tok["admin"]);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json().at("id").as_string()) : "";
  }
};

// What one subscriber saw.
struct seen {
  std::vector<std::int64_t> seqs;
  std::vector<std::string> messages;
  std::string end_status;
  int frames = 0;
  bool closed = false;
  int close_code = 0;
  std::string close_reason, error;

  // Takes one message; false when the stream is over (end or closed).
  bool take(const testbed::ws_message& m) {
    if (m.closed) {
      closed = true;
      close_code = m.close_code;
      close_reason = m.close_reason;
      error = m.error;
      return false;
    }
    ++frames;
    auto v = boost::json::parse(m.text);
    if (v.at("type") == "end") {
      end_status = std::string(v.at("status").as_string());
      return true;
    }
    EXPECT_EQ(v.at("type"), "lines");
    for (const auto& l : v.at("lines").as_array()) {
      seqs.push_back(l.at("seq").as_int64());
      messages.emplace_back(l.at("message").as_string());
    }
    return true;
  }
  bool in_order_from(std::int64_t first, std::int64_t last) const {
    if (static_cast<std::int64_t>(seqs.size()) != last - first + 1) return false;
    for (std::size_t i = 0; i < seqs.size(); ++i)
      if (seqs[i] != first + static_cast<std::int64_t>(i)) return false;
    return true;
  }
};

// Reads until `pred` holds or the stream ends/times out.
void read_until(testbed::ws_client& ws, seen& s, const std::function<bool()>& pred, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) break;
    if (!s.take(ws.read(left))) break;
  }
}

TEST_F(api_log_stream, backlog_then_live_then_end) {
  start();
  auto job = make_active();
  for (int i = 1; i <= 3; ++i) append_line(job.id, fmt::format("before {}", i));
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id), tok["viewer"]), 101) << ws.rejection();
  seen s;
  read_until(ws, s, [&] { return s.seqs.size() >= 3; });
  ASSERT_TRUE(s.in_order_from(1, 3));
  EXPECT_EQ(s.messages[0], "before 1");
  // Lines another process appends arrive through the store poller (100 ms in tests).
  auto t0 = std::chrono::steady_clock::now();
  append_line(job.id, "live 4");
  append_line(job.id, "live 5");
  read_until(ws, s, [&] { return s.seqs.size() >= 5; });
  EXPECT_TRUE(s.in_order_from(1, 5));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  finish(job, store::finish_kind::completed);
  read_until(ws, s, [&] { return !s.end_status.empty(); });
  EXPECT_EQ(s.end_status, "completed");
  // Then the server closes the stream normally.
  EXPECT_FALSE(s.take(ws.read(3s)));
  EXPECT_EQ(s.close_code, 1000);
  EXPECT_EQ(s.close_reason, "job finished");
}

TEST_F(api_log_stream, finished_job_sends_backlog_and_end_at_once) {
  start();
  auto job = make_active();
  for (int i = 1; i <= 4; ++i) append_line(job.id, "x");
  finish(job, store::finish_kind::dead);
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id, 2), tok["viewer"]), 101);
  seen s;
  read_until(ws, s, [&] { return !s.end_status.empty(); });
  EXPECT_TRUE(s.in_order_from(3, 4));
  EXPECT_EQ(s.end_status, "dead");
}

TEST_F(api_log_stream, reconnect_with_cursor_has_no_gap_and_no_duplicate) {
  start();
  auto job = make_active();
  for (int i = 1; i <= 10; ++i) append_line(job.id, fmt::format("m{}", i));
  seen all;
  {
    testbed::ws_client ws("127.0.0.1", port);
    ASSERT_EQ(ws.connect(stream_path(job.id, 4), tok["viewer"]), 101);
    read_until(ws, all, [&] { return all.seqs.size() >= 6; });
    ws.close();
  }
  ASSERT_TRUE(all.in_order_from(5, 10));
  // Lines written while disconnected are picked up from the cursor.
  for (int i = 11; i <= 14; ++i) append_line(job.id, fmt::format("m{}", i));
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id, all.seqs.back()), tok["viewer"]), 101);
  append_line(job.id, "m15");
  read_until(ws, all, [&] { return all.seqs.size() >= 11; });
  EXPECT_TRUE(all.in_order_from(5, 15));
  EXPECT_EQ(all.messages.back(), "m15");
}

// A stream ends with the credential that opened it (issue 31: within a second of a revoke or a
// sign-out, here or in another process); streams of other credentials go on.
#if CERTFLEET_TEST_ASAN
constexpr auto credential_close_bound = 3s;  // beside other sanitized tests on 2 cores
#else
constexpr auto credential_close_bound = 1s;
#endif

// Reads until the server closes the stream; how long that took from `t0`.
std::chrono::milliseconds time_to_close(testbed::ws_client& ws, seen& s, std::chrono::steady_clock::time_point t0) {
  read_until(ws, s, [] { return false; }, 5s);
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

TEST_F(api_log_stream, a_revoked_token_closes_its_streams_within_a_second_and_no_other) {
  start();
  auto job = make_active();
  append_line(job.id, "one");
  auto c = client();
  auto made = c.post("/api/v1/projects/default/tokens", R"({"name":"viewer-2","role":"viewer","ttl_s":3600})", tok["admin"]);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string text(made.json().at("token").as_string());
  const std::string id(made.json().at("id").as_string());
  testbed::ws_client a("127.0.0.1", port), b("127.0.0.1", port), other("127.0.0.1", port);
  ASSERT_EQ(a.connect(stream_path(job.id), text), 101) << a.rejection();
  ASSERT_EQ(b.connect(stream_path(job.id), text), 101) << b.rejection();
  ASSERT_EQ(other.connect(stream_path(job.id), tok["viewer"]), 101) << other.rejection();
  seen sa, sb, so;
  read_until(a, sa, [&] { return sa.seqs.size() >= 1; });
  read_until(b, sb, [&] { return sb.seqs.size() >= 1; });
  read_until(other, so, [&] { return so.seqs.size() >= 1; });
  ASSERT_EQ(sa.seqs.size(), 1u);

  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(c.request("DELETE", "/api/v1/projects/default/tokens/" + id, {}, tok["admin"]).status, 200);
  const auto took_a = time_to_close(a, sa, t0);
  const auto took_b = time_to_close(b, sb, t0);
  EXPECT_TRUE(sa.closed);
  EXPECT_EQ(sa.close_code, 1008) << sa.error;
  EXPECT_EQ(sa.close_reason, "the token was revoked");
  EXPECT_EQ(sb.close_code, 1008) << sb.error;
  EXPECT_LT(took_a, credential_close_bound);
  EXPECT_LT(took_b, credential_close_bound);
  // The viewer's stream still gets the next line.
  append_line(job.id, "two");
  read_until(other, so, [&] { return so.seqs.size() >= 2; });
  EXPECT_EQ(so.seqs.size(), 2u) << so.error << " " << so.close_reason;
  EXPECT_FALSE(so.closed);
}

TEST_F(api_log_stream, a_token_revoked_by_another_process_or_the_cli_closes_its_stream_within_a_second) {
  start();
  auto job = make_active();
  append_line(job.id, "one");
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id), tok["operator"]), 101) << ws.rejection();
  seen s;
  read_until(ws, s, [&] { return s.seqs.size() >= 1; });
  // Straight in the store, as `certfleet token revoke` or another process does: nothing wakes
  // this server, its watcher finds it.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(run_sync(st->auth().revoke_token(token_ids["operator"], clock.now_ms())));
  const auto took = time_to_close(ws, s, t0);
  EXPECT_EQ(s.close_code, 1008) << s.error;
  EXPECT_EQ(s.close_reason, "the token was revoked");
  EXPECT_LT(took, credential_close_bound);
}

TEST_F(api_log_stream, a_token_that_expires_closes_its_stream_when_it_does) {
  start();
  auto job = make_active();
  append_line(job.id, "one");
  const auto expires = clock.now_ms() + 1'500;
  auto t = run_sync(api::issue_token(st->auth(), project_id, store::role::viewer, false, "short", "test", clock, false,
                                     expires));
  ASSERT_TRUE(t && *t);
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id), (*t)->text), 101) << ws.rejection();
  seen s;
  read_until(ws, s, [&] { return s.seqs.size() >= 1; });
  read_until(ws, s, [] { return false; }, 5s);
  const auto closed_at = clock.now_ms();
  EXPECT_EQ(s.close_code, 1008) << s.error;
  EXPECT_EQ(s.close_reason, "the token expired");
  EXPECT_GE(closed_at, expires);
  EXPECT_LT(closed_at - expires, std::chrono::duration_cast<std::chrono::milliseconds>(credential_close_bound).count());
}

TEST_F(api_log_stream, signing_out_closes_the_sessions_stream_within_a_second) {
  start();
  auto job = make_active();
  append_line(job.id, "one");
  auto c = client();
  auto sess = sign_in(c, "viewer");
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id), "", 0,
                       {{"Cookie", sess.cookie}, {"Origin", fmt::format("http://127.0.0.1:{}", port)}}),
            101)
      << ws.rejection();
  // The same token's bearer stream is another credential: it stays.
  testbed::ws_client bearer("127.0.0.1", port);
  ASSERT_EQ(bearer.connect(stream_path(job.id), tok["viewer"]), 101) << bearer.rejection();
  seen s, sb;
  read_until(ws, s, [&] { return s.seqs.size() >= 1; });
  read_until(bearer, sb, [&] { return sb.seqs.size() >= 1; });
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(c.request("DELETE", "/api/v1/session", {}, "", with(sess, true)).status, 204);
  const auto took = time_to_close(ws, s, t0);
  EXPECT_EQ(s.close_code, 1008) << s.error;
  EXPECT_NE(s.close_reason.find("signed out"), std::string::npos) << s.close_reason;
  EXPECT_LT(took, credential_close_bound);
  append_line(job.id, "two");
  read_until(bearer, sb, [&] { return sb.seqs.size() >= 2; });
  EXPECT_EQ(sb.seqs.size(), 2u) << sb.error;
}

TEST_F(api_log_stream, refusals_before_the_upgrade) {
  start();
  auto job = make_active();
  testbed::ws_client ws("127.0.0.1", port);
  EXPECT_EQ(ws.connect(stream_path(job.id) + "&after=1", tok["viewer"]), 400);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(job_path(job.id) + "/logs/stream?after=-1", tok["viewer"]), 400);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(job_path(job.id) + "/logs/stream?after=x", tok["viewer"]), 400);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(job_path(job.id) + "/logs/stream?limit=5", tok["viewer"]), 400);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(stream_path("0123456789abcdef01234567"), tok["viewer"]), 404);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(stream_path("nothex"), tok["viewer"]), 400);
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect(stream_path(job.id), ""), 401);
  // An upgrade request on a route that is not a stream is answered as plain HTTP.
  EXPECT_EQ(testbed::ws_client("127.0.0.1", port).connect("/healthz", ""), 200);
  EXPECT_EQ(client().get("/healthz").status, 200);
}

// Lines from this process's worker come through the hub at once, without waiting for a poll.
TEST_F(api_log_stream, in_process_lines_come_through_the_hub) {
  auto o = test_options();
  o.log_poll_interval = 10s;  // a poll would be far too late: only the hub can deliver in time
  start(o, true);
  auto id = enqueue_noop(R"({"lines":50,"wait_ms":500,"gap_ms":2})");
  ASSERT_FALSE(id.empty());
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(id), tok["viewer"]), 101);
  auto t0 = std::chrono::steady_clock::now();
  seen s;
  read_until(ws, s, [&] { return s.seqs.size() >= 50; }, 15s);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);  // the handler alone needs ~0.6 s
  EXPECT_TRUE(s.in_order_from(1, 50));
  read_until(ws, s, [&] { return !s.end_status.empty(); }, 15s);
  EXPECT_EQ(s.end_status, "completed");
}

// 200 subscribers on one job, connected while it runs: each gets every line once, in order.
TEST_F(api_log_stream, two_hundred_subscribers_get_every_line_in_order) {
  auto o = test_options();
  o.ws_streams_per_token = 1000;  // one viewer token watches 200 times: the fan-out, not the cap, is under test
  o.ws_streams_per_client = 1000;
  start(o, true);
  constexpr int lines = 300, subscribers = 200;
  auto id = enqueue_noop(fmt::format(R"({{"lines":{},"wait_ms":1000,"gap_ms":1}})", lines));
  ASSERT_FALSE(id.empty());
  asio::io_context cioc;
  std::vector<seen> results(subscribers);
  std::vector<int> handshakes(subscribers, 0);
  for (int i = 0; i < subscribers; ++i) {
    asio::co_spawn(
        cioc,
        [&, i]() -> asio::awaitable<void> {
          testbed::ws_stream ws(cioc.get_executor());
          handshakes[i] = co_await ws.connect("127.0.0.1", port, stream_path(id), tok["viewer"]);
          if (handshakes[i] != 101) co_return;
          for (;;)
            if (!results[i].take(co_await ws.read()) || !results[i].end_status.empty()) break;
          co_await ws.close();
        },
        asio::detached);
  }
  cioc.run_for(120s);
  for (int i = 0; i < subscribers; ++i) {
    ASSERT_EQ(handshakes[i], 101) << i;
    EXPECT_TRUE(results[i].in_order_from(1, lines)) << "subscriber " << i << " got " << results[i].seqs.size();
    EXPECT_EQ(results[i].end_status, "completed") << i;
  }
  auto st_now = on_loop([&] { return srv->current_stats(); });
  EXPECT_EQ(st_now.subscribers_dropped, 0u);
}

// The hub writes its frames straight to the socket while Beast answers the client's pings on the
// same socket: a pong cut into a frame (or a frame into a pong) would break the client's parse.
TEST_F(api_log_stream, pongs_and_hub_frames_never_interleave) {
  auto o = test_options();
  o.ws_queue_frames = 100000;  // the slow reader below must not be dropped as too slow
  o.ws_queue_bytes = 64u << 20;
  start(o, true);
  constexpr int lines = 2000;
  auto id = enqueue_noop(fmt::format(R"({{"lines":{},"line_bytes":3000,"wait_ms":500}})", lines));
  ASSERT_FALSE(id.empty());
  asio::io_context cioc;
  testbed::ws_stream ws(cioc.get_executor());
  seen s;
  int status = 0, pings = 0;
  bool done = false;
  asio::co_spawn(
      cioc,
      [&]() -> asio::awaitable<void> {
        // A small receive buffer and a reader that pauses: the server's queue holds frames partly
        // written while the pongs are queued behind them.
        status = co_await ws.connect("127.0.0.1", port, stream_path(id), tok["viewer"], 16384);
        if (status != 101) co_return;
        asio::co_spawn(
            cioc,
            [&]() -> asio::awaitable<void> {
              asio::steady_timer t(cioc.get_executor());
              while (!done && co_await ws.ping()) {
                ++pings;
                t.expires_after(std::chrono::microseconds(200));
                co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
              }
            },
            asio::detached);
        asio::steady_timer pause(cioc.get_executor());
        for (;;) {
          if (!s.take(co_await ws.read()) || !s.end_status.empty()) break;
          pause.expires_after(std::chrono::milliseconds(2));
          co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        done = true;
        co_await ws.close();
      },
      asio::detached);
  cioc.run_for(60s);
  ASSERT_EQ(status, 101);
  EXPECT_TRUE(s.in_order_from(1, lines)) << s.seqs.size() << " lines; " << s.error << " " << s.close_code << " "
                                          << s.close_reason;
  EXPECT_EQ(s.end_status, "completed");
  EXPECT_GT(pings, 50);
  EXPECT_GT(ws.pongs(), 50);
}

// A subscriber that stops reading is closed with a reason; the others get every line on time.
TEST_F(api_log_stream, stalled_subscriber_is_closed_and_others_are_not_slowed) {
  auto o = test_options();
  // The stalled reader is dropped by the byte bound: it never reads 6 MB, of which the sockets
  // take about 1 MiB. A fast reader may lag 2 MiB (~500 lines) before it counts as slow: the
  // 64-frame bound this test had (~256 KB) dropped a fast reader of the sanitizer build when a
  // parallel test starved its thread (clean-clone CI, 1 run in 4).
  o.ws_queue_bytes = 2u << 20;
  start(o, true);
  constexpr int lines = 1500;
  auto id = enqueue_noop(fmt::format(R"({{"lines":{},"line_bytes":4000,"wait_ms":800}})", lines));
  ASSERT_FALSE(id.empty());

  asio::io_context cioc;
  testbed::ws_stream stalled(cioc.get_executor());
  int stalled_status = 0;
  std::vector<seen> fast(4);
  std::vector<std::chrono::steady_clock::time_point> fast_done(fast.size());
  asio::co_spawn(
      cioc,
      [&]() -> asio::awaitable<void> {
        stalled_status = co_await stalled.connect("127.0.0.1", port, stream_path(id), tok["viewer"], 4096);
      },
      asio::detached);
  for (std::size_t i = 0; i < fast.size(); ++i) {
    asio::co_spawn(
        cioc,
        [&, i]() -> asio::awaitable<void> {
          testbed::ws_stream ws(cioc.get_executor());
          if (co_await ws.connect("127.0.0.1", port, stream_path(id), tok["viewer"]) != 101) co_return;
          for (;;)
            if (!fast[i].take(co_await ws.read()) || !fast[i].end_status.empty()) break;
          fast_done[i] = std::chrono::steady_clock::now();
          co_await ws.close();
        },
        asio::detached);
  }
  cioc.run_for(60s);
  ASSERT_EQ(stalled_status, 101);
  // The job's own end time, from the store.
  auto job = run_sync(st->jobs().get(project_id, id));
  ASSERT_TRUE(job);
  ASSERT_EQ(job->status, store::job_status::completed);
  for (std::size_t i = 0; i < fast.size(); ++i) {
    EXPECT_TRUE(fast[i].in_order_from(1, lines)) << i << ": " << fast[i].seqs.size();
    EXPECT_EQ(fast[i].end_status, "completed");
  }
  auto stats = on_loop([&] { return srv->current_stats(); });
  EXPECT_EQ(stats.subscribers_dropped, 1u);
  // The stalled client, reading at last, finds its stream closed before the end, with a reason.
  seen s;
  asio::co_spawn(
      cioc,
      [&]() -> asio::awaitable<void> {
        for (;;)
          if (!s.take(co_await stalled.read())) break;
      },
      asio::detached);
  cioc.restart();
  cioc.run_for(20s);
  EXPECT_TRUE(s.closed);
  EXPECT_TRUE(s.end_status.empty());
  EXPECT_LT(s.seqs.size(), static_cast<std::size_t>(lines));
  if (s.close_code != 0) {
    EXPECT_EQ(s.close_code, 1013);
    EXPECT_NE(s.close_reason.find("too slow"), std::string::npos) << s.close_reason;
  }
}

TEST_F(api_log_stream, keepalive_pings_keep_a_reader_and_drop_a_silent_peer) {
  auto o = test_options();
  o.ws_idle_timeout = 1s;
  start(o);
  auto job = make_active();
  // A reader answers pings (while reading) and stays connected past several idle timeouts.
  testbed::ws_client reader("127.0.0.1", port);
  ASSERT_EQ(reader.connect(stream_path(job.id), tok["viewer"]), 101);
  auto m = reader.read(3500ms);
  EXPECT_EQ(m.error, "timeout");  // nothing arrived, and the server did not close it
  // A peer that never reads (never answers a ping) is closed by the server.
  asio::io_context cioc;
  testbed::ws_stream silent(cioc.get_executor());
  int status = 0;
  asio::co_spawn(cioc, [&]() -> asio::awaitable<void> {
    status = co_await silent.connect("127.0.0.1", port, stream_path(job.id), tok["viewer"]);
  }, asio::detached);
  cioc.run_for(5s);
  ASSERT_EQ(status, 101);
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(on_loop([&] { return srv->current_stats().subscribers; }), 0u);
}

// Resident memory of this process (the server runs in it), after giving freed heap back. Under
// AddressSanitizer freed blocks sit in its quarantine and its shadow pages stay resident, so there
// the live heap as its allocator counts it stands in (what a leaked session would keep).
std::size_t rss_bytes() {
#if CERTFLEET_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#endif
  malloc_trim(0);
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// Viewers that never read, on a job with megabytes of backlog: the server's sends stall with
// megabytes queued until the idle timeout closes the socket. Every such session must end then and
// give back its connection slot and its queued bytes (they were kept for good: the session waited
// for a queue that a closed socket never drains).
TEST_F(api_log_stream, timed_out_stalled_viewers_release_their_slot_and_memory) {
  auto o = test_options();
  o.ws_idle_timeout = 1s;
  start(o);
  auto job = make_active();
  const std::string pad(4000, 'x');
  for (int i = 0; i < 2000; ++i) append_line(job.id, fmt::format("line {} {}", i, pad));  // 8 MB
  ASSERT_EQ(on_loop([&] { return srv->current_stats().connections; }), 0u);
  const auto baseline = rss_bytes();

  constexpr int viewers = 20;
  asio::io_context cioc;
  std::vector<std::unique_ptr<testbed::ws_stream>> ws;
  int upgraded = 0;
  for (int i = 0; i < viewers; ++i) {
    ws.push_back(std::make_unique<testbed::ws_stream>(cioc.get_executor()));
    asio::co_spawn(
        cioc,
        [&, w = ws.back().get()]() -> asio::awaitable<void> {
          if (co_await w->connect("127.0.0.1", port, stream_path(job.id), tok["viewer"], 4096) == 101) ++upgraded;
        },
        asio::detached);
  }
  cioc.run_for(5s);
  ASSERT_EQ(upgraded, viewers);
  // While they stall, each holds a slot (and megabytes queued): the test would prove nothing else.
  EXPECT_EQ(on_loop([&] { return srv->current_stats().connections; }), static_cast<std::size_t>(viewers));

  // Past the idle timeout (pings at 0.5 s, closed at 1 s) and the close handshake's 2 s deadline.
  std::size_t conns = viewers;
  for (int i = 0; i < 100 && conns != 0; ++i) {
    std::this_thread::sleep_for(100ms);
    conns = on_loop([&] { return srv->current_stats().connections; });
  }
  EXPECT_EQ(conns, 0u);
  EXPECT_EQ(on_loop([&] { return srv->current_stats().subscribers; }), 0u);
  const auto after = rss_bytes();
  // 20 stalled viewers held well over 40 MB (a 2 MB page queued each); what remains is allocator
  // and SQLite noise: 12.2-12.6 MiB measured over runs (2026-12-04), so 16 MiB failed now and then
  // under load. 24 MiB still fails when half the sessions keep their queued page.
  std::cerr << "stalled viewers: RSS after minus baseline "
            << (static_cast<long long>(after) - static_cast<long long>(baseline)) / 1024 << " KiB\n";
  EXPECT_LT(after, baseline + (24u << 20)) << "baseline " << baseline / 1024 << " KiB, after " << after / 1024 << " KiB";
  ws.clear();
}

// Issue 28: 250 streams that never read, opened with one viewer token on a finished job with a
// 10,000-line log, kept the loop busy paging, serializing and writing every line into kernel
// buffers for nobody, and /healthz answered after 4 s. Now: the token's cap (32) refuses the rest
// with 429 naming the setting; the accepted streams stall once the kernel holds what the peer has
// not read; /healthz stays fast; every slot comes back when the clients go.
TEST_F(api_log_stream, a_viewer_flood_is_capped_paced_and_leaves_healthz_fast) {
  start();
  const auto job_id = make_dead();
  const std::string pad(100, 'x');
  for (int i = 0; i < 10'000; ++i) append_line(job_id, fmt::format("line {} {}", i, pad));
  const auto baseline = rss_bytes();

  std::atomic<bool> flooding{true};
  std::vector<double> healthz_ms;
  int healthz_bad = 0;
  std::thread prober([&] {
    auto c = client();
    while (flooding) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = c.get("/healthz");
      healthz_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (r.status != 200) ++healthz_bad;
      std::this_thread::sleep_for(10ms);
    }
  });

  constexpr int flood = 250;
  asio::io_context cioc;
  std::vector<std::unique_ptr<testbed::ws_stream>> ws;
  int upgraded = 0, refused = 0, other = 0;
  for (int i = 0; i < flood; ++i) {
    ws.push_back(std::make_unique<testbed::ws_stream>(cioc.get_executor()));
    asio::co_spawn(
        cioc,
        [&, w = ws.back().get()]() -> asio::awaitable<void> {
          const int status = co_await w->connect("127.0.0.1", port, stream_path(job_id), tok["viewer"], 4096);
          (status == 101 ? upgraded : status == 429 ? refused : other) += 1;
        },
        asio::detached);
  }
  const auto flood_start = std::chrono::steady_clock::now();
  cioc.run_for(6s);  // returns once every handshake is answered; the accepted streams stay open
  // Keep probing while the accepted streams sit stalled with their backlog pending.
  std::this_thread::sleep_until(flood_start + 4s);
  flooding = false;
  prober.join();

  EXPECT_EQ(upgraded, 32);
  EXPECT_EQ(refused, flood - 32);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(on_loop([&] { return srv->current_stats().stream_slots; }), 32u);
  // Under the sanitizers, beside other tests on 2 cores, a probe can take long for reasons that are
  // not this server's (the machine is busy): fewer samples are asked there.
  ASSERT_GT(healthz_ms.size(), CERTFLEET_TEST_ASAN ? 20u : 50u);
  EXPECT_EQ(healthz_bad, 0);
  std::sort(healthz_ms.begin(), healthz_ms.end());
  const double p99 = healthz_ms[healthz_ms.size() * 99 / 100];
  // The bound is the issue's 50 ms in the optimized build (measured: 2-6 ms alone, 28 ms beside a
  // fan-out test). The sanitizers make every instruction several times slower and CI runs them two
  // tests at a time: there the bound only catches a stall of the kind the issue saw (4 s).
  const double bound_ms = CERTFLEET_TEST_ASAN ? 1000 : 50;
  EXPECT_LT(p99, bound_ms) << "healthz p99 " << p99 << " ms over " << healthz_ms.size() << " requests";
  // 32 stalled streams hold at most their queue (256 KiB low water + one page) each; the kernel
  // holds the rest. Bound: 64 MiB over the baseline (before the fix every stream wrote its whole
  // log and the refused ones did not exist).
  const auto during = rss_bytes();
  std::cerr << "flood: " << upgraded << " streams accepted, " << refused << " refused; healthz p99 " << p99 << " ms over "
            << healthz_ms.size() << " requests; RSS +" << (during > baseline ? (during - baseline) >> 20 : 0) << " MiB\n";
  EXPECT_LT(during, baseline + (64u << 20)) << "baseline " << baseline / 1024 << " KiB, during " << during / 1024 << " KiB";

  // The refusal names the setting.
  testbed::ws_client extra("127.0.0.1", port);
  EXPECT_EQ(extra.connect(stream_path(job_id), tok["viewer"]), 429);
  EXPECT_NE(extra.rejection().find("ws_streams_per_token"), std::string::npos) << extra.rejection();

  ws.clear();  // the clients go: every slot must come back
  std::size_t slots = 1, conns = 1;
  for (int i = 0; i < 100 && (slots != 0 || conns != 0); ++i) {
    std::this_thread::sleep_for(100ms);
    slots = on_loop([&] { return srv->current_stats().stream_slots; });
    conns = on_loop([&] { return srv->current_stats().connections; });
  }
  EXPECT_EQ(slots, 0u);
  EXPECT_EQ(conns, 0u);
  // And a stream can be opened again.
  testbed::ws_client again("127.0.0.1", port);
  EXPECT_EQ(again.connect(stream_path(job_id), tok["viewer"]), 101) << again.rejection();
}

// ws_streams_per_client counts streams by address whatever the token.
TEST_F(api_log_stream, streams_per_client_address_are_capped_across_tokens) {
  auto o = test_options();
  o.ws_streams_per_client = 3;
  start(o);
  auto job = make_active();
  std::vector<std::unique_ptr<testbed::ws_client>> open;
  for (const char* role : {"viewer", "operator", "admin"}) {
    open.push_back(std::make_unique<testbed::ws_client>("127.0.0.1", port));
    ASSERT_EQ(open.back()->connect(stream_path(job.id), tok[role]), 101) << open.back()->rejection();
  }
  testbed::ws_client fourth("127.0.0.1", port);
  EXPECT_EQ(fourth.connect(stream_path(job.id), tok["owner"]), 429);
  EXPECT_NE(fourth.rejection().find("ws_streams_per_client"), std::string::npos) << fourth.rejection();
}

TEST_F(api_log_stream, shutdown_closes_streams_going_away) {
  start();
  auto job = make_active();
  testbed::ws_client ws("127.0.0.1", port);
  ASSERT_EQ(ws.connect(stream_path(job.id), tok["viewer"]), 101);
  std::thread stopper([&] { stop(); });
  seen s;
  read_until(ws, s, [] { return false; }, 5s);
  stopper.join();
  EXPECT_TRUE(s.closed);
  EXPECT_EQ(s.close_code, 1001);
}

}  // namespace
