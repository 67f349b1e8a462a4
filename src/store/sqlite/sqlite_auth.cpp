// Tokens, audit log, system settings and the metrics/log-stream reads on SQLite.
#include "sqlite_auth.hpp"

#include "certfleet/core/object_id.hpp"

#include <fmt/format.h>

#include <array>

namespace certfleet::store {

namespace {
constexpr std::array<std::string_view, 4> role_names{"viewer", "operator", "admin", "owner"};
}

std::string_view to_string(role r) noexcept { return role_names[static_cast<std::size_t>(r) - 1]; }

std::optional<role> parse_role(std::string_view s) noexcept {
  for (std::size_t i = 0; i < role_names.size(); ++i)
    if (role_names[i] == s) return static_cast<role>(i + 1);
  return std::nullopt;
}

namespace sqlite {
namespace {

#define TOKEN_COLS "id, project_id, role, system, name, created_by, created_at, revoked_at, expires_at, last_used_at"

token_record read_token(stmt& s) {
  token_record t;
  t.id = s.text(0);
  t.project_id = s.text(1);
  // An unknown role in the file (a newer build wrote it) grants the least.
  t.token_role = parse_role(s.text(2)).value_or(role::viewer);
  t.system = s.int64(3) != 0;
  t.name = s.text(4);
  t.created_by = s.text(5);
  t.created_at = s.int64(6);
  t.revoked_at = s.int64(7);
  t.expires_at = s.int64(8);
  t.last_used_at = s.int64(9);
  return t;
}

result<token_record> insert_token(db& d, const new_token& t, time_ms now) {
  auto s = d.prepare("INSERT INTO tokens (id, project_id, role, system, name, hash, created_by, created_at, expires_at) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) RETURNING " TOKEN_COLS);
  s->bind(1, new_object_id()).bind(2, t.project_id).bind(3, to_string(t.token_role)).bind(4, t.system ? 1 : 0);
  s->bind_or_null(5, t.name).bind(6, t.hash).bind_or_null(7, t.created_by).bind(8, now);
  if (t.expires_at > 0)
    s->bind(9, t.expires_at);
  else
    s->bind_null(9);
  if (!s->step()) throw db_error(0, "token insert returned no row");
  auto rec = read_token(*s);
  s->run();
  return rec;
}

class impl final : public auth_stores, public auth_store, public observe_store {
 public:
  impl(writer& w, reader_pool& r) : w_(w), r_(r) {}
  auth_store& auth() override { return *this; }
  observe_store& observe() override { return *this; }

  task<token_record> create_token(new_token t, time_ms now) override {
    return run_write<result<token_record>>(w_, [t = std::move(t), now](db& d) { return insert_token(d, t, now); });
  }

  task<std::optional<token_record>> create_first_token(new_token t, time_ms now) override {
    return run_write<result<std::optional<token_record>>>(
        w_, [t = std::move(t), now](db& d) -> result<std::optional<token_record>> {
          {
            auto s = d.prepare("SELECT 1 FROM tokens LIMIT 1");
            if (s->step()) return std::optional<token_record>{};
          }
          auto r = insert_token(d, t, now);
          if (!r) return std::move(r).error();
          return std::optional<token_record>(std::move(*r));
        });
  }

  task<token_record> find_token(std::string hash) override {
    return run_read<result<token_record>>(r_, [hash = std::move(hash)](db& d) -> result<token_record> {
      auto s = d.prepare("SELECT " TOKEN_COLS " FROM tokens WHERE hash = ?1 AND revoked_at IS NULL");
      s->bind(1, hash);
      if (!s->step()) return make_error(errc::not_found, "no such active token", "token");
      return read_token(*s);
    });
  }

  task<std::vector<token_record>> list_tokens(std::string project_id) override {
    return run_read<result<std::vector<token_record>>>(r_, [p = std::move(project_id)](db& d) {
      std::vector<token_record> out;
      auto s = d.prepare("SELECT " TOKEN_COLS " FROM tokens WHERE ?1 = '' OR project_id = ?1 ORDER BY created_at, id");
      s->bind(1, p);
      while (s->step()) out.push_back(read_token(*s));
      return result<std::vector<token_record>>(std::move(out));
    });
  }

  task<token_record> revoke_token(std::string id, time_ms now) override {
    return run_write<result<token_record>>(w_, [id = std::move(id), now](db& d) -> result<token_record> {
      {
        auto s = d.prepare("UPDATE tokens SET revoked_at = ?1 WHERE id = ?2 AND revoked_at IS NULL RETURNING " TOKEN_COLS);
        s->bind(1, now).bind(2, id);
        if (s->step()) {
          auto rec = read_token(*s);
          s->run();
          return rec;
        }
      }
      auto s = d.prepare("SELECT 1 FROM tokens WHERE id = ?1");
      s->bind(1, id);
      if (s->step()) return make_error(errc::conflict, fmt::format("token {} is already revoked", id), "id");
      return make_error(errc::not_found, fmt::format("token {} not found", id), "id");
    });
  }

  task<void> append_audit(audit_entry e) override {
    return run_write<result<void>>(w_, [e = std::move(e)](db& d) -> result<void> {
      insert_audit(d, e);
      return {};
    });
  }

  static void insert_audit(db& d, const audit_entry& e) {
    auto s = d.prepare("INSERT INTO audit_log (project_id, actor, action, object, outcome, detail, at) "
                       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    s->bind(1, e.project_id).bind(2, e.actor).bind(3, e.action).bind(4, e.object).bind(5, e.outcome);
    s->bind_or_null(6, e.detail).bind(7, e.at);
    s->run();
  }

  task<audit_page> list_audit(std::string project_id, int page, int page_size) override {
    return run_read<result<audit_page>>(r_, [p = std::move(project_id), page, page_size](db& d) -> result<audit_page> {
      audit_page out;
      read_snapshot snapshot(d);
      {
        auto s = d.prepare("SELECT seq, project_id, actor, action, object, outcome, detail, at FROM audit_log "
                           "WHERE project_id = ?1 ORDER BY seq DESC LIMIT ?2 OFFSET ?3");
        s->bind(1, p).bind(2, page_size).bind(3, static_cast<std::int64_t>(page - 1) * page_size);
        while (s->step())
          out.items.push_back(audit_entry{s->int64(0), s->text(1), s->text(2), s->text(3), s->text(4), s->text(5),
                                          s->text(6), s->int64(7)});
      }
      auto c = d.prepare("SELECT count(*) FROM audit_log WHERE project_id = ?1");
      c->bind(1, p);
      if (c->step()) out.total = c->int64(0);
      return out;
    });
  }

  task<std::map<std::string, std::string>> system_settings() override {
    return run_read<result<std::map<std::string, std::string>>>(r_, [](db& d) {
      std::map<std::string, std::string> out;
      auto s = d.prepare("SELECT name, value FROM system_settings");
      while (s->step()) out.emplace(s->text(0), s->text(1));
      return result<std::map<std::string, std::string>>(std::move(out));
    });
  }

  task<void> put_system_settings(std::map<std::string, std::string> values, audit_entry audit) override {
    return run_write<result<void>>(w_, [values = std::move(values), audit = std::move(audit)](db& d) -> result<void> {
      for (const auto& [name, value] : values) {
        auto s = d.prepare("INSERT INTO system_settings (name, value, updated_at) VALUES (?1, ?2, ?3) "
                           "ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at");
        s->bind(1, name).bind(2, value).bind(3, audit.at).run();
      }
      insert_audit(d, audit);
      return {};
    });
  }

  task<void> touch_token(std::string id, time_ms now, time_ms min_interval) override {
    return run_write<result<void>>(w_, [id = std::move(id), now, min_interval](db& d) -> result<void> {
      auto s = d.prepare("UPDATE tokens SET last_used_at = ?1 WHERE id = ?2 AND (last_used_at IS NULL OR last_used_at <= ?3)");
      s->bind(1, now).bind(2, id).bind(3, now - min_interval).run();
      return {};
    });
  }

  task<void> create_session(std::string hash, std::string token_id, time_ms expires_at, time_ms now) override {
    return run_write<result<void>>(w_, [h = std::move(hash), t = std::move(token_id), expires_at, now](db& d) -> result<void> {
      {
        auto s = d.prepare("DELETE FROM ui_sessions WHERE expires_at <= ?1");
        s->bind(1, now);
        s->run();
      }
      auto s = d.prepare("INSERT INTO ui_sessions (hash, token_id, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)");
      s->bind(1, h).bind(2, t).bind(3, now).bind(4, expires_at);
      s->run();
      return {};
    });
  }

  task<ui_session> find_session(std::string hash, time_ms now) override {
    return run_read<result<ui_session>>(r_, [h = std::move(hash), now](db& d) -> result<ui_session> {
      auto s = d.prepare("SELECT t.id, t.project_id, t.role, t.system, t.name, t.created_by, t.created_at, t.revoked_at, "
                         "t.expires_at, t.last_used_at, s.expires_at FROM ui_sessions s JOIN tokens t ON t.id = s.token_id "
                         "WHERE s.hash = ?1 AND s.expires_at > ?2 AND t.revoked_at IS NULL");
      s->bind(1, h).bind(2, now);
      if (!s->step()) return make_error(errc::not_found, "no such session, or it expired", "session");
      ui_session out;
      out.token = read_token(*s);
      out.expires_at = s->int64(10);
      return out;
    });
  }

  task<void> delete_session(std::string hash) override {
    return run_write<result<void>>(w_, [h = std::move(hash)](db& d) -> result<void> {
      auto s = d.prepare("DELETE FROM ui_sessions WHERE hash = ?1");
      s->bind(1, h);
      s->run();
      return {};
    });
  }

  // observe_store
  task<std::vector<job_count>> job_counts() override {
    return run_read<result<std::vector<job_count>>>(r_, [](db& d) {
      std::vector<job_count> out;
      auto s = d.prepare("SELECT status, type, sum(n) FROM job_counts GROUP BY status, type HAVING sum(n) > 0 "
                         "ORDER BY status, type");
      while (s->step()) out.push_back(job_count{s->text(0), s->text(1), s->int64(2)});
      return result<std::vector<job_count>>(std::move(out));
    });
  }

  task<duration_histogram> job_durations(std::vector<double> bounds_s) override {
    return run_read<result<duration_histogram>>(r_, [bounds = std::move(bounds_s)](db& d) -> result<duration_histogram> {
      duration_histogram h;
      h.bounds_s = bounds;
      h.cumulative.assign(bounds.size() + 1, 0);
      std::int64_t sum_ms = 0;
      // Grouped by whole milliseconds so the scan returns few rows whatever the job count.
      auto s = d.prepare("SELECT completed_at - started_at AS ms, count(*) FROM jobs "
                         "WHERE completed_at IS NOT NULL AND started_at IS NOT NULL AND completed_at >= started_at "
                         "GROUP BY ms");
      while (s->step()) {
        auto ms = s->int64(0);
        auto n = s->int64(1);
        sum_ms += ms * n;
        for (std::size_t i = 0; i < bounds.size(); ++i)
          if (static_cast<double>(ms) / 1000.0 <= bounds[i]) h.cumulative[i] += n;
        h.cumulative.back() += n;
      }
      h.sum_s = static_cast<double>(sum_ms) / 1000.0;
      return h;
    });
  }

  task<log_watch> watch_logs(std::string job_id, std::int64_t after_seq, int limit) override {
    return run_read<result<log_watch>>(r_, [id = std::move(job_id), after_seq, limit](db& d) -> result<log_watch> {
      log_watch w;
      read_snapshot snapshot(d);
      {
        auto s = d.prepare("SELECT status FROM jobs WHERE id = ?1");
        s->bind(1, id);
        if (!s->step()) return make_error(errc::not_found, fmt::format("job {} not found", id), "id");
        w.status = parse_job_status(s->text(0)).value_or(job_status::dead);
      }
      {
        auto s = d.prepare("SELECT coalesce(max(seq), 0) FROM job_logs WHERE job_id = ?1");
        s->bind(1, id);
        if (s->step()) w.last_seq = s->int64(0);
      }
      if (limit > 0 && after_seq < w.last_seq) {
        auto s = d.prepare("SELECT seq, ts, level, message, detail FROM job_logs WHERE job_id = ?1 AND seq > ?2 "
                           "ORDER BY seq LIMIT ?3");
        s->bind(1, id).bind(2, after_seq).bind(3, limit);
        while (s->step()) w.lines.push_back(log_line{s->int64(0), s->int64(1), s->text(2), s->text(3), s->text(4)});
      }
      return w;
    });
  }

 private:
  writer& w_;
  reader_pool& r_;
};

}  // namespace

std::unique_ptr<auth_stores> make_auth_store(writer& w, reader_pool& r) { return std::make_unique<impl>(w, r); }

}  // namespace sqlite
}  // namespace certfleet::store
