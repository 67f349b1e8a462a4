#pragma once
// Notification messages people read (docs/notifications.md#templates): a template (a subject and
// a body with {{placeholder}}s) filled with an event's values and rendered for each channel kind
// — plain text + HTML email, Slack Block Kit, a Microsoft Teams Adaptive Card 1.5 — with every
// value escaped for its format. Pure code: no I/O, no clock; the sender passes everything in.
#include "certfleet/core/error.hpp"
#include "certfleet/notify/events.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::notify {

inline constexpr std::size_t max_template_subject = 200;   // bytes of template text
inline constexpr std::size_t max_template_body = 4000;

struct message_template {
  std::string subject;
  std::string body;
};

// A piece of template text: literal text, or the name inside {{ }}.
struct template_part {
  bool placeholder = false;
  std::string text;
};

// Splits `text` at its placeholders. `{{ name }}` (spaces allowed inside the braces) is a
// placeholder; a name is lower-case letters, digits, '_' and '.'. Errors (invalid_argument naming
// `field`): an unclosed "{{", a name with other characters, control characters other than a
// line break in the text.
result<std::vector<template_part>> parse_template_text(std::string_view text, std::string_view field);

// The placeholders an event's templates may use: its fields and the built-ins (events.hpp).
bool known_placeholder(const event_def& e, std::string_view name);

// A rule's `template` member: {"subject"?: text, "body"?: text}, at least one of them. Each is
// parsed and every placeholder must be known to the event; the error names all the unknown ones
// ("unknown placeholder {{colour}} in template.body; certificate.expiring has {{name}}, …") with
// field "template.subject" or "template.body". A member left out keeps the default.
result<message_template> parse_template_override(const boost::json::value& v, const event_def& e);
// The template a message uses: the event's default, with the override's members in its place.
message_template template_for(const event_def& e, const message_template& override_or_empty);

// An event's values as text, by placeholder name: time fields as RFC 3339 UTC, lists joined
// with ", ", integers in decimal, a missing field as "". Text is made valid UTF-8 (a bad byte
// becomes U+FFFD) without control characters other than a line break.
struct message_values {
  std::map<std::string, std::string, std::less<>> by_name;
  const std::string& get(std::string_view name) const;
};
message_values event_values(const event_def& e, const boost::json::object& data, std::string_view event_id,
                            std::string_view project, std::string_view link);

// The event's data as machines receive it (a webhook body): its time fields as RFC 3339 UTC with
// milliseconds, like every answer (DESIGN §6); the rest as the event carries it.
boost::json::object machine_data(const event_def& e, const boost::json::object& data);

// The event's page in the UI: ui_base_url + the event's ui_path (its {field}s filled, each
// percent-encoded) + "?project=<project>"; empty when ui_base_url is empty, the event has no page
// or a field it needs is missing.
std::string event_link(const event_def& e, const boost::json::object& data, std::string_view ui_base_url,
                       std::string_view project);

// Escaping, one function per format.
std::string escape_html(std::string_view s);
// Slack mrkdwn: &, < and > as entities (what Slack's message formatting requires), so a value
// cannot make a link or a mention.
std::string escape_slack(std::string_view s);
// Valid UTF-8 without control characters other than '\n' (kept only when keep_newlines).
std::string clean_text(std::string_view s, bool keep_newlines);
// At most `max` bytes, cut at a character boundary, "…" at the end when cut.
std::string truncate_utf8(std::string_view s, std::size_t max);

// A template filled for one format: `escape` applies to the template's text and to each value
// alike (a template is plain text, not markup: an operator's "<" shows as "<").
std::string fill(const std::vector<template_part>& parts, const message_values& values,
                 std::string (*escape)(std::string_view));

// What every rendering starts from: the template with values in, the facts (label, value) of the
// event's table row that have a value, and the link.
struct message_content {
  std::string subject;  // one line, at most 250 bytes
  std::vector<template_part> body;  // parsed, filled per format
  message_values values;
  std::vector<std::pair<std::string, std::string>> facts;
  std::string link;
  std::string event_id;
  std::string project;
};
// `tpl` must have come through parse_template_override or be a default (its text parses); a
// template that does not parse renders as its raw text.
message_content compose(const event_def& e, const message_template& tpl, const message_values& values);

struct rendered_email {
  std::string subject;  // one line, unencoded UTF-8 (the MIME layer encodes it)
  std::string text;     // text/plain part
  std::string html;     // text/html part
};
rendered_email render_email(const message_content& m);
// Slack incoming-webhook payload: {"text": fallback, "blocks": [header, section, fields, actions,
// context]} within Block Kit's documented limits (header 150 characters, section text 3000, at
// most 10 fields of 2000, button URL 3000).
boost::json::object render_slack(const message_content& m);
// Teams incoming webhook / Workflows payload: {"type": "message", "attachments": [{"contentType":
// "application/vnd.microsoft.card.adaptive", "content": AdaptiveCard version 1.5}]}.
boost::json::object render_teams(const message_content& m);

}  // namespace certfleet::notify
