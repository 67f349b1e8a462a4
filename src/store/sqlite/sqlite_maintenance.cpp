#include "sqlite_maintenance.hpp"

#include <fmt/format.h>

#include <vector>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace certfleet::store::sqlite {

namespace {

class impl final : public maintenance_stores, public lease_store, public maintenance_store {
 public:
  impl(writer& w, reader_pool& r) : writer_(w), readers_(r) {}
  lease_store& leases() override { return *this; }
  maintenance_store& maintenance() override { return *this; }

  task<leader_lease> acquire(std::string name, std::string holder, time_ms now, time_ms ttl) override {
    return run_write<result<leader_lease>>(
        writer_, [name = std::move(name), holder = std::move(holder), now, ttl](db& d) -> result<leader_lease> {
          // Free, expired, or ours: take or renew it. A change of holder bumps the epoch.
          auto s = d.prepare(
              "INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?1, ?2, 1, ?3 + ?4) "
              "ON CONFLICT (name) DO UPDATE SET "
              "epoch = CASE WHEN holder = ?2 THEN epoch ELSE epoch + 1 END, holder = ?2, expires_at = ?3 + ?4 "
              "WHERE holder = ?2 OR expires_at <= ?3 "
              "RETURNING holder, epoch, expires_at");
          s->bind(1, name).bind(2, holder).bind(3, now).bind(4, ttl);
          if (s->step()) {
            leader_lease l{name, s->text(0), s->int64(1), s->int64(2), true};
            s->run();
            return l;
          }
          auto cur = d.prepare("SELECT holder, epoch, expires_at FROM leases WHERE name = ?1");
          cur->bind(1, name);
          if (!cur->step()) throw db_error(0, "lease vanished inside the write transaction");
          return leader_lease{name, cur->text(0), cur->int64(1), cur->int64(2), false};
        });
  }

  task<void> release(std::string name, std::string holder, std::int64_t epoch) override {
    return run_write<result<void>>(writer_, [name = std::move(name), holder = std::move(holder), epoch](db& d) {
      auto s = d.prepare("UPDATE leases SET expires_at = 0 WHERE name = ?1 AND holder = ?2 AND epoch = ?3");
      s->bind(1, name).bind(2, holder).bind(3, epoch).run();
      return result<void>{};
    });
  }

  task<int> purge_finished(time_ms before, int limit) override {
    return run_write<result<int>>(writer_, [before, limit](db& d) -> result<int> {
      // ObjectIds start with their creation second: the first job created at or after the cutoff
      // (by the unique id index) bounds the scan of the (project, status) index, in rid order, to
      // the jobs stored before it; completed_at decides.
      char cutoff[25];
      std::snprintf(cutoff, sizeof cutoff, "%08llx0000000000000000",
                    static_cast<unsigned long long>(std::max<time_ms>(before, 0) / 1000));
      std::int64_t below = 0;
      {
        auto b = d.prepare("SELECT coalesce((SELECT rid FROM jobs WHERE id >= ?1 ORDER BY id LIMIT 1), "
                           "(SELECT max(rid) + 1 FROM jobs), 0)");
        b->bind(1, std::string(cutoff));
        if (b->step()) below = b->int64(0);
      }
      std::vector<std::string> ids;
      {
        auto s = d.prepare(
            // `<> 'active'` lets SQLite use the partial jobs_project_status index (migration 6);
            // CROSS JOIN keeps projects the outer loop, so each (project, status) is one range.
            "SELECT j.id FROM projects p CROSS JOIN jobs j INDEXED BY jobs_project_status ON j.project_id = p.id "
            "AND j.status IN ('completed', 'cancelled') AND j.status <> 'active' AND j.rid < ?1 "
            "WHERE j.completed_at < ?2 LIMIT ?3");
        s->bind(1, below).bind(2, before).bind(3, limit);
        while (s->step()) ids.push_back(s->text(0));
      }
      for (const auto& id : ids) {
        auto logs = d.prepare("DELETE FROM job_logs WHERE job_id = ?1");
        logs->bind(1, id).run();
        auto job = d.prepare("DELETE FROM jobs WHERE id = ?1");
        job->bind(1, id).run();
        // Its challenge records once they are out of the zone (one still in a zone stays: the
        // DNS cleanup sweep removes it).
        auto records = d.prepare("DELETE FROM acme_dns_records WHERE job_id = ?1 AND removed_at IS NOT NULL");
        records->bind(1, id).run();
      }
      return static_cast<int>(ids.size());
    });
  }

  task<int> purge_audit(time_ms before, int limit) override {
    return run_write<result<int>>(writer_, [before, limit](db& d) -> result<int> {
      // Entries are appended in time order: look at the oldest `limit` only (a bounded read of
      // the primary key) and delete those before the cutoff, up to the first that is not.
      std::int64_t last = -1;
      int n = 0;
      {
        auto s = d.prepare("SELECT seq, at FROM audit_log ORDER BY seq LIMIT ?1");
        s->bind(1, limit);
        while (s->step()) {
          if (s->int64(1) >= before) break;
          last = s->int64(0);
          ++n;
        }
      }
      if (n == 0) return 0;
      auto del = d.prepare("DELETE FROM audit_log WHERE seq <= ?1");
      del->bind(1, last).run();
      return n;
    });
  }

  task<int> purge_expired_tokens(time_ms before, int limit) override {
    return run_write<result<int>>(writer_, [before, limit](db& d) -> result<int> {
      std::vector<std::string> ids;
      {
        auto s = d.prepare("SELECT id FROM tokens WHERE expires_at IS NOT NULL AND expires_at < ?1 ORDER BY expires_at LIMIT ?2");
        s->bind(1, before).bind(2, limit);
        while (s->step()) ids.push_back(s->text(0));
      }
      for (const auto& id : ids) {
        auto sessions = d.prepare("DELETE FROM ui_sessions WHERE token_id = ?1");
        sessions->bind(1, id).run();
        auto token = d.prepare("DELETE FROM tokens WHERE id = ?1");
        token->bind(1, id).run();
      }
      return static_cast<int>(ids.size());
    });
  }

  task<void> backup_to(std::string path) override {
    return run_read<result<void>>(readers_, [path = std::move(path)](db& d) -> result<void> {
      // The copy holds every sealed secret and token hash: it is made 0600 before a byte is in
      // it (VACUUM INTO writes into an empty file), and O_EXCL means it never overwrites.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd < 0) {
        if (errno == EEXIST)
          return make_error(errc::invalid_argument, fmt::format("{} already exists; backup never overwrites", path), "to");
        return make_error(errc::invalid_argument, fmt::format("backup to {} failed: {}", path, std::strerror(errno)), "to");
      }
      ::close(fd);
      // VACUUM INTO reads one consistent snapshot and writes a compact copy; the store stays
      // online (a reader connection, so writers are not blocked).
      // Reader connections are query_only; VACUUM INTO writes only the new file.
      d.exec("PRAGMA query_only=0");
      struct restore_query_only {
        db& d;
        ~restore_query_only() {
          try {
            d.exec("PRAGMA query_only=1");
          } catch (...) {
          }
        }
      } guard{d};
      auto s = d.prepare("VACUUM INTO ?1");
      s->bind(1, path);
      try {
        s->run();
      } catch (const db_error& e) {
        std::error_code ignored;
        std::filesystem::remove(path, ignored);
        return make_error(errc::invalid_argument, fmt::format("backup to {} failed: {}", path, e.what()), "to");
      }
      return {};
    });
  }

 private:
  writer& writer_;
  reader_pool& readers_;
};

}  // namespace

std::unique_ptr<maintenance_stores> make_maintenance_stores(writer& w, reader_pool& r) {
  return std::make_unique<impl>(w, r);
}

}  // namespace certfleet::store::sqlite
