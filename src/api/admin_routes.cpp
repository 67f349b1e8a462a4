// Health, /metrics, the system settings and the audit log.
#include "certfleet/api/openapi.hpp"
#include "certfleet/api/requests.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/queue/liveness.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/workers.hpp"
#include "certfleet/checks/gauges.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"
#include "handlers.hpp"
#include "server_state.hpp"

#include <boost/json.hpp>

#include <array>
#include <charconv>
#include <memory>

namespace certfleet::api {

boost::asio::awaitable<reply> get_healthz(server_state&, const route_call&) {
  co_return json_reply(200, boost::json::object{{"status", "ok"}});
}

boost::asio::awaitable<reply> get_readyz(server_state& s, const route_call&) {
  auto r = co_await s.timed("ping", s.st.ping());
  if (!r && r.error().is(errc::store_disk_full)) {
    auto full = error_reply(r.error());
    full.status = 503;  // not ready: load balancers know 503, not 507
    co_return full;
  }
  if (!r) co_return error_reply(make_error(errc::store_busy, "store unreachable: " + r.error().message));
  boost::json::object o{{"status", "ready"}};
  // Ready to serve, but an operator's probe should learn that nothing runs the jobs (issue 28):
  // a dead worker's jobs, or new ones, wait until a worker comes back.
  if (s.liveness && s.liveness->stats().checks > 0) {
    const auto& l = s.liveness->stats();
    o["workers_alive"] = l.workers_alive;
    if (l.workers_alive == 0)
      o["warning"] = "no live worker in the worker registry: jobs wait until a worker process runs (certfleet workers)";
  }
  co_return json_reply(200, o);
}

boost::asio::awaitable<reply> list_workers(server_state& s, const route_call&) {
  const auto now = s.clock.now_ms();
  auto all = co_await s.timed("worker_list", s.st.workers().list_workers(now));
  if (!all) co_return error_reply(all.error());
  const time_ms dead_after = s.liveness ? s.liveness->options().dead_after_ms : queue::liveness_options{}.dead_after_ms;
  boost::json::array items;
  std::int64_t alive = 0;
  for (const auto& w : *all) {
    const auto v = queue::judge_worker(w, queue::this_host(), dead_after, queue::process_start_of);
    const char* state = queue::liveness_state_name(v.state);
    if (v.state == queue::liveness_state::alive) ++alive;
    boost::json::object o{{"id", w.id},
                          {"host", w.host},
                          {"pid", w.pid},
                          {"version", w.version},
                          {"lanes", w.lanes},
                          {"state", state},
                          {"running_jobs", w.running},
                          {"started_at", format_iso8601(w.started_at)},
                          {"last_heartbeat_at", format_iso8601(w.last_seen)},
                          {"heartbeat_age_ms", w.age_ms}};
    if (w.dead_at > 0) {
      o["dead_at"] = format_iso8601(w.dead_at);
      o["dead_reason"] = w.dead_reason;
      o["released_jobs"] = w.released_jobs;
    } else if (v.dead()) {
      o["dead_reason"] = v.reason;
    }
    items.push_back(std::move(o));
  }
  co_return json_reply(200, boost::json::object{{"items", std::move(items)}, {"alive", alive}, {"total", all->size()}});
}

boost::asio::awaitable<reply> get_metrics(server_state& s, const route_call&) {
  api_metrics::snapshot snap;
  snap.now = s.clock.now_ms();
  auto jobs = co_await s.timed("job_counts", s.st.observe().job_counts());
  auto lanes = co_await s.timed("lane_statistics", s.st.jobs().lane_statistics(snap.now));
  std::vector<double> bounds{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600};
  auto durations = co_await s.timed("job_durations", s.st.observe().job_durations(bounds));
  snap.store_ok = jobs && lanes && durations;
  snap.store_writes = s.st.write_state();
  if (jobs) snap.jobs = std::move(*jobs);
  if (lanes) snap.lanes = std::move(*lanes);
  if (durations) snap.durations = std::move(*durations);
  snap.delivery_phases = s.delivery_phases;
  if (s.tls.context) {
    snap.tls = true;
    snap.tls_not_after_ms = s.tls.identity.not_after_ms;
    snap.tls_reloads = s.tls.reloads;
    snap.tls_reload_failures = s.tls.reload_failures;
  }
  if (s.liveness) snap.liveness = &s.liveness->stats();
  if (s.worker) {
    snap.worker = &s.worker->stats();
    snap.worker_running = s.worker->running();
  }
  if (s.scheduler_probe) {
    auto [leader, epoch] = s.scheduler_probe();
    snap.scheduler_leader = leader ? 1 : 0;
    snap.scheduler_epoch = epoch;
  }
  {
    (void)co_await s.setting_int("jobs_page_size_default");  // refreshes the cached system settings
    const time_ms window = checks::expiry_window_ms(s.system_settings);
    auto g = co_await s.timed("catalog_gauges", checks::read_catalog_gauges(s.st, snap.now, window));
    if (g) {
      snap.certificates_expiring_soon = g->certificates_expiring_soon;
      snap.certificates_expired = g->certificates_expired;
      snap.certificates_revoked = g->certificates_revoked;
      snap.distributions_running = g->distributions_running;
      snap.distributions_running_long = g->distributions_running_long;
      snap.certificate_series = std::move(g->certificates);
      snap.distribution_series = std::move(g->distributions);
      snap.target_series = std::move(g->targets);
    } else {
      snap.store_ok = false;
    }
  }
  snap.process = read_process_stats();
  snap.version = s.opt.version;
  snap.ws_subscribers = s.hub.subscribers();
  snap.ws_watched_jobs = s.hub.watched_jobs();
  snap.connections = s.conns.size();
  reply r;
  r.body = s.metrics.render(snap);
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  co_return r;
}

boost::asio::awaitable<reply> list_audit(server_state& s, const route_call& call) {
  auto pq = parse_audit_query(call.query);
  if (!pq) co_return error_reply(pq.error());
  auto page = co_await s.timed("audit_list", s.st.auth().list_audit(call.who.project->id, pq->page, pq->page_size));
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

namespace {
// A setting's text as the API shows it: integers as numbers, the rest as strings.
boost::json::value setting_json(const setting_def& d, std::string_view text) {
  if (d.type != setting_type::integer) return boost::json::string(text);
  std::int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}
}  // namespace

boost::asio::awaitable<reply> get_settings(server_state& s, const route_call&) {
  auto stored = co_await s.timed("system_settings", s.st.auth().system_settings());
  if (!stored) co_return error_reply(stored.error());
  // What is in effect: a stored value that no longer validates reads as its table fallback.
  const auto effective = store::to_settings_map(*stored);
  boost::json::object o;
  for (const auto& d : all_settings()) {
    if (d.scope != setting_scope::system) continue;
    o[d.name] = setting_json(d, effective.text(d.name));
  }
  co_return json_reply(200, o);
}

// The OpenAPI document, generated from the route and body tables (a few hundred microseconds;
// nobody asks often).
boost::asio::awaitable<reply> get_openapi(server_state& s, const route_call&) {
  reply r;
  r.body = openapi_document(s.opt.version);
  co_return r;
}

// Each setting of a scope as the settings table describes it (the UI's Settings page reads it).
boost::json::object settings_schema(setting_scope scope) {
  boost::json::array items;
  for (const auto& d : all_settings()) {
    if (d.scope != scope) continue;
    boost::json::object o;
    o["name"] = d.name;
    o["type"] = type_name(d.type);
    if (d.type == setting_type::integer) {
      o["min"] = d.min;
      o["max"] = d.max;
    }
    if (d.type == setting_type::choice) {
      boost::json::array choices;
      for (auto c : choice_values(d)) choices.emplace_back(c);
      o["choices"] = std::move(choices);
    }
    o["default"] = setting_json(d, d.default_value);
    o["doc"] = d.doc;
    o["group"] = group_of(d);
    items.push_back(std::move(o));
  }
  boost::json::array groups;
  if (scope == setting_scope::system)
    for (const auto& g : setting_groups()) {
      boost::json::array names;
      for (auto name : group_members(g)) names.emplace_back(name);
      groups.push_back(boost::json::object{{"id", g.id}, {"title", g.title}, {"doc", g.doc}, {"settings", std::move(names)}});
    }
  return boost::json::object{{"items", std::move(items)}, {"groups", std::move(groups)}};
}

boost::asio::awaitable<reply> get_settings_schema(server_state&, const route_call&) {
  co_return json_reply(200, settings_schema(setting_scope::system));
}

boost::asio::awaitable<reply> get_project_settings_schema(server_state&, const route_call&) {
  co_return json_reply(200, settings_schema(setting_scope::project));
}

boost::asio::awaitable<reply> put_settings(server_state& s, const route_call& call) {
  const caller& c = call.who;
  // Every value is checked by its row of the settings table (the allow-lists' grammar included).
  auto values = parse_settings_body(call.body);
  if (!values) {
    boost::json::object d;
    d["message"] = values.error().message;
    auto detail = boost::json::serialize(d);
    co_await s.audit(c, "settings.update", "settings", errc_name(values.error().value()), detail);
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
  e.at = s.clock.now_ms();
  if (s.opt.audit_sink) s.opt.audit_sink->write(e);
  auto r = co_await s.timed("settings_put", s.st.auth().put_system_settings(std::move(*values), std::move(e)));
  if (!r) {
    co_await s.audit(c, "settings.update", "settings", errc_name(r.error().value()));
    co_return error_reply(r.error());
  }
  s.settings_valid = false;  // this process sees the change at once
  co_return co_await get_settings(s, call);
}

// A project's settings (setting_scope::project): its members read them, its admins change them.
// Stored as the project's settings object (lifecycle/approval.hpp), so a change is seen by
// the next request on every process at once.
boost::asio::awaitable<reply> get_project_settings(server_state& s, const route_call& call) {
  auto r = co_await s.catalog.project_settings(call.who.project->id);
  if (!r) co_return error_reply(r.error());
  co_return json_reply(200, *r);
}

boost::asio::awaitable<reply> put_project_settings(server_state& s, const route_call& call) {
  const caller& c = call.who;
  auto values = parse_settings_body(call.body, setting_scope::project);
  if (!values) {
    auto detail = boost::json::serialize(boost::json::object{{"message", values.error().message}});
    co_await s.audit(c, "project_settings.update", "project_settings", errc_name(values.error().value()), detail);
    co_return error_reply(values.error());
  }
  boost::json::object changed;
  for (const auto& [k, v] : *values) changed[k] = v;
  auto r = co_await s.catalog.put_project_settings(c.project->id, std::move(*values));
  const std::string detail = boost::json::serialize(changed);
  const std::string outcome = r ? std::string("ok") : std::string(errc_name(r.error().value()));
  co_await s.audit(c, "project_settings.update", "project_settings", outcome, detail);
  if (!r) co_return error_reply(r.error());
  co_return json_reply(200, *r);
}

}  // namespace certfleet::api
