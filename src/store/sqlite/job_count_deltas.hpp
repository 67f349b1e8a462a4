#pragma once
// The job list's exact counts (job_counts: per project, type and status; job_blocks: the same
// per block of rids), kept by the writer's connection. TEMP triggers on jobs call
// certfleet_job_count() for each row a statement inserts, deletes or moves to another status; the
// changes of one operation are kept when its savepoint is released and dropped when it is rolled
// back; before COMMIT the writer adds the group commit's sums to the two tables, one upsert per
// (project, type, status) and per block, in the same transaction. As exact as the per-row
// triggers of migrations 7 and 10 (migration 15 drops them), at a few row writes per commit
// instead of four per status change.
#include "db.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace certfleet::store::sqlite {

class job_count_deltas {
 public:
  // Registers certfleet_job_count() and the TEMP triggers on `d`, the writer's connection, whose
  // schema is current; `this` must outlive the connection's use.
  void install(db& d);

  // One row changed: +1 for the status it has now, -1 for the one it left.
  void record(std::string_view project, std::string_view type, std::string_view status, std::int64_t rid, int delta);
  // The operation's savepoint was released: its changes belong to the transaction.
  void keep_op();
  // The operation was rolled back: its changes never happened.
  void drop_op() noexcept;
  // Adds the transaction's sums to job_counts and job_blocks (inside the open transaction; a
  // db_error fails the commit). Block rows left at zero go, as the delete trigger did.
  void flush(db& d);
  // The transaction rolled back.
  void discard() noexcept;

  // The changes kept for the open transaction (tests).
  std::size_t pending() const noexcept { return txn_.size(); }

 private:
  // Names (projects, types, statuses) are interned: a record allocates nothing once its names
  // were seen (the map is looked up by string_view).
  struct change {
    std::uint32_t project = 0, type = 0, status = 0;
    std::int64_t block = 0;
    int delta = 0;
  };
  std::uint32_t intern(std::string_view name);
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::vector<change> op_, txn_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint32_t, name_hash, std::equal_to<>> ids_;
};

}  // namespace certfleet::store::sqlite
