// The job store's reads on SQLite (sqlite_store_detail.hpp): a job, the job list with its
// per-status counts, log pages and the lanes' counts, each on a reader thread. Apart from the
// writes (sqlite_store.cpp) because none of them goes through the writer or its transaction.
#include "sqlite_store_detail.hpp"

#include "job_row.hpp"
#include "migrations.hpp"

#include <limits>

namespace certfleet::store::sqlite::detail {

task<job_record> sqlite_store::get(std::string project_id, std::string id) {
  return run_read<result<job_record>>(readers_, [p = std::move(project_id), id = std::move(id)](db& d) -> result<job_record> {
    auto j = find_job(d, p, id);
    if (!j) return job_not_found(id);
    return std::move(*j);
  });
}

task<job_page> sqlite_store::list(job_filter f) {
  return run_read<result<job_page>>(readers_, [f = std::move(f)](db& d) -> result<job_page> {
    job_page page;
    const std::string status = f.status ? std::string(to_string(*f.status)) : std::string();
    read_snapshot snapshot(d);
    {
      auto c = d.prepare("SELECT status, sum(n) FROM job_counts WHERE project_id = ?1 AND (?2 = '' OR type = ?2) "
                         "GROUP BY status");
      c->bind(1, f.project_id).bind(2, f.type);
      while (c->step())
        if (auto st = parse_job_status(c->text(0))) page.counts[static_cast<std::size_t>(*st)] = c->int64(1);
    }
    if (f.status) {
      page.total = page.counts[static_cast<std::size_t>(*f.status)];
    } else {
      for (auto n : page.counts) page.total += n;
    }
    // The page starts below `below` (a rid) after skipping `skip` index entries. The list is in
    // rid order, newest first (migration 10).
    std::int64_t below = std::numeric_limits<std::int64_t>::max();
    std::int64_t skip = 0;
    if (!f.cursor.empty()) {
      // The cursor is the last job id of the previous page. If retention removed that job since,
      // the page goes on below the nearest older id.
      auto c = d.prepare("SELECT coalesce((SELECT rid FROM jobs WHERE id = ?1), "
                         "(SELECT rid + 1 FROM jobs WHERE id < ?1 ORDER BY id DESC LIMIT 1), 0)");
      c->bind(1, f.cursor);
      if (c->step()) below = c->int64(0);
    } else {
      skip = static_cast<std::int64_t>(f.page - 1) * f.page_size;
      if (skip >= page.total) return page;  // past the end: nothing to walk
      if (skip > 0 && status != "active") {
        // Walk the blocks' counts, newest first, to the block that holds the page's first row;
        // only the rest of the offset is skipped in the index.
        auto b = d.prepare("SELECT block, sum(n) FROM job_blocks WHERE project_id = ?1 AND (?2 = '' OR type = ?2) "
                           "AND (?3 = '' OR status = ?3) GROUP BY block ORDER BY block DESC");
        b->bind(1, f.project_id).bind(2, f.type).bind(3, status);
        bool found = false;
        while (!found && b->step()) {
          const std::int64_t n = b->int64(1);
          if (n > skip) {
            below = (b->int64(0) + 1) << CERTFLEET_JOB_BLOCK_BITS;
            found = true;
          } else {
            skip -= n;
          }
        }
        if (!found) return page;  // the counts and the blocks are one snapshot: only past the end
      }
    }
    // One inner statement per filter shape, each on its own index. The inner select reads only
    // that index (the rowid is in every index), so an offset skips index entries, not rows; the
    // outer one reads the page's rows. One row more than the page says whether a next page exists.
    // Active jobs are in no status index (migration 6): there are only as many as the workers'
    // concurrency, all in jobs_lease. `status <> 'active'` is spelled out where a partial index
    // is meant: SQLite uses one only when the query implies its WHERE clause.
    const char* sql = nullptr;
#define CERTFLEET_PAGE_OF(inner) "SELECT " JOB_COLS " FROM jobs WHERE rid IN (" inner ") ORDER BY rid DESC"
    if (status == "active")
      sql = CERTFLEET_PAGE_OF("SELECT rid FROM jobs INDEXED BY jobs_lease WHERE status = 'active' AND project_id = ?1 AND rid < ?4 "
              "AND (?6 = '' OR type = ?6) ORDER BY rid DESC LIMIT ?2 OFFSET ?3");
    else if (status.empty() && f.type.empty())
      sql = CERTFLEET_PAGE_OF("SELECT rid FROM jobs INDEXED BY jobs_project WHERE project_id = ?1 AND rid < ?4 "
              "ORDER BY rid DESC LIMIT ?2 OFFSET ?3");
    else if (f.type.empty())
      sql = CERTFLEET_PAGE_OF("SELECT rid FROM jobs INDEXED BY jobs_project_status WHERE project_id = ?1 AND status = ?5 "
              "AND status <> 'active' AND rid < ?4 ORDER BY rid DESC LIMIT ?2 OFFSET ?3");
    else if (status.empty())
      sql = CERTFLEET_PAGE_OF("SELECT rid FROM jobs INDEXED BY jobs_project_type WHERE project_id = ?1 AND type = ?6 AND rid < ?4 "
              "ORDER BY rid DESC LIMIT ?2 OFFSET ?3");
    else
      sql = CERTFLEET_PAGE_OF("SELECT rid FROM jobs INDEXED BY jobs_project_type_status WHERE project_id = ?1 AND type = ?6 "
              "AND status = ?5 AND status <> 'active' AND rid < ?4 ORDER BY rid DESC LIMIT ?2 OFFSET ?3");
#undef CERTFLEET_PAGE_OF
    auto a = d.prepare(sql);
    a->bind(1, f.project_id).bind(2, f.page_size + 1).bind(3, skip).bind(4, below);
    if (a->parameter_count() >= 5) a->bind(5, status);
    if (a->parameter_count() >= 6) a->bind(6, f.type);
    while (a->step()) page.items.push_back(read_job(*a));
    if (static_cast<int>(page.items.size()) > f.page_size) {
      page.items.pop_back();
      page.next_cursor = page.items.back().id;
    }
    return page;
  });
}

task<log_page> sqlite_store::read_logs(std::string job_id, std::int64_t after_seq, int limit) {
  return run_read<result<log_page>>(readers_, [job_id = std::move(job_id), after_seq, limit](db& d) -> result<log_page> {
    log_page page;
    page.next_cursor = after_seq;
    auto s = d.prepare("SELECT seq, ts, level, message, detail FROM job_logs WHERE job_id = ?1 AND seq > ?2 "
                       "ORDER BY seq LIMIT ?3");
    s->bind(1, job_id).bind(2, after_seq).bind(3, limit);
    while (s->step()) {
      page.lines.push_back(log_line{s->int64(0), s->int64(1), s->text(2), s->text(3), s->text(4)});
      page.next_cursor = page.lines.back().seq;
    }
    return page;
  });
}

task<lane_load> sqlite_store::load_of_lane(std::string lane, time_ms now) {
  return run_read<result<lane_load>>(readers_, [lane = std::move(lane), now](db& d) {
    lane_load l;
    read_snapshot snapshot(d);
    {
      auto s = d.prepare("SELECT count(*) FROM jobs WHERE lane = ?1 AND " CLAIMABLE " AND ready_at <= ?2");
      s->bind(1, lane).bind(2, now);
      if (s->step()) l.waiting = s->int64(0);
    }
    {
      auto s = d.prepare("SELECT count(*) FROM jobs WHERE status = 'active' AND lane = ?1");
      s->bind(1, lane);
      if (s->step()) l.running = s->int64(0);
    }
    return result<lane_load>(l);
  });
}

task<std::vector<lane_stats>> sqlite_store::lane_statistics(time_ms now) {
  return run_read<result<std::vector<lane_stats>>>(readers_, [](db& d) {
    std::vector<lane_stats> out;
    for (const char* lane : {"main", "dist"}) {
      auto s = d.prepare("SELECT count(*), coalesce(min(ready_at), 0) FROM jobs WHERE lane = ?1 AND " CLAIMABLE);
      s->bind(1, lane);
      lane_stats st{lane, 0, 0};
      if (s->step()) {
        st.pending = s->int64(0);
        st.oldest_ready_at = s->int64(1);
      }
      out.push_back(std::move(st));
    }
    return result<std::vector<lane_stats>>(std::move(out));
  });
}

}  // namespace certfleet::store::sqlite::detail
