#pragma once
// Notification channels and rules (docs/notifications.md): their request bodies and the stored
// documents they become, parsed without I/O; a channel's secret is sealed under the
// key-encryption key with an aad naming the row, and never appears in a document.
#include "certfleet/catalog/kinds.hpp"
#include "certfleet/core/secrets.hpp"
#include "certfleet/store/catalog.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::notify {

// The kinds of notification channel (docs/notifications.md#channels).
enum class channel_kind : std::uint8_t { webhook, email, slack, teams };
std::string_view channel_kind_name(channel_kind k) noexcept;
std::optional<channel_kind> parse_channel_kind(std::string_view name) noexcept;

inline constexpr std::size_t max_email_recipients = 50;

struct email_channel {
  std::string host;         // the submission server: a host name or an IP literal
  std::uint16_t port = 587;
  // STARTTLS is required; false only for a relay on this host (host localhost, 127.x.x.x or ::1).
  bool starttls = true;
  std::string username;     // empty: no AUTH (the password, sealed, goes with it)
  std::string from;
  std::vector<std::string> to;
};

struct channel_spec {
  channel_kind kind = channel_kind::webhook;
  std::string url;                   // webhook
  std::string secret_credential_id;  // webhook: the password credential that signs
  email_channel email;               // email
  std::string webhook_host;          // slack, teams: the host of the sealed URL (shown; the URL is not)
};

// What a channel keeps sealed: never in its document, never returned, never logged.
struct channel_secret {
  std::string password;     // email: the AUTH password
  std::string webhook_url;  // slack, teams: the incoming-webhook / workflow URL (a bearer token)
  bool empty() const { return password.empty() && webhook_url.empty(); }
};

struct new_channel {
  std::string name;
  channel_spec spec;
  channel_secret secret;
};

// POST …/notification-channels
//   {name, kind: "webhook", url, secret_credential_id?}
//   {name, kind: "email", email: {host, port=587, starttls=true, username?, password?, from, to[]}}
//   {name, kind: "slack", slack: {webhook_url}}   {name, kind: "teams", teams: {webhook_url}}
// Errors name the field ("email.to", "slack.webhook_url"); secrets are never quoted.
result<new_channel> parse_channel_request(std::string_view body);
// The stored object: the spec as its document, the secret (if any) sealed to the row.
result<store::catalog_object> make_channel_object(const new_channel& c, const kek* key, std::string id,
                                                  std::string project_id, time_ms now);
result<channel_spec> parse_channel_doc(const store::catalog_object& o);
std::string channel_doc_json(const channel_spec& c);
result<channel_secret> open_channel_secret(const kek& key, const store::catalog_object& o);

struct rule_spec {
  std::string event;  // a name of the events table (events.hpp)
  std::string channel_id;
  // The rule's own message, checked against the event's placeholders (template.hpp);
  // null when the event's default is used.
  boost::json::value template_override;
};
// POST …/notification-rules {event, channel_id, template?: {subject?, body?}}
result<rule_spec> parse_rule_request(std::string_view body);
std::string rule_doc_json(const rule_spec& r);
// A rule's object name, "<event>-><channel>": names are unique per project and kind, so an event
// has one rule per channel, and the rules of an event are the names starting with
// rule_name_prefix(event) (found by catalog_read::objects_named without reading the others).
std::string rule_object_name(std::string_view event, std::string_view channel_id);
std::string rule_name_prefix(std::string_view event);

// A channel's view: its document and whether a secret is stored (an email password, a
// Slack/Teams URL), never the secret.
boost::json::object channel_view(const store::catalog_object& o);


// The catalog kinds this module owns (channels and rules), for the service's table of kinds.
std::span<const catalog::kind> kinds() noexcept;

}  // namespace certfleet::notify
