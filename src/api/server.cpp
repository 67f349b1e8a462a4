// The HTTP/1.1 + WebSocket server: accept loop, sessions (keep-alive, limits, deadlines),
// authentication and authorization, the route handlers and the live log stream sessions.
#include "certfleet/api/server.hpp"

#include "certfleet/api/requests.hpp"
#include "certfleet/api/router.hpp"
#include "certfleet/api/tokens.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/delivery/egress.hpp"
#include "certfleet/distribution/service.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/auth.hpp"
#include "certfleet/store/store.hpp"
#include "certfleet/store/catalog.hpp"
#include "log_hub.hpp"
#include "queued_socket.hpp"
#include "metrics.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <charconv>
#include <unordered_map>

namespace certfleet::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using asio::use_awaitable;
constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

namespace {

constexpr std::string_view server_name = "certfleet";

struct reply {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;
};

unsigned status_for(errc e) {
  switch (e) {
    case errc::invalid_argument:
    case errc::unknown_job_type: return 400;
    case errc::payload_too_large: return 413;
    case errc::not_found: return 404;
    case errc::conflict:
    case errc::lease_lost:
    case errc::cancelled: return 409;
    case errc::rate_limited: return 429;
    case errc::unauthorized: return 401;
    case errc::forbidden: return 403;
    case errc::store_busy:
    case errc::too_many_connections:
    case errc::shutting_down: return 503;
    case errc::timeout: return 504;
    case errc::store_disk_full: return 507;
    case errc::ssh_unreachable: return 502;
    default: return 500;
  }
}

std::string error_body(std::string_view code, std::string_view message, std::string_view field) {
  boost::json::object e{{"code", code}, {"message", message}};
  if (!field.empty()) e["field"] = field;
  return boost::json::serialize(boost::json::object{{"error", std::move(e)}});
}

reply error_reply(const error& e) {
  reply r;
  r.status = status_for(e.value());
  // Store failures are internal: their text (SQL) is for the log, not the client.
  if (r.status == 500) {
    spdlog::error("request failed: {}", e.message);
    r.body = error_body(errc_name(e.value()), "internal error; see the server log", "");
  } else {
    r.body = error_body(errc_name(e.value()), e.message, e.field);
  }
  if (e.is(errc::rate_limited) || e.is(errc::too_many_connections))
    r.headers.emplace_back("Retry-After", std::to_string(std::max<std::int64_t>(1, e.retry_after_s)));
  return r;
}

reply error_reply(errc code, std::string message, std::string field = {}) {
  return error_reply(make_error(code, std::move(message), std::move(field)));
}

reply json_reply(unsigned status, const boost::json::value& v) {
  reply r;
  r.status = status;
  r.body = boost::json::serialize(v);
  return r;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

store::role role_for(access a) {
  switch (a) {
    case access::operator_: return store::role::operator_;
    case access::admin: return store::role::admin;
    case access::owner: return store::role::owner;
    default: return store::role::viewer;
  }
}

result<std::pair<std::string, unsigned short>> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return make_error(errc::invalid_argument, fmt::format("listen must be ADDR:PORT (got \"{}\")", listen), "listen");
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned port = 0;
  auto ps = std::string_view(listen).substr(colon + 1);
  auto [p, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), port);
  if (ec != std::errc() || p != ps.data() + ps.size() || port > 65535)
    return make_error(errc::invalid_argument, fmt::format("listen must be ADDR:PORT (got \"{}\")", listen), "listen");
  return std::pair{host, static_cast<unsigned short>(port)};
}

struct caller {
  std::optional<store::token_record> token;
  std::optional<store::project> project;
};

using request_t = http::request<http::string_body>;

// Whom the per-client connection limit counts: an IPv4 address (also IPv4-mapped IPv6), or an
// IPv6 client's /64 (one host is usually given a whole /64, so counting single addresses would
// not limit it).
std::string client_key(const tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  auto a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  if (a.is_v4()) return a.to_string();
  auto b = a.to_v6().to_bytes();
  std::fill(b.begin() + 8, b.end(), 0);
  return asio::ip::address_v6(b).to_string() + "/64";
}

// The Transfer-Encoding fields of a request, as one list.
std::string transfer_encodings(const request_t& h) {
  std::string all;
  for (auto it = h.find(http::field::transfer_encoding); it != h.end() && it->name() == http::field::transfer_encoding;
       ++it) {
    if (!all.empty()) all += ", ";
    all.append(it->value().data(), it->value().size());
  }
  return all;
}

}  // namespace

struct server::impl : std::enable_shared_from_this<impl> {
  impl(asio::any_io_executor e, store::store& s, queue::queue_service& q, const clock_source& c, server_options o)
      : ex(e), st(s), queue(q), clock(c), opt(std::move(o)), acceptor(e), hub(e, s, opt.log_poll_interval, opt.log_coalesce),
        catalog(s, q, c, opt.key, opt.cpu) {}

  asio::any_io_executor ex;
  store::store& st;
  queue::queue_service& queue;
  const clock_source& clock;
  server_options opt;
  tcp::acceptor acceptor;
  unsigned short bound_port = 0;
  bool stopping = false;
  const queue::worker* worker = nullptr;
  std::function<std::pair<bool, std::int64_t>()> scheduler_probe;
  log_hub hub;
  api_metrics metrics;
  distribution::service catalog;

  struct conn {
    beast::tcp_stream* http = nullptr;  // while an HTTP session owns the socket
    bool idle = false;                  // waiting for the next request
    std::function<void()> close_ws;     // while a WebSocket session owns it
  };
  std::uint64_t next_conn = 0;
  std::unordered_map<std::uint64_t, conn> conns;
  std::unordered_map<std::string, int> conns_per_client;  // by client_key()
  // Refusal audit entries of the current minute, and refusals not written since the last one.
  steady::time_point refusal_window{};
  int refusals_in_window = 0;
  std::int64_t refusals_unaudited = 0;

  struct cached_token {
    store::token_record rec;
    steady::time_point expires;
  };
  std::unordered_map<std::string, cached_token> token_cache;
  // Projects are never renamed; a deleted one leaves this process's cache at once and other
  // processes' caches within auth_cache_ttl (like a revoked token).
  struct cached_project {
    store::project p;
    steady::time_point expires;
  };
  std::unordered_map<std::string, cached_project> project_cache;
  struct cached_list {
    std::string body;
    steady::time_point expires;
    bool refreshing = false;  // one store read per entry at a time; the others get this body
  };
  std::unordered_map<std::string, cached_list> list_cache;  // "project_id|status|type|page|size"
  std::unordered_map<std::string, std::uint64_t> list_generation;  // bumped by each write
  void forget_lists(const std::string& project_id) {
    ++list_generation[project_id];
    for (auto it = list_cache.begin(); it != list_cache.end();)
      it = it->first.rfind(project_id + "|", 0) == 0 ? list_cache.erase(it) : std::next(it);
  }
  settings_map system_settings;
  steady::time_point settings_loaded{};
  bool settings_valid = false;

  // ---- helpers -------------------------------------------------------------------------

  template <class T>
  asio::awaitable<result<T>> timed(std::string_view op, store::task<T> t) {
    auto t0 = steady::now();
    auto r = co_await std::move(t);
    metrics.store_call(op, std::chrono::duration<double>(steady::now() - t0).count());
    co_return r;
  }

  asio::awaitable<std::int64_t> setting_int(std::string_view name) {
    if (!settings_valid || steady::now() - settings_loaded > opt.settings_cache_ttl) {
      auto r = co_await timed("system_settings", st.auth().system_settings());
      if (r) {
        settings_map m;
        for (const auto& [k, v] : *r) (void)m.set(k, v);  // a stale invalid value falls back to its default
        system_settings = std::move(m);
        settings_loaded = steady::now();
        settings_valid = true;
      } else {
        spdlog::warn("reading the system settings failed: {}", r.error().message);
      }
    }
    co_return system_settings.integer(name);
  }

  asio::awaitable<result<store::project>> project_by_name(const std::string& name) {
    if (auto it = project_cache.find(name); it != project_cache.end() && it->second.expires > steady::now())
      co_return it->second.p;
    auto p = co_await timed("project_find", st.projects().find_by_name(name));
    if (p) {
      if (project_cache.size() >= 10'000) project_cache.clear();
      project_cache[name] = cached_project{*p, steady::now() + opt.auth_cache_ttl};
    }
    co_return p;
  }

  // string_view parameters: GCC 12 rejects string literals for by-value std::string coroutine
  // parameters; the callers' arguments live until their co_await ends.
  asio::awaitable<void> audit(const caller& c, std::string_view action, std::string_view object, std::string_view outcome,
                              std::string_view detail = {}) {
    store::audit_entry e;
    e.project_id = c.project ? c.project->id : (c.token ? c.token->project_id : std::string());
    e.actor = c.token ? "token:" + c.token->id : "anonymous";
    e.action = std::string(action);
    e.object = std::string(object);
    e.outcome = std::string(outcome);
    e.detail = std::string(detail);
    e.at = clock.now_ms();
    auto r = co_await timed("audit_append", st.auth().append_audit(std::move(e)));
    if (!r) spdlog::error("audit entry not stored: {}", r.error().message);
  }

  // A refused (401/403) state-changing call. Entries are bounded per minute: anyone can send 401s
  // as fast as the network allows, and each would be a row kept for audit_retention_s. Beyond the
  // bound the refusals are counted, and the next entry written says how many were not.
  asio::awaitable<void> audit_refusal(caller c, const route_match& m, std::string_view path, const error& e) {
    const auto now = steady::now();
    if (now - refusal_window >= std::chrono::minutes(1)) {
      refusal_window = now;
      refusals_in_window = 0;
    }
    if (refusals_in_window >= opt.refusal_audit_per_minute) {
      ++refusals_unaudited;
      metrics.refusal_unaudited();
      co_return;
    }
    ++refusals_in_window;
    // An anonymous caller of a project route: the project's own log, when the project exists.
    if (!c.project && !c.token && !m.project.empty()) {
      auto p = co_await project_by_name(m.project);
      if (p) c.project = std::move(*p);
    }
    boost::json::object d;
    d["message"] = e.message;
    if (refusals_unaudited > 0) d["unaudited_refusals_before"] = refusals_unaudited;
    refusals_unaudited = 0;
    auto detail = boost::json::serialize(d);
    const auto action = fmt::format("{} {}", m.route->method, m.route->pattern);
    co_await audit(c, action, path.substr(0, 300), errc_name(e.value()), detail);
  }

  // Who is calling and may they use this route on this project? The error is the reply.
  // `known`, when given, gets who the caller is as far as it was learnt (for auditing a refusal).
  asio::awaitable<result<caller>> authorize(const request_t& req, const route_match& m, caller* known = nullptr) {
    caller c;
    const auto& r = *m.route;
    // Which of two would count is ambiguous (a proxy in front may have checked the other).
    if (req.count(http::field::authorization) > 1)
      co_return make_error(errc::invalid_argument, "the request has more than one Authorization header; send one",
                           "authorization");
    if (r.need == access::none) co_return c;
    auto h = req[http::field::authorization];
    std::string_view hv(h.data(), h.size());
    if (hv.empty())
      co_return make_error(errc::unauthorized, "this route needs Authorization: Bearer <token>", "authorization");
    if (hv.size() < 7 || !iequals(hv.substr(0, 7), "Bearer "))
      co_return make_error(errc::unauthorized, "the Authorization header must be \"Bearer <token>\"", "authorization");
    auto text = hv.substr(7);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    if (!looks_like_token(text)) co_return make_error(errc::unauthorized, "invalid or revoked token", "authorization");
    auto hash = hash_token(text);
    auto now = steady::now();
    if (auto it = token_cache.find(hash); it != token_cache.end() && it->second.expires > now) {
      c.token = it->second.rec;
    } else {
      auto t = co_await timed("token_find", st.auth().find_token(hash));
      if (!t) {
        if (t.error().is(errc::not_found))
          co_return make_error(errc::unauthorized, "invalid or revoked token", "authorization");
        co_return std::move(t).error();
      }
      if (token_cache.size() >= 10'000) token_cache.clear();
      token_cache[hash] = cached_token{*t, now + opt.auth_cache_ttl};
      c.token = std::move(*t);
    }
    if (r.pattern.find("{p}") != std::string_view::npos) {
      // Another project's objects answer 404, exactly like objects that do not exist.
      auto not_found = make_error(errc::not_found, fmt::format("project {} not found", m.project.substr(0, 100)), "project");
      auto p = co_await project_by_name(m.project);
      if (!p) co_return p.error().is(errc::not_found) ? not_found : std::move(p).error();
      if (!c.token->system && c.token->project_id != p->id) co_return not_found;
      c.project = std::move(*p);
    }
    if (known) *known = c;
    if (r.need == access::system_admin) {
      if (!c.token->system) co_return make_error(errc::forbidden, "this route needs a system-admin token", "authorization");
    } else if (r.need != access::any_token && c.token->token_role < role_for(r.need)) {
      co_return make_error(errc::forbidden,
                           fmt::format("this route needs the {} role; the token has {}", store::to_string(role_for(r.need)),
                                       store::to_string(c.token->token_role)),
                           "authorization");
    }
    co_return c;
  }

  // ---- handlers ------------------------------------------------------------------------

  asio::awaitable<reply> handle(const request_t& req, std::string& route_name) {
    auto parts = split_target(std::string_view(req.target().data(), req.target().size()));
    if (!parts) co_return error_reply(errc::invalid_argument, "the request target must be a path", "path");
    auto m = match_route(std::string_view(req.method_string().data(), req.method_string().size()), parts->path);
    if (!m) {
      if (m.error().is(errc::conflict)) {
        auto r = error_reply(make_error(errc::conflict, m.error().message, "method"));
        r.status = 405;
        r.body = error_body("method_not_allowed", m.error().message, "method");
        r.headers.emplace_back("Allow", m.error().field);
        co_return r;
      }
      co_return error_reply(m.error());
    }
    route_name = std::string(m->route->pattern);
    if (m->route->api_only && !opt.serve_api)
      co_return error_reply(errc::not_found, "this process serves only /healthz, /readyz and /metrics (mode)", "path");
    auto q = parse_query(parts->query);
    if (!q) co_return error_reply(q.error());
    if (m->route->websocket)
      co_return error_reply(make_error(errc::invalid_argument, "this route is a WebSocket: send an Upgrade request", "upgrade"));
    caller known;
    auto c = co_await authorize(req, *m, &known);
    if (!c) {
      if (m->route->changes_state && (c.error().is(errc::unauthorized) || c.error().is(errc::forbidden)))
        co_await audit_refusal(known, *m, parts->path, c.error());
      co_return error_reply(c.error());
    }
    if (!m->id.empty() && !is_object_id(m->id))
      co_return error_reply(errc::invalid_argument, "id must be a 24-character hex object id", "id");

    if (!route_object_kind(m->route->id).empty()) co_return co_await catalog_route(*c, *m, *q, req.body());
    switch (m->route->id) {
      case route_id::healthz: co_return json_reply(200, boost::json::object{{"status", "ok"}});
      case route_id::readyz: {
        auto r = co_await timed("ping", st.ping());
        if (!r && r.error().is(errc::store_disk_full)) {
          auto full = error_reply(r.error());
          full.status = 503;  // not ready: load balancers know 503, not 507
          co_return full;
        }
        if (!r) co_return error_reply(make_error(errc::store_busy, "store unreachable: " + r.error().message));
        co_return json_reply(200, boost::json::object{{"status", "ready"}});
      }
      case route_id::metrics: co_return co_await metrics_reply();
      case route_id::projects: co_return co_await list_projects(*c);
      case route_id::project_create: co_return co_await create_project(*c, req.body());
      case route_id::project_delete: co_return co_await delete_project(*c);
      case route_id::jobs_list: co_return co_await list_jobs(*c, *q);
      case route_id::jobs_enqueue: co_return co_await enqueue(*c, req.body());
      case route_id::job_get: {
        auto j = co_await timed("job_get", st.jobs().get(c->project->id, m->id));
        if (!j) co_return error_reply(j.error());
        co_return json_reply(200, queue::to_json(*j));
      }
      case route_id::job_retry: co_return co_await retry(*c, m->id);
      case route_id::job_cancel: co_return co_await cancel(*c, m->id);
      case route_id::job_logs: co_return co_await read_logs(*c, m->id, *q);
      case route_id::audit: co_return co_await list_audit(*c, *q);
      case route_id::settings_get: co_return co_await settings_reply();
      case route_id::settings_put: co_return co_await put_settings(*c, req.body());
      case route_id::job_log_stream: break;
      default: break;
    }
    co_return error_reply(errc::not_found, "no such route", "path");
  }

  // Catalog and distribution routes: the distribution service does the work; this maps its
  // answer to HTTP and audits every state change.
  asio::awaitable<reply> catalog_route(const caller& c, const route_match& m, const query_params& q,
                                       const std::string& body) {
    using R = route_id;
    const std::string kind(route_object_kind(m.route->id));
    const std::string& pid = c.project->id;
    const std::string actor = c.token ? "token:" + c.token->id : "anonymous";
    unsigned ok_status = 200;
    std::string verb;
    auto t0 = steady::now();
    result<boost::json::value> r = make_error(errc::not_found, "no such route", "path");
    switch (m.route->id) {
      case R::certificates_list: case R::credentials_list: case R::targets_list: case R::channels_list:
      case R::rules_list: case R::distributions_list: {
        auto pq = parse_page_query(q);
        if (!pq) co_return error_reply(pq.error());
        if (kind == "distribution") r = co_await catalog.list_distributions(pid, pq->page, pq->page_size);
        else r = co_await catalog.list(kind, pid, pq->page, pq->page_size);
        break;
      }
      case R::certificate_create: case R::credential_create: case R::target_create: case R::channel_create:
      case R::rule_create: case R::distribution_create:
        verb = "create";
        ok_status = 201;
        if (kind == "distribution") r = co_await catalog.create_distribution(pid, body);
        else {
          distribution::requester who{actor, c.token && c.token->system};  // named: GCC 12 and co_await temporaries
          r = co_await catalog.create(kind, pid, body, who);
        }
        break;
      case R::certificate_get: case R::credential_get: case R::target_get: case R::channel_get: case R::rule_get:
      case R::distribution_get:
        if (kind == "distribution") r = co_await catalog.get_distribution(pid, m.id);
        else r = co_await catalog.get(kind, pid, m.id);
        break;
      case R::certificate_delete: case R::credential_delete: case R::target_delete: case R::channel_delete:
      case R::rule_delete: case R::distribution_delete:
        verb = "delete";
        if (kind == "distribution") r = co_await catalog.remove_distribution(pid, m.id);
        else r = co_await catalog.remove(kind, pid, m.id);
        break;
      case R::target_scan_host_key: r = co_await catalog.scan_host_key(pid, m.id); break;
      case R::distribution_execute:
        verb = "execute";
        ok_status = 202;
        r = co_await catalog.execute(pid, m.id, actor);
        break;
      case R::distribution_retry_failed:
        verb = "retry_failed";
        ok_status = 202;
        r = co_await catalog.retry_failed(pid, m.id, actor);
        break;
      case R::distribution_rollback:
        verb = "rollback";
        ok_status = 202;
        r = co_await catalog.rollback(pid, m.id, body, actor);
        break;
      case R::distribution_cancel:
        verb = "cancel";
        ok_status = 202;
        r = co_await catalog.cancel(pid, m.id);
        break;
      case R::distribution_results: {
        auto rq = parse_results_query(q);
        if (!rq) co_return error_reply(rq.error());
        r = co_await catalog.results(pid, m.id, rq->run, rq->page, rq->page_size);
        break;
      }
      default: break;
    }
    metrics.store_call(kind + (verb.empty() ? std::string("_read") : "_" + verb),
                       std::chrono::duration<double>(steady::now() - t0).count());
    if (!verb.empty()) {
      std::string object = kind + "/";
      if (!m.id.empty()) object += m.id;
      else if (r && r->is_object())
        if (auto* id = r->as_object().if_contains("id"); id && id->is_string()) object += std::string(id->as_string());
      if (verb == "execute" || verb == "retry_failed" || verb == "rollback" || verb == "cancel") forget_lists(pid);
      co_await audit(c, kind + "." + verb, object, r ? "ok" : errc_name(r.error().value()));
    }
    if (!r) co_return error_reply(r.error());
    co_return json_reply(ok_status, *r);
  }

  asio::awaitable<reply> metrics_reply() {
    api_metrics::snapshot s;
    s.now = clock.now_ms();
    auto jobs = co_await timed("job_counts", st.observe().job_counts());
    auto lanes = co_await timed("lane_statistics", st.jobs().lane_statistics(s.now));
    std::vector<double> bounds{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
    auto durations = co_await timed("job_durations", st.observe().job_durations(bounds));
    s.store_ok = jobs && lanes && durations;
    s.store_writes = st.write_state();
    if (jobs) s.jobs = std::move(*jobs);
    if (lanes) s.lanes = std::move(*lanes);
    if (durations) s.durations = std::move(*durations);
    if (worker) {
      s.worker = &worker->stats();
      s.worker_running = worker->running();
    }
    if (scheduler_probe) {
      auto [leader, epoch] = scheduler_probe();
      s.scheduler_leader = leader ? 1 : 0;
      s.scheduler_epoch = epoch;
    }
    {
      (void)co_await setting_int("jobs_page_size_default");  // refreshes the cached system settings
      auto thresholds = parse_expiry_thresholds(system_settings.text("certificate_expiry_thresholds_days"));
      const time_ms window = (thresholds ? thresholds->front() : 30) * 86'400'000LL;
      const time_ms now = s.now;
      auto counts = std::make_shared<std::array<std::int64_t, 4>>();
      store::read_fn fn = [counts, now, window](store::catalog_read& rd) -> result<void> {
        auto certs = rd.certificates_expiring(now + window, 1'000'000);
        if (!certs) return std::move(certs).error();
        for (const auto& c : *certs) ++(*counts)[c.not_after <= now ? 1 : 0];
        auto running = rd.distributions_in_status("running", 100'000);
        if (!running) return std::move(running).error();
        (*counts)[2] = static_cast<std::int64_t>(running->size());
        for (const auto& d : *running)
          if (d.run_started_at < now - 3'600'000) ++(*counts)[3];
        return {};
      };
      auto r = co_await timed("catalog_gauges", st.catalog().read(std::move(fn)));
      if (r) {
        s.certificates_expiring_soon = (*counts)[0];
        s.certificates_expired = (*counts)[1];
        s.distributions_running = (*counts)[2];
        s.distributions_running_long = (*counts)[3];
      } else {
        s.store_ok = false;
      }
    }
    s.ws_subscribers = hub.subscribers();
    s.ws_watched_jobs = hub.watched_jobs();
    s.connections = conns.size();
    reply r;
    r.body = metrics.render(s);
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    co_return r;
  }

  asio::awaitable<reply> list_projects(const caller& c) {
    auto ps = co_await timed("project_list", st.projects().list());
    if (!ps) co_return error_reply(ps.error());
    boost::json::array items;
    for (const auto& p : *ps)
      if (c.token->system || p.id == c.token->project_id)
        items.push_back(boost::json::object{{"id", p.id}, {"name", p.name}, {"created_at", format_iso8601(p.created_at)}});
    co_return json_reply(200, boost::json::object{{"items", std::move(items)}});
  }

  // Project changes are audited in the project of the system-admin token that made them (like
  // settings): the project itself may not exist before or after.
  asio::awaitable<void> audit_project(const caller& c, std::string_view action, std::string_view name,
                                      std::string_view outcome, std::string_view id) {
    caller in_own;
    in_own.token = c.token;
    boost::json::object d;
    d["name"] = name;
    if (!id.empty()) d["id"] = id;
    auto detail = boost::json::serialize(d);
    std::string object = "project/" + std::string(name);
    co_await audit(in_own, action, object, outcome, detail);
  }

  asio::awaitable<reply> create_project(const caller& c, const std::string& body) {
    auto name = parse_project_body(body);
    if (!name) {
      co_await audit_project(c, "project.create", "", errc_name(name.error().value()), "");
      co_return error_reply(name.error());
    }
    auto p = co_await timed("project_create", st.projects().create(*name, clock.now_ms()));
    // Named first: GCC 12 mishandles temporaries built inside a co_await expression.
    const std::string id = p ? p->id : std::string();
    co_await audit_project(c, "project.create", *name, p ? "ok" : errc_name(p.error().value()), id);
    if (!p) co_return error_reply(p.error());
    co_return json_reply(201, boost::json::object{{"id", p->id}, {"name", p->name}, {"created_at", format_iso8601(p->created_at)}});
  }

  asio::awaitable<reply> delete_project(const caller& c) {
    const std::string name = c.project->name;
    auto p = co_await timed("project_delete", st.projects().remove(name, clock.now_ms()));
    co_await audit_project(c, "project.delete", name, p ? "ok" : errc_name(p.error().value()), c.project->id);
    if (!p) co_return error_reply(p.error());
    project_cache.erase(name);
    token_cache.clear();  // its tokens were revoked
    forget_lists(p->id);
    co_return json_reply(200, boost::json::object{{"id", p->id}, {"name", p->name}, {"deleted", true}});
  }

  asio::awaitable<reply> list_jobs(const caller& c, const query_params& q) {
    auto lq = parse_job_list_query(q);
    if (!lq) co_return error_reply(lq.error());
    if (lq->page_size == 0) lq->page_size = static_cast<int>(co_await setting_int("jobs_page_size_default"));
    std::string key;
    if (opt.list_cache_ttl.count() > 0) {
      key = fmt::format("{}|{}|{}|{}|{}", c.project->id, lq->status ? store::to_string(*lq->status) : "all", lq->type,
                        lq->page, lq->page_size);
      if (auto it = list_cache.find(key); it != list_cache.end()) {
        // Fresh, or expired while another request is already re-reading it: no store call, so
        // a busy list never sends every waiting connection to the store at once.
        if (it->second.expires > steady::now() || it->second.refreshing) {
          reply r;
          r.body = it->second.body;
          co_return r;
        }
        it->second.refreshing = true;
      }
    }
    store::job_filter f{c.project->id, lq->status, lq->type, lq->page, lq->page_size};
    const auto generation = list_generation[c.project->id];
    auto page = co_await timed("job_list", st.jobs().list(f));
    if (!page) {
      if (auto it = list_cache.find(key); !key.empty() && it != list_cache.end()) it->second.refreshing = false;
      co_return error_reply(page.error());
    }
    boost::json::array items;
    items.reserve(page->items.size());
    for (const auto& j : page->items) items.push_back(queue::to_json(j));
    auto r = json_reply(200, boost::json::object{{"items", std::move(items)},
                                                 {"page", lq->page},
                                                 {"page_size", lq->page_size},
                                                 {"total", page->total}});
    // A write through this API during the read may not be in it: cache only a read no write
    // overtook.
    if (!key.empty() && list_generation[c.project->id] == generation) {
      if (list_cache.size() >= 1000) list_cache.clear();
      list_cache[key] = cached_list{r.body, steady::now() + opt.list_cache_ttl, false};
    }
    co_return r;
  }

  asio::awaitable<reply> enqueue(const caller& c, const std::string& body) {
    auto b = parse_enqueue_body(body);
    if (!b) {
      co_await audit(c, "job.enqueue", "job", errc_name(b.error().value()), error_body("", b.error().message, b.error().field));
      co_return error_reply(b.error());
    }
    queue::enqueue_request req;
    req.project_id = c.project->id;
    req.type = b->type;
    req.payload = b->payload;
    req.idempotency_key = b->idempotency_key;
    req.run_at = b->run_at;
    req.triggered_by = "token:" + c.token->id;
    auto t0 = steady::now();
    auto out = co_await queue.enqueue(std::move(req), queue::caller::user);
    forget_lists(c.project->id);
    metrics.store_call("job_enqueue", std::chrono::duration<double>(steady::now() - t0).count());
    if (!out) {
      // Built outside the co_await: GCC 12 miscompiles braced lists of literals inside one.
      boost::json::object d;
      d["type"] = b->type;
      d["message"] = out.error().message;
      auto detail = boost::json::serialize(d);
      co_await audit(c, "job.enqueue", "job", errc_name(out.error().value()), detail);
      co_return error_reply(out.error());
    }
    boost::json::object d;
    d["type"] = b->type;
    d["created"] = out->created;
    auto detail = boost::json::serialize(d);
    co_await audit(c, "job.enqueue", "job/" + out->job.id, "ok", detail);
    auto o = queue::to_json(out->job);
    o["created"] = out->created;
    co_return json_reply(out->created ? 201 : 200, o);
  }

  asio::awaitable<reply> retry(const caller& c, const std::string& id) {
    queue.set_retry_per_minute(static_cast<int>(co_await setting_int("job_retry_per_minute")));
    auto t0 = steady::now();
    auto r = co_await queue.retry(c.project->id, id);
    forget_lists(c.project->id);
    metrics.store_call("job_retry", std::chrono::duration<double>(steady::now() - t0).count());
    co_await audit(c, "job.retry", "job/" + id, r ? "ok" : errc_name(r.error().value()));
    if (!r) co_return error_reply(r.error());
    co_return json_reply(200, queue::to_json(*r));
  }

  asio::awaitable<reply> cancel(const caller& c, const std::string& id) {
    auto t0 = steady::now();
    auto r = co_await queue.cancel(c.project->id, id);
    forget_lists(c.project->id);
    metrics.store_call("job_cancel", std::chrono::duration<double>(steady::now() - t0).count());
    co_await audit(c, "job.cancel", "job/" + id, r ? "ok" : errc_name(r.error().value()));
    if (!r) co_return error_reply(r.error());
    auto o = queue::to_json(r->job);
    o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
    co_return json_reply(r->immediate ? 200 : 202, o);
  }

  asio::awaitable<reply> read_logs(const caller& c, const std::string& id, const query_params& q) {
    auto lq = parse_log_query(q, false);
    if (!lq) co_return error_reply(lq.error());
    // The project check: a foreign job is not found.
    auto job = co_await timed("job_get", st.jobs().get(c.project->id, id));
    if (!job) co_return error_reply(job.error());
    auto page = co_await timed("log_read", st.jobs().read_logs(id, lq->after, lq->limit));
    if (!page) co_return error_reply(page.error());
    boost::json::array lines;
    lines.reserve(page->lines.size());
    for (const auto& l : page->lines) lines.push_back(queue::to_json(l));
    // done: the job is over (read before the lines, so none can follow) and this page ends the log.
    bool done = store::is_terminal(job->status) && static_cast<int>(page->lines.size()) < lq->limit;
    co_return json_reply(200, boost::json::object{{"lines", std::move(lines)},
                                                  {"next_cursor", page->next_cursor},
                                                  {"done", done}});
  }

  asio::awaitable<reply> list_audit(const caller& c, const query_params& q) {
    auto pq = parse_audit_query(q);
    if (!pq) co_return error_reply(pq.error());
    auto page = co_await timed("audit_list", st.auth().list_audit(c.project->id, pq->page, pq->page_size));
    if (!page) co_return error_reply(page.error());
    boost::json::array items;
    for (const auto& e : page->items) {
      boost::json::object o{{"seq", e.seq},       {"actor", e.actor},     {"action", e.action},
                            {"object", e.object}, {"outcome", e.outcome}, {"at", format_iso8601(e.at)}};
      boost::json::error_code ec;
      auto d = e.detail.empty() ? boost::json::value(nullptr) : boost::json::parse(e.detail, ec);
      o["detail"] = ec ? boost::json::value(e.detail) : d;
      items.push_back(std::move(o));
    }
    co_return json_reply(200, boost::json::object{{"items", std::move(items)},
                                                  {"page", pq->page},
                                                  {"page_size", pq->page_size},
                                                  {"total", page->total}});
  }

  asio::awaitable<reply> settings_reply() {
    auto stored = co_await timed("system_settings", st.auth().system_settings());
    if (!stored) co_return error_reply(stored.error());
    boost::json::object o;
    for (const auto& d : all_settings()) {
      if (d.scope != setting_scope::system) continue;
      std::string value(d.default_value);
      if (auto it = stored->find(std::string(d.name)); it != stored->end() && validate_setting(d, it->second))
        value = it->second;
      if (d.type == setting_type::integer) {
        std::int64_t v = 0;
        std::from_chars(value.data(), value.data() + value.size(), v);
        o[d.name] = v;
      } else {
        o[d.name] = value;
      }
    }
    co_return json_reply(200, o);
  }

  asio::awaitable<reply> put_settings(const caller& c, const std::string& body) {
    auto values = parse_settings_body(body);
    // The egress allow-list has a grammar of its own (CIDRs, names): refuse a bad one now, not at
    // the first notification.
    for (const char* list : {"egress_allow_list", "ssh_allow_list"})
      if (values)
        if (auto it = values->find(list); it != values->end())
          if (auto e = delivery::parse_egress_allow_list(it->second, list); !e) values = std::move(e).error();
    if (!values) {
      boost::json::object d;
      d["message"] = values.error().message;
      auto detail = boost::json::serialize(d);
      co_await audit(c, "settings.update", "settings", errc_name(values.error().value()), detail);
      co_return error_reply(values.error());
    }
    boost::json::object detail;
    for (const auto& [k, v] : *values) detail[k] = v;
    store::audit_entry e;
    e.project_id = c.token->project_id;
    e.actor = "token:" + c.token->id;
    e.action = "settings.update";
    e.object = "settings";
    e.outcome = "ok";
    e.detail = boost::json::serialize(detail);
    e.at = clock.now_ms();
    auto r = co_await timed("settings_put", st.auth().put_system_settings(std::move(*values), std::move(e)));
    if (!r) {
      co_await audit(c, "settings.update", "settings", errc_name(r.error().value()));
      co_return error_reply(r.error());
    }
    settings_valid = false;  // this process sees the change at once
    co_return co_await settings_reply();
  }

  // ---- HTTP sessions -------------------------------------------------------------------

  http::response<http::string_body> make_response(const reply& r, unsigned version, bool keep_alive) {
    http::response<http::string_body> res{static_cast<http::status>(r.status), version};
    res.set(http::field::server, server_name);
    res.set(http::field::content_type, r.content_type);
    res.set(http::field::cache_control, "no-store");
    for (const auto& [k, v] : r.headers) res.set(k, v);
    res.body() = r.body;
    res.keep_alive(keep_alive);
    res.prepare_payload();
    return res;
  }

  asio::awaitable<void> send_error_and_close(beast::tcp_stream& stream, unsigned status, errc code, std::string msg,
                                             std::string field) {
    reply r = error_reply(code, std::move(msg), std::move(field));
    r.status = status;
    auto res = make_response(r, 11, false);
    stream.expires_after(opt.write_timeout);
    auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
    metrics.request("unmatched", status, 0);
    if (!ec) co_await linger(stream);
  }

  // Closing with unread request bytes makes the kernel send a reset, which can destroy the error
  // response before the client reads it (a client still sending a too-large body). So: stop
  // sending, then read and discard for a short while (bounded in time and bytes), then close.
  asio::awaitable<void> linger(beast::tcp_stream& stream, std::chrono::milliseconds for_at_most = std::chrono::seconds(1)) {
    boost::system::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream.expires_after(for_at_most);
    std::size_t drained = 0;
    std::array<char, 16384> sink;
    while (drained < (8u << 20)) {
      auto [rec, n] = co_await stream.async_read_some(asio::buffer(sink), tuple_awaitable);
      drained += n;
      if (rec) break;
    }
  }

  // Over a connection limit: 503 too_many_connections, then close. Such a connection is never
  // counted (a flood of refused ones must not take the slots of others) and lives briefly: a
  // short write deadline and a short linger, so the response is not reset away.
  asio::awaitable<void> refuse_connection(beast::tcp_stream& stream, bool per_client) {
    metrics.connection_refused(per_client);
    auto e = make_error(errc::too_many_connections,
                        per_client ? fmt::format("this client address already has {} connections open, the most allowed "
                                                 "(http_max_connections_per_client); close some and retry",
                                                 opt.max_connections_per_client)
                                   : fmt::format("the server has {} connections open, its limit; try again later",
                                                 opt.max_connections));
    e.retry_after_s = per_client ? 5 : 1;
    auto res = make_response(error_reply(e), 11, false);
    stream.expires_after(std::chrono::seconds(2));
    auto [ec, n] = co_await http::async_write(stream, res, tuple_awaitable);
    metrics.request("unmatched", 503, 0);
    if (!ec) co_await linger(stream, std::chrono::milliseconds(250));
  }

  asio::awaitable<void> session(tcp::socket sock) {
    auto self = shared_from_this();
    auto client = client_key(sock);
    beast::tcp_stream stream(std::move(sock));
    {
      auto it = conns_per_client.find(client);
      const bool client_full = it != conns_per_client.end() && it->second >= opt.max_connections_per_client;
      if (client_full || static_cast<int>(conns.size()) >= opt.max_connections) {
        co_await refuse_connection(stream, client_full);
        co_return;
      }
    }
    const auto id = ++next_conn;
    ++conns_per_client[client];
    struct unregister {
      impl* s;
      std::uint64_t id;
      std::string client;
      ~unregister() {
        s->conns.erase(id);
        if (auto it = s->conns_per_client.find(client); it != s->conns_per_client.end() && --it->second <= 0)
          s->conns_per_client.erase(it);
      }
    } guard{this, id, client};
    conns[id].http = &stream;
    beast::flat_buffer buf;
    bool first_request = true;
    for (;;) {
      if (stopping) break;
      if (buf.size() == 0) {
        // Wait for the first byte of the next request: a new connection gets the short
        // first-byte deadline (connecting and sending nothing must not hold a slot for long),
        // a kept-alive one the idle deadline.
        conns[id].idle = true;
        stream.expires_after(first_request ? opt.first_byte_timeout : opt.idle_timeout);
        auto [ec, n] = co_await stream.async_read_some(buf.prepare(8192), tuple_awaitable);
        buf.commit(n);
        if (auto it = conns.find(id); it != conns.end()) it->second.idle = false;
        if (ec || stopping) break;
      }
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(opt.header_limit));
      parser.body_limit(opt.body_limit);
      stream.expires_after(opt.read_timeout);
      auto [hec, hn] = co_await http::async_read_header(stream, buf, parser, tuple_awaitable);
      first_request = false;
      if (!hec && parser.get().count(http::field::transfer_encoding) > 0)
        if (auto problem = transfer_encoding_problem(parser.get().version(), transfer_encodings(parser.get()))) {
          // Closing (after a linger that discards the rest) is the point: what follows this
          // header cannot be told apart from a next request.
          co_await send_error_and_close(stream, 400, errc::invalid_argument, std::move(*problem), "transfer-encoding");
          break;
        }
      if (!hec && parser.get()[http::field::expect] == "100-continue" && !parser.is_done()) {
        http::response<http::empty_body> cont{http::status::continue_, 11};
        auto [cec, cn] = co_await http::async_write(stream, cont, tuple_awaitable);
        if (cec) break;
      }
      boost::system::error_code ec = hec;
      if (!ec) std::tie(ec, std::ignore) = co_await http::async_read(stream, buf, parser, tuple_awaitable);
      if (ec) {
        if (ec == http::error::body_limit) {
          co_await send_error_and_close(stream, 413, errc::payload_too_large,
                                        fmt::format("the body is larger than {} bytes", opt.body_limit), "body");
        } else if (ec == http::error::header_limit) {
          co_await send_error_and_close(stream, 431, errc::invalid_argument,
                                        fmt::format("the request header is larger than {} bytes", opt.header_limit),
                                        "header");
        } else if (ec == beast::error::timeout) {
          // tcp_stream closed the socket at the deadline: nothing can be answered.
          metrics.request("unmatched", 408, 0);
        } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
                   ec != asio::error::operation_aborted && ec != asio::error::connection_reset) {
          co_await send_error_and_close(stream, 400, errc::invalid_argument,
                                        fmt::format("malformed HTTP request: {}", ec.message()), "request");
        }
        break;
      }
      auto t0 = steady::now();
      if (websocket::is_upgrade(parser.get())) {
        auto req = parser.release();
        auto parts = split_target(std::string_view(req.target().data(), req.target().size()));
        auto m = parts ? match_route("GET", parts->path) : result<route_match>(make_error(errc::not_found, ""));
        if (m && m->route->websocket) {
          conns[id].http = nullptr;
          // The query is copied: it points into the request, which moves into the stream session.
          std::string query(parts->query);
          co_await log_stream(std::move(stream), std::move(req), *m, std::move(query), id);
          co_return;
        }
        parser.get() = std::move(req);  // not a WebSocket route: answer it as plain HTTP
      }
      const auto& req = parser.get();
      reply r;
      std::string route_name = "unmatched";
      try {
        r = co_await handle(req, route_name);
      } catch (const std::exception& e) {
        // A bug: this request fails and its connection ends; the process and others carry on.
        spdlog::error("{} {}: unexpected exception: {}", std::string_view(req.method_string().data(), req.method_string().size()),
                      std::string_view(req.target().data(), std::min<std::size_t>(req.target().size(), 200)), e.what());
        r = error_reply(errc::store_failure, "internal error");
        r.close = true;
      }
      bool keep = req.keep_alive() && !stopping && !r.close;
      auto res = make_response(r, req.version(), keep);
      stream.expires_after(opt.write_timeout);
      auto [wec, wn] = co_await http::async_write(stream, res, tuple_awaitable);
      metrics.request(route_name, r.status, std::chrono::duration<double>(steady::now() - t0).count());
      if (wec || !keep) break;
    }
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.close();
  }

  // ---- live log stream -----------------------------------------------------------------

  struct ws_conn {
    explicit ws_conn(tcp::socket&& s) : ws(std::move(s)) {}
    websocket::stream<queued_socket> ws;
    bool closed = false;   // the read side ended: the connection is gone or closed
    bool closing = false;  // a close was started
    std::int64_t sent = 0; // the cursor: last seq sent
  };

  asio::awaitable<void> reject_upgrade(beast::tcp_stream& stream, const reply& r, unsigned version) {
    auto res = make_response(r, version, false);
    stream.expires_after(opt.write_timeout);
    co_await http::async_write(stream, res, tuple_awaitable);
    metrics.request("/api/v1/projects/{p}/jobs/{id}/logs/stream", r.status, 0);
  }

  // Starts a close handshake; the socket is closed outright when the peer does not finish it in
  // time (a stalled peer whose receive window is full never reads our close frame).
  void start_close(const std::shared_ptr<ws_conn>& c, websocket::close_code code, std::string reason) {
    if (c->closing) return;
    c->closing = true;
    auto self = shared_from_this();
    asio::co_spawn(
        ex,
        [self, c, code, reason = std::move(reason)]() -> asio::awaitable<void> {
          asio::steady_timer deadline(self->ex, std::chrono::seconds(2));
          deadline.async_wait([c](boost::system::error_code ec) {
            if (!ec && !c->closed) {
              boost::system::error_code ignored;
              beast::get_lowest_layer(c->ws).shutdown(tcp::socket::shutdown_both, ignored);
              beast::get_lowest_layer(c->ws).close(ignored);
            }
          });
          co_await c->ws.async_close(websocket::close_reason(code, reason), tuple_awaitable);
          // Done or failed; the deadline still guards the read side finishing.
          if (c->closed) deadline.cancel();
        },
        asio::detached);
  }

  // The session's own sends (backlog, catch-up, merged frames, the end): queued behind whatever
  // the hub sent directly, then paced by the peer — the next one waits until the connection holds
  // at most ws_send_low_water bytes, so a long backlog never piles up in memory.
  static constexpr std::size_t ws_send_low_water = 256 * 1024;
  static constexpr int ws_send_buffer = 1 << 20;
  asio::awaitable<bool> ws_send(const std::shared_ptr<ws_conn>& c, const std::string& text) {
    if (c->closing || c->closed) co_return false;
    c->ws.text(true);
    auto [ec, n] = co_await c->ws.async_write(asio::buffer(text), tuple_awaitable);
    if (ec) co_return false;
    co_return co_await c->ws.next_layer().wait_below(ws_send_low_water);
  }

  // Sends the store's lines after c->sent up to `upto` (0: to the end); returns false on a
  // failure that ends the session; sets `ended` when the job is over and all is sent.
  asio::awaitable<bool> ws_catch_up(const std::shared_ptr<ws_conn>& c, const std::string& job_id, std::int64_t upto,
                                    bool& ended) {
    constexpr int batch = 500;
    for (;;) {
      int limit = batch;
      if (upto > 0) {
        if (c->sent >= upto) co_return true;
        limit = static_cast<int>(std::min<std::int64_t>(batch, upto - c->sent));
      }
      auto w = co_await timed("log_watch", st.observe().watch_logs(job_id, c->sent, limit));
      if (!w) {
        start_close(c, websocket::close_code::internal_error, "log read failed: " + w.error().message.substr(0, 80));
        co_return false;
      }
      if (!w->lines.empty()) {
        if (!co_await ws_send(c, lines_frame_text(w->lines, 0, w->lines.size()))) co_return false;
        c->sent = w->lines.back().seq;
      }
      if (static_cast<int>(w->lines.size()) < limit || w->lines.empty()) {
        if (upto == 0 && store::is_terminal(w->status) && c->sent >= w->last_seq) {
          if (!co_await ws_send(c, end_frame_text(w->status))) co_return false;
          ended = true;
        }
        co_return true;
      }
    }
  }

  asio::awaitable<void> log_stream(beast::tcp_stream stream, request_t req, route_match m, std::string query_view,
                                   std::uint64_t conn_id) {
    auto t0 = steady::now();
    auto q = parse_query(query_view);
    if (!q) co_return co_await reject_upgrade(stream, error_reply(q.error()), req.version());
    if (!opt.serve_api)
      co_return co_await reject_upgrade(stream, error_reply(errc::not_found, "this process does not serve the API", "path"),
                                        req.version());
    auto c = co_await authorize(req, m);
    if (!c) co_return co_await reject_upgrade(stream, error_reply(c.error()), req.version());
    auto lq = parse_log_query(*q, true);
    if (!lq) co_return co_await reject_upgrade(stream, error_reply(lq.error()), req.version());
    if (!is_object_id(m.id))
      co_return co_await reject_upgrade(stream, error_reply(errc::invalid_argument, "id must be a 24-character hex object id", "id"),
                                        req.version());
    auto job = co_await timed("job_get", st.jobs().get(c->project->id, m.id));
    if (!job) co_return co_await reject_upgrade(stream, error_reply(job.error()), req.version());
    if (stopping)
      co_return co_await reject_upgrade(stream, error_reply(errc::shutting_down, "the server is shutting down"), req.version());

    stream.expires_never();  // the WebSocket timeouts take over
    auto socket = stream.release_socket();
    {
      // A burst is one large message per subscriber: the default 16 KiB send buffer (grown only
      // by sustained traffic) would take it in pieces, a wait for writability each.
      boost::system::error_code ignored;
      socket.set_option(asio::socket_base::send_buffer_size(ws_send_buffer), ignored);
    }
    auto conn = std::make_shared<ws_conn>(std::move(socket));
    conn->sent = lq->after;
    websocket::stream_base::timeout to{};
    to.handshake_timeout = std::chrono::seconds(10);
    to.idle_timeout = opt.ws_idle_timeout;
    to.keep_alive_pings = true;
    conn->ws.set_option(to);
    conn->ws.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, server_name); }));
    conn->ws.read_message_max(64 * 1024);
    // One frame per message: Beast would otherwise split a message into 4 KiB frames, a write
    // each, multiplied by every subscriber.
    conn->ws.auto_fragment(false);
    auto [aec] = co_await conn->ws.async_accept(req, tuple_awaitable);
    metrics.request(std::string(m.route->pattern), aec ? 400 : 101,
                    std::chrono::duration<double>(steady::now() - t0).count());
    if (aec) co_return;

    auto self = shared_from_this();
    auto sub = std::make_shared<log_subscriber>(ex, opt.ws_queue_frames, opt.ws_queue_bytes);
    std::weak_ptr<ws_conn> weak = conn;
    sub->on_overflow = [this, self, weak, max = opt.ws_queue_frames] {
      if (auto cc = weak.lock()) {
        metrics.subscriber_dropped();
        cc->ws.next_layer().drop_unsent();  // the close frame goes next, not behind megabytes
        start_close(cc, websocket::close_code::try_again_later,
                    fmt::format("too slow: more than {} frames queued; reconnect with after={}", max, cc->sent));
      }
    };
    if (auto it = conns.find(conn_id); it != conns.end())
      it->second.close_ws = [this, weak] {
        if (auto cc = weak.lock()) start_close(cc, websocket::close_code::going_away, "server shutting down");
      };
    // The read side: answers pings, notices the peer's close; client messages are ignored.
    asio::co_spawn(
        ex,
        [conn, sub]() -> asio::awaitable<void> {
          beast::flat_buffer b;
          for (;;) {
            auto [ec, n] = co_await conn->ws.async_read(b, tuple_awaitable);
            if (ec) break;
            b.consume(b.size());
          }
          conn->closed = true;
          sub->notify();
        },
        asio::detached);

    sub->direct = [weak](const log_frame& f) {
      auto cc = weak.lock();
      if (!cc || cc->closing || cc->closed || f.first_seq != cc->sent + 1) return false;
      auto& out = cc->ws.next_layer();
      // Behind (the kernel has not taken all we wrote): the frame waits in the subscriber's
      // bounded queue, and the session sends what gathered there as one message.
      if (out.queued_bytes() != 0) return false;
      if (!out.send_frame(f.wire)) return false;
      cc->sent = f.last_seq;
      return true;
    };
    const std::string job_id = m.id;
    hub.subscribe(job_id, sub);  // first, so no line falls between the backlog and the live frames
    bool ended = false;
    bool ok = co_await ws_catch_up(conn, job_id, 0, ended);
    while (ok && !ended && !conn->closed && !conn->closing && !sub->overflowed()) {
      if (sub->empty()) {
        sub->live = true;  // caught up: the hub may send straight to the socket
        co_await sub->wait();
        sub->live = false;
        continue;
      }
      auto f = sub->pop();
      if (f.sync) {
        if (f.last_seq > conn->sent) ok = co_await ws_catch_up(conn, job_id, f.last_seq, ended);
        continue;
      }
      if (f.end) {
        ok = co_await ws_send(conn, *f.text);
        ended = true;
        break;
      }
      if (f.last_seq <= conn->sent) continue;  // already sent from the store
      if (f.first_seq != conn->sent + 1) {
        ok = co_await ws_catch_up(conn, job_id, f.last_seq, ended);  // fill the gap from the store
        continue;
      }
      // Behind by several frames: send them as one message.
      std::vector<log_frame> batch;
      std::size_t bytes = f.text->size();
      while (const auto* next = sub->peek()) {
        if (next->end || next->sync || next->first_seq != (batch.empty() ? f.last_seq : batch.back().last_seq) + 1 ||
            bytes + next->text->size() > (1u << 20))
          break;
        bytes += next->text->size();
        batch.push_back(sub->pop());
      }
      if (batch.empty()) {
        ok = co_await ws_send(conn, *f.text);
        if (ok) conn->sent = f.last_seq;
      } else {
        std::vector<const std::string*> texts{f.text.get()};
        for (const auto& b : batch) texts.push_back(b.text.get());
        ok = co_await ws_send(conn, merge_lines_frames(texts));
        if (ok) conn->sent = batch.back().last_seq;
      }
    }
    hub.unsubscribe(job_id, sub.get());
    sub->direct = nullptr;
    if (ended) start_close(conn, websocket::close_code::normal, "job finished");
    // An overflowed subscriber is closed by on_overflow, with the reason.
    else if (!sub->overflowed() && !conn->closing && !conn->closed)
      start_close(conn, websocket::close_code::going_away, "stream ended");
    // Wait for the read side to finish (close handshake or hard close by start_close's deadline).
    asio::steady_timer t(ex);
    for (int i = 0; i < 400 && !conn->closed; ++i) {
      t.expires_after(std::chrono::milliseconds(10));
      co_await t.async_wait(tuple_awaitable);
    }
    if (!conn->closed) {
      boost::system::error_code ignored;
      beast::get_lowest_layer(conn->ws).close(ignored);
    }
  }

  // ---- accept loop ---------------------------------------------------------------------

  asio::awaitable<void> accept_loop() {
    auto self = shared_from_this();
    while (!stopping) {
      auto [ec, sock] = co_await acceptor.async_accept(tuple_awaitable);
      if (ec) {
        if (stopping || ec == asio::error::operation_aborted) break;
        // Out of descriptors and the like: back off instead of spinning.
        spdlog::warn("accept failed: {}", ec.message());
        asio::steady_timer t(ex, std::chrono::milliseconds(50));
        co_await t.async_wait(tuple_awaitable);
        continue;
      }
      sock.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(ex, session(std::move(sock)), [](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          spdlog::error("HTTP session ended by an unexpected exception: {}", x.what());
        } catch (...) {
          spdlog::error("HTTP session ended by an unexpected exception");
        }
      });
    }
  }

  result<std::string> start() {
    auto hp = parse_listen(opt.listen);
    if (!hp) return std::move(hp).error();
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(hp->first == "localhost" ? "127.0.0.1" : hp->first, ec);
    if (ec) return make_error(errc::invalid_argument, fmt::format("listen: bad address {}: {}", hp->first, ec.message()), "listen");
    tcp::endpoint ep(addr, hp->second);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return make_error(errc::invalid_argument, fmt::format("listen {}: {}", opt.listen, ec.message()), "listen");
    bound_port = acceptor.local_endpoint().port();
    asio::co_spawn(ex, accept_loop(), asio::detached);
    auto a = acceptor.local_endpoint().address();
    return a.is_v6() ? fmt::format("[{}]:{}", a.to_string(), bound_port) : fmt::format("{}:{}", a.to_string(), bound_port);
  }

  asio::awaitable<void> stop() {
    auto self = shared_from_this();
    if (stopping) co_return;
    stopping = true;
    boost::system::error_code ec;
    acceptor.close(ec);
    auto deadline = steady::now() + opt.shutdown_grace;
    asio::steady_timer t(ex);
    while (!conns.empty() && steady::now() < deadline) {
      // Idle keep-alive connections and streams go now; requests in flight finish first.
      for (auto& [id, c] : conns) {
        if (c.http && c.idle) c.http->cancel();
        if (c.close_ws) {
          auto f = std::move(c.close_ws);
          c.close_ws = nullptr;
          f();
        }
      }
      t.expires_after(std::chrono::milliseconds(10));
      co_await t.async_wait(tuple_awaitable);
    }
    for (auto& [id, c] : conns)
      if (c.http) c.http->close();
    hub.stop();
  }
};

server::server(asio::any_io_executor ex, store::store& st, queue::queue_service& queue, const clock_source& clock,
               server_options options)
    : impl_(std::make_shared<impl>(ex, st, queue, clock, std::move(options))) {}

server::~server() {
  boost::system::error_code ec;
  impl_->acceptor.close(ec);
}

result<std::string> server::start() { return impl_->start(); }
asio::awaitable<void> server::stop() { return impl_->stop(); }
unsigned short server::port() const { return impl_->bound_port; }
void server::attach_worker(const queue::worker* w) { impl_->worker = w; }
void server::attach_scheduler_probe(std::function<std::pair<bool, std::int64_t>()> probe) {
  impl_->scheduler_probe = std::move(probe);
}

queue::log_publisher server::log_publisher() {
  std::weak_ptr<impl> w = impl_;
  return [w](const std::string& job_id, const store::log_line& line) {
    if (auto p = w.lock()) p->hub.publish(job_id, line);
  };
}

server::stats server::current_stats() const {
  return stats{impl_->conns.size(), impl_->hub.subscribers(), impl_->hub.watched_jobs(), impl_->metrics.subscribers_dropped()};
}

}  // namespace certfleet::api
