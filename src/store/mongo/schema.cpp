#include "schema.hpp"

#include "job_document.hpp"
#include "mongo_auth.hpp"
#include "mongo_catalog.hpp"

#include <fmt/format.h>

namespace certfleet::store::mongo {

namespace {

doc index_doc(const index_spec& s) {
  doc key;
  for (const auto& [field, dir] : s.keys) key.i32(field, dir);
  doc d;
  d.sub("key", key).str("name", s.name);
  if (s.unique) d.boolean("unique", true);
  if (s.partial_exists) {
    doc exists;
    exists.boolean("$exists", true);
    doc filter;
    filter.sub(s.partial_exists, exists);
    d.sub("partialFilterExpression", filter);
  }
  return d;
}

}  // namespace

doc create_indexes(const char* coll, const std::vector<index_spec>& specs, std::int32_t max_time_ms) {
  std::vector<doc> indexes;
  for (const auto& s : specs) indexes.push_back(index_doc(s));
  doc cmd;
  cmd.str("createIndexes", coll).array("indexes", indexes).sub("writeConcern", majority_write_concern(max_time_ms));
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

std::vector<doc> index_commands(std::int32_t max_time_ms) {
  std::vector<doc> out;
  out.push_back(create_indexes(
      "jobs",
      {
          // The claim: equality on q (the lane while claimable), then due time and id, the order
          // of its sort. Partial: only claimable jobs are in it.
          {claim_index_name, {{"q", 1}, {"ready_at", 1}, {"_id", 1}}, false, "q"},
          // Idempotent enqueue: one job per key in a project.
          {"idempotency", {{"project_id", 1}, {"idempotency_key", 1}}, true, "idempotency_key"},
          // Retention: finished jobs, oldest first (and the durations of /metrics).
          {"retention", {{"completed_at", 1}}, false, "completed_at"},
          // Expired leases, oldest first (the reaper).
          {"lease", {{"locked_until", 1}}, false, "locked_until"},
          // The job list, newest first, by project and by its filters.
          {"project", {{"project_id", 1}, {"_id", -1}}},
          {"project_status", {{"project_id", 1}, {"status", 1}, {"_id", -1}}},
          {"project_type", {{"project_id", 1}, {"type", 1}, {"_id", -1}}},
          {"project_type_status", {{"project_id", 1}, {"type", 1}, {"status", 1}, {"_id", -1}}},
      },
      max_time_ms));
  // Log lines by cursor; by project for a project's removal.
  out.push_back(create_indexes("job_logs", {{"cursor", {{"job_id", 1}, {"seq", 1}}, true}, {"project", {{"project_id", 1}}}},
                               max_time_ms));
  out.push_back(create_indexes("projects", {{"name", {{"name", 1}}, true}}, max_time_ms));
  for (auto& c : catalog_index_commands(max_time_ms)) out.push_back(std::move(c));
  for (auto& c : auth_index_commands(max_time_ms)) out.push_back(std::move(c));
  return out;
}

result<void> prepare_schema(connection& c) {
  connection::lease l(c);
  for (const auto& cmd : index_commands(c.max_time_ms())) {
    doc reply;
    if (auto f = c.command(l.get(), cmd, reply)) return to_error(*f, "store: creating indexes");
  }
  // The version, written w:majority: a cluster that cannot acknowledge a majority write (too
  // few data-bearing members up, or an arbiter majority) fails here, at start, not at the first job.
  doc q;
  q.str("_id", "schema");
  doc find;
  find.str("find", "store_meta").sub("filter", q).i64("limit", 1).boolean("singleBatch", true);
  find.sub("readConcern", majority_read_concern()).i32("maxTimeMS", c.max_time_ms());
  doc reply;
  if (auto f = c.command(l.get(), find, reply)) return to_error(*f, "store: reading the schema version");
  auto batch = view(reply.get()).docs("cursor.firstBatch");
  const auto stored = batch.empty() ? 0 : view(batch.front().get()).i64("version");
  if (stored > schema_version)
    return make_error(errc::store_failure,
                      fmt::format("store: the database has schema version {}, newer than this build's {}: run the "
                                  "newer certfleet, or restore a dump made before the upgrade",
                                  stored, schema_version),
                      "store");
  doc set;
  set.i64("version", schema_version);
  doc update;
  update.sub("$set", set);
  doc stmt;
  stmt.sub("q", q).sub("u", update).boolean("upsert", true);
  doc cmd;
  cmd.str("update", "store_meta").array("updates", {stmt}).sub("writeConcern", majority_write_concern(c.max_time_ms()));
  cmd.i32("maxTimeMS", c.max_time_ms());
  if (auto f = c.command(l.get(), cmd, reply)) {
    if (f->reply && view(f->reply->get()).has("writeConcernError"))
      return make_error(errc::store_failure,
                        fmt::format("store: the cluster did not acknowledge a w:majority write ({}): certfleet needs a "
                                    "majority of data-bearing members up; see docs/operations-mongodb.md",
                                    f->err.message),
                        "store");
    return to_error(*f, "store: recording the schema version");
  }
  return {};
}

}  // namespace certfleet::store::mongo
