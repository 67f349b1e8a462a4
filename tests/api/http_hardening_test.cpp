// The HTTP layer under attack, over raw sockets: connections that send nothing, one client
// opening many, request framing the server must refuse (Transfer-Encoding, duplicate
// Authorization), and refused state-changing calls in the audit log.
#include "api_fixture.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <sys/socket.h>
#include <sys/time.h>

#include <cctype>
#include <map>

using namespace api_test;
using namespace std::chrono_literals;
using tcp = boost::asio::ip::tcp;

namespace {

class api_http_hardening : public api_fixture {};

// A blocking raw connection from a chosen local address (the loopback net is all of 127/8, so a
// test can be several clients).
struct raw_conn {
  asio::io_context ioc;
  tcp::socket s{ioc};
  raw_conn(unsigned short port, const char* from = "127.0.0.1") {
    s.open(tcp::v4());
    s.bind(tcp::endpoint(asio::ip::make_address(from), 0));
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    timeval tv{10, 0};  // no read in a test blocks for ever
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(std::string_view bytes) { asio::write(s, asio::buffer(bytes)); }
  // Everything until the server closes (or 10 s pass).
  std::string read_all() {
    std::string out;
    std::array<char, 4096> b;
    for (;;) {
      boost::system::error_code ec;
      auto n = s.read_some(asio::buffer(b), ec);
      out.append(b.data(), n);
      if (ec) break;
    }
    return out;
  }
  // Does one request on it get an answer (the connection is served)?
  std::string round_trip(std::string_view request) {
    send(request);
    return read_all();
  }
  // One response, parsed (the connection stays open). `head`: the answer to a HEAD request,
  // which has no body whatever its Content-Length says. A parse error (say, the previous
  // response's stray body bytes) leaves status 0 and `error` set.
  struct parsed {
    unsigned status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string error;
    std::string header(const std::string& name) const {
      auto it = headers.find(name);
      return it == headers.end() ? std::string() : it->second;
    }
  };
  boost::beast::flat_buffer buf;
  parsed read_response(bool head = false) {
    namespace http = boost::beast::http;
    http::response_parser<http::string_body> p;
    p.skip(head);
    boost::system::error_code ec;
    http::read(s, buf, p, ec);
    parsed out;
    if (ec) {
      out.error = ec.message();
      return out;
    }
    out.status = p.get().result_int();
    out.body = p.get().body();
    for (const auto& f : p.get()) {
      std::string name(f.name_string());
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.headers[name] = std::string(f.value());
    }
    return out;
  }
  parsed exchange(std::string_view request, bool head = false) {
    send(request);
    return read_response(head);
  }
  // Has the server closed it (EOF, or a reset, within `within`)?
  bool closed_by_server(std::chrono::milliseconds within = 3000ms) {
    timeval tv{static_cast<long>(within.count() / 1000), static_cast<long>((within.count() % 1000) * 1000)};
    ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::array<char, 256> b;
    boost::system::error_code ec;
    s.read_some(asio::buffer(b), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
};

// How many responses a raw read holds (each has one Server header).
int responses_in(const std::string& raw) {
  int n = 0;
  for (auto p = raw.find("\r\nServer: certfleet"); p != std::string::npos; p = raw.find("\r\nServer: certfleet", p + 1)) ++n;
  return n;
}

std::string body_of(const std::string& raw) {
  auto p = raw.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : raw.substr(p + 4);
}
std::string code_in(const std::string& raw) {
  boost::system::error_code ec;
  auto v = boost::json::parse(body_of(raw), ec);
  if (ec || !v.is_object() || !v.as_object().contains("error")) return {};
  return std::string(v.at("error").at("code").as_string());
}
std::string field_in(const std::string& raw) {
  boost::system::error_code ec;
  auto v = boost::json::parse(body_of(raw), ec);
  if (ec || !v.is_object() || !v.as_object().contains("error")) return {};
  const auto& e = v.at("error").as_object();
  return e.contains("field") ? std::string(e.at("field").as_string()) : std::string();
}

// A connection that never sends a byte is closed by the first-byte deadline, not kept for the
// keep-alive idle timeout.
TEST_F(api_http_hardening, silent_connection_is_closed_at_the_first_byte_deadline) {
  auto o = test_options();
  o.idle_timeout = 30s;
  o.first_byte_timeout = 1s;
  start(o);
  raw_conn c(port);
  auto t0 = std::chrono::steady_clock::now();
  auto got = c.read_all();  // returns when the server closes
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(got, "");
  EXPECT_GE(took, 900ms);
  EXPECT_LT(took, 5s);
  // A connection that sent its request in time is served, then kept for the idle timeout.
  raw_conn k(port);
  k.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(on_loop([&] { return srv->current_stats().connections; }), 1u);
}

// One client address may hold only so many connections (idle ones count); other addresses are
// served meanwhile, and the refusal has its own code and a Retry-After.
TEST_F(api_http_hardening, per_client_connection_limit) {
  auto o = test_options();
  o.max_connections_per_client = 3;
  start(o);
  std::vector<std::unique_ptr<raw_conn>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<raw_conn>(port));
  // The server has seen all three before the fourth arrives.
  for (int i = 0; i < 100 && on_loop([&] { return srv->current_stats().connections; }) < 3; ++i)
    std::this_thread::sleep_for(10ms);
  raw_conn fourth(port);
  auto r = fourth.round_trip("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 503"), std::string::npos) << r;
  EXPECT_EQ(code_in(r), "too_many_connections") << r;
  EXPECT_NE(r.find("Retry-After: "), std::string::npos) << r;
  // Another client address is not affected.
  raw_conn other(port, "127.0.0.2");
  r = other.round_trip("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  // A slot frees when one of the first client's connections ends.
  idle.pop_back();
  std::string again;
  for (int i = 0; i < 50 && again.find("HTTP/1.1 200") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
    again = raw_conn(port).round_trip("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  }
  EXPECT_NE(again.find("HTTP/1.1 200"), std::string::npos) << again;
}

// The global limit answers the same code (it said store_busy, which sent operators to the store).
// Both slots are busy (a request half sent: nothing idle to evict) and there is no health
// reserve, so even /healthz gets the 503.
TEST_F(api_http_hardening, global_connection_limit_says_too_many_connections) {
  auto o = test_options();
  o.max_connections = 2;
  o.health_reserve_connections = 0;
  o.read_timeout = 30s;
  start(o);
  raw_conn a(port, "127.0.0.3"), b(port, "127.0.0.4");
  a.send("GET /healthz HTTP/1.1\r\n");
  b.send("GET /healthz HTTP/1.1\r\n");
  for (int i = 0; i < 100 && on_loop([&] { return srv->current_stats().connections; }) < 2; ++i)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);  // both have read their first bytes: busy
  auto r = raw_conn(port, "127.0.0.5").round_trip("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(r.find("HTTP/1.1 503"), std::string::npos) << r;
  EXPECT_EQ(code_in(r), "too_many_connections") << r;
  EXPECT_NE(r.find("Retry-After: "), std::string::npos) << r;
}

// RFC 9112 §6.1: a Transfer-Encoding the server does not understand (anything but a lone
// "chunked") is 400 and the connection closes; the bytes after the header are never parsed as
// another request. HTTP/1.0 has no chunked encoding.
TEST_F(api_http_hardening, unknown_transfer_encoding_is_refused_and_closes) {
  start();
  const std::string smuggled = "GET /api/v1/projects HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::string te : {"gzip", "chunked, identity", "identity", "gzip, chunked"}) {
    raw_conn c(port);
    auto r = c.round_trip("POST /api/v1/projects/default/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
                          "\r\n\r\n" + smuggled);
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << te << ": " << r;
    EXPECT_EQ(code_in(r), "invalid_argument") << te << ": " << r;
    EXPECT_EQ(field_in(r), "transfer-encoding") << te << ": " << r;
    // Exactly one response: the smuggled request got none (it would be a 401).
    EXPECT_EQ(responses_in(r), 1) << te << ": " << r;
  }
  // Two Transfer-Encoding fields are one list ("gzip, chunked" is not a lone chunked either).
  {
    raw_conn c(port);
    auto r = c.round_trip("POST /api/v1/projects/default/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled);
    EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
    EXPECT_EQ(responses_in(r), 1) << r;
  }
  // Chunked on HTTP/1.0.
  {
    raw_conn c(port);
    auto r = c.round_trip("POST /api/v1/projects/default/jobs HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "0\r\n\r\n" + smuggled);
    EXPECT_NE(r.find(" 400 "), std::string::npos) << r;
    EXPECT_EQ(field_in(r), "transfer-encoding") << r;
    EXPECT_EQ(responses_in(r), 1) << r;
  }
  // A proper chunked body still works.
  {
    raw_conn c(port);
    const std::string body = R"({"type":"noop"})";
    auto r = c.round_trip(fmt::format("POST /api/v1/projects/default/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n"
                                      "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                                      "{:x}\r\n{}\r\n0\r\n\r\n",
                                      tok["admin"], body.size(), body));
    EXPECT_EQ(r.rfind("HTTP/1.1 201", 0), 0u) << r;
  }
  EXPECT_EQ(count_jobs(), 1);
}

// Two Authorization headers: which one counts is ambiguous (a proxy may check the other), so 400.
TEST_F(api_http_hardening, two_authorization_headers_are_refused) {
  start();
  raw_conn c(port);
  auto r = c.round_trip(fmt::format("GET /api/v1/projects/default/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n"
                                    "Authorization: Bearer {}\r\nConnection: close\r\n\r\n",
                                    tok["admin"], tok["foreign"]));
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_EQ(code_in(r), "invalid_argument") << r;
  EXPECT_EQ(field_in(r), "authorization") << r;
  // Also on a state-changing route, where it changes nothing.
  raw_conn p(port);
  r = p.round_trip(fmt::format("POST /api/v1/projects/default/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n"
                               "Authorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
                               "Connection: close\r\n\r\n{{\"type\":\"noop\"}}",
                               tok["admin"], tok["admin"]));
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_EQ(count_jobs(), 0);
  // And on the live stream's upgrade.
  auto job = make_active();
  raw_conn w(port);
  r = w.round_trip(fmt::format("GET {}/logs/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                               "Authorization: Bearer {}\r\nAuthorization: Bearer {}\r\n\r\n",
                               job_path(job.id), tok["viewer"], tok["viewer"]));
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << r;
  EXPECT_EQ(field_in(r), "authorization") << r;
}

// Refused state-changing calls are audited: who (when known), which route, the outcome.
TEST_F(api_http_hardening, refused_state_changes_are_audited) {
  start();
  auto c = client();
  auto job = make_active();
  EXPECT_EQ(c.post(jobs_path(), R"({"type":"noop"})").status, 401);                       // no token
  EXPECT_EQ(c.post(jobs_path(), R"({"type":"noop"})", "cf_nonsense").status, 401);         // bad token
  EXPECT_EQ(c.post(job_path(job.id) + "/cancel", "", tok["viewer"]).status, 403);          // role too low
  EXPECT_EQ(c.put("/api/v1/settings", R"({"job_retry_per_minute":5})", tok["owner"]).status, 403);  // not system
  EXPECT_EQ(c.get(jobs_path(), tok["foreign"]).status, 404);  // not state-changing, not a 401/403: not audited
  EXPECT_EQ(c.get(jobs_path()).status, 401);                  // a read: not audited
  auto a = c.get("/api/v1/projects/default/audit?page_size=50", tok["admin"]);
  ASSERT_EQ(a.status, 200) << a.body;
  auto items = a.json().at("items").as_array();
  // Newest first.
  ASSERT_EQ(items.size(), 4u) << a.body;
  EXPECT_EQ(items[0].at("outcome"), "forbidden");
  EXPECT_EQ(items[0].at("actor"), "token:" + token_ids["owner"]);
  EXPECT_EQ(items[0].at("action"), "PUT /api/v1/settings");
  EXPECT_EQ(items[1].at("outcome"), "forbidden");
  EXPECT_EQ(items[1].at("actor"), "token:" + token_ids["viewer"]);
  EXPECT_EQ(items[1].at("action"), "POST /api/v1/projects/{p}/jobs/{id}/cancel");
  EXPECT_EQ(items[1].at("object"), "/api/v1/projects/default/jobs/" + job.id + "/cancel");
  for (int i : {2, 3}) {
    EXPECT_EQ(items[i].at("outcome"), "unauthorized");
    EXPECT_EQ(items[i].at("actor"), "anonymous");
    EXPECT_EQ(items[i].at("action"), "POST /api/v1/projects/{p}/jobs");
  }
  // Nothing else changed.
  EXPECT_EQ(run_sync(st->jobs().get(project_id, job.id))->status, store::job_status::active);
}

// A flood of refusals writes a bounded number of entries; the rest are counted in the next one.
TEST_F(api_http_hardening, refusal_audit_is_bounded_per_minute) {
  auto o = test_options();
  o.refusal_audit_per_minute = 5;
  start(o);
  auto c = client();
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c.post(jobs_path(), R"({"type":"noop"})").status, 401);
  auto a = c.get("/api/v1/projects/default/audit?page_size=200", tok["admin"]);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json().at("total"), 5) << a.body;
}

// Waits until the server counts `n` connections.
#define WAIT_FOR_CONNECTIONS(n)                                                                            \
  for (int i_ = 0; i_ < 300 && on_loop([&] { return srv->current_stats().connections; }) != (n); ++i_)     \
    std::this_thread::sleep_for(10ms);                                                                     \
  ASSERT_EQ(on_loop([&] { return srv->current_stats().connections; }), (n))

std::string metric_line(const std::string& metrics, const std::string& name) {
  auto p = metrics.find("\n" + name + " ");
  if (p == std::string::npos) return {};
  auto e = metrics.find('\n', p + 1);
  return metrics.substr(p + 1, e - p - 1);
}

// Issue 28: idle keep-alive connections from many addresses fill the global cap. A newcomer
// takes the slot of the oldest idle connection of the address holding the most; the others
// are untouched.
TEST_F(api_http_hardening, at_the_connection_cap_the_heaviest_address_loses_its_oldest_idle_connection) {
  auto o = test_options();
  o.max_connections = 40;
  o.max_connections_per_client = 10;
  o.idle_timeout = 60s;
  start(o);
  // 127.0.0.2 holds 10, .3 .4 .5 hold 8 each, .6 holds 6: 40, every one idle after one request.
  std::map<std::string, std::vector<std::unique_ptr<raw_conn>>> by;
  const std::vector<std::pair<std::string, int>> plan{
      {"127.0.0.2", 10}, {"127.0.0.3", 8}, {"127.0.0.4", 8}, {"127.0.0.5", 8}, {"127.0.0.6", 6}};
  for (const auto& [addr, n] : plan)
    for (int i = 0; i < n; ++i) {
      by[addr].push_back(std::make_unique<raw_conn>(port, addr.c_str()));
      auto r = by[addr].back()->exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
      ASSERT_EQ(r.status, 200u) << addr << " #" << i << ": " << r.error;
    }
  WAIT_FOR_CONNECTIONS(40u);

  // A fresh address is served, on a slot freed for it.
  raw_conn fresh(port, "127.0.0.7");
  auto r = fresh.exchange(fmt::format("GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
                                      tok["viewer"]));
  EXPECT_EQ(r.status, 200u) << r.error << r.body;
  // The slot was 127.0.0.2's oldest idle connection: closed by the server.
  EXPECT_TRUE(by["127.0.0.2"][0]->closed_by_server());
  // Everyone else's connections are still served, 127.0.0.2's newer ones included.
  for (const auto* addr : {"127.0.0.2", "127.0.0.3", "127.0.0.6"}) {
    auto& c = *by[addr].back();
    auto again = c.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(again.status, 200u) << addr << ": " << again.error;
  }
  EXPECT_EQ(by["127.0.0.3"][0]->exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").status, 200u);
  // Still at the cap, never over it; the eviction is counted.
  WAIT_FOR_CONNECTIONS(40u);
  // /healthz from yet another address gets in the same way (127.0.0.2 still holds the most).
  raw_conn probe(port, "127.0.0.8");
  EXPECT_EQ(probe.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").status, 200u);
  EXPECT_TRUE(by["127.0.0.2"][1]->closed_by_server());
  auto m = probe.exchange("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(metric_line(m.body, "certfleet_http_connections_evicted_total"), "certfleet_http_connections_evicted_total 2");
  EXPECT_EQ(metric_line(m.body, "certfleet_http_connections_refused_total{limit=\"total\"}"),
            "certfleet_http_connections_refused_total{limit=\"total\"} 0");
}

// Issue 28: every slot busy (requests half sent, nothing idle to evict): /healthz, /readyz and
// /metrics still answer from the reserve; anything else there gets 503 too_many_connections.
TEST_F(api_http_hardening, health_and_metrics_answer_from_the_reserve_when_every_slot_is_busy) {
  auto o = test_options();
  o.max_connections = 20;
  o.max_connections_per_client = 10;
  o.health_reserve_connections = 2;
  o.read_timeout = 30s;  // the half-sent requests stay busy for the whole test
  start(o);
  std::vector<std::unique_ptr<raw_conn>> busy;
  for (const auto* addr : {"127.0.0.2", "127.0.0.3"})
    for (int i = 0; i < 10; ++i) {
      busy.push_back(std::make_unique<raw_conn>(port, addr));
      busy.back()->send("GET /healthz HTTP/1.1\r\nHost: x\r\n");  // no end of header
    }
  WAIT_FOR_CONNECTIONS(20u);
  std::this_thread::sleep_for(200ms);  // each has read its first bytes: busy, not idle

  for (int i = 0; i < 5; ++i) {  // more than the reserve's 2 slots, one after another: none leaks
    raw_conn probe(port, "127.0.0.4");
    auto r = probe.round_trip("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
    EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;  // one request per reserve slot
  }
  raw_conn ready(port, "127.0.0.5");
  EXPECT_EQ(ready.round_trip("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  raw_conn head(port, "127.0.0.5");
  auto hr = head.exchange("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(hr.status, 200u) << hr.error;
  raw_conn metrics(port, "127.0.0.5");
  auto m = metrics.round_trip("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(m.rfind("HTTP/1.1 200", 0), 0u) << m.substr(0, 300);
  EXPECT_NE(m.find("certfleet_http_health_reserve_requests_total 7"), std::string::npos);
  // The API is not served from the reserve.
  raw_conn api(port, "127.0.0.6");
  auto r = api.round_trip(fmt::format("GET /api/v1/projects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
                                      tok["viewer"]));
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  EXPECT_EQ(code_in(r), "too_many_connections") << r;
  EXPECT_NE(r.find("Retry-After: "), std::string::npos) << r;
  // Nothing of the reserve is held afterwards: 20 busy connections, no more.
  WAIT_FOR_CONNECTIONS(20u);
}

// RFC 9110 §9.3.2: a HEAD response has no body. GET routes and UI paths answer HEAD as GET
// without the body; every other answer to HEAD (405, 404, 401) has none either, so a kept-alive
// connection stays in step.
TEST_F(api_http_hardening, head_is_get_without_a_body_and_keeps_the_connection_in_step) {
  start();
  raw_conn c(port);
  auto h = c.exchange("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(h.status, 200u) << h.error;
  auto g = c.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(g.status, 200u) << g.error;
  EXPECT_FALSE(g.body.empty());
  EXPECT_EQ(h.header("content-length"), g.header("content-length"));
  // An API GET route, with its token.
  const auto auth = fmt::format("Authorization: Bearer {}\r\n", tok["viewer"]);
  h = c.exchange("HEAD /api/v1/projects HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", true);
  EXPECT_EQ(h.status, 200u) << h.error;
  EXPECT_EQ(h.header("content-type"), "application/json");
  EXPECT_NE(h.header("content-length"), "0");
  // A UI path.
  h = c.exchange("HEAD /jobs HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(h.status, 200u) << h.error;
  EXPECT_NE(h.header("content-type").find("text/html"), std::string::npos) << h.header("content-type");
  // A POST-only route: 405 with Allow, no body.
  auto job = make_active();
  h = c.exchange("HEAD " + job_path(job.id) + "/cancel HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", true);
  EXPECT_EQ(h.status, 405u) << h.error;
  EXPECT_EQ(h.header("allow"), "POST");
  // No route, and no token: 404 and 401, no body.
  h = c.exchange("HEAD /api/v1/nope HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(h.status, 404u) << h.error;
  h = c.exchange("HEAD /api/v1/projects HTTP/1.1\r\nHost: x\r\n\r\n", true);
  EXPECT_EQ(h.status, 401u) << h.error;
  // Still in step: each of those left nothing behind on the connection.
  g = c.exchange("GET /api/v1/projects HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n");
  EXPECT_EQ(g.status, 200u) << g.error;
  EXPECT_NE(g.body.find("\"default\""), std::string::npos) << g.body;
  // The raw bytes: headers only.
  raw_conn r(port);
  auto raw = r.round_trip("HEAD /api/v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(raw.rfind("HTTP/1.1 404", 0), 0u) << raw;
  EXPECT_EQ(body_of(raw), "") << raw;
}

// Other methods on the UI's paths: 405 with Allow (the resource is there), not a JSON 404.
TEST_F(api_http_hardening, other_methods_on_ui_paths_are_405_with_allow) {
  start();
  auto c = client();
  for (const auto* method : {"OPTIONS", "PATCH", "POST", "PUT", "DELETE", "PROPFIND"})
    for (const auto* path : {"/jobs", "/jobs/0123456789abcdef01234567", "/", "/login"}) {
      auto r = c.request(method, path);
      EXPECT_EQ(r.status, 405) << method << " " << path << ": " << r.body;
      EXPECT_EQ(r.header("allow"), "GET, HEAD") << method << " " << path;
      EXPECT_EQ(error_code_of(r), "method_not_allowed") << method << " " << path;
      EXPECT_EQ(error_field_of(r), "method") << method << " " << path;
    }
  // A path the UI does not have stays 404; GET of a UI path is unchanged.
  EXPECT_EQ(c.request("OPTIONS", "/no/such/page").status, 404);
  EXPECT_EQ(c.get("/jobs").status, 200);
  EXPECT_EQ(c.request("OPTIONS", "/api/v1/nope").status, 404);
}

// RFC 9112 §3.2: exactly one Host on HTTP/1.1; HTTP/1.0 may go without, never with two.
TEST_F(api_http_hardening, a_request_without_exactly_one_host_is_refused) {
  start();
  for (std::string req : {"GET /healthz HTTP/1.1\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                          "GET /healthz HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
                          "POST /api/v1/session HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"}) {
    raw_conn c(port);
    auto r = c.round_trip(req + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_NE(r.find(" 400 Bad Request\r\n"), std::string::npos) << req << r;
    EXPECT_EQ(code_in(r), "invalid_argument") << r;
    EXPECT_EQ(field_in(r), "host") << r;
    EXPECT_EQ(responses_in(r), 1) << r;  // the connection closed: what followed was not served
  }
  raw_conn old(port);
  auto r = old.round_trip("GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.0 200", 0), 0u) << r;
}

// POST /api/v1/session takes JSON only: a cross-site form post (urlencoded, multipart,
// text/plain) never reaches it.
TEST_F(api_http_hardening, sign_in_accepts_only_a_json_body) {
  start();
  const auto body = boost::json::serialize(boost::json::object{{"token", tok["admin"]}});
  auto post = [&](const std::string& content_type_line, const std::string& b) {
    raw_conn c(port);
    return c.round_trip(fmt::format("POST /api/v1/session HTTP/1.1\r\nHost: x\r\n{}Content-Length: {}\r\n"
                                    "Connection: close\r\n\r\n{}",
                                    content_type_line, b.size(), b));
  };
  for (std::string ct : {"Content-Type: application/x-www-form-urlencoded\r\n", "Content-Type: text/plain\r\n",
                         "Content-Type: multipart/form-data; boundary=x\r\n", "",
                         "Content-Type: application/json; charset=latin1\r\n", "Content-Type: application/jsonx\r\n",
                         "Content-Type: application/json\r\nContent-Type: application/json\r\n"}) {
    auto r = post(ct, ct.find("urlencoded") != std::string::npos ? "token=" + tok["admin"] : body);
    EXPECT_EQ(r.rfind("HTTP/1.1 415", 0), 0u) << ct << r;
    EXPECT_EQ(code_in(r), "unsupported_media_type") << r;
    EXPECT_EQ(field_in(r), "content-type") << r;
    EXPECT_EQ(r.find("Set-Cookie"), std::string::npos) << r;
  }
  for (std::string ct : {"Content-Type: application/json\r\n", "Content-Type: application/json; charset=utf-8\r\n",
                         "Content-Type: Application/JSON;charset=\"UTF-8\"\r\n"}) {
    auto r = post(ct, body);
    EXPECT_EQ(r.rfind("HTTP/1.1 201", 0), 0u) << ct << r;
    EXPECT_NE(r.find("Set-Cookie: certfleet_session="), std::string::npos) << r;
  }
}

// Issue 36: every body is JSON and says so. A body of another type (or none declared) is refused
// with 415 naming content-type, and nothing happens; a JSON body, or no body, goes through.
TEST_F(api_http_hardening, every_route_refuses_a_body_that_is_not_declared_json_and_changes_nothing) {
  start();
  auto send = [&](std::string_view method, const std::string& path, const std::string& content_type_line,
                  const std::string& body) {
    raw_conn c(port);
    return c.round_trip(fmt::format("{} {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n{}Content-Length: {}\r\n"
                                    "Connection: close\r\n\r\n{}",
                                    method, path, tok["admin"], content_type_line, body.size(), body));
  };
  const std::string job = R"({"type":"noop","idempotency_key":"media-type"})";
  for (std::string ct : {"Content-Type: text/plain\r\n", "", "Content-Type: application/x-www-form-urlencoded\r\n",
                         "Content-Type: application/json-patch+json\r\n"}) {
    auto r = send("POST", jobs_path(), ct, job);
    EXPECT_EQ(r.rfind("HTTP/1.1 415", 0), 0u) << ct << r;
    EXPECT_EQ(code_in(r), "unsupported_media_type") << r;
    EXPECT_EQ(field_in(r), "content-type") << r;
    EXPECT_NE(r.find("Accept-Post: application/json"), std::string::npos) << r;
  }
  auto c = client();
  auto list = c.get(jobs_path(), tok["admin"]);
  EXPECT_EQ(boost::json::parse(list.body).at("total").as_int64(), 0) << list.body;  // nothing was enqueued

  auto put = send("PUT", "/api/v1/settings", "Content-Type: text/plain\r\n", R"({"job_retry_per_minute":5})");
  EXPECT_EQ(put.rfind("HTTP/1.1 415", 0), 0u) << put;
  EXPECT_EQ(put.find("Accept-Post"), std::string::npos) << put;

  auto ok = send("POST", jobs_path(), "Content-Type: application/json; charset=utf-8\r\n", job);
  EXPECT_EQ(ok.rfind("HTTP/1.1 201", 0), 0u) << ok;
  auto id = boost::json::parse(ok.substr(ok.find("\r\n\r\n") + 4)).at("id").as_string();
  // No body, no type needed: a retry or a cancel carries nothing.
  auto cancel = send("POST", jobs_path() + "/" + std::string(id) + "/cancel", "", "");
  EXPECT_NE(cancel.rfind("HTTP/1.1 415", 0), 0u) << cancel;
}

// Strict-Transport-Security only over TLS (tls_test.cpp): plain HTTP never sends it.
TEST_F(api_http_hardening, plain_http_sends_no_hsts) {
  start();
  auto c = client();
  for (const auto* path : {"/healthz", "/jobs", "/api/v1/nope"}) {
    auto r = c.get(path);
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.header("strict-transport-security"), "") << path;
  }
}

}  // namespace
