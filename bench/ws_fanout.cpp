// Live log stream fan-out: N WebSocket subscribers on one job whose handler (in this process, so
// lines go through the in-process hub) appends a burst of L lines. Reports lines/s delivered,
// append-to-receive latency p50/p99 (append time = the line's ts, in ms) and the process RSS.
// `ws_fanout [SUBSCRIBERS=1000] [LINES=10000] [raw|beast]`; the clients run on a second thread:
// `raw` (default) is a minimal epoll WebSocket client (real handshake, frame parsing, pong), so
// the clients — on the same two cores as the server — cost as little as a client can; `beast`
// is one Beast coroutine per subscriber, several times the CPU per frame.
// WS_FANOUT_DUMP=FILE writes every latency sample as "seq latency_ms append_ms_of_day" (to see
// whether a tail is one slow start or a steady backlog).
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

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <functional>
#include <sstream>
#include <sys/wait.h>
#include <cstring>
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

using steady = std::chrono::steady_clock;

// What the clients saw. Written by the client thread only; read after it is joined.
struct tally {
  std::vector<std::int64_t> latencies_ms;
  std::int64_t received = 0, bad_order = 0;
  steady::time_point first_rx{}, last_rx{};
  std::atomic<int> connected{0}, finished{0};
  std::atomic<bool> gave_up{false};
  std::FILE* dump = nullptr;  // WS_FANOUT_DUMP, opened by the first take() (in the process that reads)
  bool dump_checked = false;

  // One lines message: a scan, not a JSON parse (the client must cost far less than the server
  // it measures). False for the end message.
  bool take(std::string_view text, std::int64_t& last, std::int64_t now_ms) {
    if (text.starts_with(R"({"type":"end")")) return false;
    if (!dump_checked) {
      dump_checked = true;
      if (const char* f = std::getenv("WS_FANOUT_DUMP")) dump = std::fopen(f, "w");
    }
    auto now = steady::now();
    if (first_rx == steady::time_point{}) first_rx = now;
    last_rx = now;
    // Each line object starts with {"seq": — found by memchr on '{' (about once a line), where a
    // search for the quoted key stops at every '"'.
    constexpr std::string_view key = R"({"seq":)";
    std::size_t pos = 0;
    for (;;) {
      const void* hit = std::memchr(text.data() + pos, '{', text.size() - pos);
      if (!hit) break;
      pos = static_cast<std::size_t>(static_cast<const char*>(hit) - text.data());
      if (text.compare(pos, key.size(), key) != 0) {
        ++pos;
        continue;
      }
      pos += key.size();
      std::int64_t seq = 0;
      std::from_chars(text.data() + pos, text.data() + text.size(), seq);
      if (seq != last + 1) ++bad_order;
      last = seq;
      ++received;
      // ts is the append time (ms): sample every 10th line of every subscriber.
      if (seq % 10 != 0) continue;
      auto tp = text.find(R"("ts":")", pos);
      if (tp == std::string_view::npos || tp + 6 + 24 > text.size()) continue;
      auto ts = text.substr(tp + 6, 24);  // 2026-11-29T09:05:18.123Z
      auto num = [&](std::size_t at, std::size_t len) {
        int v = 0;
        std::from_chars(ts.data() + at, ts.data() + at + len, v);
        return v;
      };
      std::int64_t day_ms = ((num(11, 2) * 60 + num(14, 2)) * 60 + num(17, 2)) * 1000 + num(20, 3);
      latencies_ms.push_back(now_ms % 86'400'000 - day_ms);
      if (dump) std::fprintf(dump, "%lld %lld %lld\n", static_cast<long long>(seq), static_cast<long long>(now_ms % 86'400'000 - day_ms), static_cast<long long>(day_ms));
    }
    return true;
  }
};

// One Beast coroutine per subscriber on one io_context.
void run_beast_clients(int n, std::uint16_t port, const std::string& path, const std::string& token, tally& t) {
  asio::io_context cioc(1);
  const auto& clock = system_clock();
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        cioc,
        [&]() -> asio::awaitable<void> {
          websocket::stream<beast::tcp_stream> ws(cioc.get_executor());
          auto [cec] = co_await beast::get_lowest_layer(ws).async_connect(
              tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), tuple_awaitable);
          if (cec) co_return;
          ws.set_option(websocket::stream_base::decorator(
              [&](websocket::request_type& r) { r.set(beast::http::field::authorization, "Bearer " + token); }));
          auto [hec] = co_await ws.async_handshake("127.0.0.1", path, tuple_awaitable);
          if (hec) co_return;
          ++t.connected;
          std::int64_t last = 0;
          beast::flat_buffer buf;
          for (;;) {
            auto [ec, bytes] = co_await ws.async_read(buf, tuple_awaitable);
            if (ec) break;
            auto text = beast::buffers_to_string(buf.data());
            buf.consume(buf.size());
            if (!t.take(text, last, clock.now_ms())) break;
          }
          ++t.finished;
          co_await ws.async_close(websocket::close_code::normal, tuple_awaitable);
        },
        asio::detached);
  }
  cioc.run();
}

// A minimal WebSocket client per socket, all on one epoll loop: the real handshake, server frames
// parsed by their headers, pings answered, a close frame sent at the end.
void run_raw_clients(int n, std::uint16_t port, const std::string& path, const std::string& token, tally& t,
                     const std::function<void()>& all_connected) {
  struct conn {
    int fd = -1;
    std::string buf;
    std::int64_t last = 0;
  };
  const auto& clock = system_clock();
  int ep = ::epoll_create1(0);
  std::vector<conn> conns(static_cast<std::size_t>(n));
  const std::string request = fmt::format(
      "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {}\r\n\r\n",
      path, token);
  // A client frame is masked (RFC 6455 §5.3); the zero mask keeps the payload as is.
  auto send_control = [](int fd, unsigned char opcode, std::string_view payload) {
    std::string f;
    f.push_back(static_cast<char>(0x80 | opcode));
    f.push_back(static_cast<char>(0x80 | payload.size()));
    f.append(4, '\0');
    f.append(payload);
    (void)!::send(fd, f.data(), f.size(), MSG_NOSIGNAL);
  };
  for (int i = 0; i < n; ++i) {
    auto& c = conns[static_cast<std::size_t>(i)];
    c.fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::send(c.fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
      t.gave_up = true;
      return;
    }
    char tmp[4096];
    while (c.buf.find("\r\n\r\n") == std::string::npos) {
      auto r = ::recv(c.fd, tmp, sizeof tmp, 0);
      if (r <= 0) {
        t.gave_up = true;
        return;
      }
      c.buf.append(tmp, static_cast<std::size_t>(r));
    }
    if (!c.buf.starts_with("HTTP/1.1 101")) {
      std::cerr << "handshake refused: " << c.buf.substr(0, c.buf.find("\r\n")) << std::endl;
      t.gave_up = true;
      return;
    }
    c.buf.erase(0, c.buf.find("\r\n\r\n") + 4);
    ::fcntl(c.fd, F_SETFL, ::fcntl(c.fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
    ++t.connected;
  }
  all_connected();
  std::vector<char> rx(256 * 1024);
  int open = n;
  while (open > 0) {
    epoll_event evs[64];
    int k = ::epoll_wait(ep, evs, 64, 60'000);
    if (k <= 0) {
      t.gave_up = true;
      break;
    }
    for (int e = 0; e < k; ++e) {
      auto& c = conns[evs[e].data.u32];
      bool gone = false;
      for (;;) {
        auto r = ::recv(c.fd, rx.data(), rx.size(), 0);
        if (r > 0) c.buf.append(rx.data(), static_cast<std::size_t>(r));
        if (r == 0 || (r < 0 && errno != EAGAIN)) gone = true;
        if (r < static_cast<ssize_t>(rx.size())) break;
      }
      const auto now_ms = clock.now_ms();
      bool done = false;
      std::size_t pos = 0;
      while (!done && c.buf.size() - pos >= 2) {
        auto b0 = static_cast<unsigned char>(c.buf[pos]), b1 = static_cast<unsigned char>(c.buf[pos + 1]);
        std::uint64_t len = b1 & 0x7f;
        std::size_t header = 2;
        if (len == 126 || len == 127) {
          header = len == 126 ? 4 : 10;
          if (c.buf.size() - pos < header) break;
          len = 0;
          for (std::size_t b = 2; b < header; ++b) len = (len << 8) | static_cast<unsigned char>(c.buf[pos + b]);
        }
        if (c.buf.size() - pos < header + len) break;
        std::string_view payload(c.buf.data() + pos + header, len);
        switch (b0 & 0x0f) {
          case 0x0:
          case 0x1:
            if (!t.take(payload, c.last, now_ms)) done = true;
            break;
          case 0x8: gone = true; done = true; break;
          case 0x9: send_control(c.fd, 0xA, payload); break;
          default: break;
        }
        pos += header + len;
      }
      c.buf.erase(0, pos);
      if (done || gone) {
        if (!gone) send_control(c.fd, 0x8, std::string_view("\x03\xe8", 2));  // 1000, normal
        ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
        ::close(c.fd);
        c.fd = -1;
        --open;
        ++t.finished;
      }
    }
  }
  ::close(ep);
}

// The raw clients run in a child process, forked before any thread exists, so the parent's RSS
// is the server's. Parent → child: "port path token\n"; child → parent: 'C' once connected (or
// 'G' when it gave up), then the tally.
struct client_process {
  pid_t pid = -1;
  int to_child = -1, from_child = -1;
};

bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    auto r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void write_all(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    auto r = ::write(fd, c, n);
    if (r <= 0) return;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
}

client_process fork_raw_clients(int subscribers) {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) std::abort();
  client_process cp;
  cp.pid = ::fork();
  if (cp.pid != 0) {
    ::close(down[0]);
    ::close(up[1]);
    cp.to_child = down[1];
    cp.from_child = up[0];
    return cp;
  }
  ::close(down[1]);
  ::close(up[0]);
  std::string line;
  char ch;
  while (::read(down[0], &ch, 1) == 1 && ch != '\n') line.push_back(ch);
  std::istringstream in(line);
  int port = 0;
  std::string path, token;
  in >> port >> path >> token;
  tally t;
  bool connected = false;
  run_raw_clients(subscribers, static_cast<std::uint16_t>(port), path, token, t, [&] {
    connected = true;
    write_all(up[1], "C", 1);
  });
  if (!connected) write_all(up[1], "G", 1);
  std::int64_t head[6] = {t.received, t.bad_order, t.first_rx.time_since_epoch().count(),
                          t.last_rx.time_since_epoch().count(), static_cast<std::int64_t>(t.latencies_ms.size()),
                          t.gave_up ? 1 : 0};
  write_all(up[1], head, sizeof head);
  write_all(up[1], t.latencies_ms.data(), t.latencies_ms.size() * sizeof(std::int64_t));
  ::_exit(0);
}

int main(int argc, char** argv) {
  int subscribers = argc > 1 ? std::atoi(argv[1]) : 1000;
  int lines = argc > 2 ? std::atoi(argv[2]) : 10000;
  bool beast_clients = argc > 3 && std::string_view(argv[3]) == "beast";
  // Each subscriber is a socket here and one in the server: raise the soft file limit to the hard
  // one before the client process forks (it inherits it), as the systemd unit's LimitNOFILE does.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < static_cast<rlim_t>(subscribers) + 256) {
    std::cerr << fmt::format("ws_fanout: {} subscribers need about {} open files; the limit is {} (raise it with "
                             "ulimit -Hn, or LimitNOFILE= for a service)\n",
                             subscribers, subscribers + 256, static_cast<unsigned long long>(files.rlim_cur));
    return 2;
  }
  client_process child;
  if (!beast_clients) child = fork_raw_clients(subscribers);
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
  // Every subscriber connects from 127.0.0.1: the per-client bound (http_max_connections_per_client,
  // 256 by default) would refuse all past the 256th; an operator behind a proxy raises it likewise.
  so.max_connections = std::max(so.max_connections, subscribers + 64);
  so.max_connections_per_client = so.max_connections;
  // One token and one address open every stream: the per-token and per-client stream caps
  // (ws_streams_per_token 32, ws_streams_per_client 64 by default) would refuse all past them.
  so.ws_streams_per_token = so.ws_streams_per_client = subscribers + 1;
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

  tally t;
  t.latencies_ms.reserve(static_cast<std::size_t>(subscribers) * lines / 10);
  const std::string path = "/api/v1/projects/default/jobs/" + job + "/logs/stream";
  std::atomic<bool> clients_done{false};
  std::thread client_thread([&] {
    if (beast_clients) {
      run_beast_clients(subscribers, srv.port(), path, token, t);
    } else {
      auto hello = fmt::format("{} {} {}\n", srv.port(), path, token);
      write_all(child.to_child, hello.data(), hello.size());
      char c = 0;
      if (!read_all(child.from_child, &c, 1) || c != 'C') t.gave_up = true;
      t.connected = subscribers;
      std::int64_t head[6];
      if (read_all(child.from_child, head, sizeof head)) {
        if (head[5]) t.gave_up = true;
        if (head[4] < 0 || head[4] > (std::int64_t{1} << 32)) head[4] = 0;
        t.received = head[0];
        t.bad_order = head[1];
        t.first_rx = steady::time_point(steady::duration(head[2]));
        t.last_rx = steady::time_point(steady::duration(head[3]));
        t.latencies_ms.resize(static_cast<std::size_t>(head[4]));
        read_all(child.from_child, t.latencies_ms.data(), t.latencies_ms.size() * sizeof(std::int64_t));
      }
      ::waitpid(child.pid, nullptr, 0);
    }
    clients_done = true;
  });
  while (t.connected < subscribers && !t.gave_up) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  long rss_connected = rss_kib();
  long rss_peak = rss_connected;
  go = true;
  while (!clients_done && (beast_clients ? t.finished < subscribers && !t.gave_up : true)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rss_peak = std::max(rss_peak, rss_kib());
  }
  client_thread.join();
  auto& latencies_ms = t.latencies_ms;
  auto received = t.received;
  auto bad_order = t.bad_order;
  auto first_rx = t.first_rx;
  auto last_rx = t.last_rx;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    return latencies_ms.empty() ? -1 : latencies_ms[std::min(latencies_ms.size() - 1, static_cast<std::size_t>(p * latencies_ms.size()))];
  };
  double secs = std::chrono::duration<double>(last_rx - first_rx).count();
  auto stats = srv.current_stats();
  std::cout << fmt::format(
                   "ws_fanout ({} clients): {} subscribers x {} lines: {} lines delivered ({} out of order) in {:.2f} s = {:.0f} "
                   "lines/s; append-to-receive p50 {} ms p90 {} ms p99 {} ms max {} ms; RSS ({}) before "
                   "{} MiB, {} subscribers connected {} MiB, peak during the burst {} MiB; dropped subscribers {}",
                   beast_clients ? "beast" : "raw", subscribers, lines, received, bad_order, secs, secs > 0 ? received / secs : 0.0, pct(0.5), pct(0.9), pct(0.99), pct(1.0),
                   beast_clients ? "server and clients in one process" : "server; the clients run in a child process",
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
