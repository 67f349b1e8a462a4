#include "migrations.hpp"

#include <fmt/format.h>

#include <array>

#define CERTFLEET_STR2(x) #x
#define CERTFLEET_STR(x) CERTFLEET_STR2(x)
#define BLOCK_OF(rid) "(" rid " >> " CERTFLEET_STR(CERTFLEET_JOB_BLOCK_BITS) ")"

namespace certfleet::store::sqlite {

namespace {
// Append-only: a released migration is never edited; a change is a new entry.
constexpr std::array<const char*, 16> migrations{{
    // 1: projects, jobs, job logs, rate-limit windows
    R"sql(
CREATE TABLE projects (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL
);
CREATE TABLE jobs (
  rid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  project_id TEXT NOT NULL,
  type TEXT NOT NULL,
  lane TEXT NOT NULL,
  payload TEXT NOT NULL,
  status TEXT NOT NULL,
  result_status TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  fence INTEGER NOT NULL DEFAULT 0,
  ready_at INTEGER NOT NULL,
  held INTEGER NOT NULL DEFAULT 0,
  locked_by TEXT,
  locked_until INTEGER,
  idempotency_key TEXT,
  parent_job_id TEXT,
  certificate_id TEXT,
  distribution_id TEXT,
  triggered_by TEXT,
  created_at INTEGER NOT NULL,
  started_at INTEGER,
  completed_at INTEGER,
  error TEXT,
  progress_current INTEGER NOT NULL DEFAULT 0,
  progress_total INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (project_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_claim ON jobs (lane, ready_at, id) WHERE status IN ('pending', 'failed', 'active') AND held = 0;
CREATE INDEX jobs_lease ON jobs (locked_until) WHERE status = 'active';
CREATE INDEX jobs_project ON jobs (project_id, id);
CREATE INDEX jobs_project_status ON jobs (project_id, status, id);
CREATE INDEX jobs_project_type ON jobs (project_id, type, id);
CREATE INDEX jobs_parent ON jobs (parent_job_id) WHERE parent_job_id IS NOT NULL;
CREATE TABLE job_logs (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  level TEXT NOT NULL,
  message TEXT NOT NULL,
  detail TEXT,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE rate_windows (
  project_id TEXT NOT NULL,
  name TEXT NOT NULL,
  window INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (project_id, name)
) WITHOUT ROWID;
)sql",
    // 2: access tokens (hashed), audit log, stored system-wide settings
    R"sql(
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  role TEXT NOT NULL,
  system INTEGER NOT NULL DEFAULT 0,
  name TEXT,
  hash TEXT NOT NULL UNIQUE,
  created_by TEXT,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER
);
CREATE INDEX tokens_project ON tokens (project_id, created_at);
CREATE TABLE audit_log (
  seq INTEGER PRIMARY KEY,
  project_id TEXT NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  object TEXT NOT NULL,
  outcome TEXT NOT NULL,
  detail TEXT,
  at INTEGER NOT NULL
);
CREATE INDEX audit_project ON audit_log (project_id, seq);
CREATE TABLE system_settings (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
    // 3: leader leases
    R"sql(
CREATE TABLE leases (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  epoch INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
    // 4: the catalog (certificates, credentials, targets, notification channels and rules),
    // distributions with their runs, per-target results and the fan-out guard set; store facts
    // (the key-encryption key's fingerprint).
    R"sql(
CREATE TABLE objects (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  doc TEXT NOT NULL,
  sealed TEXT,
  ref_id TEXT,
  not_after INTEGER,
  created_at INTEGER NOT NULL,
  UNIQUE (project_id, kind, name)
);
CREATE INDEX objects_project_kind ON objects (project_id, kind, id);
CREATE INDEX objects_ref ON objects (project_id, kind, ref_id) WHERE ref_id IS NOT NULL;
CREATE INDEX objects_not_after ON objects (not_after) WHERE kind = 'certificate';
CREATE TABLE distributions (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  name TEXT NOT NULL,
  certificate_id TEXT NOT NULL,
  target_ids TEXT NOT NULL,
  canary INTEGER NOT NULL,
  failure_tolerance REAL NOT NULL,
  fail_fast INTEGER NOT NULL,
  status TEXT NOT NULL,
  run_no INTEGER NOT NULL,
  mode TEXT,
  run_target_ids TEXT NOT NULL,
  job_ids TEXT NOT NULL,
  error TEXT,
  fan_out_total INTEGER NOT NULL DEFAULT 0,
  fan_out_succeeded INTEGER NOT NULL DEFAULT 0,
  fan_out_failed INTEGER NOT NULL DEFAULT 0,
  fan_out_partial INTEGER NOT NULL DEFAULT 0,
  fan_out_cancelled INTEGER NOT NULL DEFAULT 0,
  fan_out_retrying INTEGER NOT NULL DEFAULT 0,
  fan_out_retry_wave INTEGER NOT NULL DEFAULT 0,
  fail_fast_fired INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  run_started_at INTEGER,
  run_finished_at INTEGER,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  UNIQUE (project_id, name)
);
CREATE INDEX distributions_project ON distributions (project_id, id);
CREATE INDEX distributions_status ON distributions (status, updated_at);
CREATE TABLE distribution_objects (
  distribution_id TEXT NOT NULL,
  object_id TEXT NOT NULL,
  PRIMARY KEY (object_id, distribution_id)
) WITHOUT ROWID;
CREATE TABLE target_results (
  distribution_id TEXT NOT NULL,
  run_no INTEGER NOT NULL,
  target_id TEXT NOT NULL,
  retry_attempt INTEGER NOT NULL,
  fence INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  status TEXT NOT NULL,
  error_class TEXT,
  error TEXT,
  started_at INTEGER,
  finished_at INTEGER,
  fingerprint TEXT,
  hash_skipped INTEGER NOT NULL DEFAULT 0,
  files_from_run INTEGER NOT NULL DEFAULT 0,
  detail TEXT,
  PRIMARY KEY (distribution_id, run_no, target_id, retry_attempt, fence, job_id)
) WITHOUT ROWID;
CREATE TABLE fanout_finalized (
  distribution_id TEXT NOT NULL,
  run_no INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  outcome TEXT NOT NULL,
  batch INTEGER NOT NULL,
  PRIMARY KEY (distribution_id, run_no, job_id)
) WITHOUT ROWID;
CREATE TABLE store_meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql",
    // 5: a child's report reads only the results it wrote
    R"sql(
CREATE INDEX target_results_job ON target_results (distribution_id, run_no, job_id);
)sql",
    // 6: active jobs leave the claim and status-tab indexes: a claim only removes a job from them,
    // a finish only puts it back in the status tab (four b-tree writes fewer per job, and a
    // heartbeat no longer moves the job in jobs_claim). Active jobs are found through jobs_lease:
    // the expired ones a claim may take over, the few a status tab lists.
    R"sql(
DROP INDEX jobs_claim;
CREATE INDEX jobs_claim ON jobs (lane, ready_at, id) WHERE status IN ('pending', 'failed') AND held = 0;
DROP INDEX jobs_project_status;
CREATE INDEX jobs_project_status ON jobs (project_id, status, id) WHERE status <> 'active';
)sql",
    // 7: the web UI (DESIGN §8). Browser sessions, stored by the hash of the cookie. Job counts per
    // (project, type, status) kept exact by triggers in the transaction of every status change, so
    // the list's tab counts cost a few rows instead of a count over the jobs; filled here from the
    // jobs already stored. The type-and-status index serves a tab filtered by type.
    R"sql(
CREATE TABLE ui_sessions (
  hash TEXT PRIMARY KEY,
  token_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ui_sessions_expiry ON ui_sessions (expires_at);
CREATE TABLE job_counts (
  project_id TEXT NOT NULL,
  type TEXT NOT NULL,
  status TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (project_id, type, status)
) WITHOUT ROWID;
INSERT INTO job_counts (project_id, type, status, n) SELECT project_id, type, status, count(*) FROM jobs GROUP BY 1, 2, 3;
CREATE TRIGGER job_counts_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO job_counts (project_id, type, status, n) VALUES (new.project_id, new.type, new.status, 1)
    ON CONFLICT (project_id, type, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs BEGIN
  UPDATE job_counts SET n = n - 1 WHERE project_id = old.project_id AND type = old.type AND status = old.status;
END;
CREATE TRIGGER job_counts_status AFTER UPDATE OF status ON jobs WHEN old.status <> new.status BEGIN
  UPDATE job_counts SET n = n - 1 WHERE project_id = old.project_id AND type = old.type AND status = old.status;
  INSERT INTO job_counts (project_id, type, status, n) VALUES (new.project_id, new.type, new.status, 1)
    ON CONFLICT (project_id, type, status) DO UPDATE SET n = n + 1;
END;
CREATE INDEX jobs_project_type_status ON jobs (project_id, type, status, id) WHERE status <> 'active';
)sql",
    // 8: certificate versions (DESIGN §9): a distribution may run by itself for each new version
    // of its certificate; a run records the version it opened with and what opened it.
    R"sql(
ALTER TABLE distributions ADD COLUMN auto_execute INTEGER NOT NULL DEFAULT 0;
ALTER TABLE distributions ADD COLUMN run_certificate_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE distributions ADD COLUMN run_trigger TEXT;
)sql",
    // 9: session slots per SSH destination (issue 20), each held by one job attempt (job id +
    // fence) until released or expired; an acquire frees its destination's dead slots first.
    R"sql(
CREATE TABLE session_slots (
  id INTEGER PRIMARY KEY,
  destination TEXT NOT NULL,
  job_id TEXT NOT NULL,
  fence INTEGER NOT NULL,
  acquired_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
CREATE INDEX session_slots_destination ON session_slots (destination);
CREATE INDEX session_slots_holder ON session_slots (job_id, fence);
)sql",
    // 10: a deep page of the job list in constant time (issue 14). The list orders by rid, the order
    // the store took the jobs in (newest first; in one process the same order as the ids, across
    // processes the truer one), so each list index ends in the rowid alone. job_blocks counts the
    // jobs per (project, block of rids, type, status), kept by triggers in the transaction of every
    // status change like job_counts: page N walks the newest blocks' counts to the block that holds
    // its first row and skips fewer than a block's index entries there.
    R"sql(
DROP INDEX jobs_project;
CREATE INDEX jobs_project ON jobs (project_id);
DROP INDEX jobs_project_status;
CREATE INDEX jobs_project_status ON jobs (project_id, status) WHERE status <> 'active';
DROP INDEX jobs_project_type;
CREATE INDEX jobs_project_type ON jobs (project_id, type);
DROP INDEX jobs_project_type_status;
CREATE INDEX jobs_project_type_status ON jobs (project_id, type, status) WHERE status <> 'active';
CREATE TABLE job_blocks (
  project_id TEXT NOT NULL,
  block INTEGER NOT NULL,
  type TEXT NOT NULL,
  status TEXT NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (project_id, block, type, status)
) WITHOUT ROWID;
INSERT INTO job_blocks (project_id, block, type, status, n)
  SELECT project_id, )sql" BLOCK_OF("rid") R"sql(, type, status, count(*) FROM jobs GROUP BY 1, 2, 3, 4;
CREATE TRIGGER job_blocks_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO job_blocks (project_id, block, type, status, n)
    VALUES (new.project_id, )sql" BLOCK_OF("new.rid") R"sql(, new.type, new.status, 1)
    ON CONFLICT (project_id, block, type, status) DO UPDATE SET n = n + 1;
END;
CREATE TRIGGER job_blocks_delete AFTER DELETE ON jobs BEGIN
  UPDATE job_blocks SET n = n - 1 WHERE project_id = old.project_id AND block = )sql" BLOCK_OF("old.rid") R"sql(
    AND type = old.type AND status = old.status;
  DELETE FROM job_blocks WHERE project_id = old.project_id AND block = )sql" BLOCK_OF("old.rid") R"sql(
    AND type = old.type AND status = old.status AND n = 0;
END;
CREATE TRIGGER job_blocks_status AFTER UPDATE OF status ON jobs WHEN old.status <> new.status BEGIN
  UPDATE job_blocks SET n = n - 1 WHERE project_id = old.project_id AND block = )sql" BLOCK_OF("old.rid") R"sql(
    AND type = old.type AND status = old.status;
  INSERT INTO job_blocks (project_id, block, type, status, n)
    VALUES (new.project_id, )sql" BLOCK_OF("new.rid") R"sql(, new.type, new.status, 1)
    ON CONFLICT (project_id, block, type, status) DO UPDATE SET n = n + 1;
END;
)sql",
    // 11: DNS-01 challenge records (DESIGN §9), each written before its UPDATE is
    // sent and marked removed after, so cleanup_dns and the scheduler's sweep find what a crash
    // left in a zone. The partial index holds only the records still in a zone.
    R"sql(
CREATE TABLE acme_dns_records (
  id TEXT PRIMARY KEY,
  project_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  fence INTEGER NOT NULL,
  zone TEXT NOT NULL,
  fqdn TEXT NOT NULL,
  value TEXT NOT NULL,
  presented_at INTEGER NOT NULL,
  removed_at INTEGER
);
CREATE INDEX acme_dns_records_left ON acme_dns_records (presented_at, id) WHERE removed_at IS NULL;
CREATE INDEX acme_dns_records_attempt ON acme_dns_records (job_id, fence);
)sql",
    // 12: the worker registry (issue 34): one row per worker process, its heartbeat, and the
    // verdict once it is declared dead (its jobs then released at once, not at lease expiry).
    R"sql(
CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  host_key TEXT NOT NULL,
  pid INTEGER NOT NULL,
  proc_start TEXT NOT NULL,
  version TEXT NOT NULL,
  lanes TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  running INTEGER NOT NULL DEFAULT 0,
  last_seen INTEGER NOT NULL,
  dead_at INTEGER,
  dead_reason TEXT,
  released_jobs INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 13: a token's lifecycle (issue 35): when it stops being accepted, and when it was last used
    // (written at most once a minute per process, so a busy token costs no write per request).
    R"sql(
ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
CREATE INDEX tokens_expiry ON tokens (expires_at) WHERE expires_at IS NOT NULL;
)sql",
    // 14: re-drives of a finished run's failed targets (issue 31), so each reopened run's end is
    // told once.
    R"sql(
ALTER TABLE distributions ADD COLUMN run_redrives INTEGER NOT NULL DEFAULT 0;
)sql",
    // 15: job_counts and job_blocks are kept by the writer (job_count_deltas.hpp): TEMP triggers
    // record each change, and each group commit adds the sums in its own transaction. The
    // per-row triggers of migrations 7 and 10 go; the counts they kept are exact and stay.
    R"sql(
DROP TRIGGER IF EXISTS job_counts_insert;
DROP TRIGGER IF EXISTS job_counts_delete;
DROP TRIGGER IF EXISTS job_counts_status;
DROP TRIGGER IF EXISTS job_blocks_insert;
DROP TRIGGER IF EXISTS job_blocks_delete;
DROP TRIGGER IF EXISTS job_blocks_status;
)sql",
    // 16: a job's error is stored with its code and class (store::job_record), so nothing reads
    // the words of the error again to tell what it was. Rows before have neither (NULL).
    R"sql(
ALTER TABLE jobs ADD COLUMN error_code TEXT;
ALTER TABLE jobs ADD COLUMN error_class TEXT;
)sql",
}};
#undef BLOCK_OF
#undef CERTFLEET_STR
#undef CERTFLEET_STR2
}  // namespace

int schema_version() { return static_cast<int>(migrations.size()); }

namespace {
// The migrations the file has applied.
std::int64_t applied_version(db& d) {
  auto s = d.prepare("SELECT coalesce(max(version), 0) FROM schema_migrations");
  return s->step() ? s->int64(0) : 0;
}
}  // namespace

void check_schema_current(db& d) {
  std::int64_t current = 0;
  try {
    current = applied_version(d);
  } catch (const db_error&) {
    throw db_error(0, "the file is not a certfleet store (no schema_migrations table)");
  }
  if (current != schema_version())
    throw db_error(0, fmt::format("the store's schema version is {}, this build's is {}: a read-only open does not "
                                  "migrate",
                                  current, schema_version()));
}

void migrate(db& d) {
  // BEGIN IMMEDIATE: two processes starting at once must not both apply a migration.
  d.exec("BEGIN IMMEDIATE");
  try {
    d.exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    const std::int64_t current = applied_version(d);
    if (current > schema_version())
      throw db_error(0, "the store's schema is newer than this certfleet build: upgrade certfleet");
    for (auto v = current; v < schema_version(); ++v) {
      d.exec(migrations[static_cast<std::size_t>(v)]);
      auto s = d.prepare("INSERT INTO schema_migrations (version, applied_at) VALUES (?1, strftime('%s','now') * 1000)");
      s->bind(1, v + 1).run();
    }
    d.exec("COMMIT");
  } catch (...) {
    d.exec("ROLLBACK");
    throw;
  }
}

}  // namespace certfleet::store::sqlite
