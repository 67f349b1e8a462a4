// The HTTP layer under attack, over raw sockets: connections that send nothing, one client
// opening many, request framing the server must refuse (Transfer-Encoding, duplicate
// Authorization), and refused state-changing calls in the audit log.
#include "api_fixture.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>
#include <sys/time.h>

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
TEST_F(api_http_hardening, global_connection_limit_says_too_many_connections) {
  auto o = test_options();
  o.max_connections = 2;
  start(o);
  raw_conn a(port, "127.0.0.3"), b(port, "127.0.0.4");
  for (int i = 0; i < 100 && on_loop([&] { return srv->current_stats().connections; }) < 2; ++i)
    std::this_thread::sleep_for(10ms);
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
                                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
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
                               "Authorization: Bearer {}\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{{\"type\":\"noop\"}}",
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

}  // namespace
