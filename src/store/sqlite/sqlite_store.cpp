// The embedded store: SQLite in WAL mode, one writer thread (group commit), reader threads.
// Here: opening it, the job writes and the expired-lease transitions; the job reads are
// sqlite_store_reads.cpp's, worker_store sqlite_store_workers.cpp's, project_store
// sqlite_store_projects.cpp's (sqlite_store_detail.hpp: the class they share).
#include "sqlite_store_detail.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/job_policy.hpp"
#include "certfleet/store/store.hpp"
#include "executor.hpp"
#include "job_row.hpp"
#include "migrations.hpp"
#include "sqlite_auth.hpp"
#include "sqlite_catalog.hpp"
#include "sqlite_maintenance.hpp"
#include "sqlite_session_slots.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <tuple>

namespace certfleet::store {
namespace sqlite {

job_record read_job(stmt& s) {
  job_record j;
  j.id = s.text(0);
  j.project_id = s.text(1);
  j.type = s.text(2);
  j.lane = s.text(3);
  j.payload = s.text(4);
  j.status = parse_job_status(s.text(5)).value_or(job_status::dead);
  j.result_status = s.text(6);
  j.attempts = static_cast<int>(s.int64(7));
  j.max_attempts = static_cast<int>(s.int64(8));
  j.fence = s.int64(9);
  j.ready_at = s.int64(10);
  j.held = s.int64(11) != 0;
  j.locked_by = s.text(12);
  j.locked_until = s.int64(13);
  j.idempotency_key = s.text(14);
  j.parent_job_id = s.text(15);
  j.certificate_id = s.text(16);
  j.distribution_id = s.text(17);
  j.triggered_by = s.text(18);
  j.created_at = s.int64(19);
  j.started_at = s.int64(20);
  j.completed_at = s.int64(21);
  j.error = s.text(22);
  j.progress_current = s.int64(23);
  j.progress_total = s.int64(24);
  j.cancel_requested = s.int64(25) != 0;
  j.error_code = s.text(26);
  j.error_class = s.text(27);
  return j;
}

namespace {

// What a claim returns: what a handler reads. The rest of an active job's document follows from the
// claim itself (status active, locked_by the caller, ready_at = locked_until, not held, no cancel
// request) and is filled in without asking SQLite to copy it: RETURNING costs per column.
#define CLAIM_COLS                                                                                 \
  "id, project_id, type, lane, payload, attempts, max_attempts, fence, locked_until, started_at, " \
  "idempotency_key, parent_job_id, certificate_id, distribution_id, triggered_by, created_at"

job_record read_claimed(stmt& s, const std::string& worker_id) {
  job_record j;
  j.id = s.text(0);
  j.project_id = s.text(1);
  j.type = s.text(2);
  j.lane = s.text(3);
  j.payload = s.text(4);
  j.status = job_status::active;
  j.attempts = static_cast<int>(s.int64(5));
  j.max_attempts = static_cast<int>(s.int64(6));
  j.fence = s.int64(7);
  j.locked_by = worker_id;
  j.locked_until = s.int64(8);
  j.ready_at = j.locked_until;
  j.started_at = s.int64(9);
  j.idempotency_key = s.text(10);
  j.parent_job_id = s.text(11);
  j.certificate_id = s.text(12);
  j.distribution_id = s.text(13);
  j.triggered_by = s.text(14);
  j.created_at = s.int64(15);
  return j;
}

class tx_impl final : public job_tx {
 public:
  explicit tx_impl(db& d) : d_(d) {}

  result<enqueue_outcome> enqueue(const new_job& j, time_ms now) override {
    auto id = j.id.empty() ? new_object_id() : j.id;
    {
      auto s = d_.prepare(
          "INSERT INTO jobs (id, project_id, type, lane, payload, status, attempts, max_attempts, fence, "
          "ready_at, held, idempotency_key, parent_job_id, certificate_id, distribution_id, triggered_by, "
          "created_at) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, ?6, 0, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
          "ON CONFLICT (project_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING "
          "RETURNING " JOB_COLS);
      s->bind(1, id).bind(2, j.project_id).bind(3, j.type).bind(4, j.lane).bind(5, j.payload);
      s->bind(6, j.max_attempts).bind(7, j.run_at ? j.run_at : now).bind(8, j.held ? 1 : 0);
      s->bind_or_null(9, j.idempotency_key).bind_or_null(10, j.parent_job_id).bind_or_null(11, j.certificate_id);
      s->bind_or_null(12, j.distribution_id).bind_or_null(13, j.triggered_by).bind(14, now);
      if (s->step()) {
        auto rec = read_job(*s);
        s->run();
        return enqueue_outcome{std::move(rec), true};
      }
    }
    auto s = d_.prepare("SELECT " JOB_COLS " FROM jobs WHERE project_id = ?1 AND idempotency_key = ?2");
    s->bind(1, j.project_id).bind(2, j.idempotency_key);
    if (!s->step()) throw db_error(0, "idempotency conflict without an existing job");
    return enqueue_outcome{read_job(*s), false};
  }

  result<std::int64_t> append_log(const std::string& job_id, std::string_view level, std::string_view message,
                                  std::string_view detail, time_ms now) override {
    std::int64_t seq = 1;
    {
      auto s = d_.prepare("SELECT coalesce(max(seq), 0) + 1 FROM job_logs WHERE job_id = ?1");
      s->bind(1, job_id);
      if (s->step()) seq = s->int64(0);
    }
    auto s = d_.prepare("INSERT INTO job_logs (job_id, seq, ts, level, message, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    s->bind(1, job_id).bind(2, seq).bind(3, now).bind(4, level).bind(5, message).bind_or_null(6, detail);
    s->run();
    return seq;
  }

  catalog_tx& catalog() override {
    if (!catalog_) catalog_ = make_catalog_tx(d_, *this);
    return *catalog_;
  }

 private:
  db& d_;
  std::unique_ptr<catalog_tx> catalog_;
};

}  // namespace

using namespace detail;

namespace detail {

error job_not_found(const std::string& id) {
  return make_error(errc::not_found, fmt::format("job {} not found", id), "id");
}

std::optional<job_record> find_job(db& d, const std::string& project_id, const std::string& id) {
  auto s = d.prepare("SELECT " JOB_COLS " FROM jobs WHERE id = ?1 AND project_id = ?2");
  s->bind(1, id).bind(2, project_id);
  if (!s->step()) return std::nullopt;
  return read_job(*s);
}

sqlite_store::sqlite_store(const sqlite_options& o)
    : writer_(
          o.path, o.busy_timeout_ms, o.synchronous_full,
          [read_only = o.read_only](db& d) { read_only ? check_schema_current(d) : migrate(d); }, 512,
          o.read_only),
      readers_(o.path, o.readers, o.busy_timeout_ms, o.read_only),
      auth_(make_auth_store(writer_, readers_)),
      maintenance_(make_maintenance_stores(writer_, readers_)),
      catalog_(make_catalog_store(writer_, readers_, [](db& d) -> std::unique_ptr<job_tx> {
        return std::make_unique<tx_impl>(d);
      })),
      slots_(make_session_slot_store(writer_, readers_)) {}

task<void> sqlite_store::ping() {
  if (writer_.disk_full()) {
    // Ready again only once a write goes through: the probe needs a new WAL frame, as an
    // enqueue does.
    auto probe = co_await run_write<result<void>>(writer_, [](db& d) -> result<void> {
      auto s = d.prepare("INSERT INTO store_meta (key, value) VALUES ('write_probe', hex(randomblob(16))) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
      s->run();
      return {};
    });
    if (!probe) co_return std::move(probe).error();
  }
  co_return co_await run_read<result<void>>(readers_, [](db& d) -> result<void> {
    d.prepare("SELECT 1")->run();
    return {};
  });
}

// Runs the terminal hook for a job that just became terminal, in the current transaction.
void sqlite_store::terminal(db& d, const job_record& j) {
  if (!hook_.wants(j.type, j.status)) return;
  tx_impl tx(d);
  hook_.fn(tx, j);
}

task<enqueue_outcome> sqlite_store::enqueue(new_job j, time_ms now) {
  return run_write<result<enqueue_outcome>>(writer_, [j = std::move(j), now](db& d) {
    tx_impl tx(d);
    return tx.enqueue(j, now);
  });
}

task<std::vector<enqueue_outcome>> sqlite_store::enqueue_many(std::vector<new_job> jobs, time_ms now) {
  return run_write<result<std::vector<enqueue_outcome>>>(
      writer_, [jobs = std::move(jobs), now](db& d) -> result<std::vector<enqueue_outcome>> {
        tx_impl tx(d);
        std::vector<enqueue_outcome> out;
        out.reserve(jobs.size());
        for (const auto& j : jobs) {
          auto r = tx.enqueue(j, now);
          if (!r) return std::move(r).error();
          out.push_back(std::move(*r));
        }
        return out;
      });
}

task<std::vector<job_record>> sqlite_store::claim(std::string lane, std::string worker_id, time_ms now,
                                                  time_ms lease_ms, int limit) {
  return run_write<result<std::vector<job_record>>>(
      writer_, [lane = std::move(lane), worker_id = std::move(worker_id), now, lease_ms, limit](db& d) {
        // Select, then update each by rowid, in this one write transaction (a single writer:
        // nothing runs between the two). UPDATE … RETURNING would buffer the rows in an
        // ephemeral table opened and freed per statement. The claimable set comes from two
        // indexes (migration 6) merged in (ready_at, id) order: waiting jobs from jobs_claim,
        // active jobs whose lease expired with attempts left from jobs_lease (ready_at =
        // locked_until for an active job).
        struct candidate {
          job_record job;
          std::int64_t rid;
        };
        std::vector<candidate> found;
        auto collect = [&](stmt_scope s) {
          s->bind(1, lane).bind(2, now).bind(3, limit);
          while (s->step()) {
            candidate c{read_claimed(*s, worker_id), s->int64(16)};
            c.job.ready_at = s->int64(17);
            found.push_back(std::move(c));
          }
        };
        collect(d.prepare("SELECT " CLAIM_COLS ", rid, ready_at FROM jobs WHERE lane = ?1 AND " CLAIMABLE
                          " AND ready_at <= ?2 ORDER BY ready_at, id LIMIT ?3"));
        collect(d.prepare("SELECT " CLAIM_COLS ", rid, locked_until FROM jobs WHERE status = 'active' AND locked_until <= ?2 "
                          "AND lane = ?1 AND held = 0 AND attempts < max_attempts AND cancel_requested = 0 "
                          "ORDER BY locked_until, id LIMIT ?3"));
        std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
          return std::tie(a.job.ready_at, a.job.id) < std::tie(b.job.ready_at, b.job.id);
        });
        if (found.size() > static_cast<std::size_t>(limit)) found.resize(static_cast<std::size_t>(limit));
        std::vector<job_record> out;
        std::vector<std::int64_t> rids;
        out.reserve(found.size());
        for (auto& c : found) {
          rids.push_back(c.rid);
          out.push_back(std::move(c.job));
        }
        auto u = d.prepare("UPDATE jobs SET status = 'active', locked_by = ?2, locked_until = ?3, ready_at = ?3, "
                           "attempts = attempts + 1, fence = fence + 1, started_at = ?4 WHERE rid = ?1");
        for (std::size_t i = 0; i < rids.size(); ++i) {
          u->reset();
          u->bind(1, rids[i]).bind(2, worker_id).bind(3, now + lease_ms).bind(4, now);
          u->run();
          auto& j = out[i];
          j.attempts += 1;
          j.fence += 1;
          j.locked_until = j.ready_at = now + lease_ms;
          j.started_at = now;
        }
        std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
        return result<std::vector<job_record>>(std::move(out));
      });
}

task<std::vector<heartbeat_result>> sqlite_store::heartbeat(std::vector<lease_ref> leases, std::string worker_id,
                                                            time_ms now, time_ms lease_ms) {
  return run_write<result<std::vector<heartbeat_result>>>(
      writer_, [leases = std::move(leases), worker_id = std::move(worker_id), now, lease_ms](db& d) {
        std::vector<heartbeat_result> out;
        out.reserve(leases.size());
        for (const auto& l : leases) {
          auto s = d.prepare(
              "UPDATE jobs SET locked_until = ?1, ready_at = ?1 WHERE id = ?2 AND locked_by = ?3 AND fence = ?4 "
              "AND status = 'active' RETURNING cancel_requested");
          s->bind(1, now + lease_ms).bind(2, l.id).bind(3, worker_id).bind(4, l.fence);
          heartbeat_result h{l.id, lease_state::lost};
          if (s->step()) {
            h.state = s->int64(0) ? lease_state::cancel_requested : lease_state::held;
            s->run();
          }
          out.push_back(std::move(h));
        }
        return result<std::vector<heartbeat_result>>(std::move(out));
      });
}

task<std::vector<result<job_record>>> sqlite_store::finish(std::vector<finish_request> reqs, time_ms now) {
  return run_write<result<std::vector<result<job_record>>>>(
      writer_, [this, reqs = std::move(reqs), now](db& d) {
        std::vector<result<job_record>> out;
        out.reserve(reqs.size());
        for (const auto& r : reqs) out.push_back(finish_one(d, r, now));
        return result<std::vector<result<job_record>>>(std::move(out));
      });
}

result<job_record> sqlite_store::finish_one(db& d, const finish_request& r, time_ms now) {
  // Fenced: only the holder of this attempt (worker and fence) may end it. Read, then update
  // by rowid: an UPDATE … RETURNING would buffer its rows in an ephemeral table (a b-tree and
  // a pager opened and freed per statement: a fifth of the writer's time at 25,000 jobs/s).
  job_record j;
  std::int64_t rid = 0;
  {
    auto s = d.prepare("SELECT rid, attempts, max_attempts, ready_at, type FROM jobs "
                       "WHERE id = ?1 AND locked_by = ?2 AND fence = ?3 AND status = 'active'");
    s->bind(1, r.lease.id).bind(2, r.worker_id).bind(3, r.lease.fence);
    if (!s->step())
      return make_error(errc::lease_lost,
                        fmt::format("job {} attempt {} is no longer held by {}", r.lease.id, r.lease.fence, r.worker_id),
                        "fence");
    rid = s->int64(0);
    j.attempts = static_cast<int>(s->int64(1));
    j.max_attempts = static_cast<int>(s->int64(2));
    j.ready_at = s->int64(3);
    j.type = s->text(4);
    s->run();
  }
  j.id = r.lease.id;
  j.fence = r.lease.fence;
  switch (r.kind) {
    case finish_kind::completed: {
      j.status = job_status::completed;
      j.result_status = r.result_status.empty() ? std::string("ok") : r.result_status;
      j.completed_at = now;
      auto s = d.prepare("UPDATE jobs SET status = 'completed', result_status = ?2, completed_at = ?3, "
                         "locked_until = NULL, error = NULL, error_code = NULL, error_class = NULL WHERE rid = ?1");
      s->bind(1, rid).bind(2, j.result_status).bind(3, now);
      s->run();
      break;
    }
    case finish_kind::failed:
    case finish_kind::dead: {
      // The store enforces the rule: an error with no attempts left is dead, whatever was asked.
      bool dead = r.kind == finish_kind::dead || j.attempts >= j.max_attempts;
      j.status = dead ? job_status::dead : job_status::failed;
      j.completed_at = dead ? now : 0;
      j.ready_at = r.retry_at ? r.retry_at : now;
      j.error = r.error;
      j.error_code = r.error_code;
      j.error_class = r.error_class;
      auto s = d.prepare("UPDATE jobs SET status = ?2, completed_at = ?3, ready_at = ?4, error = ?5, "
                         "error_code = NULLIF(?6, ''), error_class = NULLIF(?7, ''), locked_until = NULL WHERE rid = ?1");
      s->bind(1, rid).bind(2, std::string(to_string(j.status))).bind(4, j.ready_at).bind(5, r.error);
      s->bind(6, r.error_code).bind(7, r.error_class);
      if (dead) s->bind(3, now);
      else s->bind_null(3);
      s->run();
      break;
    }
    case finish_kind::cancelled: {
      j.status = job_status::cancelled;
      j.completed_at = now;
      j.error = "cancelled on request";
      j.error_code = std::string(cancelled_code);
      auto s = d.prepare("UPDATE jobs SET status = 'cancelled', completed_at = ?2, error = 'cancelled on request', "
                         "error_code = ?3, error_class = NULL, locked_until = NULL WHERE rid = ?1");
      s->bind(1, rid).bind(2, now).bind(3, cancelled_code);
      s->run();
      break;
    }
    case finish_kind::released: {
      // Shutdown: the attempt is given back, the fence is not.
      j.status = job_status::pending;
      j.attempts -= 1;
      j.ready_at = now;
      auto s = d.prepare("UPDATE jobs SET status = 'pending', attempts = attempts - 1, ready_at = ?2, locked_by = NULL, "
                         "locked_until = NULL WHERE rid = ?1");
      s->bind(1, rid).bind(2, now);
      s->run();
      break;
    }
  }
  if (is_terminal(j.status) && hook_.wants(j.type, j.status)) {
    auto full = d.prepare("SELECT " JOB_COLS " FROM jobs WHERE rid = ?1");
    full->bind(1, rid);
    if (!full->step()) throw db_error(0, "finished job vanished inside the write transaction");
    auto rec = read_job(*full);
    full->run();
    terminal(d, rec);
  }
  return j;
}

task<int> sqlite_store::reap_expired(time_ms now, int limit) {
  return run_write<result<int>>(writer_, [this, now, limit](db& d) -> result<int> {
    std::vector<job_record> expired;
    {
      auto s = d.prepare("SELECT " JOB_COLS " FROM jobs WHERE status = 'active' AND locked_until <= ?1 "
                         "ORDER BY locked_until LIMIT ?2");
      s->bind(1, now).bind(2, limit);
      while (s->step()) expired.push_back(read_job(*s));
    }
    return reap_jobs(d, expired, now);
  });
}

// An expired lease's transitions (reap_transition_of), for jobs read inside this write
// transaction, so each one's cancel request is the stored one: an ending job runs the terminal
// hook.
int sqlite_store::reap_jobs(db& d, const std::vector<job_record>& expired, time_ms now) {
    int n = 0;
    for (const auto& j : expired) {
      const auto t = reap_transition_of(j, now);
      if (t.returns_to_pending()) {
        // Back to pending, so the job list shows a waiting job rather than a dead worker's
        // "active" one (the next claim raises attempts and fence). locked_by is cleared: the
        // lost worker's heartbeat and finish are refused.
        auto p = d.prepare(
            "UPDATE jobs SET status = ?3, locked_by = NULL, locked_until = NULL, error = ?4, "
            "error_code = NULLIF(?5, ''), error_class = NULLIF(?6, '') WHERE id = ?1 AND fence = ?2 AND status = 'active'");
        p->bind(1, j.id).bind(2, j.fence).bind(3, to_string(t.status)).bind(4, t.error);
        p->bind(5, t.error_code).bind(6, t.error_class);
        p->run();
        if (d.changes() > 0) ++n;
        continue;
      }
      auto s = d.prepare(
          "UPDATE jobs SET status = ?4, error = ?5, error_code = NULLIF(?6, ''), error_class = NULLIF(?7, ''), "
          "completed_at = ?1, locked_until = NULL WHERE id = ?2 AND fence = ?3 AND status = 'active' RETURNING " JOB_COLS);
      s->bind(1, t.completed_at).bind(2, j.id).bind(3, j.fence).bind(4, to_string(t.status)).bind(5, t.error);
      s->bind(6, t.error_code).bind(7, t.error_class);
      if (!s->step()) continue;
      auto done = read_job(*s);
      s->run();
      terminal(d, done);
      ++n;
    }
    return n;
}

task<cancel_outcome> sqlite_store::cancel(std::string project_id, std::string id, time_ms now) {
  return run_write<result<cancel_outcome>>(
      writer_, [this, p = std::move(project_id), id = std::move(id), now](db& d) -> result<cancel_outcome> {
        auto j = find_job(d, p, id);
        if (!j) return job_not_found(id);
        if (j->status == job_status::pending || j->status == job_status::failed) {
          auto s = d.prepare("UPDATE jobs SET status = 'cancelled', completed_at = ?1, error = 'cancelled on request', "
                             "error_code = ?3, error_class = NULL "
                             "WHERE id = ?2 AND status IN ('pending', 'failed') RETURNING " JOB_COLS);
          s->bind(1, now).bind(2, id).bind(3, cancelled_code);
          if (!s->step()) throw db_error(0, "cancel raced inside the write transaction");
          auto done = read_job(*s);
          s->run();
          terminal(d, done);
          return cancel_outcome{std::move(done), true};
        }
        if (j->status == job_status::active) {
          auto s = d.prepare("UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND status = 'active' RETURNING " JOB_COLS);
          s->bind(1, id);
          if (!s->step()) throw db_error(0, "cancel raced inside the write transaction");
          auto rec = read_job(*s);
          s->run();
          return cancel_outcome{std::move(rec), false};
        }
        return make_error(errc::conflict,
                          fmt::format("job {} is {}; only pending, failed or active jobs can be cancelled", id,
                                      to_string(j->status)),
                          "status");
      });
}

task<job_record> sqlite_store::retry(std::string project_id, std::string id, time_ms now, int per_minute) {
  return run_write<result<job_record>>(
      writer_, [p = std::move(project_id), id = std::move(id), now, per_minute](db& d) -> result<job_record> {
        auto j = find_job(d, p, id);
        if (!j) return job_not_found(id);
        if (auto refused = retry_refusal(*j)) return std::move(*refused);
        std::optional<rate_window> stored;
        {
          auto s = d.prepare("SELECT window, count FROM rate_windows WHERE project_id = ?1 AND name = 'job_retry'");
          s->bind(1, p);
          if (s->step()) stored = rate_window{s->int64(0), s->int64(1)};
        }
        auto counted = count_retry(stored, now, per_minute);
        if (!counted) return std::move(counted).error();
        {
          auto s = d.prepare(
              "INSERT INTO rate_windows (project_id, name, window, count) VALUES (?1, 'job_retry', ?2, ?3) "
              "ON CONFLICT (project_id, name) DO UPDATE SET window = ?2, count = ?3");
          s->bind(1, p).bind(2, counted->window).bind(3, counted->count).run();
        }
        auto s = d.prepare(
            "UPDATE jobs SET status = 'pending', error = NULL, error_code = NULL, error_class = NULL, ready_at = ?1, attempts = 0, locked_by = NULL, "
            "locked_until = NULL, completed_at = NULL, result_status = NULL, cancel_requested = 0 "
            "WHERE id = ?2 AND status IN ('failed', 'dead') RETURNING " JOB_COLS);
        s->bind(1, now).bind(2, id);
        if (!s->step()) throw db_error(0, "retry raced inside the write transaction");
        auto rec = read_job(*s);
        s->run();
        return rec;
      });
}

task<void> sqlite_store::set_progress(lease_ref lease, std::int64_t current, std::int64_t total) {
  return run_write<result<void>>(writer_, [lease = std::move(lease), current, total](db& d) -> result<void> {
    auto s = d.prepare("UPDATE jobs SET progress_current = ?1, progress_total = ?2 WHERE id = ?3 AND fence = ?4 "
                       "AND status = 'active'");
    s->bind(1, current).bind(2, total).bind(3, lease.id).bind(4, lease.fence).run();
    if (d.changes() == 0)
      return make_error(errc::lease_lost, fmt::format("job {} attempt {} no longer holds its lease", lease.id, lease.fence));
    return {};
  });
}

task<std::int64_t> sqlite_store::append_log(std::string job_id, std::optional<lease_ref> lease, std::string level,
                                            std::string message, std::string detail, time_ms now) {
  return run_write<result<std::int64_t>>(
      writer_, [job_id = std::move(job_id), lease = std::move(lease), level = std::move(level),
                message = std::move(message), detail = std::move(detail), now](db& d) -> result<std::int64_t> {
        if (lease) {
          auto s = d.prepare("SELECT 1 FROM jobs WHERE id = ?1 AND fence = ?2 AND status = 'active'");
          s->bind(1, job_id).bind(2, lease->fence);
          if (!s->step())
            return make_error(errc::lease_lost,
                              fmt::format("job {} attempt {} no longer holds its lease", job_id, lease->fence));
        } else {
          auto s = d.prepare("SELECT 1 FROM jobs WHERE id = ?1");
          s->bind(1, job_id);
          if (!s->step()) return job_not_found(job_id);
        }
        tx_impl tx(d);
        return tx.append_log(job_id, level, message, detail, now);
      });
}

}  // namespace detail
}  // namespace sqlite

namespace {
// The database holds sealed secrets, token hashes, target definitions and the audit log: only
// the service user reads it (docs/secrets.md). SQLite creates files 0644 less the umask and
// gives -wal and -shm the database file's mode, so the database file is created 0600 here
// before SQLite opens it; files left by an older version (0644) are tightened.
result<void> private_db_files(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return {};
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) {
    ::close(fd);
    return {};
  }
  if (errno != EEXIST)
    return make_error(errc::store_failure, fmt::format("cannot create {}: {}", path, std::strerror(errno)), "data");
  for (const auto& f : {path, path + "-wal", path + "-shm"}) {
    struct stat sb {};
    if (::lstat(f.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || (sb.st_mode & 077) == 0) continue;
    if (::chmod(f.c_str(), 0600) != 0)
      return make_error(errc::store_failure,
                        fmt::format("{} has mode {:04o} and cannot be made 0600: {}", f, sb.st_mode & 07777,
                                    std::strerror(errno)),
                        "data");
    spdlog::warn("{} had mode {:04o}: group and others could read the store; changed to 0600", f, sb.st_mode & 07777);
  }
  return {};
}
}  // namespace

result<std::unique_ptr<store>> open_sqlite(const sqlite_options& options) {
  // Memory statistics take a global mutex on every allocation; nothing here reads them.
  static const int configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)configured;
  if (options.read_only) {
    struct stat sb {};
    if (::stat(options.path.c_str(), &sb) != 0)
      return make_error(errc::store_failure, fmt::format("{} does not exist: {}", options.path, std::strerror(errno)),
                        "data");
  } else if (auto ok = private_db_files(options.path); !ok) {
    return std::move(ok).error();
  }
  try {
    return std::unique_ptr<store>(std::make_unique<sqlite::sqlite_store>(options));
  } catch (const sqlite::db_error& e) {
    return make_error(errc::store_failure, fmt::format("cannot open the store {}: {}", options.path, e.what()), "data");
  }
}

}  // namespace certfleet::store
