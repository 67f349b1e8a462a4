// `certfleet jobs …`: list, show, enqueue, watch, logs, cancel, retry, over the store or the API.
#include "cli_common.hpp"

namespace certfleet::app::detail {

namespace {

// A job's status as people read it: a completed job whose result is partial says so.
std::string status_cell(const store::job_record& j) {
  if (j.status == store::job_status::completed && j.result_status == "partial") return "partial";
  std::string s(store::to_string(j.status));
  if (j.cancel_requested && j.status == store::job_status::active) s += " (cancelling)";
  return s;
}
std::string duration_cell(const store::job_record& j) {
  if (j.started_at == 0 || j.completed_at == 0) return "-";
  return format_duration(j.completed_at - j.started_at);
}

// The exit code of a job that ended (--watch): completed ok, partial, or failed.
int exit_for_job(const store::job_record& j) {
  if (j.status == store::job_status::completed)
    return to_int(j.result_status == "partial" ? exit_code::partial : exit_code::ok);
  return to_int(exit_code::failed);
}

void print_job(const store::job_record& j) {
  text_table t{{"FIELD", "VALUE"}, {}, {}};
  auto row = [&](std::string k, std::string v) {
    if (!v.empty()) t.rows.push_back({std::move(k), std::move(v)});
  };
  row("id", j.id);
  row("type", j.type);
  row("status", status_cell(j));
  row("attempts", fmt::format("{}/{}", j.attempts, j.max_attempts));
  if (j.progress_total > 0) row("progress", fmt::format("{}/{}", j.progress_current, j.progress_total));
  row("created", time_cell(j.created_at));
  row("started", j.started_at ? time_cell(j.started_at) : "");
  row("completed", j.completed_at ? time_cell(j.completed_at) : "");
  row("duration", duration_cell(j) == "-" ? "" : duration_cell(j));
  row("triggered_by", j.triggered_by);
  row("parent_job", j.parent_job_id);
  row("distribution", j.distribution_id);
  row("certificate", j.certificate_id);
  row("idempotency_key", j.idempotency_key);
  row("error", j.error);
  std::cout << render(t);
}

void print_log_line(const store::log_line& l) {
  std::string level = l.level;
  for (auto& c : level) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::cout << format_iso8601(l.ts) << " " << fmt::format("{:<5}", level) << " " << cell(l.message) << "\n";
  if (!l.detail.empty()) std::cout << "    " << cell(l.detail, 2000) << "\n";
}

// The state of a job --watch prints (after the time) when it changes.
std::string watch_state(const store::job_record& j) {
  auto s = fmt::format("{}  attempt {}/{}", status_cell(j), j.attempts, j.max_attempts);
  if (j.progress_total > 0) s += fmt::format("  progress {}/{}", j.progress_current, j.progress_total);
  if (!j.error.empty()) s += "  error: " + cell(j.error, 200);
  return s;
}

// `certfleet jobs …` on the store itself (local mode).
class local_jobs_backend final : public jobs_backend {
 public:
  local_jobs_backend(cli_context cli, std::string project_id)
      : cli_(std::move(cli)), pid_(std::move(project_id)),
        queue_(*cli_.store, handlers_, system_clock(), static_cast<int>(cli_.settings.integer("job_retry_per_minute"))) {}
  // Handlers first: the queue refuses types without one.
  static std::unique_ptr<local_jobs_backend> make(cli_context cli, std::string project_id) {
    auto b = std::unique_ptr<local_jobs_backend>(new local_jobs_backend(std::move(cli), std::move(project_id)));
    register_handlers(b->handlers_, b->cli_.settings);
    return b;
  }

  result<store::job_page> list(std::optional<store::job_status> status, const std::string& type, int page,
                               int page_size) override {
    store::job_filter f{pid_, status, type, page, page_size};
    return run_sync([&] { return cli_.store->jobs().list(f); });
  }
  result<store::job_record> get(const std::string& id) override {
    return run_sync([&] { return cli_.store->jobs().get(pid_, id); });
  }
  result<store::log_page> logs(const std::string& id, std::int64_t after, int limit) override {
    return run_sync([&] { return cli_.store->jobs().read_logs(id, after, limit); });
  }
  result<enqueued> enqueue(const std::string& type, const std::string& payload, const std::string& key,
                           time_ms run_at) override {
    auto r = run_sync([&] { return queue_.enqueue(request(type, payload, key, run_at), queue::caller::user); });
    if (!r) return std::move(r).error();
    return enqueued{std::move(r->job), r->created};
  }
  result<void> enqueue_many(const std::string& type, const std::string& payload, time_ms run_at, int count) override {
    // Validated once, inserted in chunks of one transaction each.
    auto prepared = queue_.prepare(request(type, payload, "", run_at), queue::caller::user);
    if (!prepared) return std::move(prepared).error();
    int left = count;
    while (left > 0) {
      int n = std::min(left, 5000);
      std::vector<store::new_job> batch(static_cast<std::size_t>(n), *prepared);
      auto r = run_sync([&] { return cli_.store->jobs().enqueue_many(std::move(batch), system_clock().now_ms()); });
      if (!r) return std::move(r).error();
      left -= n;
    }
    return {};
  }
  result<store::job_record> retry(const std::string& id) override {
    return run_sync([&] { return queue_.retry(pid_, id); });
  }
  result<store::cancel_outcome> cancel(const std::string& id) override {
    return run_sync([&] { return queue_.cancel(pid_, id); });
  }

 private:
  queue::enqueue_request request(const std::string& type, const std::string& payload, const std::string& key,
                                 time_ms run_at) const {
    queue::enqueue_request req{pid_, type, payload};
    if (!key.empty()) req.idempotency_key = key;
    req.run_at = run_at;
    req.triggered_by = queue::triggers::cli;
    return req;
  }
  cli_context cli_;
  std::string pid_;
  queue::handler_registry handlers_;
  queue::queue_service queue_;
};

}  // namespace

int run_jobs(const std::string& cmd, common_flags& flags, jobs_args& a) {
  int exit = 0;
  std::optional<remote_client> remote;
  auto be = open_backend<local_jobs_backend>(flags, a.project, exit, remote, &remote_jobs);
  if (!be) return exit;

  if (cmd == "list") {
    std::optional<store::job_status> status;
    if (!a.status.empty() && a.status != "all") {
      status = store::parse_job_status(a.status);
      if (!status)
        return fail(make_error(errc::invalid_argument,
                               "status must be one of all, pending, active, completed, failed, dead, cancelled", "status"));
    }
    if (a.page < 1 || a.page_size < 1 || a.page_size > 1000)
      return fail(make_error(errc::invalid_argument, "page must be >= 1 and page-size from 1 to 1000", "page_size"));
    auto r = be->list(status, a.type, a.page, a.page_size);
    if (!r) return fail(r.error());
    if (a.json) {
      boost::json::array items;
      for (const auto& j : r->items) items.push_back(queue::to_json(j));
      print(boost::json::object{{"items", std::move(items)}, {"page", a.page}, {"page_size", a.page_size}, {"total", r->total}});
      return 0;
    }
    text_table t{{"ID", "TYPE", "STATUS", "ATTEMPTS", "CREATED", "DURATION", "ERROR"}, {}, {24, 32, 24, 9, 19, 9, 60}};
    if (a.wide) {
      // -o wide: where it ran and why, and the whole error line.
      t.header.insert(t.header.end() - 1, {"LANE", "PROGRESS", "WORKER", "TRIGGERED BY"});
      t.max_width.insert(t.max_width.end() - 1, {8, 13, 40, 40});
      t.max_width.back() = 400;
    }
    for (const auto& j : r->items) {
      std::vector<std::string> row{j.id, j.type, status_cell(j), fmt::format("{}/{}", j.attempts, j.max_attempts),
                                   time_cell(j.created_at), duration_cell(j)};
      if (a.wide)
        row.insert(row.end(), {j.lane, j.progress_total ? fmt::format("{}/{}", j.progress_current, j.progress_total) : "",
                               j.locked_by, j.triggered_by});
      row.push_back(j.error);
      t.rows.push_back(std::move(row));
    }
    std::cout << render(t);
    const auto pages = (r->total + a.page_size - 1) / a.page_size;
    if (pages > 1 || r->items.empty())
      std::cout << fmt::format("page {} of {}, {} jobs{}\n", a.page, std::max<std::int64_t>(pages, 1), r->total,
                               a.page < pages ? fmt::format(" (next: --page {})", a.page + 1) : "");
    return 0;
  }
  if (cmd == "show") {
    if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
    auto r = be->get(a.id);
    if (!r) return fail(r.error());
    if (a.json) print(queue::to_json(*r));
    else print_job(*r);
    if (!a.watch) return 0;
    // Follow it: a line on each change (status, attempt, progress, error) until it ends.
    const deadline until(a.timeout_s);
    std::string last;
    for (;;) {
      if (auto state = watch_state(*r); state != last) {
        std::cerr << time_cell(system_clock().now_ms()) << "  " << state << std::endl;
        last = std::move(state);
      }
      if (store::is_terminal(r->status)) {
        if (a.json) print(queue::to_json(*r));
        return exit_for_job(*r);
      }
      if (until.passed()) return fail(make_error(errc::timeout, fmt::format("job {} is still {} after --timeout {}s",
                                                                            a.id, store::to_string(r->status), a.timeout_s), "timeout"));
      std::this_thread::sleep_for(watch_interval);
      r = be->get(a.id);
      if (!r) return fail(r.error());
    }
  }
  if (cmd == "enqueue") {
    if (a.count < 1 || a.count > 10'000'000)
      return fail(make_error(errc::invalid_argument, "count must be from 1 to 10000000", "count"));
    if (a.count == 1) {
      auto r = be->enqueue(a.type, a.payload, a.key, a.run_at);
      if (!r) return fail(r.error());
      auto o = queue::to_json(r->job);
      o["created"] = r->created;
      print(o);
      return 0;
    }
    if (!a.key.empty()) return fail(make_error(errc::invalid_argument, "--key cannot be used with --count", "key"));
    auto r = be->enqueue_many(a.type, a.payload, a.run_at, a.count);
    if (!r) return fail(r.error());
    print(boost::json::object{{"enqueued", a.count}, {"type", a.type}});
    return 0;
  }
  if (cmd == "retry") {
    auto r = be->retry(a.id);
    if (!r) return fail(r.error());
    print(queue::to_json(*r));
    return 0;
  }
  if (cmd == "cancel") {
    auto r = be->cancel(a.id);
    if (!r) return fail(r.error());
    auto o = queue::to_json(r->job);
    o["message"] = r->immediate ? "Job cancelled" : "Job cancel requested";
    print(o);
    return 0;
  }
  if (cmd == "logs") {
    if (a.after < 0) return fail(make_error(errc::invalid_argument, "after must not be negative", "after"));
    if (a.limit < 1 || a.limit > 1000) return fail(make_error(errc::invalid_argument, "limit must be from 1 to 1000", "limit"));
    if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
    const deadline until(a.timeout_s);
    std::int64_t after = a.after;
    for (;;) {
      // The job first: lines read after it was seen terminal are all the lines it will have.
      auto job = be->get(a.id);
      if (!job) return fail(job.error());
      auto r = be->logs(a.id, after, a.limit);
      if (!r) return fail(r.error());
      const bool done = store::is_terminal(job->status);
      if (a.json) {
        // --watch --json: one JSON object a page, like the API's pages, until done is true.
        if (!a.watch || !r->lines.empty() || done) {
          boost::json::array lines;
          for (const auto& l : r->lines) lines.push_back(queue::to_json(l));
          print(boost::json::object{{"lines", std::move(lines)}, {"next_cursor", r->next_cursor}, {"done", done}});
        }
      } else {
        for (const auto& l : r->lines) print_log_line(l);
      }
      std::cout.flush();
      after = r->next_cursor;
      if (!a.watch) return 0;
      if (static_cast<int>(r->lines.size()) == a.limit) continue;  // more are waiting
      if (done) {
        if (!a.json)
          std::cerr << fmt::format("job {} {}{}", a.id, status_cell(*job), job->error.empty() ? "" : ": " + cell(job->error, 300))
                    << std::endl;
        return exit_for_job(*job);
      }
      if (until.passed()) return fail(make_error(errc::timeout, fmt::format("job {} is still {} after --timeout {}s",
                                                                            a.id, store::to_string(job->status), a.timeout_s), "timeout"));
      std::this_thread::sleep_for(watch_interval);
    }
  }
  return to_int(exit_code::usage);
}

}  // namespace certfleet::app::detail
