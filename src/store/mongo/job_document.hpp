#pragma once
// The job document in MongoDB (collection `jobs`) and the pure pieces of the job commands: the
// claim's filter, sort and update pipeline, the finish pipelines. Built without I/O so the wire
// tests and the fuzz-free unit tests can read them whole.
#include "bson_doc.hpp"
#include "certfleet/store/job.hpp"

#include <optional>
#include <string>

namespace certfleet::store::mongo {

// Field `q` ("queue"): the lane while the job can be claimed (pending or failed and not held, or
// active with attempts left and no cancel request, claimable once its lease ends), absent
// otherwise. It lets one compound index {q, ready_at, _id} serve the claim with one equality and
// one range, no $or (DESIGN §10).
inline constexpr const char* claim_index_name = "claim";

doc new_job_document(const new_job& j, const std::string& id, time_ms now);
job_record read_job(const bson_t* d);

// `now` is the value the pipeline writes for the current time: {$toLong: "$$NOW"} (the server's
// clock) or a literal (the caller's).
struct time_expr {
  bool server = true;
  time_ms literal = 0;
  void append_to(doc& d, std::string_view key) const;
  void append_to(list& l) const;
};

doc claim_command(const std::string& lane, const std::string& worker_id, time_ms due_by, const time_expr& now,
                  time_ms lease_ms, std::int32_t max_time_ms);
doc finish_command(const finish_request& r, time_ms now, std::int32_t max_time_ms, bool in_transaction);

// A log line's seq: the job's own counter, incremented under the lease's fence when there is one;
// the reply's value carries log_seq and project_id (the line names its project).
doc next_log_seq_command(const std::string& job_id, const std::optional<lease_ref>& lease, std::int32_t max_time_ms,
                         bool in_transaction);
// The insert of one line (unique {job_id, seq}: a second send of it fails on the key).
doc log_line_insert(const std::string& job_id, const bson_t* seq_value, std::string_view level, std::string_view message,
                    std::string_view detail, time_ms now, std::int32_t max_time_ms, bool in_transaction);

}  // namespace certfleet::store::mongo
