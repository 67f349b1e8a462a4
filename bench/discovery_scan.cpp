// Discovery scan rate and memory (docs/performance.md): net::scan, the code discovery_execute
// runs, against real TLS servers on loopback (`openssl s_server`, started by the testbed) at a
// given concurrency, and over a whole /20 of loopback addresses on a closed port (every target
// refused: the cost of the plan and the scan loop themselves), with the process's peak RSS.
//
//   bench/run discovery_scan [--targets N] [--servers K] [--concurrency C] [--range CIDR]
#include "certfleet/net/tls_probe.hpp"
#include "certs.hpp"
#include "s_server.hpp"
#include "temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace certfleet;

namespace {

long peak_rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

struct timed {
  net::scan_counts counts;
  double seconds = 0;
};

timed run_scan(const net::discovery_plan& plan, std::size_t concurrency, std::chrono::milliseconds timeout) {
  asio::io_context io;
  timed out;
  auto t0 = std::chrono::steady_clock::now();
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        net::scan_options so;
        so.concurrency = concurrency;
        so.per_endpoint_timeout = timeout;
        out.counts = co_await net::scan(
            plan, so, [](std::uint64_t, const net::probe_target&, net::probe_outcome) -> asio::awaitable<void> {
              co_return;
            });
      },
      asio::detached);
  io.run();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t targets = 2000, servers = 8, concurrency = 50;
  std::string range = "127.1.0.0/20";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--targets")) targets = std::stoul(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--servers")) servers = std::stoul(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--concurrency")) concurrency = std::stoul(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--range")) range = argv[i + 1];
  }
  testbed::temp_dir dir;
  auto ca = testbed::make_certificate({.common_name = "Bench CA", .is_ca = true});
  auto leaf = testbed::make_certificate({.common_name = "bench.test", .dns_sans = {"bench.test"}, .issuer = &ca});
  std::vector<testbed::s_server> fleet;
  for (std::size_t i = 0; i < servers; ++i)
    fleet.push_back(testbed::start_s_server(dir, "s" + std::to_string(i), leaf, ca.cert_pem));
  std::vector<net::probe_target> list;
  for (std::size_t i = 0; i < targets; ++i) list.push_back({"127.0.0.1", fleet[i % servers].port, "bench.test"});
  auto plan = net::discovery_plan::from_targets(std::move(list));
  auto tls = run_scan(plan, concurrency, std::chrono::milliseconds(5000));
  std::printf("tls: %llu targets over %zu s_server at concurrency %zu: %llu handshakes, %llu failed in %.2f s = %.0f endpoints/s\n",
              static_cast<unsigned long long>(tls.counts.total), servers, concurrency,
              static_cast<unsigned long long>(tls.counts.ok), static_cast<unsigned long long>(tls.counts.failed()),
              tls.seconds, tls.counts.total / tls.seconds);

  // A whole range on a port nothing listens on.
  std::uint16_t closed;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, {asio::ip::make_address("127.0.0.1"), 0});
    closed = a.local_endpoint().port();
  }
  const long rss_before = peak_rss_kib();
  auto range_plan = net::parse_discovery_spec({}, {range}, {closed}, {}, 1'048'576);
  if (!range_plan) {
    std::fprintf(stderr, "range: %s\n", range_plan.error().message.c_str());
    return 2;
  }
  auto swept = run_scan(*range_plan, concurrency, std::chrono::milliseconds(5000));
  std::printf("range %s port %u: %llu targets, %llu refused, %llu other in %.2f s = %.0f endpoints/s; peak RSS %ld KiB "
              "before, %ld KiB after (plan object %zu bytes + %zu range entries)\n",
              range.c_str(), closed, static_cast<unsigned long long>(swept.counts.total),
              static_cast<unsigned long long>(swept.counts.refused),
              static_cast<unsigned long long>(swept.counts.total - swept.counts.refused), swept.seconds,
              swept.counts.total / swept.seconds, rss_before, peak_rss_kib(), sizeof(net::discovery_plan),
              range_plan->ranges().size());
  return 0;
}
