// `certfleet doctor`'s look at the embedded store: read-only, no migration, no repair.
#include "certfleet/store/store.hpp"
#include "migrations.hpp"

#include <fmt/format.h>
#include <sqlite3.h>

namespace certfleet::store {

result<sqlite_file_report> inspect_sqlite(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  struct closer {
    sqlite3* d;
    ~closer() { sqlite3_close_v2(d); }
  } close_db{db};
  auto failed = [&](std::string_view what) {
    return make_error(errc::store_failure,
                      fmt::format("{}: {}: {}", path, what, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)), "data");
  };
  if (rc != SQLITE_OK) return failed("cannot open");
  sqlite3_busy_timeout(db, 5000);
  sqlite_file_report out;
  out.build_schema_version = sqlite::schema_version();
  auto query = [&](const char* sql, auto&& each_row) -> result<void> {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) return failed("cannot read");
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) each_row(st);
    sqlite3_finalize(st);
    if (step != SQLITE_DONE) return failed("cannot read");
    return {};
  };
  bool has_migrations = false;
  if (auto r = query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
                     [&](sqlite3_stmt* st) { has_migrations = sqlite3_column_int(st, 0) > 0; });
      !r)
    return std::move(r).error();
  if (has_migrations)
    if (auto r = query("SELECT coalesce(max(version), 0) FROM schema_migrations",
                       [&](sqlite3_stmt* st) { out.schema_version = sqlite3_column_int(st, 0); });
        !r)
      return std::move(r).error();
  if (auto r = query("PRAGMA integrity_check(20)",
                     [&](sqlite3_stmt* st) {
                       auto p = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
                       out.integrity.emplace_back(p ? p : "");
                     });
      !r)
    return std::move(r).error();
  return out;
}

}  // namespace certfleet::store
