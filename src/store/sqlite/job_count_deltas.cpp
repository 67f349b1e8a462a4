#include "job_count_deltas.hpp"

#include "migrations.hpp"  // CERTFLEET_JOB_BLOCK_BITS

#include <map>
#include <tuple>

namespace certfleet::store::sqlite {

namespace {

std::string_view text_arg(sqlite3_value* v) {
  auto p = reinterpret_cast<const char*>(sqlite3_value_text(v));
  return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_value_bytes(v))) : std::string_view();
}

// certfleet_job_count(project_id, type, status, rid, delta): called by the TEMP triggers only.
void job_count_fn(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (argc != 5) {
    sqlite3_result_error(ctx, "certfleet_job_count takes 5 arguments", -1);
    return;
  }
  auto* self = static_cast<job_count_deltas*>(sqlite3_user_data(ctx));
  try {
    self->record(text_arg(argv[0]), text_arg(argv[1]), text_arg(argv[2]), sqlite3_value_int64(argv[3]),
                 sqlite3_value_int(argv[4]));
  } catch (const std::bad_alloc&) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_null(ctx);
}

// The triggers' conditions are those of migrations 7 and 10: an insert, a delete, an update that
// changes the status.
constexpr const char* triggers = R"sql(
CREATE TEMP TRIGGER certfleet_jobs_insert AFTER INSERT ON main.jobs BEGIN
  SELECT certfleet_job_count(new.project_id, new.type, new.status, new.rid, 1);
END;
CREATE TEMP TRIGGER certfleet_jobs_delete AFTER DELETE ON main.jobs BEGIN
  SELECT certfleet_job_count(old.project_id, old.type, old.status, old.rid, -1);
END;
CREATE TEMP TRIGGER certfleet_jobs_status AFTER UPDATE OF status ON main.jobs WHEN old.status <> new.status BEGIN
  SELECT certfleet_job_count(old.project_id, old.type, old.status, old.rid, -1),
         certfleet_job_count(new.project_id, new.type, new.status, new.rid, 1);
END;
)sql";

}  // namespace

void job_count_deltas::install(db& d) {
  int rc = sqlite3_create_function_v2(d.handle(), "certfleet_job_count", 5, SQLITE_UTF8, this, job_count_fn, nullptr,
                                      nullptr, nullptr);
  if (rc != SQLITE_OK) throw db_error(rc, sqlite3_errmsg(d.handle()));
  d.exec(triggers);
}

std::uint32_t job_count_deltas::intern(std::string_view name) {
  if (auto it = ids_.find(name); it != ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(names_.back(), id);
  return id;
}

void job_count_deltas::record(std::string_view project, std::string_view type, std::string_view status,
                              std::int64_t rid, int delta) {
  op_.push_back({intern(project), intern(type), intern(status), rid >> CERTFLEET_JOB_BLOCK_BITS, delta});
}

void job_count_deltas::keep_op() {
  if (txn_.empty()) {
    txn_.swap(op_);
  } else {
    txn_.insert(txn_.end(), std::make_move_iterator(op_.begin()), std::make_move_iterator(op_.end()));
  }
  op_.clear();
}

void job_count_deltas::drop_op() noexcept { op_.clear(); }

void job_count_deltas::discard() noexcept {
  op_.clear();
  txn_.clear();
}

void job_count_deltas::flush(db& d) {
  // Changes outside an operation's savepoint (none today) count with the transaction.
  keep_op();
  // No transaction left (SQLite rolled it back): COMMIT fails and the writer discards these.
  if (txn_.empty() || sqlite3_get_autocommit(d.handle())) return;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::int64_t> counts;
  std::map<std::tuple<std::uint32_t, std::int64_t, std::uint32_t, std::uint32_t>, std::int64_t> blocks;
  for (const auto& c : txn_) {
    counts[{c.project, c.type, c.status}] += c.delta;
    blocks[{c.project, c.block, c.type, c.status}] += c.delta;
  }
  for (const auto& [k, n] : counts) {
    if (n == 0) continue;
    const auto& project = names_[std::get<0>(k)];
    const auto& type = names_[std::get<1>(k)];
    const auto& status = names_[std::get<2>(k)];
    d.prepare("INSERT INTO job_counts (project_id, type, status, n) VALUES (?1, ?2, ?3, ?4) "
              "ON CONFLICT (project_id, type, status) DO UPDATE SET n = n + excluded.n")
        ->bind(1, project).bind(2, type).bind(3, status).bind(4, n).run();
  }
  for (const auto& [k, n] : blocks) {
    if (n == 0) continue;
    const auto& project = names_[std::get<0>(k)];
    const auto block = std::get<1>(k);
    const auto& type = names_[std::get<2>(k)];
    const auto& status = names_[std::get<3>(k)];
    d.prepare("INSERT INTO job_blocks (project_id, block, type, status, n) VALUES (?1, ?2, ?3, ?4, ?5) "
              "ON CONFLICT (project_id, block, type, status) DO UPDATE SET n = n + excluded.n")
        ->bind(1, project).bind(2, block).bind(3, type).bind(4, status).bind(5, n).run();
    if (n < 0)
      d.prepare("DELETE FROM job_blocks WHERE project_id = ?1 AND block = ?2 AND type = ?3 AND status = ?4 AND n = 0")
          ->bind(1, project).bind(2, block).bind(3, type).bind(4, status).run();
  }
  txn_.clear();
}

}  // namespace certfleet::store::sqlite
