#pragma once
// What the two files of the SQLite catalog share, private to src/store/sqlite: each record's
// column list and row reader, with the statement helpers, in sqlite_catalog_rows.cpp; the reads,
// the writes and the store in sqlite_catalog.cpp. A row's columns and its reader are spelled once,
// beside each other, as job_row.hpp does for jobs.
#include "certfleet/store/catalog.hpp"
#include "db.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#define OBJECT_COLS "id, project_id, kind, name, doc, sealed, ref_id, not_after, created_at"

#define DIST_COLS                                                                                          \
  "id, project_id, name, certificate_id, target_ids, canary, failure_tolerance, fail_fast, status, run_no, " \
  "mode, run_target_ids, job_ids, error, fan_out_total, fan_out_succeeded, fan_out_failed, fan_out_partial, " \
  "fan_out_cancelled, fan_out_retrying, fan_out_retry_wave, fail_fast_fired, cancel_requested, "             \
  "run_started_at, run_finished_at, created_at, updated_at, auto_execute, run_certificate_version, run_trigger, run_redrives"

#define RESULT_COLS                                                                                   \
  "distribution_id, run_no, target_id, job_id, retry_attempt, fence, status, error_class, error, " \
  "started_at, finished_at, fingerprint, hash_skipped, files_from_run, detail"

#define DNS_RECORD_COLS "id, project_id, provider_id, job_id, fence, zone, fqdn, value, presented_at, removed_at"

namespace certfleet::store::sqlite::detail {

catalog_object read_object(stmt& s);
std::string ids_to_json(const std::vector<std::string>& ids);
distribution_record read_distribution(stmt& s);
target_result read_result(stmt& s);
// The columns of DNS_RECORD_COLS from column `at` on.
dns_record read_dns_record(stmt& s, int at = 0);
std::pair<std::string, std::string> prefix_range(std::string_view prefix);
bool is_known_kind(std::string_view kind);
const char* named_sql(std::string_view kind, bool bounded);
error object_not_found(std::string_view kind, std::string_view id);

}  // namespace certfleet::store::sqlite::detail
