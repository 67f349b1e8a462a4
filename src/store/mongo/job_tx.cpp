#include "job_tx.hpp"

#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"
#include "commands.hpp"
#include "job_document.hpp"

#include <stdexcept>

namespace certfleet::store::mongo {

mongo_job_tx::mongo_job_tx(const connection& c, mongoc_client_t* client, mongoc_client_session_t* s,
                           const catalog_tx_factory* catalog)
    : c_(c), client_(client), s_(s), catalog_factory_(catalog) {}

mongo_job_tx::~mongo_job_tx() = default;

error mongo_job_tx::keep(const failure& f, std::string_view doing) {
  failed = f;
  return to_error(f, doing);
}

result<enqueue_outcome> mongo_job_tx::enqueue(const new_job& j, time_ms now) {
  // Inside a transaction a duplicate-key error aborts it: look the key up first; a concurrent
  // insert of the same key conflicts (WriteConflict, a transient error) and the transaction runs
  // again, finding it.
  if (!j.idempotency_key.empty()) {
    doc f;
    f.str("project_id", j.project_id).str("idempotency_key", j.idempotency_key);
    doc reply;
    if (auto fail = c_.command(client_, find_in_txn("jobs", f, 1, c_.max_time_ms()), reply, s_))
      return keep(*fail, "enqueue in a transaction");
    auto batch = first_batch(reply);
    if (!batch.empty()) return enqueue_outcome{read_job(batch.front().get()), false};
  }
  const auto id = j.id.empty() ? new_object_id() : j.id;
  auto d = new_job_document(j, id, now);
  doc cmd;
  cmd.str("insert", "jobs").array("documents", {d}).i32("maxTimeMS", c_.max_time_ms());
  doc reply;
  if (auto fail = c_.command(client_, cmd, reply, s_)) return keep(*fail, "enqueue in a transaction");
  return enqueue_outcome{read_job(d.get()), true};
}

result<std::int64_t> mongo_job_tx::append_log(const std::string& job_id, std::string_view level,
                                              std::string_view message, std::string_view detail, time_ms now) {
  doc reply;
  if (auto fail = c_.command(client_, next_log_seq_command(job_id, std::nullopt, c_.max_time_ms(), true), reply, s_))
    return keep(*fail, "append log in a transaction");
  auto v = find_and_modify_value(reply);
  if (!v) return job_not_found(job_id);
  const auto seq = view(v->get()).i64("log_seq");
  const auto ins = log_line_insert(job_id, v->get(), level, message, detail, now, c_.max_time_ms(), true);
  if (auto fail = c_.command(client_, ins, reply, s_)) return keep(*fail, "append log in a transaction");
  return seq;
}

catalog_tx& mongo_job_tx::catalog() {
  if (!catalog_) {
    // Only the job queue alone (open_mongodb_queue) has no catalog; a hook that reports to the
    // catalog cannot be set on it, so reaching this is a bug.
    if (!catalog_factory_ || !*catalog_factory_)
      throw std::logic_error("this MongoDB job store was opened without a catalog");
    catalog_ = (*catalog_factory_)(client_, s_, *this);
  }
  return *catalog_;
}

}  // namespace certfleet::store::mongo
