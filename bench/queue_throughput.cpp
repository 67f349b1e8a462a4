// bench/queue_throughput: enqueue N noop jobs, process them with one worker process (this one),
// report enqueue/s, processed jobs/s, claim statement latency and claim-to-start latency
// (p50/p99), and peak RSS. With --preload M, M jobs (pending, due tomorrow: inside the claim
// index but not ready) are in the table first, to show claim latency stays flat as it grows.
// The store is durable as shipped: WAL with synchronous=NORMAL (--synchronous full for FULL).
// --dead 1: every job fails for good (dead), to measure what a dead job costs with the job.dead
// hook (--dead-hook on, as shipped) or without it (off: the hook sees distribution jobs only), and
// with a job.dead rule in the project (--dead-rule 1: each death enqueues a notification.send).
// --store mongodb://…: the same run on a MongoDB replica set the operator has, in a scratch
// database (certfleet_bench_<pid>) dropped at the end; the URI's own database is not touched.
// --enqueue-from other: the latency phase enqueues through a second store connection (for
// MongoDB another client pool, as another machine would), so nothing wakes the worker in-process:
// the change stream (MongoDB) or the poll (SQLite, every 20 ms) does.
#include "certfleet/core/clock.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/queue_service.hpp"
#include "certfleet/queue/worker.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/mongodb.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <unordered_map>

using namespace certfleet;
namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

namespace {

double percentile(std::vector<std::uint32_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i] / 1000.0;  // ms
}

long peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

template <class T>
T run(asio::io_context& ioc, asio::awaitable<T> a) {
  std::optional<T> out;
  asio::co_spawn(ioc, [&]() -> asio::awaitable<void> { out.emplace(co_await std::move(a)); }, asio::detached);
  ioc.restart();
  ioc.run();
  return std::move(*out);
}

}  // namespace

int main(int argc, char** argv) {
  long jobs = 100'000, preload = 0, latency_jobs = 1000, latency_rate = 200;
  int concurrency = 256, batch = 32;
  std::string dir, synchronous = "normal", dead_hook = "on", store_uri = "sqlite", enqueue_from = "same";
  bool dead = false, dead_rule = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--jobs") jobs = std::stol(v);
    else if (a == "--preload") preload = std::stol(v);
    else if (a == "--concurrency") concurrency = std::stoi(v);
    else if (a == "--claim-batch") batch = std::stoi(v);
    else if (a == "--dir") dir = v;
    else if (a == "--synchronous") synchronous = v;
    else if (a == "--latency-jobs") latency_jobs = std::stol(v);
    else if (a == "--latency-rate") latency_rate = std::stol(v);
    else if (a == "--dead") dead = v == "1";
    else if (a == "--dead-hook") dead_hook = v;
    else if (a == "--dead-rule") dead_rule = v == "1";
    else if (a == "--store") store_uri = v;
    else if (a == "--enqueue-from" && (v == "same" || v == "other")) enqueue_from = v;
    else {
      std::cerr << "usage: queue_throughput [--jobs N] [--preload M] [--concurrency C] [--claim-batch B] "
                   "[--dir DIR] [--synchronous normal|full] [--latency-jobs M] [--latency-rate R] [--dead 0|1] "
                   "[--dead-hook on|off] [--dead-rule 0|1] [--store sqlite|mongodb://…] [--enqueue-from same|other]\n";
      return 2;
    }
  }
  if (dir.empty()) dir = (std::filesystem::temp_directory_path() / fmt::format("cf-bench-{}", getpid())).string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  spdlog::set_level(spdlog::level::warn);

  const bool mongodb = store_uri != "sqlite";
  store::mongodb_options mongo;
  mongo.uri = store_uri;
  mongo.database = fmt::format("certfleet_bench_{}", getpid());
  // The scratch database goes on every way out once it exists, a failed run's included (declared
  // before the stores, so it runs after they are closed).
  struct drop_scratch_database {
    const store::mongodb_options* options;
    ~drop_scratch_database() {
      if (!options) return;
      if (auto dropped = store::drop_mongodb_database(*options); !dropped)
        std::cerr << "dropping " << options->database << ": " << dropped.error().message << "\n";
    }
  } scratch{nullptr};
  auto open = [&]() -> result<std::unique_ptr<store::store>> {
    if (!mongodb) return store::open_sqlite({dir + "/certfleet.db", 2, 10'000, synchronous == "full"});
    return store::open_mongodb(mongo);
  };
  auto opened = open();
  if (!opened) {
    std::cerr << opened.error().message << "\n";
    return 1;
  }
  auto& st = **opened;
  if (mongodb) scratch.options = &mongo;
  // The second connection of --enqueue-from other: another client pool, like another machine's.
  std::unique_ptr<store::store> other;
  if (enqueue_from == "other") {
    auto o = open();
    if (!o) {
      std::cerr << "second connection: " << o.error().message << "\n";
      return 1;
    }
    other = std::move(*o);
  }
  // As `certfleet serve` runs it: distribution jobs report to their run when they end.
  auto hook = distribution::make_terminal_hook();
  hook.every_dead = dead_hook == "on";
  st.jobs().set_terminal_hook(std::move(hook));
  const auto& clock = system_clock();
  asio::io_context ioc(1);
  auto project = run(ioc, st.projects().ensure("default", clock.now_ms()))->first.id;
  if (dead_rule) {
    // A webhook channel and a job.dead rule: every death enqueues one notification.send (not
    // handled here: this measures the dead job's transaction).
    auto channel = std::make_shared<store::catalog_object>();
    channel->id = "6b0e8f0c1a2b3c4d5e6f7081";
    channel->project_id = project;
    channel->kind = std::string(store::kind_channel);
    channel->name = "bench";
    channel->doc = R"({"kind":"webhook","url":"http://127.0.0.1:9/"})";
    store::tx_fn add = [channel](store::catalog_tx& tx) -> result<void> {
      if (auto r = tx.insert_object(*channel); !r) return std::move(r).error();
      store::catalog_object rule;
      rule.id = "6b0e8f0c1a2b3c4d5e6f7082";
      rule.project_id = channel->project_id;
      rule.kind = std::string(store::kind_rule);
      rule.name = "job.dead->bench";
      rule.ref_id = channel->id;
      rule.doc = R"({"event":"job.dead","channel_id":"6b0e8f0c1a2b3c4d5e6f7081"})";
      if (auto r = tx.insert_object(rule); !r) return std::move(r).error();
      return {};
    };
    if (!run(ioc, st.catalog().transact(std::move(add)))) return 1;
  }

  auto make = [&](time_ms run_at) {
    store::new_job j;
    j.project_id = project;
    j.type = "noop";
    j.lane = "main";
    j.payload = dead ? R"({"fail_times":1,"permanent":true})" : "{}";
    j.max_attempts = 3;
    j.run_at = run_at;
    return j;
  };
  constexpr long chunk = 1000;  // like BullMQ addBulk / graphile addJobs chunks in bench/peers
  if (preload > 0) {
    auto tomorrow = clock.now_ms() + 86'400'000;
    for (long done = 0; done < preload; done += 10'000) {
      std::vector<store::new_job> batch_jobs(static_cast<std::size_t>(std::min(10'000L, preload - done)), make(tomorrow));
      if (!run(ioc, st.jobs().enqueue_many(std::move(batch_jobs), clock.now_ms()))) return 1;
    }
  }

  auto e0 = steady::now();
  for (long done = 0; done < jobs; done += chunk) {
    std::vector<store::new_job> batch_jobs(static_cast<std::size_t>(std::min(chunk, jobs - done)), make(0));
    auto r = run(ioc, st.jobs().enqueue_many(std::move(batch_jobs), clock.now_ms()));
    if (!r) {
      std::cerr << r.error().message << "\n";
      return 1;
    }
  }
  double enqueue_s = std::chrono::duration<double>(steady::now() - e0).count();

  queue::handler_registry handlers;
  queue::register_noop(handlers);
  queue::worker_options o;
  o.main_concurrency = concurrency;
  o.claim_batch = batch;
  o.poll_ms = 20;
  o.record_latency = true;
  queue::worker w(ioc.get_executor(), st, handlers, clock, o);
  // Latency as the peers measure it: jobs enqueued one by one at a steady rate to an idle worker,
  // from the enqueue call to the handler's start. The worker is woken in-process, as with API
  // enqueues, unless --enqueue-from other.
  queue::queue_service qs(other ? *other : st, handlers, clock);
  if (!other) qs.on_enqueued = [&](std::string_view lane) { w.wake(lane); };
  // As serve wires it: jobs another connection made claimable wake the lane (MongoDB's change
  // stream; a no-op on SQLite, where the poll finds them).
  st.watch_claimable([&](std::string_view lane) { asio::post(ioc, [&w, lane = std::string(lane)] { w.wake(lane); }); });
  std::unordered_map<std::string, steady::time_point> enqueued_at;
  std::vector<std::uint32_t> enqueue_to_start_us;
  queue::handler_fn real_noop = *handlers.find("noop");
  handlers.add("noop", [&](queue::job_context& ctx) -> asio::awaitable<queue::outcome> {
    if (auto it = enqueued_at.find(ctx.job().id); it != enqueued_at.end())
      enqueue_to_start_us.push_back(static_cast<std::uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - it->second).count()));
    co_return co_await real_noop(ctx);
  });
  auto latency_phase = [&]() -> asio::awaitable<void> {
    asio::steady_timer t(ioc);
    auto next = steady::now();
    for (long i = 0; i < latency_jobs; ++i) {
      next += std::chrono::microseconds(1'000'000 / std::max(1L, latency_rate));
      t.expires_at(next);
      co_await t.async_wait(asio::use_awaitable);
      auto at = steady::now();
      queue::enqueue_request req{project, "noop", "{}"};
      auto r = co_await qs.enqueue(std::move(req), queue::caller::system);
      if (r) enqueued_at.emplace(r->job.id, at);
    }
    while (w.stats().completed + w.stats().dead < jobs + latency_jobs) {
      t.expires_after(std::chrono::milliseconds(5));
      co_await t.async_wait(asio::use_awaitable);
    }
  };
  auto p0 = steady::now();
  steady::time_point p1;
  w.start();
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer t(ioc);
        while (w.stats().completed + w.stats().dead < jobs) {
          t.expires_after(std::chrono::milliseconds(1));
          co_await t.async_wait(asio::use_awaitable);
        }
        p1 = steady::now();
        co_await latency_phase();
        co_await w.stop();
        ioc.stop();
      },
      asio::detached);
  ioc.restart();
  ioc.run();
  double process_s = std::chrono::duration<double>(p1 - p0).count();
  const auto& s = w.stats();
  std::cout << fmt::format(
                   "{{\"peer\":\"certfleet\",\"store\":\"{}\",\"enqueue_from\":\"{}\",\"jobs\":{},\"preload\":{},\"concurrency\":{},\"claim_batch\":{},"
                   "\"synchronous\":\"{}\",\"dead\":{},\"dead_hook\":\"{}\",\"dead_rule\":{},\"enqueue_per_s\":{:.0f},\"processed_per_s\":{:.0f},"
                   "\"claim_p50_ms\":{:.3f},\"claim_p99_ms\":{:.3f},\"claim_to_start_p50_ms\":{:.3f},"
                   "\"claim_to_start_p99_ms\":{:.3f},\"p50_ms\":{:.3f},\"p99_ms\":{:.3f},\"claims\":{},\"completed\":{},"
                   "\"peak_rss_mb\":{:.1f},\"latency\":\"enqueue->handler start, {} jobs enqueued one by one at {}/s to an idle worker{}\"}}",
                   mongodb ? "mongodb" : "sqlite", enqueue_from, jobs, preload, concurrency, batch, synchronous, dead, dead_hook, dead_rule, jobs / enqueue_s, jobs / process_s,
                   percentile(s.claim_us, 0.5), percentile(s.claim_us, 0.99), percentile(s.claim_to_start_us, 0.5),
                   percentile(s.claim_to_start_us, 0.99), percentile(enqueue_to_start_us, 0.5),
                   percentile(enqueue_to_start_us, 0.99), s.claim_calls, s.completed, peak_rss_kb() / 1024.0, latency_jobs,
                   latency_rate,
                   !other   ? " (woken in-process, as with API enqueues)"
                   : mongodb ? " (enqueued on a second client pool: woken by the change stream)"
                             : " (enqueued on a second connection: found by the 20 ms poll)")
            << std::endl;
  if (other) other->close();
  st.close();
  std::filesystem::remove_all(dir);
  return s.completed + s.dead == jobs + latency_jobs ? 0 : 1;
}
