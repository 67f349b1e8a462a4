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
  doc q;
  q.str("_id", job_id);
  doc inc;
  inc.i64("log_seq", 1);
  doc update;
  update.sub("$inc", inc);
  doc fields;
  fields.i32("log_seq", 1).i32("project_id", 1);
  doc cmd;
  cmd.str("findAndModify", "jobs").sub("query", q).sub("update", update).boolean("new", true).sub("fields", fields);
  cmd.i32("maxTimeMS", c_.max_time_ms());
  doc reply;
  if (auto fail = c_.command(client_, cmd, reply, s_)) return keep(*fail, "append log in a transaction");
  auto v = find_and_modify_value(reply);
  if (!v) return job_not_found(job_id);
  const auto seq = view(v->get()).i64("log_seq");
  doc line;
  line.str("job_id", job_id).str("project_id", view(v->get()).str("project_id")).i64("seq", seq).i64("ts", now).str("level", level).str("message", message);
  line.str_or_null("detail", detail);
  doc ins;
  ins.str("insert", "job_logs").array("documents", {line}).i32("maxTimeMS", c_.max_time_ms());
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
