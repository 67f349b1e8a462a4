// The worker registry on SQLite (worker_store, table `workers`; issue 34), mirroring
// mongo_workers.cpp. Apart from the job queue (sqlite_store.cpp) because only declare_dead touches
// jobs, and it does so through the queue's expired-lease transitions (reap_jobs).
#include "sqlite_store_detail.hpp"

#include "certfleet/store/workers.hpp"
#include "job_row.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace certfleet::store::sqlite::detail {

task<void> sqlite_store::beat(worker_presence w, time_ms now) {
  return run_write<result<void>>(writer_, [w = std::move(w), now](db& d) -> result<void> {
    auto s = d.prepare(
        "INSERT INTO workers (id, host, host_key, pid, proc_start, version, lanes, started_at, running, last_seen) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
        "ON CONFLICT (id) DO UPDATE SET running = excluded.running, last_seen = excluded.last_seen "
        "WHERE workers.dead_at IS NULL");
    s->bind(1, w.id).bind(2, w.host).bind(3, w.host_key).bind(4, w.pid).bind(5, w.proc_start).bind(6, w.version);
    s->bind(7, w.lanes).bind(8, w.started_at).bind(9, w.running).bind(10, now);
    s->run();
    if (d.changes() == 0)
      return make_error(errc::lease_lost,
                        fmt::format("worker {} was declared dead and its jobs were given to others", w.id), "worker");
    return {};
  });
}

task<std::vector<worker_presence>> sqlite_store::list_workers(time_ms now) {
  return run_read<result<std::vector<worker_presence>>>(readers_, [now](db& d) {
    std::vector<worker_presence> out;
    auto s = d.prepare(
        "SELECT id, host, host_key, pid, proc_start, version, lanes, started_at, running, last_seen, "
        "coalesce(dead_at, 0), coalesce(dead_reason, ''), released_jobs FROM workers "
        "ORDER BY dead_at IS NOT NULL, last_seen DESC, id");
    while (s->step()) {
      worker_presence w;
      w.id = s->text(0);
      w.host = s->text(1);
      w.host_key = s->text(2);
      w.pid = s->int64(3);
      w.proc_start = s->text(4);
      w.version = s->text(5);
      w.lanes = s->text(6);
      w.started_at = s->int64(7);
      w.running = s->int64(8);
      w.last_seen = s->int64(9);
      w.age_ms = std::max<time_ms>(now - w.last_seen, 0);
      w.dead_at = s->int64(10);
      w.dead_reason = s->text(11);
      w.released_jobs = s->int64(12);
      out.push_back(std::move(w));
    }
    return result<std::vector<worker_presence>>(std::move(out));
  });
}

task<std::int64_t> sqlite_store::declare_dead(std::string worker_id, std::string reason, time_ms min_age_ms,
                                              time_ms now) {
  return run_write<result<std::int64_t>>(
      writer_, [this, worker_id = std::move(worker_id), reason = std::move(reason), min_age_ms, now](db& d)
                   -> result<std::int64_t> {
        {
          auto s = d.prepare("UPDATE workers SET dead_at = ?2, dead_reason = ?3 "
                             "WHERE id = ?1 AND dead_at IS NULL AND last_seen <= ?2 - ?4");
          s->bind(1, worker_id).bind(2, now).bind(3, reason).bind(4, min_age_ms);
          s->run();
          if (d.changes() == 0)
            return make_error(errc::conflict,
                              fmt::format("worker {} is not registered, already declared dead, or beat again", worker_id),
                              "worker");
        }
        // Its jobs' leases end now and take the transitions of an expired lease: none stays
        // active under it, so a late heartbeat, log line or finish of that worker (filtered on
        // locked_by, status and fence) is refused; the next claim raises the fence.
        std::vector<job_record> held;
        {
          auto s = d.prepare("UPDATE jobs SET locked_until = ?2, ready_at = ?2 "
                             "WHERE status = 'active' AND locked_by = ?1 RETURNING " JOB_COLS);
          s->bind(1, worker_id).bind(2, now);
          while (s->step()) held.push_back(read_job(*s));
        }
        const auto n = reap_jobs(d, held, now);
        auto u = d.prepare("UPDATE workers SET released_jobs = ?2 WHERE id = ?1");
        u->bind(1, worker_id).bind(2, n);
        u->run();
        return static_cast<std::int64_t>(n);
      });
}

task<std::int64_t> sqlite_store::prune_workers(time_ms before) {
  return run_write<result<std::int64_t>>(writer_, [before](db& d) -> result<std::int64_t> {
    auto s = d.prepare("DELETE FROM workers WHERE dead_at IS NOT NULL AND dead_at < ?1");
    s->bind(1, before);
    s->run();
    return static_cast<std::int64_t>(d.changes());
  });
}

}  // namespace certfleet::store::sqlite::detail
