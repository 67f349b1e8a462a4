// The job queue's reads on MongoDB (mongo_queue_detail.hpp): a job, the job list with its
// per-status counts, log pages and the lanes' counts. Apart from the writes (mongo_queue.cpp)
// because none of them changes a job: no fence, no terminal hook (find_job also serves cancel and
// retry, inside their transaction).
#include "mongo_queue_detail.hpp"

#include "commands.hpp"

#include <map>

namespace certfleet::store::mongo::detail {

std::optional<job_record> mongo_queue::find_job(mongoc_client_t* client, const std::string& project_id,
                                                const std::string& id, std::optional<failure>& fail,
                                                mongoc_client_session_t* s) {
  doc f;
  f.str("_id", id).str("project_id", project_id);
  doc reply;
  fail = s ? c_->command(client, find_in_txn("jobs", f, 1, c_->max_time_ms()), reply, s)
           : c_->command(client, find_command("jobs", f, nullptr, 1, 0, c_->max_time_ms(), false), reply);
  if (fail) return std::nullopt;
  auto batch = first_batch(reply);
  if (batch.empty()) return std::nullopt;
  return read_job(batch.front().get());
}

task<job_record> mongo_queue::get(std::string project_id, std::string id) {
  return run<result<job_record>>(
      ex_, [this, p = std::move(project_id), id = std::move(id)](mongoc_client_t* client) -> result<job_record> {
        std::optional<failure> fail;
        auto j = find_job(client, p, id, fail);
        if (fail) return to_error(*fail, "get job");
        if (!j) return job_not_found(id);
        return std::move(*j);
      });
}

task<job_page> mongo_queue::list(job_filter f) {
  return run<result<job_page>>(ex_, [this, f = std::move(f)](mongoc_client_t* client) -> result<job_page> {
    job_page page;
    // Counts per status for the tabs: one aggregation over the project's (and type's) jobs.
    doc match;
    match.str("project_id", f.project_id);
    if (!f.type.empty()) match.str("type", f.type);
    {
      doc m;
      m.sub("$match", match);
      doc sum;
      sum.i32("$sum", 1);
      doc group_body;
      group_body.str("_id", "$status").sub("n", sum);
      doc g;
      g.sub("$group", group_body);
      doc cursor;
      doc cmd;
      cmd.str("aggregate", "jobs").array("pipeline", {m, g}).sub("cursor", cursor).i32("maxTimeMS", c_->max_time_ms());
      doc reply;
      if (auto fail = c_->command(client, cmd, reply)) return to_error(*fail, "list jobs: counts");
      for (const auto& d : first_batch(reply)) {
        view v(d.get());
        if (auto st = parse_job_status(v.str("_id"))) page.counts[static_cast<std::size_t>(*st)] = v.i64("n");
      }
    }
    if (f.status) page.total = page.counts[static_cast<std::size_t>(*f.status)];
    else
      for (auto n : page.counts) page.total += n;
    doc filter = match;
    if (f.status) filter.str("status", to_string(*f.status));
    std::int64_t skip = 0;
    if (!f.cursor.empty()) {
      doc lt;
      lt.str("$lt", f.cursor);
      filter.sub("_id", lt);
    } else {
      skip = static_cast<std::int64_t>(f.page - 1) * f.page_size;
      if (skip >= page.total) return page;
    }
    doc sort;
    sort.i32("_id", -1);
    doc reply;
    if (auto fail = c_->command(client, find_command("jobs", filter, &sort, f.page_size + 1, skip, c_->max_time_ms(), false),
                                reply))
      return to_error(*fail, "list jobs");
    for (const auto& d : first_batch(reply)) page.items.push_back(read_job(d.get()));
    if (static_cast<int>(page.items.size()) > f.page_size) {
      page.items.pop_back();
      page.next_cursor = page.items.back().id;
    }
    return page;
  });
}

task<log_page> mongo_queue::read_logs(std::string job_id, std::int64_t after_seq, int limit) {
  return run<result<log_page>>(ex_, [this, job_id = std::move(job_id), after_seq, limit](mongoc_client_t* client) -> result<log_page> {
    log_page page;
    page.next_cursor = after_seq;
    doc gt;
    gt.i64("$gt", after_seq);
    doc filter;
    filter.str("job_id", job_id).sub("seq", gt);
    doc sort;
    sort.i32("seq", 1);
    doc reply;
    if (auto f = c_->command(client, find_command("job_logs", filter, &sort, limit, 0, c_->max_time_ms(), false), reply))
      return to_error(*f, "read logs");
    for (const auto& d : first_batch(reply)) {
      view v(d.get());
      page.lines.push_back(log_line{v.i64("seq"), v.i64("ts"), v.str("level"), v.str("message"), v.str("detail")});
      page.next_cursor = page.lines.back().seq;
    }
    return page;
  });
}

// Two counts for the dist lane's fair share (issue 34): waiting (claimable by the claim's own
// index, {q, ready_at}) and running (active jobs of the lane).
task<lane_load> mongo_queue::load_of_lane(std::string lane, time_ms now) {
  return run<result<lane_load>>(ex_, [this, lane = std::move(lane), now](mongoc_client_t* client) -> result<lane_load> {
    lane_load out;
    doc reply;
    {
      doc statuses;
      statuses.str_array("$in", {"pending", "failed"});
      doc lte;
      lte.i64("$lte", now);
      doc query;
      query.str("q", lane).sub("ready_at", lte).sub("status", statuses);
      doc cmd;
      cmd.str("count", "jobs").sub("query", query).i32("maxTimeMS", c_->max_time_ms());
      if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "lane load: waiting");
      out.waiting = view(reply.get()).i64("n");
    }
    {
      doc query;
      query.str("status", "active").str("lane", lane);
      doc cmd;
      cmd.str("count", "jobs").sub("query", query).i32("maxTimeMS", c_->max_time_ms());
      doc running;
      if (auto f = c_->command(client, cmd, running)) return to_error(*f, "lane load: running");
      out.running = view(running.get()).i64("n");
    }
    return out;
  });
}

task<std::vector<lane_stats>> mongo_queue::lane_statistics(time_ms) {
  return run<result<std::vector<lane_stats>>>(ex_, [this](mongoc_client_t* client) -> result<std::vector<lane_stats>> {
    // One aggregation on the claim index: waiting jobs per lane and the oldest due time.
    doc in_lanes;
    in_lanes.str_array("$in", {"main", "dist"});
    doc statuses;
    statuses.str_array("$in", {"pending", "failed"});
    doc match_body;
    match_body.sub("q", in_lanes).sub("status", statuses);
    doc m;
    m.sub("$match", match_body);
    doc sum;
    sum.i32("$sum", 1);
    doc oldest;
    oldest.str("$min", "$ready_at");
    doc group_body;
    group_body.str("_id", "$q").sub("n", sum).sub("oldest", oldest);
    doc g;
    g.sub("$group", group_body);
    doc cmd;
    cmd.str("aggregate", "jobs").array("pipeline", {m, g}).sub("cursor", doc{}).i32("maxTimeMS", c_->max_time_ms());
    doc reply;
    if (auto f = c_->command(client, cmd, reply)) return to_error(*f, "lane statistics");
    std::map<std::string, lane_stats> by_lane{{"main", {"main", 0, 0}}, {"dist", {"dist", 0, 0}}};
    for (const auto& d : first_batch(reply)) {
      view v(d.get());
      auto it = by_lane.find(v.str("_id"));
      if (it == by_lane.end()) continue;
      it->second.pending = v.i64("n");
      it->second.oldest_ready_at = v.i64("oldest");
    }
    return std::vector<lane_stats>{by_lane["main"], by_lane["dist"]};
  });
}

}  // namespace certfleet::store::mongo::detail
