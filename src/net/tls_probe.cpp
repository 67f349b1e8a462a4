// Discovery (tls_probe.hpp), the I/O half: one TLS handshake per endpoint that records whatever
// chain the peer sends, and the bounded scan over a plan. discovery_plan.cpp holds the pure half.
#include "certfleet/net/tls_probe.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <memory>

#include "certfleet/net/phase_timing.hpp"
#include "certfleet/net/resolve.hpp"
#include "net/ip_text.hpp"

namespace certfleet::net {

namespace asio = boost::asio;
namespace ip = asio::ip;
using asio::awaitable;
using ip::tcp;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;
using detail::parse_ip;

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
}  // namespace

// ---- Probing --------------------------------------------------------------------------------

const char* probe_failure_name(probe_failure f) noexcept {
  switch (f) {
    case probe_failure::none: return "none";
    case probe_failure::refused: return "refused";
    case probe_failure::timeout: return "timeout";
    case probe_failure::tls_error: return "tls_error";
    case probe_failure::unreachable: return "unreachable";
    case probe_failure::not_allowed: return "not_allowed";
    case probe_failure::skipped: return "skipped";
  }
  return "unknown";
}

namespace {

// The probe's own client context, never the verified one of tls_client.hpp: discovery must see
// what a server offers, including what we would refuse to trust or talk to. So the peer is not
// verified, TLS 1.0 and 1.1 are offered, and security level 0 lets OpenSSL 3 use the SHA-1
// signatures, small keys and old ciphers those servers need. This context only ever reads a
// certificate chain and hangs up; nothing is sent over it.
std::shared_ptr<asio::ssl::context> probe_context() {
  static const std::shared_ptr<asio::ssl::context> ctx = [] {
    auto c = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
    SSL_CTX* native = c->native_handle();
    SSL_CTX_set_security_level(native, 0);
    // The system openssl.cnf may raise the floor; these calls come after it and win. SSLv3 is
    // compiled out of OpenSSL 3 builds, so TLS 1.0 is the oldest protocol we can see.
    SSL_CTX_set_min_proto_version(native, TLS1_VERSION);
    SSL_CTX_set_max_proto_version(native, 0);
    SSL_CTX_set_cipher_list(native, "ALL:@SECLEVEL=0");
    // Old servers without secure renegotiation (RFC 5746) are refused by OpenSSL 3 clients.
    SSL_CTX_set_options(native, SSL_OP_LEGACY_SERVER_CONNECT);
    SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr);
    ERR_clear_error();
    return c;
  }();
  return ctx;
}


// See http.cpp: on the deadline the socket is closed, which ends every operation pending on it
// (also inside the SSL stream's composed operations).
awaitable<void> watchdog(asio::steady_timer& timer, tcp::socket& sock) {
  auto [ec] = co_await timer.async_wait(tuple_awaitable);
  if (ec) co_return;
  boost::system::error_code ignored;
  sock.close(ignored);
}

probe_outcome failed(probe_outcome out, probe_failure f, std::string message) {
  out.failure = f;
  out.error = std::move(message);
  out.chain_der.clear();
  return out;
}

probe_failure connect_failure(const boost::system::error_code& ec) {
  if (ec == asio::error::connection_refused) return probe_failure::refused;
  if (ec == asio::error::timed_out) return probe_failure::timeout;
  return probe_failure::unreachable;  // no route, network down, address not available…
}

}  // namespace

awaitable<probe_outcome> probe_tls(probe_target target, std::chrono::milliseconds timeout, const egress_policy* egress,
                                   asio::thread_pool* pool) {
  const auto deadline = steady::now() + timeout;
  const std::string where = target.endpoint_text();
  const std::string limit = " (" + std::to_string(timeout.count()) + " ms)";
  probe_outcome out;

  std::vector<tcp::endpoint> eps;
  if (auto a = parse_ip(target.host)) {
    if (egress && !egress->allows_address(*a))
      co_return failed(std::move(out), probe_failure::not_allowed, "egress_allow_list does not allow " + target.host);
    eps.emplace_back(*a, target.port);
  } else {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    auto r = co_await resolve_host(target.host, target.port, pool, std::max(left, std::chrono::milliseconds(1)));
    if (!r.ok())
      co_return failed(std::move(out), steady::now() >= deadline ? probe_failure::timeout : probe_failure::unreachable,
                       r.error.empty() ? "cannot resolve " + target.host : r.error);
    // DESIGN §6's rule against what the name resolved to; only these addresses are used after.
    std::vector<ip::address> addrs;
    for (const auto& ep : r.endpoints) addrs.push_back(ep.address());
    if (egress && !egress->allows(target.host, addrs))
      co_return failed(std::move(out), probe_failure::not_allowed, "egress_allow_list does not allow " + target.host);
    eps = std::move(r.endpoints);
  }

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  tcp::socket sock(ex);
  const auto connect_started = steady::now();
  boost::system::error_code last;
  bool connected = false;
  for (const auto& ep : eps) {
    boost::system::error_code ec;
    if (sock.is_open()) sock.close(ec);
    out.address = ep.address().to_string();
    timer.expires_at(deadline);
    auto c = co_await (sock.async_connect(ep, tuple_awaitable) || watchdog(timer, sock));
    if (c.index() == 1) co_return failed(std::move(out), probe_failure::timeout, "connecting to " + where + " timed out" + limit);
    last = std::get<0>(std::get<0>(c));
    if (!last) {
      connected = true;
      break;
    }
  }
  if (!connected) {
    auto f = connect_failure(last);
    co_return failed(std::move(out), f,
                     f == probe_failure::refused ? "connection refused by " + where : "cannot connect to " + where + ": " + last.message());
  }
  out.connect_ms = ms_since(connect_started);

  auto ctx = probe_context();
  asio::ssl::stream<tcp::socket&> stream(sock, *ctx);
  SSL* ssl = stream.native_handle();
  if (!target.sni.empty()) SSL_set_tlsext_host_name(ssl, target.sni.c_str());
  const auto handshake_started = steady::now();
  timer.expires_at(deadline);
  auto h = co_await (stream.async_handshake(asio::ssl::stream_base::client, tuple_awaitable) || watchdog(timer, sock));
  out.handshake_ms = ms_since(handshake_started);
  // The reason is in the error_code already; what OpenSSL queued on this thread must not be read
  // later as the cause of an unrelated failure.
  ERR_clear_error();
  if (h.index() == 1) co_return failed(std::move(out), probe_failure::timeout, "TLS handshake with " + where + " timed out" + limit);
  if (auto [ec] = std::get<0>(h); ec) {
    std::string why = ec == asio::ssl::error::stream_truncated || ec == asio::error::eof
                          ? "the peer closed the connection"
                          : ec.message();
    co_return failed(std::move(out), probe_failure::tls_error, "TLS handshake with " + where + " failed: " + why);
  }
  // On the client side the peer's chain includes its leaf, in the order the server sent it.
  if (STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl)) {
    for (int i = 0; i < sk_X509_num(chain); ++i) {
      X509* cert = sk_X509_value(chain, i);
      int n = i2d_X509(cert, nullptr);
      if (n <= 0) continue;
      std::string der(static_cast<std::size_t>(n), '\0');
      auto* p = reinterpret_cast<unsigned char*>(der.data());
      if (i2d_X509(cert, &p) == n) out.chain_der.push_back(std::move(der));
    }
  }
  out.protocol = SSL_get_version(ssl);
  if (const char* cipher = SSL_get_cipher_name(ssl)) out.cipher = cipher;
  if (out.chain_der.empty()) co_return failed(std::move(out), probe_failure::tls_error, where + " completed a handshake without a certificate");
  // No close_notify: we only came for the chain, and waiting for the peer's answer would cost a
  // round trip per endpoint.
  boost::system::error_code ignored;
  sock.close(ignored);
  co_return out;
}

namespace {

struct scan_state {
  const discovery_plan& plan;
  const scan_options& options;
  const scan_callback& on_result;
  std::uint64_t next = 0;
  bool stopped = false;
  scan_counts counts;
};

void count(scan_counts& c, probe_failure f) {
  switch (f) {
    case probe_failure::none: ++c.ok; break;
    case probe_failure::refused: ++c.refused; break;
    case probe_failure::timeout: ++c.timeout; break;
    case probe_failure::tls_error: ++c.tls_error; break;
    case probe_failure::unreachable: ++c.unreachable; break;
    case probe_failure::not_allowed: ++c.not_allowed; break;
    case probe_failure::skipped: ++c.skipped; break;
  }
}

// One of `concurrency` workers: takes the next index until none is left. All workers share one
// strand, so `next` and the counts need no lock.
awaitable<void> scan_worker(scan_state& st) {
  for (;;) {
    if (st.stopped || st.next >= st.plan.size()) co_return;
    if (st.options.stop_requested && st.options.stop_requested()) {
      st.stopped = true;
      co_return;
    }
    const std::uint64_t index = st.next++;
    const probe_target target = st.plan.at(index);
    auto outcome = co_await probe_tls(target, st.options.per_endpoint_timeout, st.options.egress, st.options.resolve_pool);
    count(st.counts, outcome.failure);
    if (st.on_result) co_await st.on_result(index, target, std::move(outcome));
  }
}

}  // namespace

awaitable<scan_counts> scan(const discovery_plan& plan, scan_options options, scan_callback on_result) {
  scan_state st{plan, options, on_result, 0, false, {}};
  st.counts.total = plan.size();
  const std::uint64_t workers = std::min<std::uint64_t>(std::max<std::size_t>(options.concurrency, 1), plan.size());
  if (workers > 0) {
    auto strand = asio::make_strand(co_await asio::this_coro::executor);
    using spawn_op = decltype(asio::co_spawn(strand, scan_worker(st), asio::deferred));
    std::vector<spawn_op> ops;
    ops.reserve(workers);
    for (std::uint64_t i = 0; i < workers; ++i) ops.push_back(asio::co_spawn(strand, scan_worker(st), asio::deferred));
    auto [order, errors] = co_await asio::experimental::make_parallel_group(std::move(ops))
                               .async_wait(asio::experimental::wait_for_all(), asio::use_awaitable);
    (void)order;
    // An exception in a worker is a bug: it goes on to the caller's report_unexpected.
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  st.counts.skipped = st.counts.total - st.next;
  co_return st.counts;
}

awaitable<scan_report> scan_all(const discovery_plan& plan, scan_options options) {
  scan_report report;
  report.results.resize(plan.size());
  for (auto& r : report.results) {
    r.failure = probe_failure::skipped;
    r.error = "not probed: the scan was stopped";
  }
  report.counts = co_await scan(plan, std::move(options),
                                [&report](std::uint64_t index, const probe_target&, probe_outcome outcome) -> awaitable<void> {
                                  report.results[index] = std::move(outcome);
                                  co_return;
                                });
  co_return report;
}

}  // namespace certfleet::net
