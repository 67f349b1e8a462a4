#pragma once
// A whole row of the jobs table: the column list and its reader, for every query that returns
// full job documents (the job store, the catalog's distribution children).
#include "certfleet/store/job.hpp"
#include "db.hpp"

#define JOB_COLS                                                                                     \
  "id, project_id, type, lane, payload, status, result_status, attempts, max_attempts, fence, "     \
  "ready_at, held, locked_by, locked_until, idempotency_key, parent_job_id, certificate_id, "       \
  "distribution_id, triggered_by, created_at, started_at, completed_at, error, progress_current, " \
  "progress_total, cancel_requested, error_code, error_class"

namespace certfleet::store::sqlite {

// Reads a row selected with JOB_COLS, in that order.
job_record read_job(stmt& s);

}  // namespace certfleet::store::sqlite
