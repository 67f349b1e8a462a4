// `certfleet distributions …`: list, show, create, execute and follow a run, over the store or the API.
#include "cli_common.hpp"

namespace certfleet::app::detail {

namespace {

// The progress of a run as one line: a bar over the targets with a result, and the counts.
std::string progress_line(const boost::json::object& d, bool bar) {
  std::int64_t total = 0, ok = 0, failed = 0, skipped = 0, cancelled = 0;
  if (const auto* s = d.if_contains("summary"); s && s->is_object()) {
    auto n = [&](std::string_view k) {
      const auto* v = s->as_object().if_contains(k);
      return v && v->is_int64() ? v->as_int64() : 0;
    };
    total = n("targets"), ok = n("succeeded"), failed = n("failed"), skipped = n("skipped"), cancelled = n("cancelled");
  }
  const auto done = ok + failed + skipped + cancelled;
  std::string line;
  if (bar) {
    constexpr int width = 30;
    const int filled = total > 0 ? static_cast<int>(done * width / total) : 0;
    line = "[" + std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(width - filled), '.') + "] ";
  }
  line += fmt::format("{}/{} targets  {} succeeded  {} failed", done, total, ok, failed);
  if (skipped) line += fmt::format("  {} skipped", skipped);
  if (cancelled) line += fmt::format("  {} cancelled", cancelled);
  line += "  " + text_of(d, "status");
  return line;
}

// `certfleet distributions …` on the store itself (local mode): the distribution service, as
// the API's handlers call it; each change audited with actor "cli".
class local_dist_backend final : public dist_backend {
 public:
  static std::unique_ptr<local_dist_backend> make(cli_context cli, std::string project_id) {
    auto b = std::unique_ptr<local_dist_backend>(new local_dist_backend(std::move(cli), std::move(project_id)));
    register_handlers(b->handlers_, b->cli_.settings);
    return b;
  }
  result<boost::json::value> list(int page, int page_size) override {
    return run_sync([&] { return service_.list_distributions(pid_, page, page_size); });
  }
  result<boost::json::value> get(const std::string& id) override {
    return run_sync([&] { return service_.get_distribution(pid_, id); });
  }
  result<boost::json::value> execute(const std::string& id) override {
    return audited("distribution.execute", id, run_sync([&] { return service_.execute(pid_, id, actor()); }));
  }
  result<boost::json::value> retry_failed(const std::string& id) override {
    return audited("distribution.retry_failed", id, run_sync([&] { return service_.retry_failed(pid_, id, actor()); }));
  }
  result<boost::json::value> retry_targets(const std::string& id, const boost::json::value& body) override {
    const auto text = boost::json::serialize(body);
    return audited("distribution.retry_targets", id,
                   run_sync([&] { return service_.retry_targets(pid_, id, text, actor()); }));
  }
  result<boost::json::value> rollback(const std::string& id, std::int64_t run_no) override {
    boost::json::object body;
    if (run_no > 0) body["run_no"] = run_no;
    const auto text = boost::json::serialize(body);
    return audited("distribution.rollback", id, run_sync([&] { return service_.rollback(pid_, id, text, actor()); }));
  }
  result<boost::json::value> cancel(const std::string& id) override {
    return audited("distribution.cancel", id, run_sync([&] { return service_.cancel(pid_, id); }));
  }
  result<boost::json::value> results(const std::string& id, std::int64_t run_no, int page, int page_size,
                                     const std::string& status, const std::string& error_class) override {
    auto filter = distribution::parse_result_filter(status, error_class);
    if (!filter) return std::move(filter).error();
    return run_sync([&] { return service_.results(pid_, id, run_no, page, page_size, *filter); });
  }

 private:
  local_dist_backend(cli_context cli, std::string project_id)
      : cli_(std::move(cli)), pid_(std::move(project_id)),
        queue_(*cli_.store, handlers_, system_clock(), static_cast<int>(cli_.settings.integer("job_retry_per_minute"))),
        // No key: a run seals and opens nothing (the worker opens the credentials).
        service_(*cli_.store, queue_, system_clock(), nullptr) {}
  static std::string actor() { return std::string(queue::triggers::cli); }
  result<boost::json::value> audited(const char* action, const std::string& id, result<boost::json::value> r) {
    store::audit_entry e;
    e.project_id = pid_;
    e.actor = "cli";
    e.action = action;
    e.object = "distribution/" + id;
    e.outcome = r ? "ok" : errc_name(r.error().value());
    e.at = system_clock().now_ms();
    if (auto w = run_sync([&] { return cli_.store->auth().append_audit(e); }); !w) print_error(w.error());
    return r;
  }
  cli_context cli_;
  std::string pid_;
  queue::handler_registry handlers_;
  queue::queue_service queue_;
  service::service service_;
};

// --wait: follows the run `opened` started with a progress bar on stderr until it ends; the exit
// code says how it ended.
int follow_run(dist_backend& be, const std::string& id, const boost::json::value& opened, int timeout_s) {
  const auto run_no = opened.as_object().at("run_no");
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const deadline until(timeout_s);
  std::string last;
  for (;;) {
    auto d = be.get(id);
    if (!d) return fail(d.error());
    const auto& o = d->as_object();
    if (o.at("run_no") != run_no)
      return fail(make_error(errc::conflict, fmt::format("another run ({}) of distribution {} started; follow it with "
                                                         "certfleet distributions show", text_of(o, "run_no"), id),
                             "run_no"));
    const auto status = text_of(o, "status");
    const bool ended = status == "success" || status == "partial" || status == "failed" || status == "cancelled";
    auto line = progress_line(o, true);
    // At a terminal: the bar redrawn in place; elsewhere (a log file): a line per change.
    if (tty) std::cerr << "\r\033[K" << line << std::flush;
    else if (line != last) std::cerr << line << "\n" << std::flush;
    last = line;
    if (ended) {
      if (tty) std::cerr << "\n";
      if (auto err = text_of(o, "error"); !err.empty()) std::cerr << "certfleet: " << cell(err, 500) << "\n";
      return to_int(status == "success" ? exit_code::ok : status == "partial" ? exit_code::partial : exit_code::failed);
    }
    if (until.passed()) {
      if (tty) std::cerr << "\n";
      return fail(make_error(errc::timeout, fmt::format("distribution {} run {} is still {} after --timeout {}s", id,
                                                        text_of(o, "run_no"), status, timeout_s), "timeout"));
    }
    std::this_thread::sleep_for(watch_interval);
  }
}

}  // namespace

// `certfleet distributions list|show|execute`: on the store directly, like jobs; execute only
// enqueues (a worker process runs the run) and, with --wait, follows the run to its end.
int run_distributions(const std::string& cmd, common_flags& flags, dist_args& a) {
  if (a.timeout_s < 0) return usage("timeout must be 0 (no limit) or more seconds", "timeout");
  int exit = 0;
  std::optional<remote_client> remote;
  auto be = open_backend<local_dist_backend>(flags, a.project, exit, remote, &remote_distributions);
  if (!be) return exit;

  if (cmd == "list") {
    if (a.page < 1 || a.page_size < 1 || a.page_size > 200)
      return usage("page must be >= 1 and page-size from 1 to 200", "page_size");
    auto r = be->list(a.page, a.page_size);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    text_table t{{"ID", "NAME", "STATUS", "RUN", "TARGETS", "CREATED", "ERROR"}, {}, {24, 40, 10, 5, 7, 19, 60}};
    for (const auto& v : r->as_object().at("items").as_array()) {
      const auto& d = v.as_object();
      const auto* targets = d.if_contains("target_ids");
      t.rows.push_back({text_of(d, "id"), text_of(d, "name"), text_of(d, "status"), text_of(d, "run_no"),
                        targets && targets->is_array() ? std::to_string(targets->as_array().size()) : "",
                        time_cell(d.if_contains("created_at")), text_of(d, "error")});
    }
    std::cout << render(t);
    return 0;
  }
  if (cmd == "show") {
    auto r = be->get(a.id);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    const auto& d = r->as_object();
    text_table t{{"FIELD", "VALUE"}, {}, {}};
    for (const auto* k : {"id", "name", "status", "run_no", "mode", "certificate_id", "error"})
      if (auto v = text_of(d, k); !v.empty()) t.rows.push_back({k, v});
    t.rows.push_back({"created", time_cell(d.if_contains("created_at"))});
    if (d.contains("run_started_at")) t.rows.push_back({"run_started", time_cell(d.if_contains("run_started_at"))});
    if (d.contains("run_finished_at")) t.rows.push_back({"run_finished", time_cell(d.if_contains("run_finished_at"))});
    if (d.contains("summary")) t.rows.push_back({"progress", progress_line(d, false)});
    std::cout << render(t);
    return 0;
  }
  if (cmd == "execute" || cmd == "retry-failed" || cmd == "rollback" || cmd == "retry-targets") {
    // retry-targets: the body names what the flags named; neither or both is the API's 400.
    auto redrive_body = [&] {
      boost::json::object b;
      if (!a.job.empty()) b["job_id"] = a.job;
      if (!a.targets.empty()) {
        boost::json::array ids;
        for (const auto& t : a.targets) ids.emplace_back(t);
        b["target_ids"] = std::move(ids);
      }
      return boost::json::value(std::move(b));
    };
    auto r = cmd == "execute"          ? be->execute(a.id)
             : cmd == "retry-failed"   ? be->retry_failed(a.id)
             : cmd == "retry-targets"  ? be->retry_targets(a.id, redrive_body())
                                       : be->rollback(a.id, a.run);
    if (!r) return fail(r.error());
    print(*r);  // {distribution_id, run_no, mode, job_ids}: what a script needs to follow it
    std::cout.flush();
    if (!a.wait) return 0;
    return follow_run(*be, a.id, *r, a.timeout_s);
  }
  if (cmd == "cancel") {
    auto r = be->cancel(a.id);
    if (!r) return fail(r.error());
    print(*r);
    return 0;
  }
  if (cmd == "results") {
    if (a.page < 1 || a.page_size < 1 || a.page_size > 200)
      return usage("page must be >= 1 and page-size from 1 to 200", "page_size");
    auto r = be->results(a.id, a.run, a.page, a.page_size, a.status, a.error_class);
    if (!r) return fail(r.error());
    if (a.json) {
      print(*r);
      return 0;
    }
    text_table t{{"TARGET", "STATUS", "ERROR CLASS", "FINISHED", "ERROR"}, {}, {24, 12, 16, 19, 80}};
    const auto& o = r->as_object();
    if (const auto* items = o.if_contains("items"); items && items->is_array())
      for (const auto& v : items->as_array()) {
        const auto& x = v.as_object();
        t.rows.push_back({text_of(x, "target_id"), text_of(x, "status"), text_of(x, "error_class"),
                          time_cell(x.if_contains("finished_at")), text_of(x, "error")});
      }
    std::cout << render(t);
    std::cout << fmt::format("run {}: {} results{}\n", text_of(o, "run"), text_of(o, "total"),
                             a.status.empty() && a.error_class.empty() ? "" : " matching the filter");
    return 0;
  }
  return to_int(exit_code::usage);
}

}  // namespace certfleet::app::detail
