#pragma once
// What the API keeps besides jobs: access tokens (stored hashed), the audit log, the stored
// system-wide settings, and the read-only views /metrics and the live log stream need.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/job.hpp"
#include "certfleet/store/store.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace certfleet::store {

// Ordered: a role may do everything the roles below it may.
enum class role { viewer = 1, operator_ = 2, admin = 3, owner = 4 };
std::string_view to_string(role r) noexcept;
std::optional<role> parse_role(std::string_view s) noexcept;

struct token_record {
  std::string id;
  std::string project_id;
  role token_role = role::viewer;
  bool system = false;  // system admin: every project, and the system-wide settings
  std::string name;
  std::string created_by;
  time_ms created_at = 0;
  time_ms revoked_at = 0;    // 0: active
  time_ms expires_at = 0;    // 0: never; refused from this instant on
  time_ms last_used_at = 0;  // 0: never used; kept to the minute (touch_token)
};

struct new_token {
  std::string project_id;
  role token_role = role::viewer;
  bool system = false;
  std::string name;
  std::string created_by;
  std::string hash;  // hex SHA-256 of the token text; the text itself is never stored
  time_ms expires_at = 0;  // 0: never
};

// A browser session (DESIGN §8): opened with a token, it acts as that token until it expires or
// the token is revoked.
struct ui_session {
  token_record token;
  time_ms expires_at = 0;
};

struct audit_entry {
  std::int64_t seq = 0;  // assigned by the store
  std::string project_id;
  std::string actor;   // token id, or "cli"/"system"
  std::string action;  // "job.enqueue", "token.create", "settings.update", …
  std::string object;  // "job/<id>", "token/<id>", "settings"
  std::string outcome; // "ok" or an errc name
  std::string detail;  // JSON text or empty
  time_ms at = 0;
};
struct audit_page {
  std::vector<audit_entry> items;
  std::int64_t total = 0;
};

class auth_store {
 public:
  virtual ~auth_store() = default;

  virtual task<token_record> create_token(new_token t, time_ms now) = 0;
  // Creates the token only when the store holds no token at all (first start); nullopt otherwise.
  // Atomic, so two processes starting on an empty store create one owner token between them.
  virtual task<std::optional<token_record>> create_first_token(new_token t, time_ms now) = 0;
  // The active (not revoked) token with this hash; not_found otherwise.
  virtual task<token_record> find_token(std::string hash) = 0;
  // Every token (project_id empty) or one project's, oldest first; revoked ones included.
  virtual task<std::vector<token_record>> list_tokens(std::string project_id) = 0;
  // Revokes an active token; not_found when there is none with this id, conflict when revoked.
  virtual task<token_record> revoke_token(std::string id, time_ms now) = 0;
  // Records a use: sets last_used_at to `now` when it is unset or older than now - min_interval
  // (several processes serving one token write at most once per interval between them).
  virtual task<void> touch_token(std::string id, time_ms now, time_ms min_interval) = 0;

  // Sessions are stored by the hex SHA-256 of their cookie value, never the value itself.
  // Creating one also deletes the expired ones.
  virtual task<void> create_session(std::string hash, std::string token_id, time_ms expires_at, time_ms now) = 0;
  // The unexpired session with this hash whose token is still active; not_found otherwise.
  virtual task<ui_session> find_session(std::string hash, time_ms now) = 0;
  virtual task<void> delete_session(std::string hash) = 0;

  virtual task<void> append_audit(audit_entry e) = 0;
  // One project's entries, newest first; pages count from 1.
  virtual task<audit_page> list_audit(std::string project_id, int page, int page_size) = 0;

  // The stored values of system-scope settings (unset ones are absent: their default applies).
  virtual task<std::map<std::string, std::string>> system_settings() = 0;
  // Stores every value and the audit entry in one transaction: all of it or none.
  virtual task<void> put_system_settings(std::map<std::string, std::string> values, audit_entry audit) = 0;
};

// Reads for /metrics and the live log stream.
struct job_count {
  std::string status;
  std::string type;
  std::int64_t count = 0;
};
struct duration_histogram {
  std::vector<double> bounds_s;         // upper bounds, seconds
  std::vector<std::int64_t> cumulative; // one per bound, then +Inf last
  double sum_s = 0;
};
struct log_watch {
  std::vector<log_line> lines;  // after the cursor, in seq order
  job_status status = job_status::pending;
  std::int64_t last_seq = 0;  // the job's highest seq (0: no line yet)
};

class observe_store {
 public:
  virtual ~observe_store() = default;
  // Every project's jobs by status and type, from the counts kept with each status change.
  virtual task<std::vector<job_count>> job_counts() = 0;
  // Completed/failed/dead/cancelled jobs' run time (completed_at − started_at) over `bounds_s`.
  virtual task<duration_histogram> job_durations(std::vector<double> bounds_s) = 0;
  // One consistent read: a job's lines after `after_seq` (at most `limit`), its status and its
  // last seq. not_found when the job does not exist.
  virtual task<log_watch> watch_logs(std::string job_id, std::int64_t after_seq, int limit) = 0;
};

}  // namespace certfleet::store
