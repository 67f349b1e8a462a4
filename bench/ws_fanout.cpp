// Live log stream fan-out: N WebSocket subscribers on one job whose handler (in this process, so
// lines go through the in-process hub) appends a burst of L lines. Reports lines/s delivered,
// append-to-receive latency p50/p99 (append time = the line's ts, in ms) and the process RSS.
// `ws_fanout [SUBSCRIBERS=1000] [LINES=10000]`; the clients run on a second thread.
#include "certfleet/api/server.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using namespace certfleet;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

template <class T>
T sync(asio::awaitable<T> a) {
  asio::io_context ioc;
  std::optional<T> out;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(a)); }, asio::detached);
  ioc.run();
  return std::move(*out);
}

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string k;
  long v = 0;
  while (f >> k) {
    if (k == "VmRSS:") {
      f >> v;
      return v;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  int subscribers = argc > 1 ? std::atoi(argv[1]) : 1000;
  int lines = argc > 2 ? std::atoi(argv[2]) : 10000;
  spdlog::set_level(spdlog::level::warn);
  auto dir = std::filesystem::temp_directory_path() / fmt::format("certfleet-wsbench-{}", ::getpid());
  std::filesystem::create_directories(dir);
  auto st = std::move(*store::open_sqlite({(dir / "b.db").string(), 2, 5000, false}));
  const auto& clock = system_clock();
  auto project = sync(st->projects().ensure("default", clock.now_ms()))->first.id;
  auto token = (*sync(api::issue_token(st->auth(), project, store::role::owner, false, "bench", "bench", clock)))->text;

  std::atomic<bool> go{false};
  queue::handler_registry handlers;
  handlers.add("noop", [&](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
    while (!go) co_await ctx.sleep(std::chrono::milliseconds(5));
    for (int i = 1; i <= lines; ++i) co_await ctx.log("info", fmt::format("line {} of the burst", i));
    co_return queue::outcome::ok();
  });
  queue::queue_service q(*st, handlers, clock);
  asio::io_context ioc(1);
  api::server_options so;
  so.listen = "127.0.0.1:0";
  api::server srv(ioc.get_executor(), *st, q, clock, so);
  auto bound = srv.start();
  queue::worker_options wo;
  wo.poll_ms = 20;
  queue::worker w(ioc.get_executor(), *st, handlers, clock, wo);
  w.set_log_publisher(srv.log_publisher());
  w.start();
  queue::enqueue_request req;
  req.project_id = project;
  req.type = "noop";
  auto job = sync(q.enqueue(req, queue::caller::user))->job.id;
  std::thread server_thread([&] { ioc.run(); });
  long rss_before = rss_kib();

  asio::io_context cioc(1);
  std::vector<std::int64_t> latencies_ms;
  latencies_ms.reserve(static_cast<std::size_t>(subscribers) * lines / 10);
  std::atomic<int> connected{0}, finished{0};
  std::int64_t received = 0, bad_order = 0;
  std::chrono::steady_clock::time_point first_rx{}, last_rx{};
  auto port = srv.port();
  for (int i = 0; i < subscribers; ++i) {
    asio::co_spawn(
        cioc,
        [&, i]() -> asio::awaitable<void> {
          websocket::stream<beast::tcp_stream> ws(cioc.get_executor());
          auto [cec] = co_await beast::get_lowest_layer(ws).async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), tuple_awaitable);
          if (cec) co_return;
          ws.set_option(websocket::stream_base::decorator(
              [&](websocket::request_type& r) { r.set(beast::http::field::authorization, "Bearer " + token); }));
          auto [hec] = co_await ws.async_handshake("127.0.0.1", "/api/v1/projects/default/jobs/" + job + "/logs/stream",
                                                   tuple_awaitable);
          if (hec) co_return;
          ++connected;
          std::int64_t last = 0;
          beast::flat_buffer buf;
          for (;;) {
            auto [ec, n] = co_await ws.async_read(buf, tuple_awaitable);
            if (ec) break;
            auto now_ms = clock.now_ms();
            // A scan, not a JSON parse: the client must cost far less than the server it measures.
            auto text = beast::buffers_to_string(buf.data());
            buf.consume(buf.size());
            if (text.rfind(R"({"type":"end")", 0) == 0) break;
            if (first_rx == std::chrono::steady_clock::time_point{}) first_rx = std::chrono::steady_clock::now();
            last_rx = std::chrono::steady_clock::now();
            std::size_t pos = 0;
            while ((pos = text.find(R"("seq":)", pos)) != std::string::npos) {
              pos += 6;
              std::int64_t seq = std::strtoll(text.c_str() + pos, nullptr, 10);
              if (seq != last + 1) ++bad_order;
              last = seq;
              ++received;
              // ts is the append time (ms): sample every 10th line of every subscriber.
              if (seq % 10 == 0) {
                auto tp = text.find(R"("ts":")", pos);
                if (tp == std::string::npos) continue;
                auto ts = std::string_view(text).substr(tp + 6, 24);  // 2026-11-29T09:05:18.123Z
                auto num = [&](std::size_t at, std::size_t len) { return std::stoi(std::string(ts.substr(at, len))); };
                std::int64_t day_ms = ((num(11, 2) * 60 + num(14, 2)) * 60 + num(17, 2)) * 1000 + num(20, 3);
                latencies_ms.push_back(now_ms % 86'400'000 - day_ms);
              }
            }
          }
          ++finished;
          co_await ws.async_close(websocket::close_code::normal, tuple_awaitable);
        },
        asio::detached);
  }
  std::thread client_thread([&] { cioc.run(); });
  while (connected < subscribers) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  long rss_connected = rss_kib();
  long rss_peak = rss_connected;
  go = true;
  while (finished < subscribers) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rss_peak = std::max(rss_peak, rss_kib());
  }
  client_thread.join();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    return latencies_ms.empty() ? -1 : latencies_ms[std::min(latencies_ms.size() - 1, static_cast<std::size_t>(p * latencies_ms.size()))];
  };
  double secs = std::chrono::duration<double>(last_rx - first_rx).count();
  auto stats = srv.current_stats();
  std::cout << fmt::format(
                   "ws_fanout: {} subscribers x {} lines: {} lines delivered ({} out of order) in {:.2f} s = {:.0f} "
                   "lines/s; append-to-receive p50 {} ms p99 {} ms; RSS (server and clients in one process) before "
                   "{} MiB, {} subscribers connected {} MiB, peak during the burst {} MiB; dropped subscribers {}",
                   subscribers, lines, received, bad_order, secs, secs > 0 ? received / secs : 0.0, pct(0.5), pct(0.99),
                   rss_before / 1024, subscribers, rss_connected / 1024, rss_peak / 1024, stats.subscribers_dropped)
            << std::endl;
  std::promise<void> stopped;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> {
    co_await srv.stop();
    co_await w.stop();
    stopped.set_value();
  }, asio::detached);
  stopped.get_future().wait();
  ioc.stop();
  server_thread.join();
  st->close();
  std::filesystem::remove_all(dir);
  return received == static_cast<std::int64_t>(subscribers) * lines && bad_order == 0 ? 0 : 1;
}
