#include "certfleet/queue/job_view.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/queue/triggers.hpp"

#include <boost/json.hpp>

namespace certfleet::queue {

using certfleet::json::text_value;

std::optional<std::string_view> trigger_in_words(std::string_view t) noexcept {
  if (t.empty() || token_of(t)) return std::nullopt;
  for (const auto& r : trigger_table)
    if (r.name.back() == ':' ? t.starts_with(r.name) : t == r.name) return r.words;
  return t;  // a trigger this build does not know: as written
}

boost::json::object to_json(const store::job_record& j) {
  boost::json::object o;
  o["id"] = j.id;
  o["project_id"] = j.project_id;
  o["type"] = j.type;
  o["lane"] = j.lane;
  o["status"] = std::string(store::to_string(j.status));
  o["result_status"] = text_value(j.result_status);
  o["attempts"] = j.attempts;
  o["max_attempts"] = j.max_attempts;
  o["fence"] = j.fence;
  // ready_at is run_at for a waiting job and the lease end for an active one.
  o["run_at"] = j.status == store::job_status::pending || j.status == store::job_status::failed
                    ? json::time_value(j.ready_at)
                    : boost::json::value(nullptr);
  o["held"] = j.held;
  const bool active = j.status == store::job_status::active;
  o["locked_by"] = active ? text_value(j.locked_by) : boost::json::value(nullptr);
  o["worker"] = text_value(j.locked_by);  // the worker of the current or last attempt
  o["locked_until"] = json::time_value(j.locked_until);
  o["idempotency_key"] = text_value(j.idempotency_key);
  o["parent_job_id"] = text_value(j.parent_job_id);
  o["certificate_id"] = text_value(j.certificate_id);
  o["distribution_id"] = text_value(j.distribution_id);
  o["triggered_by"] = text_value(j.triggered_by);
  o["created_at"] = json::time_value(j.created_at);
  o["started_at"] = json::time_value(j.started_at);
  o["completed_at"] = json::time_value(j.completed_at);
  o["duration_ms"] = j.started_at && j.completed_at ? boost::json::value(j.completed_at - j.started_at)
                                                    : boost::json::value(nullptr);
  o["error"] = text_value(j.error);
  o["error_code"] = text_value(j.error_code);
  o["progress"] = {{"current", j.progress_current}, {"total", j.progress_total}};
  o["cancel_requested"] = j.cancel_requested;
  boost::json::error_code ec;
  auto payload = boost::json::parse(j.payload, ec);
  o["payload"] = ec ? boost::json::value(nullptr) : std::move(payload);
  return o;
}

boost::json::object to_json(const store::log_line& l) {
  boost::json::object o;
  o["seq"] = l.seq;
  o["ts"] = format_iso8601(l.ts);
  o["level"] = l.level;
  o["message"] = l.message;
  if (!l.detail.empty()) {
    boost::json::error_code ec;
    auto d = boost::json::parse(l.detail, ec);
    o["detail"] = ec ? boost::json::value(l.detail) : std::move(d);
  }
  return o;
}

}  // namespace certfleet::queue
