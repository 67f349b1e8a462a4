// Domain registration lookups (domain_registry.hpp): the RDAP lookup rides the one HTTP client,
// the WHOIS one is a plain TCP exchange built the same way (resolve off the loop, egress on the
// resolved addresses, then connect; one deadline enforced by closing the socket). What the
// answers say is read by the pure half, domain_registry_parse.cpp.
#include "certfleet/net/domain_registry.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <set>

#include "certfleet/core/json.hpp"
#include "certfleet/core/time_text.hpp"
#include "certfleet/net/http.hpp"
#include "certfleet/net/resolve.hpp"
#include "net/domain_names.hpp"

namespace certfleet::net {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;
using detail::is_ip_literal;
using detail::normalize_domain;
using detail::parse_referral;

namespace {
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
}  // namespace

// ---- lookups ----------------------------------------------------------------------------------

namespace {

// The other half of every `op || watchdog(...)`: when the deadline passes first it closes the
// socket, which ends whatever is pending on it.
awaitable<void> watchdog(asio::steady_timer& timer, tcp::socket& sock) {
  auto [ec] = co_await timer.async_wait(tuple_awaitable);
  if (ec) co_return;
  boost::system::error_code ignored;
  sock.close(ignored);
}

std::chrono::milliseconds left(steady::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
}

std::string host_port(std::string_view host, std::uint16_t port) {
  std::string h = host.find(':') != std::string_view::npos ? "[" + std::string(host) + "]" : std::string(host);
  return port == 43 ? h : h + ":" + std::to_string(port);
}

certfleet::error egress_refused(std::string_view host) {
  return make_error(errc::forbidden, "egress_allow_list does not allow " + std::string(host), "egress_allow_list");
}

// One WHOIS question to one server: the raw answer (at most max_whois_bytes).
awaitable<result<std::string>> whois_ask(const std::string& host, std::uint16_t port, const std::string& domain,
                                         steady::time_point deadline, std::chrono::milliseconds budget,
                                         const egress_policy* egress, asio::thread_pool* pool) {
  const std::string where = host_port(host, port);
  auto too_slow = [&] {
    return make_error(errc::timeout, "WHOIS server " + where + " did not answer within " +
                                         std::to_string(budget.count()) + " ms");
  };
  // An empty policy refuses before any DNS query leaves the host.
  if (egress && egress->empty()) co_return egress_refused(host);
  std::vector<tcp::endpoint> eps;
  if (is_ip_literal(host)) {
    eps.emplace_back(asio::ip::make_address(host), port);
  } else {
    if (left(deadline).count() <= 0) co_return too_slow();
    auto r = co_await resolve_host(host, port, pool, left(deadline));
    if (!r.ok()) {
      if (left(deadline).count() <= 0) co_return too_slow();
      co_return make_error(errc::timeout, r.error);
    }
    eps = std::move(r.endpoints);
  }
  // DESIGN §6: judged on what the name resolved to, and only those addresses are used.
  if (egress) {
    std::vector<asio::ip::address> addrs;
    for (const auto& ep : eps) addrs.push_back(ep.address());
    if (!egress->allows(host, addrs)) co_return egress_refused(host);
  }

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  tcp::socket sock(ex);
  boost::system::error_code last = asio::error::host_not_found;
  bool connected = false;
  for (const auto& ep : eps) {
    boost::system::error_code ec;
    if (sock.is_open()) sock.close(ec);
    timer.expires_at(deadline);
    auto c = co_await (sock.async_connect(ep, tuple_awaitable) || watchdog(timer, sock));
    if (c.index() == 1) co_return too_slow();
    last = std::get<0>(std::get<0>(c));
    if (!last) {
      connected = true;
      break;
    }
  }
  if (!connected) co_return make_error(errc::timeout, "cannot connect to WHOIS server " + where + ": " + last.message());

  const std::string query = domain + "\r\n";
  timer.expires_at(deadline);
  auto w = co_await (asio::async_write(sock, asio::buffer(query), tuple_awaitable) || watchdog(timer, sock));
  if (w.index() == 1) co_return too_slow();
  if (auto [ec, n] = std::get<0>(w); ec)
    co_return make_error(errc::timeout, "sending the query to WHOIS server " + where + " failed: " + ec.message());

  // RFC 3912: the server answers and closes; the answer is everything up to EOF.
  std::string answer;
  std::array<char, 4096> buf{};
  while (answer.size() < max_whois_bytes) {
    timer.expires_at(deadline);
    auto r = co_await (sock.async_read_some(asio::buffer(buf), tuple_awaitable) || watchdog(timer, sock));
    if (r.index() == 1) co_return too_slow();
    auto [ec, n] = std::get<0>(r);
    answer.append(buf.data(), std::min(n, max_whois_bytes - answer.size()));
    if (ec == asio::error::eof) break;
    if (ec) co_return make_error(errc::timeout, "reading from WHOIS server " + where + " failed: " + ec.message());
  }
  boost::system::error_code ignored;
  sock.close(ignored);
  co_return answer;
}

}  // namespace

awaitable<result<rdap_domain_info>> rdap_lookup(std::string base_url, std::string domain,
                                                std::chrono::milliseconds timeout, const egress_policy* egress,
                                                asio::thread_pool* resolve_pool, std::string ca_pem) {
  auto name = normalize_domain(domain);
  if (!name) co_return make_error(errc::invalid_argument, "not a valid domain name", "domain");
  auto url = parse_url(base_url, "rdap_base_url");
  if (!url) co_return std::move(url).error();
  const std::string where = url->authority();
  if (base_url.empty() || base_url.back() != '/') base_url += '/';

  http_request req;
  req.method = http_method::get;
  req.url = base_url + "domain/" + *name;
  req.headers = {{"Accept", "application/rdap+json"}};
  req.timeout = timeout;
  req.egress = egress;
  req.resolve_pool = resolve_pool;
  req.max_body = max_rdap_bytes;
  req.ca_pem = std::move(ca_pem);
  auto res = co_await http_exchange(std::move(req));

  if (!res.ok()) {
    if (res.phase == "egress" || res.error.rfind("egress_allow_list", 0) == 0) co_return egress_refused(url->host);
    if (res.timed_out)
      co_return make_error(errc::timeout,
                           "RDAP server " + where + " did not answer within " + std::to_string(timeout.count()) + " ms");
    if (res.cls == error_class::validation) co_return make_error(errc::invalid_argument, res.error, "rdap");
    co_return make_error(errc::timeout, res.error);  // network: refused, reset, untrusted — retry later
  }
  if (res.status == 404) co_return make_error(errc::not_found, "RDAP server " + where + " has no domain " + *name);
  if (res.status == 429) {
    auto e = make_error(errc::rate_limited, "RDAP server " + where + " answered HTTP 429 (too many requests)");
    e.retry_after_s = parse_retry_after(res.header("Retry-After"), system_clock().now_ms()).value_or(0);
    co_return e;
  }
  if (res.status < 200 || res.status > 299) {
    auto msg = "RDAP server " + where + " answered HTTP " + std::to_string(res.status);
    if (res.status >= 500 || res.status == 408) co_return make_error(errc::timeout, msg);
    co_return make_error(errc::invalid_argument, msg, "rdap.status");
  }
  if (!res.body_complete) {
    if (res.timed_out)
      co_return make_error(errc::timeout, "RDAP server " + where + " did not finish its answer within " +
                                              std::to_string(timeout.count()) + " ms");
    co_return make_error(errc::invalid_argument,
                         "RDAP answer from " + where + " broke off or is larger than " +
                             std::to_string(max_rdap_bytes) + " bytes",
                         "rdap");
  }
  co_return parse_rdap_domain(res.body, *name);
}

awaitable<result<whois_answer>> whois_lookup(std::string server_host, std::uint16_t port, std::string domain,
                                             std::chrono::milliseconds timeout, int max_referrals,
                                             const egress_policy* egress, asio::thread_pool* resolve_pool) {
  auto name = normalize_domain(domain);
  if (!name) co_return make_error(errc::invalid_argument, "not a valid domain name", "domain");
  std::string host;
  std::uint16_t p = 0;
  if (!parse_referral(server_host, host, p) || p != 0)
    co_return make_error(errc::invalid_argument, "not a host name or IP address", "whois_server");
  if (port == 0) port = 43;
  max_referrals = std::clamp(max_referrals, 0, 8);
  const auto deadline = steady::now() + timeout;

  std::set<std::string> asked;
  std::optional<whois_answer> previous;  // the answer that pointed here
  for (int hop = 0;; ++hop) {
    asked.insert(host + " " + std::to_string(port));
    auto text = co_await whois_ask(host, port, *name, deadline, timeout, egress, resolve_pool);
    result<whois_info> info = text ? parse_whois(*text) : result<whois_info>(std::move(text).error());
    if (!info) {
      // A registrar's server that fails or disowns the name does not undo the registry's answer.
      if (previous && (!previous->info.registrar.empty() || !previous->info.statuses.empty())) co_return *previous;
      auto e = std::move(info).error();
      if (text) e.message = "WHOIS server " + host_port(host, port) + ": " + e.message;
      co_return e;
    }
    whois_answer answer{std::move(info).value(), host_port(host, port), hop};
    if (previous) {  // the registrar's server may leave out what the registry said
      if (answer.info.registrar.empty()) answer.info.registrar = previous->info.registrar;
      if (answer.info.statuses.empty()) answer.info.statuses = previous->info.statuses;
    }
    const auto& next_host = answer.info.referral_host;
    const std::uint16_t next_port = answer.info.referral_port ? answer.info.referral_port : std::uint16_t{43};
    if (answer.info.expires_at_ms || next_host.empty() || hop >= max_referrals ||
        asked.count(next_host + " " + std::to_string(next_port)))
      co_return answer;
    host = next_host;
    port = next_port;
    previous = std::move(answer);
  }
}

awaitable<result<domain_registration>> lookup_domain_registration(std::string domain, registration_options options) {
  auto name = normalize_domain(domain);
  if (!name) co_return make_error(errc::invalid_argument, "not a valid domain name", "domain");
  const rdap_bootstrap& table = options.bootstrap ? *options.bootstrap : shipped_rdap_bootstrap();

  std::string skipped;
  std::optional<certfleet::error> rdap_error;
  if (auto base = rdap_base_for(table, *name)) {
    auto r = co_await rdap_lookup(*base, *name, options.rdap_timeout, options.egress, options.resolve_pool,
                                  options.rdap_ca_pem);
    if (r) {
      domain_registration out;
      out.source = "rdap";
      out.expires_at_ms = r->expires_at_ms;
      out.registrar = std::move(r->registrar);
      out.statuses = std::move(r->statuses);
      out.server = *base;
      co_return out;
    }
    // The registry saying "no such domain" is the answer; anything else may be the server.
    if (r.error().is(errc::not_found)) co_return std::move(r).error();
    skipped = "RDAP: " + r.error().message;
    rdap_error = std::move(r).error();
  } else {
    skipped = "no RDAP server for ." + name->substr(name->rfind('.') == std::string::npos ? 0 : name->rfind('.') + 1);
  }
  if (!options.whois_fallback) {
    if (rdap_error) co_return *rdap_error;
    co_return make_error(errc::config_invalid, skipped + " and the WHOIS fallback is off");
  }

  auto w = co_await whois_lookup(options.whois_server, options.whois_port, *name, options.whois_timeout,
                                 options.max_referrals, options.egress, options.resolve_pool);
  if (!w) {
    auto e = std::move(w).error();
    e.message += " (after " + skipped + ")";
    if (rdap_error) e.retry_after_s = std::max(e.retry_after_s, rdap_error->retry_after_s);
    co_return e;
  }
  domain_registration out;
  out.source = "whois";
  out.expires_at_ms = w->info.expires_at_ms;
  out.registrar = std::move(w->info.registrar);
  out.statuses = std::move(w->info.statuses);
  out.server = std::move(w->server);
  out.rdap_skipped = std::move(skipped);
  co_return out;
}

}  // namespace certfleet::net
