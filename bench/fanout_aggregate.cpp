// Aggregate updates per second: N fan-out children of one run (default 200) finishing at once,
// each reported through the same path as the queue's terminal hook (report_child in one store
// transaction: results, counter, guard, completion). Then every child is reported again, as a
// crash-recovery pass would: the counters must not move. Real SQLite file in a temp dir.
//
//   bench/run fanout_aggregate [children=200] [rounds=5]
#include "certfleet/core/object_id.hpp"
#include "certfleet/distribution/engine.hpp"
#include "certfleet/distribution/plan.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

using namespace certfleet;
namespace asio = boost::asio;

namespace {

template <class T>
asio::awaitable<void> store_into(asio::awaitable<T> a, std::optional<T>& out) {
  out.emplace(co_await std::move(a));
}

template <class T>
T run(asio::io_context& ioc, asio::awaitable<T> a) {
  std::optional<T> out;
  asio::co_spawn(ioc, store_into(std::move(a), out), asio::detached);
  ioc.restart();
  ioc.run();
  return std::move(*out);
}

asio::awaitable<void> count_down(asio::awaitable<result<void>> a, int& left) {
  auto r = co_await std::move(a);
  if (!r) std::fprintf(stderr, "report failed: %s\n", r.error().message.c_str());
  --left;
}

struct round_result {
  double seconds = 0;
  bool consistent = false;
};

round_result one_round(int children, const std::filesystem::path& dir, int round) {
  asio::io_context ioc;
  auto st = store::open_sqlite({(dir / fmt::format("agg{}.db", round)).string(), 2, 5000, false});
  if (!st) throw std::runtime_error(st.error().message);
  auto& s = **st;
  auto project = run(ioc, s.projects().ensure("default", 1))->first.id;
  auto d = std::make_shared<store::distribution_record>();
  d->project_id = project;
  d->name = "bench";
  d->certificate_id = "c";
  for (int i = 0; i < children; ++i) d->target_ids.push_back(fmt::format("t{:05}", i));
  std::vector<store::job_record> jobs(static_cast<std::size_t>(children));
  store::tx_fn setup = [d, &jobs, children](store::catalog_tx& tx) -> result<void> {
    auto x = tx.insert_distribution(*d);
    if (!x) return std::move(x).error();
    *d = *x;
    d->status = "running";
    d->run_no = 1;
    d->mode = "fan_out";
    d->run_target_ids = d->target_ids;
    d->fan_out_total = children;
    if (auto u = tx.update_distribution(*d); !u) return u;
    for (int i = 0; i < children; ++i) {
      distribution::job_plan p{d->id, 1, distribution::job_mode::batch, {d->target_ids[static_cast<std::size_t>(i)]}, i + 1, 0, 0};
      store::new_job j;
      j.project_id = d->project_id;
      j.type = "distribution_execute";
      j.lane = "dist";
      j.payload = distribution::to_payload(p);
      j.idempotency_key = distribution::job_key(p);
      j.distribution_id = d->id;
      auto e = tx.jobs().enqueue(j, 1);
      if (!e) return std::move(e).error();
      auto& rec = jobs[static_cast<std::size_t>(i)];
      rec = e->job;
      rec.status = store::job_status::completed;
      rec.fence = 1;
      store::target_result r;
      r.distribution_id = d->id;
      r.run_no = 1;
      r.target_id = p.target_ids[0];
      r.job_id = rec.id;
      r.fence = 1;
      r.status = "succeeded";
      if (auto a = tx.add_result(r); !a) return a;
    }
    return {};
  };
  if (auto r = run(ioc, s.catalog().transact(std::move(setup))); !r) throw std::runtime_error(r.error().message);

  // All children report at once: N transactions queued on the writer together.
  auto report_all = [&]() {
    int left = children;
    for (const auto& j : jobs) {
      store::tx_fn fn = [j](store::catalog_tx& tx) -> result<void> { return distribution::report_child(tx, j, 2); };
      asio::co_spawn(ioc, count_down(s.catalog().transact(std::move(fn)), left), asio::detached);
    }
    ioc.restart();
    ioc.run();
    return left == 0;
  };
  auto t0 = std::chrono::steady_clock::now();
  report_all();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report_all();  // duplicates: nothing may change

  auto after = std::make_shared<store::distribution_record>();
  store::read_fn rd = [after, id = d->id](store::catalog_read& r) -> result<void> {
    auto x = r.get_distribution("", id);
    if (!x) return std::move(x).error();
    *after = *x;
    return {};
  };
  (void)run(ioc, s.catalog().read(std::move(rd)));
  s.close();
  round_result out;
  out.seconds = secs;
  out.consistent = after->fan_out_succeeded == children && after->status == "success" && after->fan_out_failed == 0;
  if (!out.consistent)
    std::fprintf(stderr, "inconsistent: succeeded %lld status %s\n", static_cast<long long>(after->fan_out_succeeded),
                 after->status.c_str());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int children = argc > 1 ? std::atoi(argv[1]) : 200;
  int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  auto dir = std::filesystem::temp_directory_path() / ("cf-agg-" + new_object_id());
  std::filesystem::create_directories(dir);
  std::vector<double> rates;
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    auto res = one_round(children, dir, r);
    rates.push_back(children / res.seconds);
    ok = ok && res.consistent;
  }
  std::sort(rates.begin(), rates.end());
  std::filesystem::remove_all(dir);
  std::printf("{\"children\":%d,\"rounds\":%d,\"aggregate_updates_per_s_median\":%.0f,\"min\":%.0f,\"max\":%.0f,"
              "\"no_lost_or_double_count\":%s}\n",
              children, rounds, rates[rates.size() / 2], rates.front(), rates.back(), ok ? "true" : "false");
  return ok ? 0 : 1;
}
