#include "job_document.hpp"

#include "certfleet/store/job_policy.hpp"

namespace certfleet::store::mongo {

namespace {

void optional_str(doc& d, std::string_view k, const std::string& v) {
  // Absent, not null: the idempotency index is partial on {$exists: true}, and null exists.
  if (!v.empty()) d.str(k, v);
}

doc literal(std::string_view v) {
  // A string that starts with '$' would be read as a field path inside a pipeline.
  doc d;
  d.str("$literal", v);
  return d;
}

}  // namespace

doc new_job_document(const new_job& j, const std::string& id, time_ms now) {
  doc d;
  d.str("_id", id).str("project_id", j.project_id).str("type", j.type).str("lane", j.lane).str("payload", j.payload);
  d.str("status", "pending").i32("attempts", 0).i32("max_attempts", j.max_attempts).i64("fence", 0);
  d.i64("ready_at", j.run_at ? j.run_at : now).boolean("held", j.held);
  optional_str(d, "idempotency_key", j.idempotency_key);
  optional_str(d, "parent_job_id", j.parent_job_id);
  optional_str(d, "certificate_id", j.certificate_id);
  optional_str(d, "distribution_id", j.distribution_id);
  optional_str(d, "triggered_by", j.triggered_by);
  d.i64("created_at", now).i64("progress_current", 0).i64("progress_total", 0).boolean("cancel_requested", false);
  d.i64("log_seq", 0);
  if (!j.held) d.str("q", j.lane);
  return d;
}

job_record read_job(const bson_t* b) {
  view v(b);
  job_record j;
  j.id = v.str("_id");
  j.project_id = v.str("project_id");
  j.type = v.str("type");
  j.lane = v.str("lane");
  j.payload = v.str("payload");
  j.status = parse_job_status(v.str("status")).value_or(job_status::dead);
  j.result_status = v.str("result_status");
  j.attempts = static_cast<int>(v.i64("attempts"));
  j.max_attempts = static_cast<int>(v.i64("max_attempts"));
  j.fence = v.i64("fence");
  j.ready_at = v.i64("ready_at");
  j.held = v.boolean("held");
  j.locked_by = v.str("locked_by");
  j.locked_until = v.i64("locked_until");
  j.idempotency_key = v.str("idempotency_key");
  j.parent_job_id = v.str("parent_job_id");
  j.certificate_id = v.str("certificate_id");
  j.distribution_id = v.str("distribution_id");
  j.triggered_by = v.str("triggered_by");
  j.created_at = v.i64("created_at");
  j.started_at = v.i64("started_at");
  j.completed_at = v.i64("completed_at");
  j.error = v.str("error");
  j.error_code = v.str("error_code");
  j.error_class = v.str("error_class");
  j.progress_current = v.i64("progress_current");
  j.progress_total = v.i64("progress_total");
  j.cancel_requested = v.boolean("cancel_requested");
  return j;
}

void time_expr::append_to(doc& d, std::string_view key) const {
  if (!server) {
    d.i64(key, literal);
    return;
  }
  doc e;
  e.str("$toLong", "$$NOW");
  d.sub(key, e);
}

void time_expr::append_to(list& l) const {
  if (!server) {
    l.i64(literal);
    return;
  }
  doc e;
  e.str("$toLong", "$$NOW");
  l.sub(e);
}

doc claim_command(const std::string& lane, const std::string& worker_id, time_ms due_by, const time_expr& now,
                  time_ms lease_ms, std::int32_t max_time_ms) {
  doc query;
  {
    doc lte;
    lte.i64("$lte", due_by);
    query.str("q", lane).sub("ready_at", lte);
  }
  doc sort;
  sort.i32("q", 1).i32("ready_at", 1).i32("_id", 1);

  auto plus = [&](std::string_view field, std::int64_t n) {
    list l;
    l.str(field).i64(n);
    doc d;
    d.arr("$add", l);
    return d;
  };
  doc lease_end;
  {
    list l;
    now.append_to(l);
    l.i64(lease_ms);
    lease_end.arr("$add", l);
  }
  // Still claimable after this attempt once its lease ends: attempts left and no cancel request.
  doc keep_in_queue;
  {
    doc attempts_left;
    {
      list cmp;
      cmp.sub(plus("$attempts", 1)).str("$max_attempts");
      attempts_left.arr("$lt", cmp);
    }
    doc not_cancelled;
    {
      list n;
      n.str("$cancel_requested");
      not_cancelled.arr("$not", n);
    }
    list both;
    both.sub(attempts_left).sub(not_cancelled);
    doc cond_if;
    cond_if.arr("$and", both);
    list cond;
    cond.sub(cond_if).str("$lane").str("$$REMOVE");
    keep_in_queue.arr("$cond", cond);
  }
  doc set;
  set.str("status", "active").sub("locked_by", literal(worker_id)).sub("attempts", plus("$attempts", 1));
  set.sub("fence", plus("$fence", 1));
  now.append_to(set, "started_at");
  set.sub("locked_until", lease_end).sub("ready_at", lease_end).sub("q", keep_in_queue);
  doc stage;
  stage.sub("$set", set);
  std::vector<doc> pipeline;
  pipeline.push_back(std::move(stage));

  doc cmd;
  cmd.str("findAndModify", "jobs").sub("query", query).sub("sort", sort).array("update", pipeline);
  cmd.boolean("new", true).sub("writeConcern", [&] {
    doc wc;
    wc.str("w", "majority").i32("wtimeout", max_time_ms);
    return wc;
  }());
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

doc finish_command(const finish_request& r, time_ms now, std::int32_t max_time_ms, bool in_transaction) {
  doc query;
  query.str("_id", r.lease.id).str("locked_by", r.worker_id).i64("fence", r.lease.fence).str("status", "active");
  doc set;
  switch (r.kind) {
    case finish_kind::completed:
      set.str("status", "completed")
          .sub("result_status", literal(r.result_status.empty() ? std::string("ok") : r.result_status))
          .i64("completed_at", now)
          .str("locked_until", "$$REMOVE")
          .str("error", "$$REMOVE")
          .str("error_code", "$$REMOVE")
          .str("error_class", "$$REMOVE")
          .str("q", "$$REMOVE");
      break;
    case finish_kind::failed:
    case finish_kind::dead: {
      // The store enforces the rule: an error with no attempts left is dead, whatever was asked.
      auto dead_if = [&] {
        doc d;
        if (r.kind == finish_kind::dead) {
          list l;
          l.i64(1).i64(1);
          d.arr("$eq", l);
        } else {
          list l;
          l.str("$attempts").str("$max_attempts");
          d.arr("$gte", l);
        }
        return d;
      };
      auto cond = [&](auto then_fn, auto else_fn) {
        list l;
        l.sub(dead_if());
        then_fn(l);
        else_fn(l);
        doc d;
        d.arr("$cond", l);
        return d;
      };
      set.sub("status", cond([](list& l) { l.str("dead"); }, [](list& l) { l.str("failed"); }));
      set.sub("completed_at", cond([&](list& l) { l.i64(now); }, [](list& l) { l.str("$$REMOVE"); }));
      set.i64("ready_at", r.retry_at ? r.retry_at : now).sub("error", literal(r.error)).str("locked_until", "$$REMOVE");
      set.sub("error_code", literal(r.error_code)).sub("error_class", literal(r.error_class));
      set.sub("q", cond([](list& l) { l.str("$$REMOVE"); }, [](list& l) { l.str("$lane"); }));
      break;
    }
    case finish_kind::cancelled:
      set.str("status", "cancelled").i64("completed_at", now).str("error", "cancelled on request");
      set.str("error_code", cancelled_code).str("error_class", "$$REMOVE");
      set.str("locked_until", "$$REMOVE").str("q", "$$REMOVE");
      break;
    case finish_kind::released: {
      // Shutdown: the attempt is given back, the fence is not.
      list l;
      l.str("$attempts").i64(1);
      doc minus;
      minus.arr("$subtract", l);
      set.str("status", "pending").sub("attempts", minus).i64("ready_at", now);
      set.str("locked_by", "$$REMOVE").str("locked_until", "$$REMOVE").str("q", "$lane");
      break;
    }
  }
  doc stage;
  stage.sub("$set", set);
  std::vector<doc> pipeline;
  pipeline.push_back(std::move(stage));
  doc cmd;
  cmd.str("findAndModify", "jobs").sub("query", query).array("update", pipeline).boolean("new", true);
  if (!in_transaction) {
    doc wc;
    wc.str("w", "majority").i32("wtimeout", max_time_ms);
    cmd.sub("writeConcern", wc);
  }
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

namespace {
void majority_unless(doc& cmd, bool in_transaction, std::int32_t max_time_ms) {
  if (!in_transaction) {
    doc wc;
    wc.str("w", "majority").i32("wtimeout", max_time_ms);
    cmd.sub("writeConcern", wc);
  }
  cmd.i32("maxTimeMS", max_time_ms);
}
}  // namespace

doc next_log_seq_command(const std::string& job_id, const std::optional<lease_ref>& lease, std::int32_t max_time_ms,
                         bool in_transaction) {
  doc q;
  q.str("_id", job_id);
  if (lease) q.i64("fence", lease->fence).str("status", "active");
  doc inc;
  inc.i64("log_seq", 1);
  doc update;
  update.sub("$inc", inc);
  doc fields;
  fields.i32("log_seq", 1).i32("project_id", 1);
  doc cmd;
  cmd.str("findAndModify", "jobs").sub("query", q).sub("update", update).boolean("new", true).sub("fields", fields);
  majority_unless(cmd, in_transaction, max_time_ms);
  return cmd;
}

doc log_line_insert(const std::string& job_id, const bson_t* seq_value, std::string_view level, std::string_view message,
                    std::string_view detail, time_ms now, std::int32_t max_time_ms, bool in_transaction) {
  view v(seq_value);
  doc line;
  line.str("job_id", job_id).str("project_id", v.str("project_id")).i64("seq", v.i64("log_seq")).i64("ts", now);
  line.str("level", level).str("message", message).str_or_null("detail", detail);
  doc ins;
  ins.str("insert", "job_logs").array("documents", {line});
  majority_unless(ins, in_transaction, max_time_ms);
  return ins;
}

}  // namespace certfleet::store::mongo
