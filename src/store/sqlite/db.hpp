#pragma once
// A thin RAII layer over one sqlite3 connection with a prepared-statement cache.
// Only this folder sees sqlite3.h.
#include "certfleet/core/error.hpp"

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

namespace certfleet::store::sqlite {

// A statement failing in a way the code did not expect (syntax, misuse) is a bug: thrown.
// Lock contention and I/O errors are turned into values by the callers that expect them.
class db_error : public std::runtime_error {
 public:
  db_error(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

class stmt {
 public:
  explicit stmt(sqlite3_stmt* s) : s_(s) {}
  stmt& bind(int i, std::int64_t v) { check(sqlite3_bind_int64(s_, i, v)); return *this; }
  stmt& bind(int i, int v) { return bind(i, static_cast<std::int64_t>(v)); }
  stmt& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  // Empty text binds NULL (optional references, keys).
  stmt& bind_or_null(int i, std::string_view v) {
    if (v.empty()) check(sqlite3_bind_null(s_, i));
    else bind(i, v);
    return *this;
  }
  stmt& bind_null(int i) { check(sqlite3_bind_null(s_, i)); return *this; }
  stmt& bind_real(int i, double v) { check(sqlite3_bind_double(s_, i, v)); return *this; }
  // The highest ?N the statement uses (one binding list for statements that use a subset).
  int parameter_count() const { return sqlite3_bind_parameter_count(s_); }
  // Makes a cached statement ready to run again with new bindings (a loop over rows).
  void reset() { sqlite3_reset(s_); }

  // True while a row is available.
  bool step();
  void run() { while (step()) {} }
  std::int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  std::string text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, col));
    return p ? std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s_, col))) : std::string();
  }
  double real(int col) const { return sqlite3_column_double(s_, col); }
  bool is_null(int col) const { return sqlite3_column_type(s_, col) == SQLITE_NULL; }

 private:
  friend class db;
  friend class stmt_scope;
  void check(int rc);
  sqlite3_stmt* s_;
};

// Resets a cached statement when the scope ends, whatever happens.
class stmt_scope {
 public:
  explicit stmt_scope(sqlite3_stmt* s) : st_(s) {}
  stmt_scope(stmt_scope&& o) noexcept : st_(o.st_) { o.st_.s_ = nullptr; }
  ~stmt_scope() {
    if (!raw()) return;
    sqlite3_reset(raw());
    sqlite3_clear_bindings(raw());
  }
  stmt_scope(const stmt_scope&) = delete;
  stmt_scope& operator=(stmt_scope&&) = delete;
  stmt_scope& operator=(const stmt_scope&) = delete;
  stmt* operator->() { return &st_; }
  stmt& operator*() { return st_; }

 private:
  sqlite3_stmt* raw() const;
  stmt st_;
};

class job_count_deltas;  // job_count_deltas.hpp

class db {
 public:
  db(const std::string& path, bool read_only, int busy_timeout_ms);
  ~db();
  db(const db&) = delete;
  db& operator=(const db&) = delete;

  void exec(const char* sql);
  // A cached prepared statement; reset and unbound when the returned scope ends.
  stmt_scope prepare(const char* sql);
  std::int64_t changes() const { return sqlite3_changes64(h_); }
  std::int64_t total_changes() const { return sqlite3_total_changes64(h_); }
  // Failures for a full disk on this connection so far (the writer's readiness and metric).
  void note_disk_full(const char* what) {
    ++disk_full_errors_;
    last_disk_full_ = what;
  }
  std::int64_t disk_full_errors() const { return disk_full_errors_; }
  const std::string& last_disk_full() const { return last_disk_full_; }
  sqlite3* handle() const { return h_; }
  // The writer's connection keeps the job counts' changes of its transaction (job_count_deltas.hpp);
  // nullptr on every other connection.
  job_count_deltas* job_counts() const { return job_counts_; }
  void set_job_counts(job_count_deltas* c) { job_counts_ = c; }

 private:
  sqlite3* h_ = nullptr;
  job_count_deltas* job_counts_ = nullptr;
  std::int64_t disk_full_errors_ = 0;
  std::string last_disk_full_;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;  // keyed by the literal's address
};

// One consistent snapshot over several reads: BEGIN now, COMMIT when the scope ends.
class read_snapshot {
 public:
  explicit read_snapshot(db& d) : d_(d) { d_.prepare("BEGIN")->run(); }
  ~read_snapshot() {
    try {
      d_.prepare("COMMIT")->run();
    } catch (...) {
      // A read-only transaction has nothing to lose; the next BEGIN resets the connection.
    }
  }
  read_snapshot(const read_snapshot&) = delete;
  read_snapshot& operator=(const read_snapshot&) = delete;

 private:
  db& d_;
};

bool is_busy(int code) noexcept;
bool is_disk_full(int code) noexcept;
error to_error(const db_error& e);
// The same, and a full disk is noted on `d` (the writer's connection).
error to_error(db& d, const db_error& e);

}  // namespace certfleet::store::sqlite
