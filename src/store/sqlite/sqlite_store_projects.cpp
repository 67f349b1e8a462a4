// Projects on SQLite (project_store, table `projects`): the store's registry of projects, apart
// from the job queue (sqlite_store.cpp) because a project's life (ensure, create, remove with its
// jobs, logs, rate windows and tokens) shares only the writer and readers with a job's.
#include "sqlite_store_detail.hpp"

#include "certfleet/core/object_id.hpp"

#include <fmt/format.h>

namespace certfleet::store::sqlite::detail {

task<std::pair<project, bool>> sqlite_store::ensure(std::string name, time_ms now) {
  return run_write<result<std::pair<project, bool>>>(
      writer_, [name = std::move(name), now](db& d) -> result<std::pair<project, bool>> {
        {
          auto s = d.prepare("INSERT INTO projects (id, name, created_at) VALUES (?1, ?2, ?3) "
                             "ON CONFLICT (name) DO NOTHING RETURNING id, name, created_at");
          s->bind(1, new_object_id()).bind(2, name).bind(3, now);
          if (s->step()) {
            project p{s->text(0), s->text(1), s->int64(2)};
            s->run();
            return std::pair{std::move(p), true};
          }
        }
        auto s = d.prepare("SELECT id, name, created_at FROM projects WHERE name = ?1");
        s->bind(1, name);
        if (!s->step()) throw db_error(0, "project vanished inside the write transaction");
        return std::pair{project{s->text(0), s->text(1), s->int64(2)}, false};
      });
}

task<project> sqlite_store::find_by_name(std::string name) {
  return run_read<result<project>>(readers_, [name = std::move(name)](db& d) -> result<project> {
    auto s = d.prepare("SELECT id, name, created_at FROM projects WHERE name = ?1");
    s->bind(1, name);
    if (!s->step()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
    return project{s->text(0), s->text(1), s->int64(2)};
  });
}

task<project> sqlite_store::create(std::string name, time_ms now) {
  return run_write<result<project>>(writer_, [name = std::move(name), now](db& d) -> result<project> {
    auto s = d.prepare("INSERT INTO projects (id, name, created_at) VALUES (?1, ?2, ?3) "
                       "ON CONFLICT (name) DO NOTHING RETURNING id, name, created_at");
    s->bind(1, new_object_id()).bind(2, name).bind(3, now);
    if (!s->step()) return make_error(errc::conflict, fmt::format("a project named {} already exists", name), "name");
    project p{s->text(0), s->text(1), s->int64(2)};
    s->run();
    return p;
  });
}

task<project> sqlite_store::remove(std::string name, time_ms now) {
  return run_write<result<project>>(writer_, [name = std::move(name), now](db& d) -> result<project> {
    project p;
    {
      auto s = d.prepare("SELECT id, name, created_at FROM projects WHERE name = ?1");
      s->bind(1, name);
      if (!s->step()) return make_error(errc::not_found, fmt::format("project {} not found", name), "project");
      p = project{s->text(0), s->text(1), s->int64(2)};
    }
    auto count = [&](const char* sql) {
      auto s = d.prepare(sql);
      s->bind(1, p.id);
      return s->step() ? s->int64(0) : 0;
    };
    // The project's settings object (PUT …/projects/{p}/settings) goes with it; it is not content.
    auto objects = count("SELECT count(*) FROM objects WHERE project_id = ?1 AND kind != 'project_settings'");
    auto dists = count("SELECT count(*) FROM distributions WHERE project_id = ?1");
    auto live = count("SELECT count(*) FROM jobs WHERE project_id = ?1 AND status IN ('pending', 'active', 'failed')");
    auto system_tokens = count("SELECT count(*) FROM tokens WHERE project_id = ?1 AND system = 1 AND revoked_at IS NULL");
    if (objects || dists || live || system_tokens) {
      std::string left;
      auto add = [&](std::int64_t n, const char* what) {
        if (n) left += fmt::format("{}{} {}", left.empty() ? "" : ", ", n, what);
      };
      add(objects, "catalog objects (certificates, credentials, targets, channels, rules)");
      add(dists, "distributions");
      add(live, "jobs that are not finished (cancel them or let them end)");
      add(system_tokens, "system-admin tokens (revoke them first)");
      return make_error(errc::conflict, fmt::format("project {} still has {}", name, left), "project");
    }
    for (const char* sql : {"DELETE FROM job_logs WHERE job_id IN (SELECT id FROM jobs WHERE project_id = ?1)",
                            "DELETE FROM jobs WHERE project_id = ?1", "DELETE FROM rate_windows WHERE project_id = ?1",
                            "DELETE FROM acme_dns_records WHERE project_id = ?1",
                            "DELETE FROM objects WHERE project_id = ?1 AND kind = 'project_settings'",
                            "DELETE FROM projects WHERE id = ?1"})
      d.prepare(sql)->bind(1, p.id).run();
    d.prepare("UPDATE tokens SET revoked_at = ?2 WHERE project_id = ?1 AND revoked_at IS NULL")->bind(1, p.id).bind(2, now).run();
    return p;
  });
}

task<std::vector<project>> sqlite_store::list() {
  return run_read<result<std::vector<project>>>(readers_, [](db& d) {
    std::vector<project> out;
    auto s = d.prepare("SELECT id, name, created_at FROM projects ORDER BY name");
    while (s->step()) out.push_back(project{s->text(0), s->text(1), s->int64(2)});
    return result<std::vector<project>>(std::move(out));
  });
}

}  // namespace certfleet::store::sqlite::detail
