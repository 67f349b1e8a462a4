// `certfleet distributions …` in remote mode: the distribution routes of the API (docs/api.md,
// Distributions).
#include "dist_backend.hpp"
#include "remote.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::app {

namespace {

namespace json = boost::json;

class remote_dist_backend final : public dist_backend {
 public:
  remote_dist_backend(const remote_client& c, std::string project) : c_(c), project_(std::move(project)) {}

  result<json::value> list(int page, int page_size) override {
    return call("GET", fmt::format("?page={}&page_size={}", page, page_size), std::nullopt);
  }
  result<json::value> get(const std::string& id) override { return call("GET", "/" + query_escape(id), std::nullopt); }
  result<json::value> execute(const std::string& id) override { return action(id, "execute", std::nullopt); }
  result<json::value> retry_failed(const std::string& id) override { return action(id, "retry-failed", std::nullopt); }
  result<json::value> retry_targets(const std::string& id, const json::value& body) override {
    return action(id, "retry-targets", body);
  }
  result<json::value> rollback(const std::string& id, std::int64_t run_no) override {
    json::object body;
    if (run_no > 0) body["run_no"] = run_no;
    return action(id, "rollback", json::value(std::move(body)));
  }
  result<json::value> cancel(const std::string& id) override { return action(id, "cancel", std::nullopt); }
  result<json::value> results(const std::string& id, std::int64_t run_no, int page, int page_size,
                              const std::string& status, const std::string& error_class) override {
    std::string q = fmt::format("/{}/results?page={}&page_size={}", query_escape(id), page, page_size);
    if (run_no > 0) q += fmt::format("&run={}", run_no);
    if (!status.empty()) q += "&status=" + query_escape(status);
    if (!error_class.empty()) q += "&error_class=" + query_escape(error_class);
    return call("GET", q, std::nullopt);
  }

 private:
  result<json::value> action(const std::string& id, std::string_view verb, const std::optional<json::value>& body) {
    return call("POST", fmt::format("/{}/{}", query_escape(id), verb), body);
  }
  result<json::value> call(std::string_view method, const std::string& rest, const std::optional<json::value>& body) {
    auto path = project_path(project_, "/distributions" + rest);
    if (!path) return std::move(path).error();
    return c_.call_object(method, *path, body);
  }

  const remote_client& c_;
  std::string project_;
};

}  // namespace

std::unique_ptr<dist_backend> remote_distributions(const remote_client& client, std::string project) {
  return std::make_unique<remote_dist_backend>(client, std::move(project));
}

}  // namespace certfleet::app
