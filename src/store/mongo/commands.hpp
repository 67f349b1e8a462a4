#pragma once
// Command documents and reply readings that every MongoDB store file uses: a find's first batch,
// a findAndModify's value, what a duplicate-key failure names. Inside a transaction the read and
// write concerns are the transaction's, so those commands never carry their own.
#include "client.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::store::mongo {

inline error job_not_found(const std::string& id) {
  return make_error(errc::not_found, fmt::format("job {} not found", id), "id");
}

inline doc write_concern(const connection& c) { return majority_write_concern(c.max_time_ms()); }

// find on one collection, outside a transaction, answered in one batch (every read here is
// bounded by its limit; 0: no limit, one batch of at most 100,000 documents and 16 MiB).
inline doc find_command(std::string_view coll, const doc& filter, const doc* sort, std::int64_t limit, std::int64_t skip,
                        std::int32_t max_time_ms, bool majority) {
  doc cmd;
  cmd.str("find", coll).sub("filter", filter);
  if (sort) cmd.sub("sort", *sort);
  if (skip > 0) cmd.i64("skip", skip);
  // One batch holds the whole answer: the server's first batch is 101 documents unless told.
  if (limit > 0) cmd.i64("limit", limit);
  cmd.i64("batchSize", limit > 0 ? limit : 100'000).boolean("singleBatch", true);
  if (majority) cmd.sub("readConcern", majority_read_concern());
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

// find inside a transaction.
inline doc find_in_txn(std::string_view coll, const doc& filter, std::int64_t limit, std::int32_t max_time_ms,
                       const doc* sort = nullptr) {
  doc cmd;
  cmd.str("find", coll).sub("filter", filter);
  if (sort) cmd.sub("sort", *sort);
  if (limit > 0) cmd.i64("limit", limit);
  cmd.i64("batchSize", limit > 0 ? limit : 100'000).boolean("singleBatch", true);
  cmd.i32("maxTimeMS", max_time_ms);
  return cmd;
}

inline std::vector<doc> first_batch(const doc& reply) { return view(reply.get()).docs("cursor.firstBatch"); }

inline std::optional<doc> find_and_modify_value(const doc& reply) { return view(reply.get()).sub("value"); }

inline bool is_duplicate_key(const failure& f) { return f.code == duplicate_key; }

// Whether a duplicate-key write error is on _id (keyPattern), so a retried insert of our own _id
// is told from a taken unique key.
inline bool duplicate_on_id(const failure& f) {
  if (!f.reply) return false;
  auto errs = view(f.reply->get()).docs("writeErrors");
  if (errs.empty()) return false;
  view e(errs.front().get());
  if (e.has("keyPattern._id")) return true;
  return e.str("errmsg").find("_id_") != std::string::npos;
}

}  // namespace certfleet::store::mongo
