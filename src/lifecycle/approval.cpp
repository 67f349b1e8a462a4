#include "certfleet/lifecycle/approval.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::lifecycle {

namespace json = boost::json;

std::map<std::string, std::string, std::less<>> project_settings_from_doc(std::string_view doc) {
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& d : all_settings())
    if (d.scope == setting_scope::project) out.emplace(std::string(d.name), std::string(d.default_value));
  boost::system::error_code ec;
  auto v = json::parse(doc, ec);
  if (ec || !v.is_object()) return out;
  for (const auto& [k, val] : v.as_object()) {
    const auto* def = find_setting(k);
    if (!def || def->scope != setting_scope::project || !val.is_string()) continue;
    if (auto canon = validate_setting(*def, std::string_view(val.as_string()))) out[std::string(def->name)] = *canon;
  }
  return out;
}

std::string project_settings_doc(const std::map<std::string, std::string, std::less<>>& values) {
  json::object o;
  for (const auto& [k, v] : values) o[k] = v;
  return json::serialize(o);
}

bool issuance_requires_approval(const std::map<std::string, std::string, std::less<>>& project_settings) {
  auto it = project_settings.find("issuance_requires_approval");
  return it != project_settings.end() && it->second == "on";
}

result<std::string> parse_reject_request(std::string_view body) {
  // No body at all reads as one without a reason: the refusal names what is missing.
  if (std::all_of(body.begin(), body.end(), [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }))
    body = "{}";
  auto r = certfleet::json::object_reader::parse(body, "body");
  if (!r) return std::move(r).error();
  if (auto ok = r->only({"reason"}); !ok) return std::move(ok).error();
  auto reason = r->optional_string("reason");
  if (!reason) return std::move(reason).error();
  auto refuse = [] {
    return make_error(errc::invalid_argument,
                      fmt::format("reason is required: why the request is rejected, 1 to {} characters without control "
                                  "characters (the requester reads it)",
                                  max_reject_reason_length),
                      "reason");
  };
  if (!*reason) return refuse();
  std::string text = std::move(**reason);
  auto not_space = [](unsigned char c) { return c != ' ' && c != '\t'; };
  auto first = std::find_if(text.begin(), text.end(), not_space);
  auto last = std::find_if(text.rbegin(), text.rend(), not_space).base();
  text = first < last ? std::string(first, last) : std::string();
  if (text.empty() || text.size() > max_reject_reason_length ||
      std::any_of(text.begin(), text.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
    return refuse();
  return text;
}

catalog::certificate_approval approval_request(std::string requested_by, time_ms now) {
  catalog::certificate_approval a;
  a.requested_by = std::move(requested_by);
  a.requested_at = now;
  return a;
}

result<void> check_approval_decision(const catalog::certificate_doc& doc, std::string_view id, std::string_view actor) {
  if (doc.status != "awaiting_approval" || !doc.acme || !doc.acme->approval ||
      doc.acme->approval->decision != "pending") {
    std::string why = doc.acme && doc.acme->approval && doc.acme->approval->decision != "pending"
                          ? fmt::format("it was {} already", doc.acme->approval->decision)
                          : fmt::format("its status is {}", doc.status);
    return make_error(errc::conflict, fmt::format("certificate {} does not await approval: {}", id, why), "status");
  }
  if (doc.acme->approval->requested_by == actor)
    return make_error(errc::forbidden,
                      fmt::format("certificate {} was requested by {}: another admin of the project approves or "
                                  "rejects it, not the requester",
                                  id, actor),
                      "actor");
  return {};
}

void approve_issuance(catalog::certificate_doc& doc, std::string actor, time_ms now) {
  doc.status = "pending";
  auto& a = *doc.acme->approval;
  a.decision = "approved";
  a.decided_by = std::move(actor);
  a.decided_at = now;
}

void reject_issuance(catalog::certificate_doc& doc, std::string actor, std::string reason, time_ms now) {
  doc.status = "rejected";
  auto& a = *doc.acme->approval;
  a.decision = "rejected";
  a.decided_by = std::move(actor);
  a.decided_at = now;
  a.reason = std::move(reason);
}

json::object approval_event_data(std::string_view certificate_id, std::string_view name, const catalog::certificate_doc& doc,
                                 std::string_view job_id) {
  json::array domains;
  if (doc.acme)
    for (const auto& d : doc.acme->domains) domains.emplace_back(d);
  json::object o{{"certificate_id", certificate_id}, {"name", name}, {"domains", std::move(domains)}};
  if (doc.acme && doc.acme->approval) {
    const auto& a = *doc.acme->approval;
    o["requested_by"] = a.requested_by;
    o["requested_at"] = a.requested_at;
    o["decided_by"] = a.decided_by;
    o["reason"] = a.reason;
  }
  o["job_id"] = job_id;
  return o;
}

}  // namespace certfleet::lifecycle
