#pragma once
// A real server on 127.0.0.1 port 0 on its own event-loop thread, a real SQLite file in a temp
// dir, tokens of every role, and helpers that put jobs into known states through the store.
#include "certfleet/api/server.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/checks/checks.hpp"
#include "certfleet/checks/discovery.hpp"
#include "certfleet/distribution/phase_metrics.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/store.hpp"
#include "http_client.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <concepts>
#include <future>
#include <map>
#include <thread>

// Lets tests compare a JSON value with a std::string directly.
namespace boost::json {
template <class S>
  requires std::same_as<S, std::string>
bool operator==(const value& a, const S& b) {
  return a.is_string() && a.get_string() == b;
}
}  // namespace boost::json

namespace api_test {

using namespace certfleet;
namespace asio = boost::asio;
using testbed::run_sync;

// The test build's `noop`: logs `lines` lines (each padded to `line_bytes`) after `wait_ms`,
// `gap_ms` apart, then succeeds (or dies when `fail`).
inline void register_chatty_noop(queue::handler_registry& h) {
  h.add("noop", [](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
    auto r = json::object_reader::parse(ctx.payload(), "payload");
    auto get = [&](const char* k) -> std::int64_t {
      if (!r) return 0;
      auto v = r->optional_int(k);
      return v && *v ? **v : 0;
    };
    auto lines = get("lines"), bytes = get("line_bytes"), wait = get("wait_ms"), gap = get("gap_ms");
    bool fail = r && r->optional_bool("fail") && r->optional_bool("fail")->value_or(false);
    if (wait > 0) co_await ctx.sleep(std::chrono::milliseconds(wait));
    for (std::int64_t i = 1; i <= lines; ++i) {
      std::string msg = fmt::format("line {}", i);
      if (bytes > static_cast<std::int64_t>(msg.size())) msg.append(static_cast<std::size_t>(bytes) - msg.size(), 'x');
      co_await ctx.log("info", std::move(msg));
      if (gap > 0) co_await ctx.sleep(std::chrono::milliseconds(gap));
    }
    if (fail) co_return queue::outcome::permanent_failure("failing on purpose");
    co_return queue::outcome::ok();
  });
}

// The key-encryption key of the in-process test servers (catalog routes seal secrets).
inline const kek& test_kek() {
  static const kek k = *kek::generate();
  return k;
}

inline api::server_options test_options() {
  api::server_options o;
  o.key = &test_kek();
  o.listen = "127.0.0.1:0";
  o.idle_timeout = std::chrono::seconds(10);
  o.read_timeout = std::chrono::seconds(2);
  o.log_poll_interval = std::chrono::milliseconds(100);
  o.auth_cache_ttl = std::chrono::milliseconds(0);
  o.settings_cache_ttl = std::chrono::milliseconds(0);
  o.shutdown_grace = std::chrono::seconds(2);
  return o;
}

class api_fixture : public ::testing::Test {
 public:  // table-driven tests call the helpers from lambdas
  void SetUp() override {
    auto s = store::open_sqlite({dir.file("api.db"), 2, 5000, false});
    ASSERT_TRUE(s) << s.error().message;
    st = std::move(*s);
    project_id = run_sync(st->projects().ensure("default", clock.now_ms()))->first.id;
    other_id = run_sync(st->projects().ensure("other", clock.now_ms()))->first.id;
    register_chatty_noop(handlers);
    // The real check handlers: routes that enqueue them (domains/{id}/check) are refused for a
    // type without one. No worker runs here, so they are only registered, never run.
    checks::register_check_handlers(handlers, std::make_shared<checks::check_options>());
    checks::register_discovery_handler(handlers, std::make_shared<checks::discovery_options>());
    q = std::make_unique<queue::queue_service>(*st, handlers, clock);
    q_test = std::make_unique<queue::queue_service>(*st, handlers, clock);
    auto issue = [&](const std::string& name, const std::string& pid, store::role r, bool system) {
      auto t = run_sync(api::issue_token(st->auth(), pid, r, system, name, "test", clock));
      ASSERT_TRUE(t) << t.error().message;
      tok[name] = (*t)->text;
      token_ids[name] = (*t)->record.id;
    };
    issue("viewer", project_id, store::role::viewer, false);
    issue("operator", project_id, store::role::operator_, false);
    issue("admin", project_id, store::role::admin, false);
    issue("owner", project_id, store::role::owner, false);
    issue("foreign", other_id, store::role::owner, false);
    issue("system", other_id, store::role::owner, true);
  }

  void TearDown() override { stop(); }

  void start(api::server_options o = test_options(), bool with_worker = false) {
    srv = std::make_unique<api::server>(ioc.get_executor(), *st, *q, clock, o);
    auto bound = srv->start();
    ASSERT_TRUE(bound) << bound.error().message;
    port = srv->port();
    if (with_worker) {
      queue::worker_options wo;
      wo.worker_id = "api-test-worker";
      wo.poll_ms = 20;
      wo.heartbeat_ms = 200;
      wo.grace_ms = 1000;
      wo.main_concurrency = 16;
      worker = std::make_unique<queue::worker>(ioc.get_executor(), *st, handlers, clock, wo);
      q->on_enqueued = [w = worker.get()](std::string_view lane) { w->wake(lane); };
      q->on_cancel_requested = [w = worker.get()](const std::string& id) { w->request_cancel(id); };
      worker->set_log_publisher(srv->log_publisher());
      srv->attach_worker(worker.get());
      srv->attach_delivery_phases(&phases);
      worker->start();
    }
    work.emplace(ioc.get_executor());
    thread = std::thread([this] { ioc.run(); });
  }

  void stop() {
    if (!thread.joinable()) return;
    std::promise<void> done;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await srv->stop();
          if (worker) co_await worker->stop();
          done.set_value();
        },
        asio::detached);
    done.get_future().wait_for(std::chrono::seconds(30));
    work.reset();
    ioc.stop();
    thread.join();
    st->close();
  }

  // Runs f on the server's loop and returns its value (reads server state without a race).
  template <class F>
  auto on_loop(F f) -> decltype(f()) {
    std::promise<decltype(f())> p;
    asio::post(ioc, [&] { p.set_value(f()); });
    return p.get_future().get();
  }

  testbed::http_client client() { return testbed::http_client("127.0.0.1", port); }
  std::string jobs_path(const std::string& project = "default") {
    return fmt::format("/api/v1/projects/{}/jobs", project);
  }
  std::string job_path(const std::string& id, const std::string& project = "default") {
    return fmt::format("/api/v1/projects/{}/jobs/{}", project, id);
  }

  // Jobs in known states, made through the store (as a worker in another process would).
  std::string enqueue(const std::string& payload = "{}", time_ms run_at = 0, const std::string& pid = "") {
    queue::enqueue_request r;
    r.project_id = pid.empty() ? project_id : pid;
    r.type = "noop";
    r.payload = payload;
    r.run_at = run_at;
    auto out = run_sync(q_test->enqueue(r, queue::caller::user));
    EXPECT_TRUE(out) << out.error().message;
    return out ? out->job.id : std::string();
  }
  // Pending job claimed by a fake worker: active, with its lease.
  store::job_record make_active(const std::string& pid = "") {
    auto id = enqueue("{}", 1, pid);  // run_at in 1970: first in the claim order
    auto claimed = run_sync(st->jobs().claim("main", "test-w", clock.now_ms(), 600'000, 1));
    EXPECT_TRUE(claimed && claimed->size() == 1 && (*claimed)[0].id == id);
    return claimed && !claimed->empty() ? (*claimed)[0] : store::job_record{};
  }
  std::string finish(const store::job_record& j, store::finish_kind kind) {
    store::finish_request f;
    f.lease = {j.id, j.fence};
    f.worker_id = "test-w";
    f.kind = kind;
    f.error = kind == store::finish_kind::completed ? "" : "broken on purpose";
    f.retry_at = clock.now_ms() + 3'600'000;
    auto r = run_sync(st->jobs().finish({f}, clock.now_ms()));
    EXPECT_TRUE(r && (*r)[0]) << (r ? "" : r.error().message);
    return j.id;
  }
  std::string make_dead(const std::string& pid = "") { return finish(make_active(pid), store::finish_kind::dead); }
  std::int64_t append_line(const std::string& job_id, const std::string& msg) {
    auto r = run_sync(st->jobs().append_log(job_id, std::nullopt, "info", msg, "", clock.now_ms()));
    EXPECT_TRUE(r) << r.error().message;
    return r ? *r : 0;
  }
  // A browser session of token `who`, opened by POST /api/v1/session.
  struct browser_session {
    std::string cookie;  // "certfleet_session=…", as a Cookie header sends it
    std::string value;
    std::string csrf;
    testbed::http_response answer;
  };
  browser_session sign_in(testbed::http_client& c, const std::string& who) {
    browser_session s;
    s.answer = c.post("/api/v1/session", boost::json::serialize(boost::json::object{{"token", tok[who]}}));
    EXPECT_EQ(s.answer.status, 201) << s.answer.body;
    auto set = s.answer.header("set-cookie");
    s.cookie = set.substr(0, set.find(';'));
    s.value = s.cookie.substr(s.cookie.find('=') + 1);
    if (s.answer.status == 201) s.csrf = std::string(s.answer.json().at("csrf_token").as_string());
    return s;
  }
  // The headers a page of that session sends: its cookie among others, and the CSRF token.
  static std::map<std::string, std::string> with(const browser_session& s, bool csrf) {
    std::map<std::string, std::string> h{{"Cookie", "theme=dark; " + s.cookie + "; other=1"}};
    if (csrf) h["X-CSRF-Token"] = s.csrf;
    return h;
  }

  std::int64_t count_jobs() {
    auto p = run_sync(st->jobs().list({project_id, std::nullopt, "", 1, 1}));
    return p ? p->total : -1;
  }

  testbed::temp_dir dir{"certfleet-api"};
  const clock_source& clock = system_clock();
  std::unique_ptr<store::store> st;
  queue::handler_registry handlers;
  std::unique_ptr<queue::queue_service> q;       // the server's
  std::unique_ptr<queue::queue_service> q_test;  // the test thread's (no worker callbacks)
  asio::io_context ioc{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::unique_ptr<api::server> srv;
  std::unique_ptr<queue::worker> worker;
  distribution::delivery_phase_metrics phases;  // /metrics of a server with a worker
  std::thread thread;
  unsigned short port = 0;
  std::string project_id, other_id;
  std::map<std::string, std::string> tok, token_ids;
};

inline std::string error_code_of(const testbed::http_response& r) {
  auto v = r.json();
  if (!v.is_object() || !v.as_object().contains("error")) return {};
  return std::string(v.at("error").at("code").as_string());
}
inline std::string error_field_of(const testbed::http_response& r) {
  auto v = r.json();
  if (!v.is_object() || !v.as_object().contains("error")) return {};
  const auto& e = v.at("error").as_object();
  return e.contains("field") ? std::string(e.at("field").as_string()) : std::string();
}

}  // namespace api_test
