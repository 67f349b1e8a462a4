#pragma once
// Notification events (docs/notifications.md): the one table of events — each one's name, when it
// is sent, its data fields (which are also its template's placeholders), its default message and
// the UI page it links to — and the one way to fire an event. Rule validation, the templates, the
// docs and every module that fires an event read this table; nothing else spells an event's data.
#include "certfleet/core/clock.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/object.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::notify {

namespace event_names {
inline constexpr std::string_view distribution_finished = "distribution.finished";
inline constexpr std::string_view certificate_expiring = "certificate.expiring";
inline constexpr std::string_view certificate_expired = "certificate.expired";
inline constexpr std::string_view certificate_issued = "certificate.issued";
inline constexpr std::string_view certificate_renewed = "certificate.renewed";
inline constexpr std::string_view certificate_renewal_failed = "certificate.renewal_failed";
inline constexpr std::string_view certificate_revoked = "certificate.revoked";
inline constexpr std::string_view certificate_approval_requested = "certificate.approval_requested";
inline constexpr std::string_view certificate_approved = "certificate.approved";
inline constexpr std::string_view certificate_rejected = "certificate.rejected";
inline constexpr std::string_view domain_expiring = "domain.expiring";
inline constexpr std::string_view job_dead = "job.dead";
}  // namespace event_names

// How a data field is written in the event's JSON and shown in a message.
enum class field_type {
  text,     // JSON string
  integer,  // JSON integer
  time,     // JSON integer, milliseconds since the epoch; shown as RFC 3339 UTC
  list,     // JSON array of strings; shown joined with ", "
};
std::string_view field_type_name(field_type t) noexcept;

struct event_field {
  std::string_view name;  // a member of `data`; "a.b" is member b of the object a
  field_type type;
  std::string_view doc;
  std::string_view label = {};  // shown beside the value in a message's facts; empty: not a fact
};

struct event_def {
  std::string_view name;
  std::string_view sent_when;  // for operators (docs)
  std::span<const event_field> fields;
  // The default message; {{placeholder}} as in a rule's template (docs/notifications.md).
  std::string_view subject;
  std::string_view body;
  // The UI page the message links to, "{field}" replaced by that data field, e.g.
  // "/distributions/{distribution_id}"; empty: no link.
  std::string_view ui_path;
};

std::span<const event_def> all_events() noexcept;
const event_def* find_event(std::string_view name) noexcept;
// "distribution.finished, certificate.expiring, …" for error messages.
std::string event_choices();

// The message POST …/notification-channels/{id}/test sends: rendered like an event, but not in
// the table (no rule can ask for it, nothing fires it).
const event_def& test_event() noexcept;

// Placeholders every template has besides its event's fields.
struct builtin_placeholder {
  std::string_view name;
  std::string_view doc;
};
std::span<const builtin_placeholder> builtin_placeholders() noexcept;

// Whether `data` fits the event's table row: every member is a field of the event with the
// field's JSON type (a missing field is allowed and shows as empty). invalid_argument names the
// member otherwise: a bug in the code that fires the event.
result<void> check_event_data(const event_def& e, const boost::json::object& data);

// The events table as Markdown (docs/notifications.md embeds it; a test keeps them equal).
std::string events_reference_markdown();

// What the notification job of an event links to (the job list's columns).
struct event_source {
  std::string certificate_id;
  std::string distribution_id;
  std::string parent_job_id;  // the job the event is about (job.dead): the UI links to it
  std::string triggered_by;  // the job's trigger ("distribution", a job type, …)
};

struct fired_event {
  std::string project_id;
  std::string_view event;  // a name of the table (event_names)
  // The id receivers dedupe by: the same for every attempt and every channel, e.g.
  // "distribution.finished:<distribution>:<run>".
  std::string event_id;
  boost::json::object data;  // the event's fields (check_event_data)
  // Idempotency: each channel's job gets the key notify:<key_base>:<channel>, so firing the same
  // event again (a replayed transaction, a second reporter) enqueues nothing new.
  std::string key_base;
  event_source source;
};

// An event's notification to one channel: notify:<key base>:<channel>. The key base names the
// event's occurrence (the modules that fire events make theirs, e.g. distribution/plan.hpp).
std::string notification_key(std::string_view key_base, std::string_view channel_id);

// Fires an event inside the caller's write transaction: one notification.send job for each
// channel of the project that has a rule for the event, committed with the caller's writes or
// not at all. A project without such a rule pays one indexed read of its rules. Returns how many
// jobs it created (0 when every key existed already). Errors: invalid_argument for an event
// missing from the table or data that does not fit it; store errors.
result<int> fire_event(store::catalog_tx& tx, const fired_event& e, time_ms now);

}  // namespace certfleet::notify
