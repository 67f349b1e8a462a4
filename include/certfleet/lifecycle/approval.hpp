#pragma once
// Issuance approval (issue 31, docs/approval.md): in a project whose issuance_requires_approval
// setting is on, an issue request stores its certificate as awaiting_approval and enqueues
// nothing; an admin other than the requester approves it (its issue job starts) or rejects it
// with a reason. Written without I/O: the project settings' reading, the reject body, who may
// decide, and each decision's effect on the certificate; the service applies them in one store
// transaction with the event they fire.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/catalog/catalog.hpp"

#include <boost/json/object.hpp>

#include <map>
#include <string>
#include <string_view>

namespace certfleet::lifecycle {

// The one settings object of a project (store::kind_project_settings) is named this.
inline constexpr std::string_view project_settings_name = "settings";

// Every project setting's value: the stored doc's values over the table's defaults. A stored
// value that no longer validates reads as its default; an unparseable doc as all defaults.
std::map<std::string, std::string, std::less<>> project_settings_from_doc(std::string_view doc);
// The stored doc of `values` (project settings only, canonical values).
std::string project_settings_doc(const std::map<std::string, std::string, std::less<>>& values);
bool issuance_requires_approval(const std::map<std::string, std::string, std::less<>>& project_settings);

// A reason is required and shown to people: 1 to this many characters, no control characters.
inline constexpr std::size_t max_reject_reason_length = 500;
// The body of POST …/certificates/{id}/reject: {"reason": "…"}.
result<std::string> parse_reject_request(std::string_view body);

// What an issue request waiting for approval records.
catalog::certificate_approval approval_request(std::string requested_by, time_ms now);

// Whether `actor` may approve or reject certificate `id` now: conflict (field "status") unless it
// awaits approval; forbidden (field "actor") for the requester, who may not approve their own.
result<void> check_approval_decision(const catalog::certificate_doc& doc, std::string_view id, std::string_view actor);

// The certificate after the decision (check_approval_decision passed): approved -> pending (its
// issue job is enqueued alongside), rejected -> rejected with the reason.
void approve_issuance(catalog::certificate_doc& doc, std::string actor, time_ms now);
void reject_issuance(catalog::certificate_doc& doc, std::string actor, std::string reason, time_ms now);

// The data of certificate.approval_requested, .approved and .rejected (events.hpp's table).
boost::json::object approval_event_data(std::string_view certificate_id, std::string_view name,
                                        const catalog::certificate_doc& doc, std::string_view job_id);

}  // namespace certfleet::lifecycle
