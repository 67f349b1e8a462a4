// `certfleet jobs …` in remote mode: the job routes of the API (docs/api.md, Jobs).
#include "jobs_backend.hpp"
#include "remote.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::app {

namespace {

namespace json = boost::json;

class remote_jobs_backend final : public jobs_backend {
 public:
  remote_jobs_backend(const remote_client& c, std::string project) : c_(c), project_(std::move(project)) {}

  result<store::job_page> list(std::optional<store::job_status> status, const std::string& type, int page,
                               int page_size) override {
    std::string q = fmt::format("?page={}&page_size={}", page, page_size);
    if (status) q += "&status=" + std::string(store::to_string(*status));
    if (!type.empty()) q += "&type=" + query_escape(type);
    auto a = get_json("/jobs" + q);
    if (!a) return std::move(a).error();
    store::job_page out;
    const auto& o = a->as_object();
    if (const auto* items = o.if_contains("items"); items && items->is_array())
      for (const auto& v : items->as_array()) {
        auto j = job_from_json(v);
        if (!j) return std::move(j).error();
        out.items.push_back(std::move(*j));
      }
    if (const auto* t = o.if_contains("total"); t && t->is_int64()) out.total = t->as_int64();
    return out;
  }

  result<store::job_record> get(const std::string& id) override {
    auto a = get_json("/jobs/" + query_escape(id));
    if (!a) return std::move(a).error();
    return job_from_json(*a);
  }

  result<store::log_page> logs(const std::string& id, std::int64_t after, int limit) override {
    auto a = get_json(fmt::format("/jobs/{}/logs?after={}&limit={}", query_escape(id), after, limit));
    if (!a) return std::move(a).error();
    store::log_page out;
    const auto& o = a->as_object();
    if (const auto* lines = o.if_contains("lines"); lines && lines->is_array())
      for (const auto& v : lines->as_array()) {
        auto l = log_line_from_json(v);
        if (!l) return std::move(l).error();
        out.lines.push_back(std::move(*l));
      }
    out.next_cursor = after;
    if (const auto* n = o.if_contains("next_cursor"); n && n->is_int64()) out.next_cursor = n->as_int64();
    return out;
  }

  result<enqueued> enqueue(const std::string& type, const std::string& payload, const std::string& key,
                           time_ms run_at) override {
    boost::system::error_code ec;
    auto p = json::parse(payload, ec);
    if (ec || !p.is_object()) return make_error(errc::invalid_argument, "payload must be a JSON object", "payload");
    json::object body{{"type", type}, {"payload", std::move(p)}};
    if (!key.empty()) body["idempotency_key"] = key;
    if (run_at > 0) body["run_at"] = run_at;
    auto a = send("POST", "/jobs", json::value(std::move(body)));
    if (!a) return std::move(a).error();
    auto j = job_from_json(a->body);
    if (!j) return std::move(j).error();
    return enqueued{std::move(*j), a->status == 201};
  }

  result<void> enqueue_many(const std::string&, const std::string&, time_ms, int) override {
    return make_error(errc::invalid_argument,
                      "--count above 1 inserts in bulk on the store's host: run it there without --server", "count");
  }

  result<store::job_record> retry(const std::string& id) override {
    auto a = send("POST", fmt::format("/jobs/{}/retry", query_escape(id)), std::nullopt);
    if (!a) return std::move(a).error();
    return job_from_json(a->body);
  }

  result<store::cancel_outcome> cancel(const std::string& id) override {
    auto a = send("POST", fmt::format("/jobs/{}/cancel", query_escape(id)), std::nullopt);
    if (!a) return std::move(a).error();
    auto j = job_from_json(a->body);
    if (!j) return std::move(j).error();
    return store::cancel_outcome{std::move(*j), a->status == 200};  // 202: asked to stop
  }

 private:
  result<remote_answer> send(std::string_view method, const std::string& rest, const std::optional<json::value>& body) {
    auto path = project_path(project_, rest);
    if (!path) return std::move(path).error();
    return c_.call(method, *path, body);
  }
  result<json::value> get_json(const std::string& rest) {
    auto path = project_path(project_, rest);
    if (!path) return std::move(path).error();
    return c_.call_object("GET", *path);
  }

  const remote_client& c_;
  std::string project_;
};

}  // namespace

std::unique_ptr<jobs_backend> remote_jobs(const remote_client& client, std::string project) {
  return std::make_unique<remote_jobs_backend>(client, std::move(project));
}

}  // namespace certfleet::app
