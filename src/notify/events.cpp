// The events table and fire_event (events.hpp).
#include "certfleet/notify/events.hpp"

#include "certfleet/notify/channel.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/queue/make_job.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>

namespace certfleet::notify {

namespace json = boost::json;

namespace {

using F = field_type;
namespace n = event_names;

constexpr event_field distribution_finished_fields[] = {
    {"distribution_id", F::text, "the distribution"},
    {"name", F::text, "the distribution's name", "Distribution"},
    {"run_no", F::integer, "the run that finished (execute and retry-failed open runs; rollbacks never notify)", "Run"},
    {"status", F::text, "the run's final status: success, partial, failed or cancelled", "Status"},
    {"error", F::text, "why the run did not succeed (empty on success)"},
    {"summary.targets", F::integer, "targets in the run", "Targets"},
    {"summary.succeeded", F::integer, "targets delivered", "Succeeded"},
    {"summary.failed", F::integer, "targets that failed", "Failed"},
    {"summary.skipped", F::integer, "targets skipped (deleted after the run started)"},
    {"summary.cancelled", F::integer, "targets cancelled, or left without a result", "Cancelled"},
};

constexpr event_field certificate_expiry_fields[] = {
    {"certificate_id", F::text, "the certificate"},
    {"name", F::text, "the certificate's name", "Certificate"},
    {"subject", F::text, "the leaf's subject", "Subject"},
    {"not_after", F::time, "when it expires", "Expires"},
    {"days_threshold", F::integer,
     "the threshold of certificate_expiry_thresholds_days just crossed (0 for certificate.expired)"},
    {"fingerprint_sha256", F::text, "SHA-256 of the leaf (hex)"},
};

constexpr event_field certificate_issued_fields[] = {
    {"certificate_id", F::text, "the certificate"},
    {"name", F::text, "the certificate's name", "Certificate"},
    {"domains", F::list, "the names it covers", "Domains"},
    {"version", F::integer, "the certificate's version number (1 for the first issuance)", "Version"},
    {"serial", F::text, "the new leaf's serial number (hex)"},
    {"not_after", F::time, "when the new version expires", "Expires"},
    {"job_id", F::text, "the issuing job"},
};

constexpr event_field certificate_renewal_failed_fields[] = {
    {"certificate_id", F::text, "the certificate"},
    {"name", F::text, "the certificate's name", "Certificate"},
    {"domains", F::list, "the names it covers", "Domains"},
    {"not_after", F::time, "when the current version (still in place) expires", "Expires"},
    {"error", F::text, "why the renewal failed", "Error"},
    {"job_id", F::text, "the renewal job"},
};

constexpr event_field certificate_revoked_fields[] = {
    {"certificate_id", F::text, "the certificate"},
    {"name", F::text, "the certificate's name", "Certificate"},
    {"serial", F::text, "the revoked leaf's serial number (hex)", "Serial"},
    {"reason", F::text, "the RFC 5280 reason name, empty when none was given", "Reason"},
    {"revoked_at", F::time, "when it was revoked", "Revoked"},
    {"source", F::text, "who saw it: request (revoked through certfleet), crl or ocsp", "Seen by"},
};

constexpr event_field certificate_approval_fields[] = {
    {"certificate_id", F::text, "the certificate"},
    {"name", F::text, "the certificate's name", "Certificate"},
    {"domains", F::list, "the names it is to cover", "Domains"},
    {"requested_by", F::text, "who asked for it: token:<id> of the requesting token, or cli", "Requested by"},
    {"requested_at", F::time, "when it was asked for", "Requested"},
    {"decided_by", F::text, "the admin who approved or rejected it (empty while it waits)", "Decided by"},
    {"reason", F::text, "why it was rejected (empty otherwise)", "Reason"},
    {"job_id", F::text, "the issue job an approval started (empty otherwise)"},
};

constexpr event_field domain_expiring_fields[] = {
    {"domain_id", F::text, "the domain"},
    {"name", F::text, "the domain name", "Domain"},
    {"expires_at", F::time, "when its registration expires", "Expires"},
    {"days_threshold", F::integer, "the threshold (days before expiry) just crossed"},
    {"registrar", F::text, "the registrar, when the registry names one", "Registrar"},
};

constexpr event_field job_dead_fields[] = {
    {"job_id", F::text, "the job"},
    {"type", F::text, "its type", "Type"},
    {"error", F::text, "its last error", "Error"},
    {"attempts", F::integer, "attempts it made", "Attempts"},
    {"max_attempts", F::integer, "attempts it had"},
    {"certificate_id", F::text, "its certificate, if any"},
    {"distribution_id", F::text, "its distribution, if any"},
};

constexpr std::array<event_def, 12> table{{
    {n::distribution_finished,
     "a delivery run (execute or retry-failed) of a distribution reaches its final status; rollback runs never notify",
     distribution_finished_fields, "Distribution {{name}}: run {{run_no}} {{status}}",
     "Run {{run_no}} of distribution {{name}} finished: {{status}}.\n"
     "{{summary.succeeded}} of {{summary.targets}} targets succeeded, {{summary.failed}} failed, "
     "{{summary.skipped}} skipped, {{summary.cancelled}} cancelled.\n"
     "{{error}}",
     "/distributions/{distribution_id}"},
    {n::certificate_expiring,
     "the hourly certificate_expiration_check finds a certificate within a threshold of "
     "certificate_expiry_thresholds_days (default 30,14,7,1) not notified before: one event per certificate and "
     "threshold, the tightest one crossed",
     certificate_expiry_fields, "Certificate {{name}} expires within {{days_threshold}} days",
     "Certificate {{name}} ({{subject}}) expires on {{not_after}}, within {{days_threshold}} days.\n"
     "Renew it, or find out why its renewal has not happened yet.",
     "/certificates/{certificate_id}"},
    {n::certificate_expired, "the same check finds a certificate past its not_after (once per certificate)",
     certificate_expiry_fields, "Certificate {{name}} has expired",
     "Certificate {{name}} ({{subject}}) expired on {{not_after}}.\n"
     "Services still presenting it fail their clients' TLS handshakes: renew it and distribute the new one.",
     "/certificates/{certificate_id}"},
    {n::certificate_issued, "a certificate's first version is issued and stored", certificate_issued_fields,
     "Certificate {{name}} issued",
     "Certificate {{name}} for {{domains}} was issued: version {{version}}, serial {{serial}}, valid until "
     "{{not_after}}.",
     "/certificates/{certificate_id}"},
    {n::certificate_renewed, "a renewal stores a new version of a certificate", certificate_issued_fields,
     "Certificate {{name}} renewed",
     "Certificate {{name}} for {{domains}} was renewed: version {{version}}, serial {{serial}}, valid until "
     "{{not_after}}.\nDistributions with auto_execute deliver the new version now.",
     "/certificates/{certificate_id}"},
    {n::certificate_renewal_failed, "a renewal job fails for good (dead): the current version stays in place",
     certificate_renewal_failed_fields, "Renewal of certificate {{name}} failed",
     "Renewing certificate {{name}} for {{domains}} failed: {{error}}\n"
     "The current version stays in place and expires on {{not_after}}.",
     "/jobs/{job_id}"},
    {n::certificate_revoked,
     "a certificate is revoked through certfleet, or the revocation check finds it revoked in its CRL or by OCSP",
     certificate_revoked_fields, "Certificate {{name}} was revoked",
     "Certificate {{name}} (serial {{serial}}) was revoked at {{revoked_at}}; reason: {{reason}}; seen by: "
     "{{source}}.\nReplace it wherever it is served.",
     "/certificates/{certificate_id}"},
    {n::certificate_approval_requested,
     "a certificate issue request in a project with issuance_requires_approval on waits for an admin's approval",
     certificate_approval_fields, "Certificate {{name}} awaits approval",
     "{{requested_by}} asked for certificate {{name}} for {{domains}} at {{requested_at}}.\n"
     "An admin of the project other than the requester approves or rejects it on its page.",
     "/certificates/{certificate_id}"},
    {n::certificate_approved, "an admin approves a waiting issue request: its issue job starts", certificate_approval_fields,
     "Certificate {{name}} approved",
     "{{decided_by}} approved certificate {{name}} for {{domains}}, asked for by {{requested_by}}; issue job {{job_id}} "
     "started.",
     "/certificates/{certificate_id}"},
    {n::certificate_rejected, "an admin rejects a waiting issue request, with a reason: nothing is issued",
     certificate_approval_fields, "Certificate {{name}} rejected",
     "{{decided_by}} rejected certificate {{name}} for {{domains}}, asked for by {{requested_by}}: {{reason}}\n"
     "Nothing was issued. Delete it, or ask again with a new issue request.",
     "/certificates/{certificate_id}"},
    {n::domain_expiring, "the domain expiration check finds a domain's registration within one of its thresholds",
     domain_expiring_fields, "Domain {{name}} expires within {{days_threshold}} days",
     "The registration of {{name}} expires on {{expires_at}} (registrar: {{registrar}}).\nRenew it with the "
     "registrar.",
     ""},
    {n::job_dead,
     "a job goes dead (no attempts left, or a failure no retry can fix); not for notification.send jobs (a "
     "notification about a failed notification would fail the same way) nor for distribution jobs (their run's "
     "distribution.finished reports them)",
     job_dead_fields, "Job {{type}} is dead",
     "Job {{job_id}} ({{type}}) made {{attempts}} of {{max_attempts}} attempts and will not run again: {{error}}\n"
     "Fix the cause, then retry it from its page.",
     "/jobs/{job_id}"},
}};

constexpr event_field test_fields[] = {
    {"channel", F::text, "the channel's name", "Channel"},
    {"kind", F::text, "the channel's kind", "Kind"},
};

constexpr event_def test_def{
    "notification.test", "an admin asks for a test message (POST …/notification-channels/{id}/test)", test_fields,
    "certfleet test message for channel {{channel}}",
    "This is a test message from certfleet to the {{kind}} channel {{channel}} of project {{project}}.\n"
    "It arrived, so the channel works: events its rules name will come here too.",
    "/notifications"};

constexpr builtin_placeholder builtins[] = {
    {"event", "the event's name, e.g. certificate.expiring"},
    {"event_id", "the event's id (the same in every message about this event: receivers dedupe by it)"},
    {"project", "the project's name"},
    {"link", "the event's page in the web UI (ui_base_url + the page), empty when ui_base_url is not set"},
};

bool fits(field_type t, const json::value& v) {
  switch (t) {
    case F::text: return v.is_string();
    case F::integer:
    case F::time: return v.is_int64() || v.is_uint64();
    case F::list:
      return v.is_array() && std::all_of(v.as_array().begin(), v.as_array().end(), [](const json::value& x) { return x.is_string(); });
  }
  return false;
}

const event_field* field_of(const event_def& e, std::string_view name) {
  for (const auto& f : e.fields)
    if (f.name == name) return &f;
  return nullptr;
}

// The rules of a project for one event: channel -> the rule's template override (null: none).
// One range read of the rules named for this event: a project without one pays that read only
// (a dead job's terminal hook runs this for every dead job).
result<std::map<std::string, json::value>> rules_for(store::catalog_read& rd, const std::string& project,
                                                     std::string_view event) {
  auto rules = rd.objects_named(project, store::kind_rule, rule_name_prefix(event), 1000);
  if (!rules) return std::move(rules).error();
  std::map<std::string, json::value> out;
  for (const auto& r : *rules) {
    boost::system::error_code ec;
    auto doc = json::parse(r.doc, ec);
    if (ec || !doc.is_object()) continue;
    auto* ev = doc.as_object().if_contains("event");
    if (!ev || !ev->is_string() || ev->as_string() != event || r.ref_id.empty()) continue;
    auto* tpl = doc.as_object().if_contains("template");
    out.emplace(r.ref_id, tpl && tpl->is_object() ? *tpl : json::value(nullptr));
  }
  return out;
}

}  // namespace

std::string_view field_type_name(field_type t) noexcept {
  switch (t) {
    case F::text: return "text";
    case F::integer: return "integer";
    case F::time: return "time";
    case F::list: return "list";
  }
  return "text";
}

std::span<const event_def> all_events() noexcept { return table; }

const event_def* find_event(std::string_view name) noexcept {
  for (const auto& e : table)
    if (e.name == name) return &e;
  return nullptr;
}

const event_def& test_event() noexcept { return test_def; }

std::string event_choices() {
  std::string out;
  for (const auto& e : table) out += fmt::format("{}{}", out.empty() ? "" : ", ", e.name);
  return out;
}

std::span<const builtin_placeholder> builtin_placeholders() noexcept { return builtins; }

result<void> check_event_data(const event_def& e, const json::object& data) {
  auto bad = [&](std::string_view member, std::string why) {
    return make_error(errc::invalid_argument, fmt::format("event {}: data.{} {}", e.name, member, why),
                      fmt::format("data.{}", member));
  };
  for (const auto& [k, v] : data) {
    if (const auto* f = field_of(e, k)) {
      if (!fits(f->type, v)) return bad(k, fmt::format("must be of type {}", field_type_name(f->type)));
      continue;
    }
    // An object member holds the fields named "<member>.<name>".
    if (v.is_object()) {
      bool any = false;
      for (const auto& f : e.fields) any = any || f.name.starts_with(std::string(k) + ".");
      if (any) {
        for (const auto& [k2, v2] : v.as_object()) {
          auto path = fmt::format("{}.{}", std::string_view(k), std::string_view(k2));
          const auto* f = field_of(e, path);
          if (!f) return bad(path, "is not a field of the event (events.cpp's table)");
          if (!fits(f->type, v2)) return bad(path, fmt::format("must be of type {}", field_type_name(f->type)));
        }
        continue;
      }
    }
    return bad(k, "is not a field of the event (events.cpp's table)");
  }
  return {};
}

std::string events_reference_markdown() {
  std::string md;
  for (const auto& e : table) {
    md += fmt::format("### `{}`\n\nSent when {}.\n\n| placeholder | type | meaning |\n|---|---|---|\n", e.name, e.sent_when);
    for (const auto& f : e.fields) md += fmt::format("| `{{{{{}}}}}` | {} | {} |\n", f.name, field_type_name(f.type), f.doc);
    md += fmt::format("\nLinks to: {}\n\n", e.ui_path.empty() ? std::string("nothing (no UI page)")
                                                           : fmt::format("`{}`", e.ui_path));
    md += fmt::format("Default subject: `{}`\n\nDefault body:\n\n```text\n{}\n```\n\n", e.subject, e.body);
  }
  md += "Every template also has:\n\n| placeholder | meaning |\n|---|---|\n";
  for (const auto& b : builtins) md += fmt::format("| `{{{{{}}}}}` | {} |\n", b.name, b.doc);
  return md;
}

std::string notification_key(std::string_view key_base, std::string_view channel_id) {
  return fmt::format("notify:{}:{}", key_base, channel_id);
}

result<int> fire_event(store::catalog_tx& tx, const fired_event& e, time_ms now) {
  const auto* def = find_event(e.event);
  if (!def)
    return make_error(errc::invalid_argument, fmt::format("no event {} in the events table", e.event), "event");
  if (auto ok = check_event_data(*def, e.data); !ok) return ok.error();
  auto rules = rules_for(tx, e.project_id, e.event);
  if (!rules) return std::move(rules).error();
  int created = 0;
  for (auto& [channel, tpl] : *rules) {
    json::object payload{{"event_id", e.event_id}, {"event", def->name}, {"channel_id", channel}, {"data", e.data}};
    if (!tpl.is_null()) payload["template"] = tpl;
    queue::enqueue_request j;
    j.project_id = e.project_id;
    j.type = queue::job_names::notification_send;
    j.payload = json::serialize(payload);
    j.idempotency_key = notification_key(e.key_base, channel);
    j.certificate_id = e.source.certificate_id;
    j.distribution_id = e.source.distribution_id;
    j.parent_job_id = e.source.parent_job_id;
    j.triggered_by = e.source.triggered_by;
    auto r = queue::enqueue_in(tx.jobs(), j, now);
    if (!r) return std::move(r).error();
    if (r->created) ++created;
  }
  return created;
}

}  // namespace certfleet::notify
