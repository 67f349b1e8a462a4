// Client-side CPU of the MongoDB store per claim + finish: what certfleet itself spends (command
// building, BSON parsing, the driver, the socket calls), measured against mockupdb on loopback.
// mockupdb is a Python test server: its answer time is not a MongoDB server's, so this measures
// CPU time of this process, never throughput; throughput against a real replica set is not
// measured here (docs/performance.md).
//
//   bench/mongo_client_cpu [--pairs 2000] [--runs 5]
#include "certfleet/store/mongodb.hpp"
#include "job_document.hpp"
#include "mockupdb.hpp"
#include "run_sync.hpp"
#include "temp_dir.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace certfleet;
namespace json = boost::json;

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = 2000, runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--pairs")) pairs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
  }
  const certfleet::time_ms t0 = 1'700'000'000'000;
  json::object job{{"_id", "650000000000000000000001"}, {"project_id", "p1"}, {"type", "noop"}, {"lane", "main"},
                   {"payload", R"({"ms":0})"}, {"status", "active"}, {"attempts", 1}, {"max_attempts", 3},
                   {"fence", 1}, {"ready_at", t0}, {"held", false}, {"locked_by", "w1"}, {"locked_until", t0 + 30'000},
                   {"created_at", t0}, {"started_at", t0}, {"progress_current", 0}, {"progress_total", 0},
                   {"cancel_requested", false}, {"log_seq", 0}};

  // 1. Pure: building the claim and finish commands and reading a job document back.
  {
    std::vector<double> ns;
    const int n = 200'000;
    store::mongo::doc reply;
    auto parsed = bson_new_from_json(reinterpret_cast<const std::uint8_t*>(json::serialize(job).c_str()), -1, nullptr);
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      std::size_t sink = 0;
      for (int i = 0; i < n; ++i) {
        auto claim = store::mongo::claim_command("main", "w1", t0, {true, 0}, 30'000, 10'000);
        store::finish_request f;
        f.lease = {"650000000000000000000001", 1};
        f.worker_id = "w1";
        auto finish = store::mongo::finish_command(f, t0, 10'000, false);
        auto rec = store::mongo::read_job(parsed);
        sink += claim.get()->len + finish.get()->len + rec.id.size();
      }
      ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / n);
      if (sink == 0) std::puts("");
    }
    bson_destroy(parsed);
    std::printf("pure: claim+finish command build + one job read: %.0f ns median of %d runs (%d each)\n", median(ns),
                runs, n);
  }

  // 2. Through the driver against mockupdb: CPU of this process per claim + finish pair.
  testbed::temp_dir dir;
  json::object script{{"rules", json::array{}}, {"default", json::object{{"findAndModify", json::object{{"ok", 1}, {"value", job}}}}}};
  testbed::mockupdb db(dir, script);
  store::mongodb_options o;
  o.uri = db.uri();
  o.threads = 1;
  o.clock = store::lease_clock::caller;
  auto q = store::open_mongodb_queue(o);
  if (!q) {
    std::fprintf(stderr, "open: %s\n", q.error().message.c_str());
    return 1;
  }
  std::vector<double> cpu_us, wall_us;
  for (int r = 0; r < runs; ++r) {
    const auto c0 = cpu_seconds();
    const auto w0 = std::chrono::steady_clock::now();
    for (int i = 0; i < pairs; ++i) {
      auto claimed = testbed::run_sync((*q)->jobs().claim("main", "w1", t0, 30'000, 1));
      if (!claimed || claimed->empty()) {
        std::fprintf(stderr, "claim failed\n");
        return 1;
      }
      store::finish_request f;
      f.lease = {claimed->front().id, claimed->front().fence};
      f.worker_id = "w1";
      auto done = testbed::run_sync((*q)->jobs().finish({f}, t0));
      if (!done) {
        std::fprintf(stderr, "finish failed: %s\n", done.error().message.c_str());
        return 1;
      }
    }
    cpu_us.push_back((cpu_seconds() - c0) * 1e6 / pairs);
    wall_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - w0).count() / pairs);
  }
  (*q)->close();
  std::printf("driver: client CPU per claim+finish pair: %.1f us median of %d runs (%d pairs each); wall %.0f us "
              "per pair (mockupdb's Python answers, not a MongoDB server's)\n",
              median(cpu_us), runs, pairs, median(wall_us));
  return 0;
}
