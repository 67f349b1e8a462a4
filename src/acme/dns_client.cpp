// DNS-01's exchanges with DNS servers (dns.hpp): UDP queries with retransmission and a TCP
// fallback, TSIG-signed UPDATEs over TCP, and the meaning of each answer for the job.
#include <openssl/rand.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>

#include "certfleet/acme/dns.hpp"
#include "certfleet/core/allow_list.hpp"
#include "certfleet/net/resolve.hpp"

namespace certfleet::acme::dns {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using asio::ip::udp;
using namespace asio::experimental::awaitable_operators;
using steady = std::chrono::steady_clock;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t max_cname_hops = 8;

error dns_error(dns_errc c, std::string message) { return error{make_error_code(c), std::move(message), {}, 0}; }
// The message, then what to do about it (the table's hint).
error dns_error_hinted(dns_errc c, std::string message) {
  message += ": ";
  message += dns_errc_hint(c);
  return dns_error(c, std::move(message));
}

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

std::uint16_t random_id() {
  std::uint16_t id = 0;
  // RFC 5452: an unpredictable id is what makes a spoofed UDP answer hard to slip in.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&id), sizeof id) != 1) {
    static std::uint16_t fallback = 0x5a5a;
    id = ++fallback;
  }
  return id;
}

std::uint64_t unix_seconds(const client_options& o) {
  const clock_source& c = o.clock ? *o.clock : system_clock();
  auto ms = c.now_ms();
  return ms > 0 ? static_cast<std::uint64_t>(ms / 1000) : 0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string endpoint_text(const asio::ip::address& a, std::uint16_t port) {
  return a.is_v6() ? "[" + a.to_string() + "]:" + std::to_string(port) : a.to_string() + ":" + std::to_string(port);
}

// A server to talk to: its text for messages and the addresses to use, in order.
struct peer {
  std::string where;
  std::uint16_t port = 53;
  std::vector<asio::ip::address> addresses;
};

awaitable<result<peer>> resolve_peer(const server_address& s, const client_options& o, steady::time_point deadline) {
  peer p;
  p.where = s.text();
  p.port = s.port;
  if (s.host_is_ip()) p.addresses.push_back(asio::ip::make_address(s.host));
  if (!s.host_is_ip()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
    auto r = co_await net::resolve_host(s.host, s.port, o.resolve_pool, std::max(left, std::chrono::milliseconds(1)));
    if (!r.ok()) co_return dns_error_hinted(dns_errc::network, "DNS server " + p.where + ": " + r.error);
    for (const auto& ep : r.endpoints)
      if (std::find(p.addresses.begin(), p.addresses.end(), ep.address()) == p.addresses.end())
        p.addresses.push_back(ep.address());
  }
  // On what the name resolved to, and only those addresses are then used.
  if (o.egress && !net::egress_allows(*o.egress, s.host, p.addresses)) {
    auto e = dns_error_hinted(dns_errc::not_allowed, "DNS server " + p.where + " is refused by acme_allow_list");
    e.field = "server";
    co_return e;
  }
  co_return p;
}

// What an exchange is about, for messages: "TXT query for _acme-challenge.example.test".
struct exchange_info {
  std::string what;
  steady::time_point deadline;
  std::chrono::milliseconds limit;
};

error no_answer(const peer& p, const exchange_info& x, std::string_view how) {
  return dns_error_hinted(dns_errc::timeout, "no answer from " + p.where + " within " + ms_text(x.limit) + " (" + x.what +
                                                 ", " + std::string(how) + ")");
}

error network_error(const peer& p, const exchange_info& x, std::string_view how, const boost::system::error_code& ec) {
  return dns_error_hinted(dns_errc::network,
                          "DNS server " + p.where + " (" + x.what + ", " + std::string(how) + "): " + ec.message());
}

error malformed(const peer& p, const exchange_info& x, const std::string& why) {
  return dns_error_hinted(dns_errc::malformed_answer, "DNS server " + p.where + " sent a malformed answer to the " + x.what +
                                                          " (" + why + ")");
}

// A datagram that answers `query_id`: anything else (a late answer to an earlier try, stray
// bytes) is not ours and is ignored.
bool answers_id(std::span<const std::uint8_t> b, std::uint16_t query_id) {
  return b.size() >= 12 && (b[0] << 8 | b[1]) == query_id && (b[2] & 0x80);
}

// A query over UDP to each address in turn: sent `tries` times, evenly spaced inside the
// deadline, and answered by the first datagram with our id. Connected sockets, so the kernel
// drops datagrams from any other address and reports an ICMP "port unreachable" as refused.
awaitable<result<bytes>> udp_exchange(const peer& p, const bytes& query, std::uint16_t id, int tries,
                                      const exchange_info& x) {
  auto ex = co_await asio::this_coro::executor;
  tries = std::max(tries, 1);
  std::optional<error> last;
  for (const auto& addr : p.addresses) {
    udp::socket sock(ex);
    boost::system::error_code ec;
    sock.open(addr.is_v6() ? udp::v6() : udp::v4(), ec);
    if (!ec) sock.connect(udp::endpoint(addr, p.port), ec);
    if (ec) {
      last = network_error(p, x, "UDP", ec);
      continue;
    }
    asio::steady_timer timer(ex);
    std::array<std::uint8_t, max_message_size> buf;
    bool refused = false;
    for (int t = 0; t < tries && !refused; ++t) {
      auto now = steady::now();
      if (now >= x.deadline) break;
      auto try_deadline = t + 1 == tries ? x.deadline : now + (x.deadline - now) / (tries - t);
      auto [sec, sent] = co_await sock.async_send(asio::buffer(query), tuple_awaitable);
      if (sec) {
        last = network_error(p, x, "UDP", sec);
        refused = true;
        break;
      }
      for (;;) {
        timer.expires_at(try_deadline);
        auto r = co_await (sock.async_receive(asio::buffer(buf), tuple_awaitable) || timer.async_wait(tuple_awaitable));
        if (r.index() == 1) break;  // this try's time is up: send again
        auto [rec, n] = std::get<0>(r);
        if (rec) {
          // connection_refused: nothing listens on that UDP port (an ICMP answer).
          last = network_error(p, x, "UDP", rec);
          refused = true;
          break;
        }
        std::span<const std::uint8_t> got(buf.data(), n);
        if (!answers_id(got, id)) continue;
        co_return bytes(got.begin(), got.end());
      }
    }
    if (!refused) last = no_answer(p, x, "UDP, " + std::to_string(tries) + (tries == 1 ? " try" : " tries"));
  }
  co_return last ? *last : no_answer(p, x, "UDP");
}

// One message over TCP (RFC 1035 §4.2.2: a two-byte length, then the message) to the first
// address that accepts, and one answer back.
awaitable<result<bytes>> tcp_exchange(const peer& p, const bytes& request, const exchange_info& x) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  std::optional<error> last;
  for (const auto& addr : p.addresses) {
    tcp::socket sock(ex);
    timer.expires_at(x.deadline);
    auto c = co_await (sock.async_connect(tcp::endpoint(addr, p.port), tuple_awaitable) || timer.async_wait(tuple_awaitable));
    if (c.index() == 1) co_return no_answer(p, x, "TCP connect");
    if (auto [ec] = std::get<0>(c); ec) {
      last = network_error(p, x, "TCP connect", ec);
      continue;
    }
    bytes framed;
    framed.reserve(request.size() + 2);
    framed.push_back(static_cast<std::uint8_t>(request.size() >> 8));
    framed.push_back(static_cast<std::uint8_t>(request.size()));
    framed.insert(framed.end(), request.begin(), request.end());
    auto w = co_await (asio::async_write(sock, asio::buffer(framed), tuple_awaitable) || timer.async_wait(tuple_awaitable));
    if (w.index() == 1) co_return no_answer(p, x, "TCP");
    if (auto [ec, n] = std::get<0>(w); ec) co_return network_error(p, x, "TCP send", ec);
    std::array<std::uint8_t, 2> len{};
    auto rl = co_await (asio::async_read(sock, asio::buffer(len), tuple_awaitable) || timer.async_wait(tuple_awaitable));
    if (rl.index() == 1) co_return no_answer(p, x, "TCP");
    if (auto [ec, n] = std::get<0>(rl); ec)
      co_return network_error(p, x, "TCP, the server closed the connection without an answer", ec);
    bytes answer(static_cast<std::size_t>(len[0] << 8 | len[1]));
    auto rb = co_await (asio::async_read(sock, asio::buffer(answer), tuple_awaitable) || timer.async_wait(tuple_awaitable));
    if (rb.index() == 1) co_return no_answer(p, x, "TCP");
    if (auto [ec, n] = std::get<0>(rb); ec) co_return network_error(p, x, "TCP, the answer broke off", ec);
    co_return answer;
  }
  co_return last ? *last : no_answer(p, x, "TCP");
}

// The answer is for what we asked: same id, a response, same opcode, and the same question
// (servers may omit the question when they refuse outright).
result<message> check_answer(const peer& p, const exchange_info& x, const bytes& wire, const message& asked) {
  auto m = decode(wire);
  if (!m) return malformed(p, x, m.error().message);
  if (m->header.id != asked.header.id || !m->header.qr) return malformed(p, x, "wrong id, or not a response");
  if (m->header.op != asked.header.op) return malformed(p, x, "answer with another opcode");
  if (m->questions.empty() && m->header.rcode != 0) return m;
  const auto& q = asked.questions.front();
  if (m->questions.size() != 1 || !(m->questions[0].name == q.name) || m->questions[0].type != q.type)
    return malformed(p, x, "the answer is for another question");
  return m;
}

// A query: UDP, then TCP when the answer is truncated.
awaitable<result<message>> query(const peer& p, const domain_name& name, rr_type type, const client_options& o,
                                 std::chrono::milliseconds limit) {
  exchange_info x{rr_type_name(type) + " query for " + name.text(), steady::now() + limit, limit};
  auto q = make_query(random_id(), name, type, o.recursion_desired);
  auto wire = encode(q);
  if (!wire) co_return wire.error();  // a parsed name always encodes: a bug if it does not
  auto a = co_await udp_exchange(p, *wire, q.header.id, o.udp_tries, x);
  if (!a) co_return std::move(a).error();
  auto m = check_answer(p, x, *a, q);
  if (!m || !m->header.tc) co_return m;
  // RFC 7766: a truncated answer is asked again over TCP, with the same id.
  auto t = co_await tcp_exchange(p, *wire, x);
  if (!t) co_return std::move(t).error();
  co_return check_answer(p, x, *t, q);
}

const soa_data* soa_of(const std::vector<resource_record>& rrs, const domain_name& owner) {
  for (const auto& rr : rrs)
    if (rr.type == rr_type::soa && rr.owner == owner)
      if (const auto* s = std::get_if<soa_data>(&rr.data)) return s;
  return nullptr;
}

// The zone whose SOA an authoritative NXDOMAIN/NODATA answer carries, when `name` is inside it.
std::optional<domain_name> zone_from_authority(const message& m, const domain_name& name, bool recursive) {
  if (!m.header.aa && !recursive) return std::nullopt;
  for (const auto& rr : m.authorities)
    if (rr.type == rr_type::soa && name.is_at_or_below(rr.owner)) return rr.owner;
  return std::nullopt;
}

bool is_referral(const message& m) {
  return !m.header.aa && std::any_of(m.authorities.begin(), m.authorities.end(),
                                     [](const resource_record& rr) { return rr.type == rr_type::ns; });
}

// A query answered with an error RCODE, as a failure for the operator.
error query_refusal(const peer& p, const std::string& what, const std::string& subject, std::uint8_t rc) {
  const std::string code = rcode_name(rc);
  switch (static_cast<rcode>(rc)) {
    case rcode::refused:
      return dns_error(dns_errc::refused, "DNS server " + p.where + " refused the " + what + " (REFUSED): it does not serve " +
                                              subject + ", or its ACL refuses certfleet's queries; point the provider at a "
                                              "server authoritative for it");
    case rcode::notauth:
      return dns_error_hinted(dns_errc::not_authoritative,
                              p.where + " is not authoritative for " + subject + " (NOTAUTH)");
    case rcode::servfail:
      return dns_error_hinted(dns_errc::server_failure, "DNS server " + p.where + " failed to answer the " + what + " (SERVFAIL)");
    default:
      return dns_error(dns_errc::refused, "DNS server " + p.where + " answered the " + what + " with " + code +
                                              ": check that it is an authoritative server for " + subject);
  }
}

// --- UPDATE ---

std::string tsig_error_advice(std::uint16_t err, std::uint16_t fudge) {
  switch (static_cast<rcode>(err)) {
    case rcode::badtime:
      return "the clocks of certfleet and the server differ by more than " + std::to_string(fudge) +
             " s: synchronise them (NTP)";
    default:
      return "the key name, algorithm (hmac-sha256) and secret must match the server's key and its update ACL";
  }
}

// The server's answer to our UPDATE, as the job needs it.
result<void> judge_update(const peer& p, const exchange_info& x, const bytes& wire, const message& asked,
                          const tsig_key& key, const bytes& request_mac, const domain_name& zone,
                          const client_options& o) {
  auto m = check_answer(p, x, wire, asked);
  if (!m) return std::move(m).error();
  const std::uint8_t rc = m->header.rcode;
  const std::string key_text = "'" + key.name.fqdn() + "'";
  const std::string zone_text = zone.text();
  // A TSIG error means the server refused our signature, whatever the RCODE (RFC 8945 §5.2: NOTAUTH).
  if (m->tsig && m->tsig->error != 0) {
    std::string err = rcode_name(m->tsig->error);
    return dns_error(dns_errc::tsig_rejected, "DNS server " + p.where + " rejected TSIG key " + key_text + " for zone " +
                                                  zone_text + " (" + rcode_name(rc) + ", TSIG error " + err +
                                                  "): " + tsig_error_advice(m->tsig->error, o.tsig_fudge));
  }
  if (rc == static_cast<std::uint8_t>(rcode::notauth))
    return dns_error_hinted(dns_errc::not_authoritative, p.where + " is not authoritative for zone " + zone_text + " (NOTAUTH)");
  if (rc == static_cast<std::uint8_t>(rcode::notzone))
    return dns_error_hinted(dns_errc::not_authoritative, p.where + " says the record is not inside zone " + zone_text + " (NOTZONE)");
  if (rc == static_cast<std::uint8_t>(rcode::refused))
    return dns_error(dns_errc::refused, "DNS server " + p.where + " refused the update of zone " + zone_text +
                                            " (REFUSED): allow updates of the zone with TSIG key " + key_text +
                                            " (knot: acl with action update; BIND: allow-update or update-policy)");
  if (rc == static_cast<std::uint8_t>(rcode::servfail))
    return dns_error_hinted(dns_errc::server_failure, "DNS server " + p.where + " failed to apply the update of zone " +
                                                          zone_text + " (SERVFAIL)");
  if (rc != 0)
    return dns_error_hinted(dns_errc::update_failed,
                            "DNS server " + p.where + " refused the update of zone " + zone_text + " (" + rcode_name(rc) + ")");
  // Success must be signed by the key: otherwise nothing says the server that holds it answered.
  auto v = tsig_verify(wire, key, request_mac, unix_seconds(o));
  if (!v.ok())
    return dns_error_hinted(dns_errc::bad_answer_signature, "DNS server " + p.where + " answered the update of zone " +
                                                                zone_text + " with NOERROR, but the answer's TSIG does not verify with key " +
                                                                key_text + " (" + v.detail + ")");
  return {};
}

enum class update_kind { add, remove };

awaitable<result<std::string>> run_update(update_kind kind, std::string server_text, std::string zone_text, tsig_key key,
                                          std::string fqdn_text, std::string value, std::uint32_t ttl,
                                          client_options o) {
  auto server = parse_server(server_text);
  if (!server) co_return std::move(server).error();
  auto name = domain_name::parse(fqdn_text, "fqdn");
  if (!name) co_return std::move(name).error();
  if (key.name.is_root() || key.secret.empty())
    co_return make_error(errc::invalid_argument, "tsig key is not set (make it with make_tsig_key)", "tsig_key_name");
  domain_name zone;
  if (zone_text.empty()) {
    auto found = co_await find_zone(server_text, fqdn_text, o);
    if (!found) co_return std::move(found).error();
    zone = *domain_name::parse(*found, "zone");
  } else {
    auto z = domain_name::parse(zone_text, "zone");
    if (!z) co_return std::move(z).error();
    zone = std::move(*z);
  }
  update_builder b(random_id(), zone);
  auto added = kind == update_kind::add ? b.add_txt(*name, value, ttl) : b.delete_txt(*name, value);
  if (!added) co_return std::move(added).error();
  auto wire = encode(b.msg);
  if (!wire) co_return std::move(wire).error();
  auto signed_wire = tsig_sign(*wire, key, unix_seconds(o), o.tsig_fudge);
  if (!signed_wire) co_return std::move(signed_wire).error();

  exchange_info x{std::string("UPDATE of zone ") + zone.text() + (kind == update_kind::add ? " (add TXT " : " (delete TXT ") +
                      name->text() + ")",
                  steady::now() + o.timeout, o.timeout};
  auto p = co_await resolve_peer(*server, o, x.deadline);
  if (!p) co_return std::move(p).error();
  auto answer = co_await tcp_exchange(*p, signed_wire->wire, x);
  if (!answer) co_return std::move(answer).error();
  auto judged = judge_update(*p, x, *answer, b.msg, key, signed_wire->mac, zone, o);
  if (!judged) co_return std::move(judged).error();
  co_return lower(zone.text());
}

}  // namespace

// --- server addresses ---

bool server_address::host_is_ip() const {
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

std::string server_address::text() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

result<server_address> parse_server(std::string_view text, std::string_view field_name) {
  const std::string field(field_name);
  auto bad = [&](std::string why) {
    return make_error(errc::invalid_argument, field + " " + why + " (expected host:port, e.g. 192.0.2.53:53)", field);
  };
  if (text.empty()) return bad("is empty");
  if (text.size() > 300) return bad("is longer than 300 characters");
  server_address s;
  std::string_view host = text, port;
  bool has_port = false;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return bad("has an unterminated [IPv6] address");
    host = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("has junk after the [IPv6] address");
      port = rest.substr(1);
      has_port = true;
    }
    boost::system::error_code ec;
    auto a = asio::ip::make_address_v6(std::string(host), ec);
    if (ec || host.find('%') != std::string_view::npos) return bad("has an invalid IPv6 address");
    s.host = a.to_string();
  } else {
    auto colon = text.rfind(':');
    if (colon != std::string_view::npos && text.find(':') != colon)
      return bad("has an IPv6 address without brackets");
    if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      has_port = true;
    }
    if (host.empty()) return bad("has no host");
    boost::system::error_code ec;
    auto a4 = asio::ip::make_address_v4(std::string(host), ec);
    if (!ec) {
      s.host = a4.to_string();
    } else {
      if (host.back() == '.') host.remove_suffix(1);
      if (!valid_dns_name(host)) return bad("host is not an IP address or a host name");
      s.host = lower(host);
    }
  }
  if (has_port) {
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return bad("port must be 1-65535");
    unsigned long n = std::stoul(std::string(port));
    if (n < 1 || n > 65535) return bad("port must be 1-65535");
    s.port = static_cast<std::uint16_t>(n);
  }
  return s;
}

// --- operations ---

awaitable<result<std::string>> present_txt(std::string server, std::string zone, tsig_key key, std::string fqdn,
                                           std::string value, std::uint32_t ttl, client_options opts) {
  co_return co_await run_update(update_kind::add, std::move(server), std::move(zone), std::move(key), std::move(fqdn),
                                std::move(value), ttl, opts);
}

awaitable<result<std::string>> remove_txt(std::string server, std::string zone, tsig_key key, std::string fqdn,
                                          std::string value, client_options opts) {
  co_return co_await run_update(update_kind::remove, std::move(server), std::move(zone), std::move(key), std::move(fqdn),
                                std::move(value), 0, opts);
}

awaitable<result<std::string>> find_zone(std::string server_text, std::string fqdn_text, client_options o) {
  auto server = parse_server(server_text);
  if (!server) co_return std::move(server).error();
  auto name = domain_name::parse(fqdn_text, "fqdn");
  if (!name) co_return std::move(name).error();
  auto p = co_await resolve_peer(*server, o, steady::now() + o.timeout);
  if (!p) co_return std::move(p).error();
  for (domain_name n = *name; !n.is_root(); n = n.parent()) {
    auto m = co_await query(*p, n, rr_type::soa, o, o.timeout);
    if (!m) co_return std::move(m).error();
    const auto rc = static_cast<rcode>(m->header.rcode);
    if (rc == rcode::servfail)
      co_return dns_error_hinted(dns_errc::server_failure,
                                 "DNS server " + p->where + " failed to answer the SOA query for " + n.text() + " (SERVFAIL)");
    if (rc == rcode::noerror && (m->header.aa || o.recursion_desired) && soa_of(m->answers, n)) co_return lower(n.text());
    if (rc == rcode::noerror || rc == rcode::nxdomain) {
      if (auto z = zone_from_authority(*m, n, o.recursion_desired)) co_return lower(z->text());
      if (is_referral(*m))
        co_return dns_error(dns_errc::zone_not_found,
                            "DNS server " + p->where + " delegates " + n.text() +
                                " to other name servers (a referral): the zone of " + name->text() +
                                " is served elsewhere; point the provider at that zone's primary server and set its zone");
    }
    // REFUSED / NOTAUTH / a non-authoritative answer: not served here; try the parent.
  }
  co_return dns_error_hinted(dns_errc::zone_not_found, "DNS server " + p->where + " serves no zone containing " + name->text() +
                                                           " (asked SOA for each name from it up to its top-level domain)");
}

awaitable<result<std::vector<nameserver>>> authoritative_servers(std::string server_text, std::string zone_text,
                                                                 client_options o) {
  auto server = parse_server(server_text);
  if (!server) co_return std::move(server).error();
  auto zone = domain_name::parse(zone_text, "zone");
  if (!zone) co_return std::move(zone).error();
  auto p = co_await resolve_peer(*server, o, steady::now() + o.timeout);
  if (!p) co_return std::move(p).error();
  auto m = co_await query(*p, *zone, rr_type::ns, o, o.timeout);
  if (!m) co_return std::move(m).error();
  const std::string subject = "zone " + zone->text();
  if (m->header.rcode == static_cast<std::uint8_t>(rcode::nxdomain))
    co_return dns_error(dns_errc::name_error, "DNS server " + p->where + " says zone " + zone->text() +
                                                  " does not exist (NXDOMAIN): check the provider's zone name");
  if (m->header.rcode != 0) co_return query_refusal(*p, "NS query for " + zone->text(), subject, m->header.rcode);
  if (!m->header.aa && !o.recursion_desired)
    co_return dns_error_hinted(dns_errc::not_authoritative,
                               p->where + " is not authoritative for zone " + zone->text() + " (answer without the AA flag)");
  std::vector<domain_name> names;
  for (const auto& rr : m->answers)
    if (rr.type == rr_type::ns && rr.owner == *zone)
      if (const auto* n = std::get_if<name_data>(&rr.data))
        if (std::none_of(names.begin(), names.end(), [&](const domain_name& x) { return x == n->name; }))
          names.push_back(n->name);
  if (names.empty())
    co_return dns_error_hinted(dns_errc::zone_not_found, "DNS server " + p->where + " has no NS records for " + zone->text() +
                                                             ": it is not the apex of a zone there");
  if (names.size() > o.max_nameservers) names.resize(o.max_nameservers);

  std::vector<nameserver> out;
  for (const auto& ns_name : names) {
    nameserver ns;
    ns.name = ns_name.text();
    auto add_from = [&](const std::vector<resource_record>& rrs) {
      for (const auto& rr : rrs)
        if ((rr.type == rr_type::a || rr.type == rr_type::aaaa) && rr.owner == ns_name)
          if (auto a = address_text(rr)) {
            auto text = endpoint_text(asio::ip::make_address(*a), o.nameserver_port);
            if (std::find(ns.addresses.begin(), ns.addresses.end(), text) == ns.addresses.end()) ns.addresses.push_back(text);
          }
    };
    add_from(m->additionals);  // glue
    if (ns.addresses.empty()) {
      std::string why;
      for (auto type : {rr_type::a, rr_type::aaaa}) {
        auto a = co_await query(*p, ns_name, type, o, o.timeout);
        if (!a) {
          why = a.error().message;
          continue;
        }
        if (a->header.rcode != 0) {
          why = rcode_name(a->header.rcode);
          continue;
        }
        add_from(a->answers);
      }
      if (ns.addresses.empty())
        ns.error = "DNS server " + p->where + " gives no address for name server " + ns.name +
                   (why.empty() ? std::string(" (no A or AAAA record)") : " (" + why + ")");
    }
    out.push_back(std::move(ns));
  }
  co_return out;
}

std::optional<std::string> resolv_conf_nameserver(std::string_view text) {
  while (!text.empty()) {
    auto eol = text.find('\n');
    auto line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
    auto skip = [&](std::string_view s) {
      while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
      return s;
    };
    line = skip(line);
    constexpr std::string_view key = "nameserver";
    if (line.substr(0, key.size()) != key || line.size() == key.size() || !is_space(line[key.size()])) continue;
    line = skip(line.substr(key.size()));
    std::size_t end = 0;
    while (end < line.size() && !is_space(line[end]) && line[end] != '#' && line[end] != ';') ++end;
    auto addr = line.substr(0, end);
    if (auto pct = addr.find('%'); pct != std::string_view::npos) addr = addr.substr(0, pct);
    boost::system::error_code ec;
    auto ip = asio::ip::make_address(std::string(addr), ec);
    if (ec) continue;
    return ip.is_v6() ? "[" + ip.to_string() + "]:53" : ip.to_string() + ":53";
  }
  return std::nullopt;
}

std::vector<std::string> propagation_targets(const std::string& server, const std::vector<nameserver>& nameservers) {
  std::vector<std::string> out{server};
  if (auto s = parse_server(server)) out.front() = s->text();
  for (const auto& ns : nameservers)
    for (const auto& a : ns.addresses)
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

awaitable<result<txt_answer>> txt_lookup(std::string server_text, std::string fqdn_text, client_options o) {
  auto server = parse_server(server_text);
  if (!server) co_return std::move(server).error();
  auto name = domain_name::parse(fqdn_text, "fqdn");
  if (!name) co_return std::move(name).error();
  auto p = co_await resolve_peer(*server, o, steady::now() + o.timeout);
  if (!p) co_return std::move(p).error();
  auto m = co_await query(*p, *name, rr_type::txt, o, o.timeout);
  if (!m) co_return std::move(m).error();
  txt_answer out;
  out.server = p->where;
  out.authoritative = m->header.aa;
  const auto rc = static_cast<rcode>(m->header.rcode);
  if (rc == rcode::nxdomain) co_return out;
  if (rc != rcode::noerror) co_return query_refusal(*p, "TXT query for " + name->text(), name->text(), m->header.rcode);
  out.name_exists = true;
  domain_name current = *name;
  for (std::size_t hop = 0; hop <= max_cname_hops; ++hop) {
    const domain_name* next = nullptr;
    for (const auto& rr : m->answers) {
      if (!(rr.owner == current)) continue;
      if (rr.type == rr_type::txt) {
        if (const auto* t = std::get_if<txt_data>(&rr.data)) out.values.push_back(t->joined());
      } else if (rr.type == rr_type::cname) {
        if (const auto* c = std::get_if<name_data>(&rr.data)) next = &c->name;
      }
    }
    if (!out.values.empty() || !next) break;
    current = *next;
  }
  co_return out;
}

awaitable<result<std::string>> follow_cname(std::string server_text, std::string fqdn_text, client_options o) {
  auto server = parse_server(server_text);
  if (!server) co_return std::move(server).error();
  auto name = domain_name::parse(fqdn_text, "fqdn");
  if (!name) co_return std::move(name).error();
  auto p = co_await resolve_peer(*server, o, steady::now() + o.timeout);
  if (!p) co_return std::move(p).error();
  domain_name current = *name;
  std::size_t hops = 0;
  while (true) {
    auto m = co_await query(*p, current, rr_type::cname, o, o.timeout);
    if (!m) co_return std::move(m).error();
    const auto rc = static_cast<rcode>(m->header.rcode);
    if (rc == rcode::nxdomain) break;
    if (rc != rcode::noerror) co_return query_refusal(*p, "CNAME query for " + current.text(), current.text(), m->header.rcode);
    // A resolver answers the whole chain at once, an authoritative server one hop: follow what
    // the answer holds, then ask again for the last name.
    bool moved = false;
    for (bool again = true; again;) {
      again = false;
      for (const auto& rr : m->answers)
        if (rr.type == rr_type::cname && rr.owner == current)
          if (const auto* c = std::get_if<name_data>(&rr.data)) {
            if (++hops > max_cname_hops || c->name == *name)
              co_return dns_error(dns_errc::malformed_answer, "the CNAME chain at " + name->text() + " is longer than " +
                                                                  std::to_string(max_cname_hops) + " names or loops (asked " +
                                                                  p->where + ")");
            current = c->name;
            moved = again = true;
            break;
          }
    }
    if (!moved) break;
  }
  std::string out = current.text();
  for (auto& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  co_return out;
}

}  // namespace certfleet::acme::dns
