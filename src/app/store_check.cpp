// The store self-test. Everything happens in a scratch database (certfleet_check_<id>) that is
// dropped at the end, so the operator's data is never read or written: concurrent claims from
// separate client pools, an idempotent-enqueue race, a fan-out enqueue in one transaction, the
// counters' guard, the fence refusing a stale finish.
#include "store_check.hpp"

#include "certfleet/app/exit_codes.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/mongodb.hpp"
#include "wiring.hpp"

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace certfleet::app {

namespace {

struct check_result {
  bool ok = false;
  std::string detail;
};

// A noop job with one attempt (the check claims it, never runs it).
result<store::new_job> check_job(const std::string& project_id, std::string key = {}) {
  queue::enqueue_request r;
  r.project_id = project_id;
  r.type = queue::job_names::noop;
  r.max_attempts = 1;
  if (!key.empty()) r.idempotency_key = std::move(key);
  return queue::make_job(r, queue::caller::system, nullptr);
}

constexpr int clients = 4;

// Jobs enqueued once, claimed by `clients` stores at once (separate pools, as separate
// machines would): every job claimed exactly once.
check_result concurrent_claims(const std::vector<std::unique_ptr<store::store>>& stores, const std::string& project) {
  constexpr int jobs = 400;
  auto one = check_job(project);
  if (!one) return {false, "job: " + one.error().message};
  std::vector<store::new_job> batch(jobs, *one);
  auto put = run_sync([&] { return stores[0]->jobs().enqueue_many(batch, system_clock().now_ms()); });
  if (!put) return {false, "enqueue: " + put.error().message};
  std::mutex m;
  std::multiset<std::string> claimed;
  std::string failure;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      const auto worker = fmt::format("check-{}", c);
      for (;;) {
        auto r = run_sync([&] { return stores[c]->jobs().claim("main", worker, system_clock().now_ms(), 60'000, 10); });
        std::lock_guard lk(m);
        if (!r) {
          failure = r.error().message;
          return;
        }
        if (r->empty()) return;
        for (const auto& j : *r) claimed.insert(j.id);
      }
    });
  for (auto& t : threads) t.join();
  if (!failure.empty()) return {false, "claim: " + failure};
  std::set<std::string> distinct(claimed.begin(), claimed.end());
  if (claimed.size() != static_cast<std::size_t>(jobs) || distinct.size() != claimed.size())
    return {false, fmt::format("{} claims of {} distinct jobs for {} enqueued (each must be claimed once)", claimed.size(),
                               distinct.size(), jobs)};
  return {true, fmt::format("{} jobs, {} clients: each claimed exactly once", jobs, clients)};
}

// The same key enqueued by every client at once: one job, every caller told its id.
check_result idempotent_race(const std::vector<std::unique_ptr<store::store>>& stores, const std::string& project) {
  const auto one = check_job(project, "check:" + new_object_id());
  if (!one) return {false, "job: " + one.error().message};
  std::mutex m;
  std::set<std::string> ids;
  int created = 0;
  std::string failure;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      for (int i = 0; i < 5; ++i) {
        auto r = run_sync([&] { return stores[c]->jobs().enqueue(*one, system_clock().now_ms()); });
        std::lock_guard lk(m);
        if (!r) {
          failure = r.error().message;
          return;
        }
        ids.insert(r->job.id);
        created += r->created ? 1 : 0;
      }
    });
  for (auto& t : threads) t.join();
  if (!failure.empty()) return {false, "enqueue: " + failure};
  if (ids.size() != 1 || created != 1)
    return {false, fmt::format("{} enqueues of one key made {} jobs ({} said created)", clients * 5, ids.size(), created)};
  return {true, fmt::format("{} concurrent enqueues of one key: one job", clients * 5)};
}

// A fan-out's children in one transaction; sent again, the same jobs come back.
check_result fan_out_transaction(store::store& st, const std::string& project) {
  const auto run = new_object_id();
  std::vector<store::new_job> batch;
  for (int i = 0; i < 100; ++i) {
    auto one = check_job(project, fmt::format("check-fan:{}:{}", run, i));
    if (!one) return {false, "job: " + one.error().message};
    batch.push_back(std::move(*one));
  }
  auto first = run_sync([&] { return st.jobs().enqueue_many(batch, system_clock().now_ms()); });
  if (!first) return {false, "first enqueue: " + first.error().message};
  auto again = run_sync([&] { return st.jobs().enqueue_many(batch, system_clock().now_ms()); });
  if (!again) return {false, "second enqueue: " + again.error().message};
  int created = 0;
  for (std::size_t i = 0; i < first->size(); ++i) {
    if (!(*first)[i].created || (*again)[i].created || (*first)[i].job.id != (*again)[i].job.id)
      return {false, fmt::format("child {} was not created once and found again", i)};
    ++created;
  }
  return {true, fmt::format("{} children in one transaction; the replay created none", created)};
}

// The counters' guard: a child reported twice is counted once.
check_result counter_guard(store::store& st, const std::string& project) {
  auto counted = std::make_shared<std::vector<bool>>();
  store::tx_fn fn = [project, counted](store::catalog_tx& tx) -> result<void> {
    store::distribution_record d;
    d.project_id = project;
    d.name = "check-" + new_object_id();
    d.certificate_id = new_object_id();
    d.run_no = 1;
    auto inserted = tx.insert_distribution(d);
    if (!inserted) return std::move(inserted).error();
    store::finalized_child c{new_object_id(), "succeeded", true};
    for (int i = 0; i < 2; ++i) {
      auto added = tx.add_finalized(inserted->id, 1, c);
      if (!added) return std::move(added).error();
      counted->push_back(*added);
    }
    return {};
  };
  auto r = run_sync([&] { return st.catalog().transact(fn); });
  if (!r) return {false, r.error().message};
  if (*counted != std::vector<bool>{true, false}) return {false, "a replayed report was counted twice"};
  return {true, "a replayed report counts once"};
}

// A finish from an attempt whose fence moved on changes nothing.
check_result fencing(store::store& st, const std::string& project) {
  auto one = check_job(project);
  if (!one) return {false, "job: " + one.error().message};
  auto j = run_sync([&] { return st.jobs().enqueue(*one, system_clock().now_ms()); });
  if (!j) return {false, j.error().message};
  auto c = run_sync([&] { return st.jobs().claim("main", "check-fence", system_clock().now_ms() + 1, 60'000, 100); });
  if (!c) return {false, c.error().message};
  store::finish_request stale;
  stale.lease = {j->job.id, 0};
  stale.worker_id = "check-fence";
  auto f = run_sync([&] { return st.jobs().finish({stale}, system_clock().now_ms()); });
  if (!f) return {false, f.error().message};
  if (f->at(0) || !f->at(0).error().is(errc::lease_lost)) return {false, "a stale fence finished a job"};
  return {true, "a stale attempt's finish is refused (lease_lost)"};
}

}  // namespace

int run_store_check(const settings_map& settings) {
  const auto& uri = settings.text("store");
  if (uri == "sqlite") {
    std::cerr << "certfleet: store: store check tests a MongoDB cluster (--store mongodb://…); the embedded store is "
                 "checked by certfleet doctor\n";
    return to_int(exit_code::usage);
  }
  auto backend = store::mongodb_backend_for(uri);
  if (!backend) {
    std::cerr << "certfleet: " << backend.error().message << "\n";
    return to_int(exit_code::usage);
  }
  store::mongodb_options o;
  o.uri = uri;
  o.database = "certfleet_check_" + new_object_id();
  o.change_stream = false;
  std::cout << fmt::format("store check on {} (scratch database {}, dropped at the end)\n",
                           (*backend)->redacted_uri(uri), o.database);
  std::vector<std::unique_ptr<store::store>> stores;
  for (int c = 0; c < clients; ++c) {
    auto s = (*backend)->open(o);
    if (!s) {
      std::cerr << "certfleet: " << s.error().message << "\n";
      if (c > 0) (void)(*backend)->drop_database(o);
      return to_int(exit_code::unavailable);
    }
    stores.push_back(std::move(*s));
  }
  std::cout << "ok    start: a replica-set primary answered, w:majority schema write and indexes created\n";
  int failed = 0;
  auto project = run_sync([&] { return stores[0]->projects().ensure("check", system_clock().now_ms()); });
  if (!project) {
    std::cout << "FAIL  project: " << project.error().message << "\n";
    ++failed;
  } else {
    const auto pid = project->first.id;
    const std::vector<std::pair<const char*, std::function<check_result()>>> checks{
        {"concurrent claims", [&] { return concurrent_claims(stores, pid); }},
        {"idempotent enqueue race", [&] { return idempotent_race(stores, pid); }},
        {"fan-out enqueue transaction", [&] { return fan_out_transaction(*stores[0], pid); }},
        {"counter guard", [&] { return counter_guard(*stores[0], pid); }},
        {"fencing", [&] { return fencing(*stores[0], pid); }},
    };
    for (const auto& [name, run] : checks) {
      auto r = run();
      std::cout << fmt::format("{:<6}{}: {}\n", r.ok ? "ok" : "FAIL", name, r.detail);
      failed += r.ok ? 0 : 1;
    }
  }
  for (auto& s : stores) s->close();
  stores.clear();
  if (auto dropped = (*backend)->drop_database(o); !dropped) {
    std::cout << "FAIL  cleanup: " << dropped.error().message << " (drop " << o.database << " by hand)\n";
    ++failed;
  } else {
    std::cout << "ok    cleanup: dropped " << o.database << "\n";
  }
  std::cout << (failed ? fmt::format("{} check(s) failed\n", failed) : std::string("all checks passed\n"));
  return failed ? to_int(exit_code::failed) : 0;
}

}  // namespace certfleet::app
