#include "db.hpp"

#include <fmt/format.h>

#include <cerrno>

namespace certfleet::store::sqlite {

void stmt::check(int rc) {
  if (rc != SQLITE_OK) {
    sqlite3* h = sqlite3_db_handle(s_);
    throw db_error(rc, fmt::format("sqlite bind: {}", sqlite3_errmsg(h)));
  }
}

namespace {
// SQLite reports most short writes as SQLITE_FULL, but some paths (growing -shm, fsync) as an
// I/O error with errno ENOSPC: one code for "the disk is full" either way.
int failure_code(sqlite3* h) {
  int code = sqlite3_extended_errcode(h);
  if ((code & 0xff) == SQLITE_IOERR && sqlite3_system_errno(h) == ENOSPC) return SQLITE_FULL;
  return code;
}
}  // namespace

bool stmt::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3* h = sqlite3_db_handle(s_);
  throw db_error(failure_code(h), fmt::format("sqlite: {} (in: {})", sqlite3_errmsg(h), sqlite3_sql(s_)));
}

sqlite3_stmt* stmt_scope::raw() const { return st_.s_; }

db::db(const std::string& path, bool read_only, int busy_timeout_ms) {
  int flags = SQLITE_OPEN_NOMUTEX | (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &h_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = h_ ? sqlite3_errmsg(h_) : "out of memory";
    sqlite3_close_v2(h_);
    h_ = nullptr;
    throw db_error(rc, fmt::format("cannot open {}: {}", path, msg));
  }
  sqlite3_extended_result_codes(h_, 1);
  sqlite3_busy_timeout(h_, busy_timeout_ms);
}

db::~db() {
  for (auto& [_, s] : cache_) sqlite3_finalize(s);
  sqlite3_close_v2(h_);
}

void db::exec(const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(h_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(h_);
    sqlite3_free(err);
    throw db_error(failure_code(h_), fmt::format("sqlite: {} (in: {:.80})", msg, sql));
  }
}

stmt_scope db::prepare(const char* sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v3(h_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
    if (rc != SQLITE_OK) throw db_error(rc, fmt::format("sqlite prepare: {} (in: {})", sqlite3_errmsg(h_), sql));
    it = cache_.emplace(sql, s).first;
  }
  return stmt_scope(it->second);
}

bool is_busy(int code) noexcept { return (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED; }

bool is_disk_full(int code) noexcept { return (code & 0xff) == SQLITE_FULL; }

error to_error(const db_error& e) {
  if (is_busy(e.code())) return make_error(errc::store_busy, fmt::format("store busy: {}", e.what()));
  // Said to the client as is (HTTP 507): no SQL in it. The writer logs the statement.
  if (is_disk_full(e.code()))
    return make_error(errc::store_disk_full,
                      "the store's disk is full: nothing was written; free space on the file system of the data "
                      "directory (the store recovers by itself)");
  return make_error(errc::store_failure, e.what());
}

error to_error(db& d, const db_error& e) {
  if (is_disk_full(e.code())) {
    d.note_disk_full(e.what());
  }
  return to_error(e);
}

}  // namespace certfleet::store::sqlite
