// The distribution_execute / distribution_rollback handlers: they deliver, record one result per
// target (fenced by the job's attempt), and leave the reporting to the terminal hook
// (report.cpp), which runs in the transaction that ends the job. notification.send is notify's (src/notify/send.cpp).
#include "certfleet/core/log.hpp"
#include "certfleet/distribution/engine.hpp"

#include "certfleet/core/crash.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/core/spawn.hpp"
#include "certfleet/delivery/file.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/distribution/phase_metrics.hpp"
#include "certfleet/delivery/webhook.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/distribution/target_queue.hpp"
#include "distribution/named_lock.hpp"
#include "distribution/session_limiter.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/queue/triggers.hpp"
#include "certfleet/store/settings.hpp"
#include "certfleet/store/session_slots.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <functional>
#include <chrono>
#include <map>
#include <set>
#include <vector>

namespace certfleet::distribution {

namespace asio = boost::asio;
using queue::job_context;
using queue::outcome;
using store::run_mode;
using store::run_status;
using store::target_status;
using detail::named_lock;
using detail::session_limiter;

namespace {

// What one job needs about its targets, read once at its start.
struct loaded_target {
  std::string id;
  std::string name;
  delivery::module_kind module = delivery::module_kind::ssh;
  catalog::target_spec spec;
  catalog::credential_secret secret;
  std::string lock_key;  // host + path: two runs never write it at once
};

struct run_inputs {
  store::distribution_record dist;
  delivery::cert_bundle bundle;
  std::string fingerprint;
  std::vector<loaded_target> targets;     // existing targets of the plan
  std::vector<std::string> deleted;       // plan targets deleted after the snapshot
  std::map<std::string, std::int64_t> files_run;  // rollback: the run whose backup to restore, by target
  std::map<std::string, std::int64_t> last_files_run;  // execute: the run whose files each target has
  settings_map settings;
  // ssh_allow_list as read at the job's start; a value that no longer parses refuses every SSH
  // destination rather than allowing all.
  std::optional<net::egress_policy> ssh_allow;
};

// Reads everything the run needs in one snapshot and opens the secrets.
asio::awaitable<result<run_inputs>> load_inputs(job_context& ctx, const job_plan& plan, const engine_options& opt) {
  auto in = std::make_shared<run_inputs>();
  auto objects = std::make_shared<std::vector<store::catalog_object>>();
  auto creds = std::make_shared<std::map<std::string, store::catalog_object>>();
  auto cert = std::make_shared<store::catalog_object>();
  std::string project = ctx.job().project_id;
  store::read_fn op1 = [&, in, objects, creds, cert](store::catalog_read& rd) -> result<void> {
    auto d = rd.get_distribution(project, plan.distribution_id);
    if (!d) return std::move(d).error();
    in->dist = std::move(*d);
    auto c = rd.get_object(project, store::kind_certificate, in->dist.certificate_id);
    if (!c) return make_error(errc::not_found, fmt::format("certificate {} of the distribution no longer exists",
                                                           in->dist.certificate_id), "certificate_id");
    *cert = std::move(*c);
    auto t = rd.objects_by_ids(project, store::kind_target, plan.target_ids);
    if (!t) return std::move(t).error();
    *objects = std::move(*t);
    for (const auto& o : *objects) {
      if (o.ref_id.empty() || creds->count(o.ref_id)) continue;
      auto cr = rd.get_object(project, store::kind_credential, o.ref_id);
      if (cr) creds->emplace(o.ref_id, std::move(*cr));
    }
    if (plan.mode == job_mode::rollback) {
      auto outs = rd.run_outcomes(plan.distribution_id, plan.rollback_of_run);
      if (!outs) return std::move(outs).error();
      for (const auto& o : *outs)
        if (o.status == to_string(target_status::succeeded) && o.files_from_run > 0) in->files_run[o.target_id] = o.files_from_run;
    } else {
      for (const auto& id : plan.target_ids) {
        auto f = rd.last_files_run(plan.distribution_id, id);
        if (!f) return std::move(f).error();
        if (*f > 0) in->last_files_run[id] = *f;
      }
    }
    return {};
  };
  auto r = co_await ctx.store().catalog().read(std::move(op1));
  if (!r) co_return std::move(r).error();
  in->settings = co_await store::read_settings(ctx.store());
  // The settings table lets only a valid list through (a stored one that no longer parses reads
  // as its fail-closed fallback), so this cannot fail short of a bug.
  auto ssh_allow = net::parse_egress_allow_list(in->settings.text("ssh_allow_list"), "ssh_allow_list");
  if (!ssh_allow) co_return std::move(ssh_allow).error();
  in->ssh_allow = std::move(*ssh_allow);
  if (!opt.key) co_return make_error(errc::config_invalid, "no key-encryption key loaded: cannot open secrets", "key_file");

  auto cert_doc = catalog::parse_certificate_doc(*cert);
  if (!cert_doc) co_return std::move(cert_doc).error();
  in->bundle.cert_pem = cert_doc->cert_pem;
  in->bundle.chain_pem = cert_doc->chain_pem;
  in->fingerprint = cert_doc->fingerprint_sha256;
  if (plan.mode != job_mode::rollback) {
    auto key = catalog::open_certificate_key(*opt.key, *cert);
    if (!key) co_return std::move(key).error();
    in->bundle.key_pem = std::move(*key);
    // Once per job, not once per target; a bundle that fails is left unchecked so that each
    // target reports the reason.
    if (auto fp = delivery::check_bundle(in->bundle)) in->bundle.checked_fingerprint = std::move(*fp);
  }

  std::map<std::string, const store::catalog_object*> by_id;
  for (const auto& o : *objects) by_id.emplace(o.id, &o);
  for (const auto& id : plan.target_ids) {
    auto it = by_id.find(id);
    if (it == by_id.end()) {
      in->deleted.push_back(id);
      continue;
    }
    loaded_target lt;
    lt.id = id;
    lt.name = it->second->name;
    auto spec = catalog::parse_target_doc(*it->second);
    if (!spec) co_return std::move(spec).error();
    lt.spec = std::move(*spec);
    lt.module = lt.spec.module;
    lt.lock_key = lt.spec.lock_key();
    if (!it->second->ref_id.empty()) {
      auto c = creds->find(it->second->ref_id);
      if (c != creds->end()) {
        auto s = catalog::open_credential(*opt.key, c->second);
        if (!s) co_return std::move(s).error();
        lt.secret = std::move(*s);
      }
    }
    in->targets.push_back(std::move(lt));
  }
  co_return std::move(*in);
}

delivery::delivery_result failed_result(net::error_class cls, std::string error, std::string phase) {
  delivery::delivery_result r;
  r.status = delivery::delivery_status::failed;
  r.cls = cls;
  r.error = std::move(error);
  r.phase = std::move(phase);
  return r;
}

// The setting as it is now (the delivery re-checks every path against it); an unreadable value
// is no directory at all, which refuses every file target.
std::vector<std::string> file_base_dirs(const run_inputs& in) {
  auto d = parse_base_dirs(in.settings.text("file_target_base_dirs"));
  return d ? std::move(*d) : std::vector<std::string>{};
}

// A file target that no system admin created (stored before that was required) may have been
// made by any project admin: it never runs.
std::optional<delivery::delivery_result> file_target_refused(const loaded_target& t) {
  if (!t.spec.created_by_system_admin.empty()) return std::nullopt;
  return failed_result(net::error_class::validation,
                       fmt::format("file target {} was not created by a system admin (it predates that rule): re-create it "
                                   "with a system-admin token", t.name),
                       "check");
}

// One target, by its module.
// `conn`: the lane's SSH connection, reused when it fits this target (nullptr: reuse is off).
asio::awaitable<delivery::delivery_result> deliver_one(const loaded_target& t, const run_inputs& in,
                                                       const job_plan& plan, const engine_options& opt,
                                                       const net::egress_policy* egress,
                                                       const net::egress_policy* ssh_allow,
                                                       delivery::ssh_connection* conn) {
  using net::error_class;
  if (plan.mode == job_mode::rollback) {
    auto it = in.files_run.find(t.id);
    if (it == in.files_run.end()) {
      delivery::delivery_result r;
      r.status = delivery::delivery_status::skipped_by_hash;
      r.error = fmt::format("run {} did not deliver to this target: nothing to roll back", plan.rollback_of_run);
      co_return r;
    }
    auto backup = run_backup_id(plan.distribution_id, it->second);
    switch (t.module) {
      case delivery::module_kind::ssh: {
        delivery::ssh_options so;
        so.resolve_pool = opt.cpu;
        so.allow = ssh_allow;
        auto cred = t.secret.ssh();
        if (conn) co_return co_await delivery::rollback_ssh(t.spec.ssh, cred, backup, so, *conn);
        co_return co_await delivery::rollback_ssh(t.spec.ssh, cred, backup, so);
      }
      case delivery::module_kind::file: {
        if (!opt.cpu) break;
        if (auto refused = file_target_refused(t)) co_return std::move(*refused);
        auto bases = file_base_dirs(in);  // named: GCC 12 mishandles temporaries inside co_await
        co_return co_await delivery::rollback_file(t.spec.file, backup, bases, *opt.cpu);
      }
      case delivery::module_kind::webhook:
        break;  // a POST cannot be taken back
    }
    co_return failed_result(error_class::validation,
                            fmt::format("{} targets cannot be rolled back", delivery::module_name(t.module)), "rollback");
  }
  auto run_id = run_backup_id(plan.distribution_id, plan.run_no);
  switch (t.module) {
    case delivery::module_kind::ssh: {
      delivery::ssh_options so;
      so.resolve_pool = opt.cpu;
      so.allow = ssh_allow;
      auto cred = t.secret.ssh();
      if (conn) co_return co_await delivery::deliver_ssh(t.spec.ssh, cred, in.bundle, run_id, so, *conn);
      co_return co_await delivery::deliver_ssh(t.spec.ssh, cred, in.bundle, run_id, so);
    }
    case delivery::module_kind::file: {
      if (!opt.cpu) break;
      if (auto refused = file_target_refused(t)) co_return std::move(*refused);
      auto bases = file_base_dirs(in);  // named: GCC 12 mishandles temporaries inside co_await
      co_return co_await delivery::deliver_file(t.spec.file, in.bundle, run_id, bases, *opt.cpu);
    }
    case delivery::module_kind::webhook: {
      delivery::webhook_options wo;
      wo.egress = egress;
      wo.ca_pem = opt.ca_pem;
      wo.resolve_pool = opt.cpu;
      wo.allow_plain_http = t.spec.webhook_allow_http;
      co_return co_await delivery::deliver_webhook(t.spec.webhook_url, t.secret.password, in.bundle, run_id, wo);
    }
  }
  co_return failed_result(error_class::validation,
                          fmt::format("unknown module \"{}\"", delivery::module_name(t.module)), "check");
}

// Fenced: a result is stored only while this attempt still holds the job.
asio::awaitable<result<void>> record(job_context& ctx, store::target_result r) {
  auto fence = ctx.job().fence;
  auto job_id = ctx.job().id;
  store::tx_fn op2 = [r = std::move(r), fence, job_id](store::catalog_tx& tx) -> result<void> {
    auto j = tx.get_job(job_id);
    if (!j) return std::move(j).error();
    if (j->fence != fence || j->status != store::job_status::active)
      return make_error(errc::lease_lost, fmt::format("job {} attempt {} no longer holds its lease", job_id, fence), "fence");
    return tx.add_result(r);
  };
  co_return co_await ctx.store().catalog().transact(std::move(op2));
}

struct run_state {
  std::size_t done = 0;
  std::size_t running = 0;
  std::size_t succeeded = 0;
  std::size_t failed = 0;
  std::string first_error;
  bool lease_lost = false;
};

// The result's detail: phase timings, and how the target's session began (run_view reads it).
std::string timings_json(const delivery::delivery_result& r, std::int64_t session_wait_ms) {
  boost::json::object t;
  for (const auto& p : r.timings) t[p.phase] = p.ms;
  boost::json::object o{{"timings_ms", std::move(t)}, {"phase", r.phase}};
  if (session_wait_ms > 0) o["session_wait_ms"] = session_wait_ms;
  if (r.reused_connection) o["reused_connection"] = true;
  // The cause behind a deliberately uniform error (connect failures): admins only (run_view).
  if (!r.error_detail.empty()) o["error_detail"] = r.error_detail;
  return boost::json::serialize(o);
}

std::string timings_text(const delivery::delivery_result& r) {
  std::string s;
  for (const auto& p : r.timings) s += fmt::format("{}{} {} ms", s.empty() ? "" : ", ", p.phase, p.ms);
  return s;
}

// One target: its path lock, the delivery (over the lane's connection `conn` when reuse is on),
// its result and log line. `session_wait_ms`: how long it waited for a session to its host
// before it started (not part of its own time).
asio::awaitable<void> deliver_target(job_context& ctx, const job_plan& plan, const run_inputs& in,
                                     const loaded_target& t, const engine_options& opt,
                                     const net::egress_policy* egress, run_state& st, std::size_t total,
                                     delivery::ssh_connection* conn, std::int64_t session_wait_ms) {
  auto started = ctx.clock().now_ms();
  named_lock lock(ctx, "path:" + t.lock_key, opt);
  bool waited = false;
  if (!co_await lock.acquire(waited)) co_return;  // interrupted while waiting
  auto line1 = fmt::format("target {} ({}): {} starting", t.name, t.id,
                                       plan.mode == job_mode::rollback ? "rollback" : "delivery");
  co_await ctx.log("info", std::move(line1));
  const net::egress_policy* ssh_allow = in.ssh_allow ? &*in.ssh_allow : nullptr;
  auto res = co_await deliver_one(t, in, plan, opt, egress, ssh_allow, conn);
  co_await lock.release();
  if (opt.phases) opt.phases->observe(res.timings);

  store::target_result r;
  r.distribution_id = plan.distribution_id;
  r.run_no = plan.run_no;
  r.target_id = t.id;
  r.job_id = ctx.job().id;
  r.retry_attempt = plan.retry_attempt;
  r.fence = ctx.job().fence;
  r.started_at = started;
  r.finished_at = ctx.clock().now_ms();
  r.detail = timings_json(res, session_wait_ms);
  if (res.ok()) {
    r.status = to_string(target_status::succeeded);
    r.fingerprint_sha256 = res.fingerprint_sha256.empty() ? in.fingerprint : res.fingerprint_sha256;
    r.hash_skipped = res.status == delivery::delivery_status::skipped_by_hash;
    if (plan.mode == job_mode::rollback) {
      r.hash_skipped = false;
      r.fingerprint_sha256.clear();
      if (!res.error.empty()) r.error = res.error;  // "nothing to roll back"
    } else if (r.hash_skipped) {
      auto f = in.last_files_run.find(t.id);
      r.files_from_run = f == in.last_files_run.end() ? 0 : f->second;
    } else {
      r.files_from_run = plan.run_no;
    }
    ++st.succeeded;
  } else {
    r.status = to_string(target_status::failed);
    r.error_class = net::error_class_name(res.cls);
    r.error = res.error;
    ++st.failed;
    if (st.first_error.empty()) st.first_error = fmt::format("{}: {}", t.name, res.error);
  }
  auto rec = co_await record(ctx, r);
  if (!rec) {
    st.lease_lost = true;
    co_return;
  }
  crash_point("target_recorded");
  // Named first: GCC 12 mishandles temporaries built inside a co_await expression.
  std::string what = r.hash_skipped ? std::string("already up to date (hash match), nothing uploaded")
                                    : std::string(plan.mode == job_mode::rollback ? "restored" : "delivered");
  if (res.ok()) {
    auto line = fmt::format("target {}: {} in {} ms ({}{})", t.name, what, r.finished_at - r.started_at, timings_text(res),
                            res.reused_connection ? "; reused connection" : "");
    co_await ctx.log("info", std::move(line));
  } else {
    auto line = fmt::format("target {}: failed [{}] {}", t.name, r.error_class, res.error);
    std::string detail;
    if (!res.remote_stderr.empty()) detail = boost::json::serialize(boost::json::object{{"stderr", res.remote_stderr}});
    co_await ctx.log("error", std::move(line), std::move(detail));
  }
  ++st.done;
  co_await ctx.progress(static_cast<std::int64_t>(st.done + in.deleted.size()), static_cast<std::int64_t>(total));
}

// What the lanes of one job share.
struct job_lanes {
  job_context& ctx;
  const job_plan& plan;
  const run_inputs& in;
  const engine_options& opt;
  const net::egress_policy* egress;
  session_limiter& limiter;
  run_state& st;
  std::size_t total;
  target_queue queue;
  int limit = 0;          // distribution_max_sessions_per_host; 0: no slots are taken
  bool reuse = false;     // distribution_ssh_connection_reuse
  time_ms slot_ttl = 0;   // the job's lease: a slot outlives its renewals by at most this
  std::optional<named_lock>* dist_lock = nullptr;
  std::map<std::size_t, time_ms> waiting_since{};  // targets that logged a wait for a session

  store::slot_holder holder() const { return {ctx.job().id, ctx.job().fence}; }

  // Everything left waits for a session: the first such target says so once in the job's log.
  asio::awaitable<void> note_waiting(std::size_t i) {
    if (waiting_since.count(i)) co_return;
    waiting_since[i] = ctx.clock().now_ms();
    const auto& t = in.targets[i];
    auto line = fmt::format("target {} ({}): waiting for a session to {} ({} at once, distribution_max_sessions_per_host)",
                            t.name, t.id, queue.at(i).destination, limit);
    co_await ctx.log("info", std::move(line));
  }

  std::int64_t waited_ms(std::size_t i) const {
    auto it = waiting_since.find(i);
    return it == waiting_since.end() ? 0 : ctx.clock().now_ms() - it->second;
  }
};

// One lane: takes targets one after another. With reuse on it keeps its SSH connection — and the
// session slot that connection holds — for the next target that can go over it; otherwise it gives
// both back and takes the first target whose host has a session free, waiting when none has.
asio::awaitable<void> run_lane(job_lanes& jl) {
  auto ex = co_await asio::this_coro::executor;
  delivery::ssh_connection conn(ex);
  std::int64_t slot_id = 0;
  std::string slot_destination;
  auto give_back = [&]() -> asio::awaitable<void> {
    if (conn.is_open()) co_await conn.close();
    if (slot_id) {
      auto id = std::exchange(slot_id, 0);
      co_await jl.limiter.release(jl.ctx.store(), slot_destination, id, jl.holder());
    }
  };
  const auto poll = jl.opt.lock_poll;
  try {
    while (!jl.st.lease_lost && jl.ctx.interrupted() == queue::interrupt_reason::none) {
      std::optional<std::size_t> next;
      if (conn.is_open()) next = jl.queue.take_reusing(conn.key());
      if (!next) {
        co_await give_back();
        auto now = std::chrono::steady_clock::now();
        next = jl.queue.take_next([&](const std::string& d) { return jl.limiter.may_try(d, jl.limit, now); });
        if (!next) {
          if (jl.queue.empty()) break;
          co_await jl.note_waiting(*jl.queue.first_pending());
          co_await jl.limiter.wait(poll);
          continue;
        }
        const auto& destination = jl.queue.at(*next).destination;
        if (!destination.empty()) {
          auto id = co_await jl.limiter.acquire(jl.ctx.store(), destination, jl.holder(), jl.limit,
                                                jl.ctx.clock().now_ms(), jl.slot_ttl, poll);
          if (!id) {
            jl.queue.put_back(*next);
            continue;
          }
          slot_id = id;
          slot_destination = destination;
        }
      }
      const auto& t = jl.in.targets[*next];
      co_await deliver_target(jl.ctx, jl.plan, jl.in, t, jl.opt, jl.egress, jl.st, jl.total,
                              jl.reuse ? &conn : nullptr, jl.waited_ms(*next));
      if (*jl.dist_lock) co_await (*jl.dist_lock)->renew_if_due();
    }
  } catch (const queue::job_interrupted&) {
    // Expected: the job stops at its checkpoint after the lanes.
  }
  co_await give_back();
}

// Keeps the job's session slots alive while its lanes run (a delivery can outlast a slot's ttl);
// stops when `stop` is cancelled.
asio::awaitable<void> renew_slots(job_lanes& jl, asio::steady_timer& stop, const bool& stopping) {
  const auto every = std::chrono::milliseconds(std::max<time_ms>(jl.slot_ttl / 3, 100));
  while (!stopping) {
    stop.expires_after(every);
    boost::system::error_code ec;
    co_await stop.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping) break;
    auto r = co_await jl.ctx.store().session_slots().renew(jl.holder(), jl.ctx.clock().now_ms(), jl.slot_ttl);
    if (!r) log::write(spdlog::level::warn, {.job_id = jl.ctx.job().id}, "job {}: renewing its session slots: {}", jl.ctx.job().id, r.error().message);
  }
}

asio::awaitable<outcome> run_distribution(job_context& ctx, std::shared_ptr<const engine_options> opt,
                                         std::shared_ptr<session_limiter> limiter) {
  auto plan = parse_payload(ctx.payload());
  if (!plan) co_return outcome::permanent_failure(plan.error());
  auto loaded = co_await load_inputs(ctx, *plan, *opt);
  if (!loaded) {
    co_await ctx.log("error", loaded.error().message);
    co_return outcome::permanent_failure(loaded.error());
  }
  auto& in = *loaded;
  if (in.dist.run_no != plan->run_no || in.dist.status != to_string(run_status::running)) {
    auto line2 = fmt::format("run {} is over (the distribution is at run {}, {}): nothing to do",
                                         plan->run_no, in.dist.run_no, in.dist.status);
    co_await ctx.log("info", std::move(line2));
    co_return outcome::ok();
  }
  auto total = plan->target_ids.size();
  auto line3 = fmt::format("{} run {}: {} targets{}", to_string(plan->mode), plan->run_no, total,
                                       plan->retry_attempt ? fmt::format(" (retry wave {})", plan->retry_attempt) : "");
  co_await ctx.log("info", std::move(line3));

  // A target deleted after the snapshot is skipped, never an error.
  for (const auto& id : in.deleted) {
    store::target_result r;
    r.distribution_id = plan->distribution_id;
    r.run_no = plan->run_no;
    r.target_id = id;
    r.job_id = ctx.job().id;
    r.retry_attempt = plan->retry_attempt;
    r.fence = ctx.job().fence;
    r.status = to_string(target_status::skipped);
    r.error = "target deleted after snapshot";
    r.started_at = r.finished_at = ctx.clock().now_ms();
    if (!co_await record(ctx, r)) co_return outcome::failure(make_error(errc::lease_lost, "lost the job's lease"));
    auto line4 = fmt::format("target {}: skipped (target deleted after snapshot)", id);
    co_await ctx.log("warn", std::move(line4));
  }

  std::optional<net::egress_policy> egress;
  if (auto e = net::parse_egress_allow_list(in.settings.text("egress_allow_list")); e) egress = std::move(*e);

  // The per-certificate lock of a normal run: two normal runs of one certificate never overlap.
  std::optional<named_lock> dist_lock;
  if (plan->mode == job_mode::normal) {
    dist_lock.emplace(ctx, fmt::format("distribution:{}", in.dist.certificate_id), *opt);
    bool waited = false;
    if (!co_await dist_lock->acquire(waited)) ctx.checkpoint();
  }

  auto concurrency = static_cast<std::size_t>(
      effective_ssh_concurrency(in.settings.integer("distribution_ssh_max_concurrency")));
  const int limit = static_cast<int>(in.settings.integer("distribution_max_sessions_per_host"));
  const bool reuse = in.settings.text("distribution_ssh_connection_reuse") == "on";
  std::vector<queued_target> queued;
  queued.reserve(in.targets.size());
  for (const auto& t : in.targets) {
    queued_target q;
    if (t.module == delivery::module_kind::ssh) {
      if (limit > 0) q.destination = delivery::ssh_destination(t.spec.ssh);
      if (reuse) q.connection_key = delivery::ssh_connection_key(t.spec.ssh, t.secret.ssh());
    }
    queued.push_back(std::move(q));
  }
  run_state st;
  const net::egress_policy* policy = egress ? &*egress : nullptr;
  job_lanes jl{ctx, *plan, in, *opt, policy, *limiter, st, total, target_queue(std::move(queued))};
  jl.limit = limit;
  jl.reuse = reuse;
  // A slot lives as long as the job's lease (the claim set locked_until = started_at + lease).
  const auto lease = ctx.job().locked_until - ctx.job().started_at;
  jl.slot_ttl = lease >= 1000 ? lease : 300'000;
  jl.dist_lock = &dist_lock;

  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer all_done(ex, asio::steady_timer::time_point::max());
  // `concurrency` lanes take targets; the job waits for the last one, and for the slot renewer.
  auto lanes = std::min(concurrency, in.targets.size());
  std::size_t lanes_left = lanes;
  bool lanes_over = lanes == 0;
  asio::steady_timer renew_timer(ex);
  bool renewing = limit > 0 && lanes > 0;
  if (renewing) {
    ++lanes_left;
    asio::co_spawn(ex, renew_slots(jl, renew_timer, lanes_over),
                   report_unexpected(fmt::format("job {}: session slot renewal", ctx.job().id), [&](bool) {
                     if (--lanes_left == 0) all_done.cancel();
                   }));
  }
  std::size_t delivering = lanes;
  for (std::size_t l = 0; l < lanes; ++l) {
    asio::co_spawn(ex, run_lane(jl),
                   report_unexpected(fmt::format("job {}: target lane", ctx.job().id), [&](bool failed) {
                     if (failed) st.lease_lost = true;  // stop the other lanes: this job's state is unknown
                     if (--delivering == 0) {
                       lanes_over = true;
                       renew_timer.cancel();
                     }
                     if (--lanes_left == 0) all_done.cancel();
                   }));
  }
  while (lanes_left > 0) {
    boost::system::error_code ec;
    co_await all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (dist_lock) co_await dist_lock->release();
  ctx.checkpoint();
  if (st.lease_lost) co_return outcome::failure(make_error(errc::lease_lost, "lost the job's lease while recording results"));
  crash_point("child_results_recorded");

  auto delivered = st.succeeded;
  auto attempted = st.succeeded + st.failed;
  std::string level = st.failed ? "warn" : "info";
  auto summary = fmt::format("done: {} succeeded, {} failed, {} skipped (deleted)", st.succeeded, st.failed,
                             in.deleted.size());
  co_await ctx.log(std::move(level), std::move(summary));
  if (attempted > 0 && delivered == 0)
    co_return outcome::permanent_failure(fmt::format("all {} targets failed: {}", attempted, st.first_error));
  if (st.failed > 0) co_return outcome::partial(fmt::format("{} of {} targets failed", st.failed, attempted));
  co_return outcome::ok();
}

}  // namespace

void register_handlers(queue::handler_registry& r, std::shared_ptr<const engine_options> options) {
  auto validate = [](const std::string& payload) -> result<void> {
    auto p = parse_payload(payload);
    if (!p) return std::move(p).error();
    return {};
  };
  namespace n = queue::job_names;
  // One per process: every job of the process counts its sessions per destination in it.
  auto limiter = std::make_shared<session_limiter>();
  r.add(std::string(n::distribution_execute),
        [options, limiter](job_context& ctx) { return run_distribution(ctx, options, limiter); }, validate,
        job_retry_refusal);
  r.add(std::string(n::distribution_rollback),
        [options, limiter](job_context& ctx) { return run_distribution(ctx, options, limiter); }, validate,
        job_retry_refusal);
}

}  // namespace certfleet::distribution
