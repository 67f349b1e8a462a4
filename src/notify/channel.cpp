// Notification channels and rules (channel.hpp): channel kinds, the email and webhook bodies,
// the stored document and its sealed secret, rules.
#include "certfleet/notify/channel.hpp"

#include "certfleet/catalog/body_fields.hpp"

#include "certfleet/net/egress.hpp"  // valid_dns_name
#include "certfleet/net/http.hpp"    // parse_url
#include "certfleet/net/smtp_protocol.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/notify/template.hpp"

#include <boost/asio/ip/address.hpp>

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <ctime>

namespace certfleet::notify {

namespace json = boost::json;
using namespace catalog::body_fields;

std::string_view channel_kind_name(channel_kind k) noexcept {
  switch (k) {
    case channel_kind::webhook: return "webhook";
    case channel_kind::email: return "email";
    case channel_kind::slack: return "slack";
    case channel_kind::teams: return "teams";
  }
  return "webhook";
}

std::optional<channel_kind> parse_channel_kind(std::string_view name) noexcept {
  for (auto k : {channel_kind::webhook, channel_kind::email, channel_kind::slack, channel_kind::teams})
    if (channel_kind_name(k) == name) return k;
  return std::nullopt;
}

namespace {

bool loopback_host(std::string_view host) {
  if (host == "localhost") return true;
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(std::string(host), ec);
  if (ec) return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6());
  return a.is_loopback();
}

bool valid_host(std::string_view host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(host), ec);
  return !ec || net::valid_dns_name(host);
}

// The members of a kind's section: refused when unknown, named "<section>.<member>".
result<const json::object*> section(const json::object& o, std::string_view kind,
                                    std::initializer_list<std::string_view> allowed) {
  for (auto other : {"email", "slack", "teams"})
    if (other != kind && o.if_contains(other))
      return bad(other, fmt::format("a {} channel has no {} section", kind, other));
  auto* s = o.if_contains(kind);
  if (!s || !s->is_object()) return bad(std::string(kind), fmt::format("{} must be an object", kind));
  for (const auto& [k, _] : s->as_object())
    if (std::find(allowed.begin(), allowed.end(), std::string_view(k)) == allowed.end())
      return bad(fmt::format("{}.{}", kind, std::string_view(k)),
                 fmt::format("unknown field \"{}.{}\"", kind, std::string_view(k)));
  return &s->as_object();
}

result<void> parse_email(const json::object& e, new_channel& c) {
  auto& m = c.spec.email;
  auto host = text(e, "host", true, 253, "email.");
  if (!host) return std::move(host).error();
  std::string h = *host;
  if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (!valid_host(h)) return bad("email.host", "email.host must be a host name or an IP address (no port: give email.port)");
  for (auto& ch : h) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  m.host = h;
  if (auto* p = e.if_contains("port"); p && !p->is_null()) {
    if (!p->is_int64() || p->as_int64() < 1 || p->as_int64() > 65535)
      return bad("email.port", "email.port must be a number from 1 to 65535 (587 is submission with STARTTLS)");
    m.port = static_cast<std::uint16_t>(p->as_int64());
  }
  auto tls = boolean(e, "starttls", true);
  if (!tls) return bad("email.starttls", "email.starttls must be true or false");
  m.starttls = *tls;
  if (!m.starttls && !loopback_host(m.host))
    return bad("email.starttls",
               "email.starttls may be false only for a relay on this host (email.host localhost, 127.0.0.1 or ::1): "
               "certfleet does not send mail or passwords to another host in the clear");
  auto user = text(e, "username", false, 256, "email.");
  if (!user) return std::move(user).error();
  for (unsigned char ch : *user)
    if (ch < 0x20 || ch == 0x7f) return bad("email.username", "email.username must not contain control characters");
  m.username = *user;
  auto pw = text(e, "password", false, 1024, "email.");
  if (!pw) return std::move(pw).error();
  if (!m.username.empty() && pw->empty()) return bad("email.password", "email.password is required with email.username");
  if (m.username.empty() && !pw->empty()) return bad("email.username", "email.username is required with email.password");
  c.secret.password = std::move(*pw);
  auto from = text(e, "from", true, 254, "email.");
  if (!from) return std::move(from).error();
  if (!net::valid_mailbox(*from))
    return bad("email.from", "email.from must be a plain address like alerts@example.com (no display name)");
  m.from = *from;
  auto* to = e.if_contains("to");
  if (!to || !to->is_array() || to->as_array().empty())
    return bad("email.to", "email.to must be a non-empty array of addresses");
  if (to->as_array().size() > max_email_recipients)
    return bad("email.to", fmt::format("email.to has more than {} addresses", max_email_recipients));
  for (const auto& a : to->as_array()) {
    if (!a.is_string() || !net::valid_mailbox(a.as_string()))
      return bad("email.to", "email.to must hold plain addresses like ops@example.com");
    std::string addr(a.as_string());
    if (std::find(m.to.begin(), m.to.end(), addr) == m.to.end()) m.to.push_back(std::move(addr));
  }
  return {};
}

// A Slack or Teams incoming-webhook URL: https only (it carries its own bearer token).
result<void> parse_hook(const json::object& s, std::string_view kind, new_channel& c) {
  const std::string field = fmt::format("{}.webhook_url", kind);
  auto url = text(s, "webhook_url", true, 2048, std::string(kind) + ".");
  if (!url) return std::move(url).error();
  auto u = net::parse_url(*url, field);
  if (!u) return std::move(u).error();
  if (!u->tls()) return bad(field, fmt::format("{} must be https:// (the URL is the channel's secret)", field));
  c.spec.webhook_host = u->authority();
  c.secret.webhook_url = std::move(*url);
  return {};
}

}  // namespace

std::string channel_doc_json(const channel_spec& c) {
  json::object o{{"kind", channel_kind_name(c.kind)}};
  switch (c.kind) {
    case channel_kind::webhook:
      o["url"] = c.url;
      if (!c.secret_credential_id.empty()) o["secret_credential_id"] = c.secret_credential_id;
      break;
    case channel_kind::email: {
      json::array to;
      for (const auto& a : c.email.to) to.emplace_back(a);
      json::object e{{"host", c.email.host}, {"port", c.email.port}, {"starttls", c.email.starttls},
                     {"from", c.email.from}, {"to", std::move(to)}};
      if (!c.email.username.empty()) e["username"] = c.email.username;
      o["email"] = std::move(e);
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams:
      o[channel_kind_name(c.kind)] = json::object{{"webhook_host", c.webhook_host}};
      break;
  }
  return json::serialize(o);
}

result<new_channel> parse_channel_request(std::string_view body) {
  auto o = body_object(body, {"name", "kind", "url", "secret_credential_id", "email", "slack", "teams"});
  if (!o) return std::move(o).error();
  auto name = name_of(*o);
  if (!name) return std::move(name).error();
  new_channel c;
  c.name = std::move(*name);
  auto kind_text = text(*o, "kind", true, 16);
  if (!kind_text) return std::move(kind_text).error();
  auto kind = parse_channel_kind(*kind_text);
  if (!kind) return bad("kind", "kind must be \"webhook\", \"email\", \"slack\" or \"teams\"");
  c.spec.kind = *kind;
  if (c.spec.kind != channel_kind::webhook)
    for (auto k : {"url", "secret_credential_id"})
      if (o->if_contains(k))
        return bad(k, fmt::format("{} is for webhook channels; a {} channel has its {} section", k, *kind_text, *kind_text));
  switch (c.spec.kind) {
    case channel_kind::webhook: {
      for (auto k : {"email", "slack", "teams"})
        if (o->if_contains(k)) return bad(k, fmt::format("a webhook channel has no {} section", k));
      auto url = text(*o, "url", true, 2048);
      if (!url) return std::move(url).error();
      if (auto u = net::parse_url(*url, "url"); !u) return std::move(u).error();
      c.spec.url = *url;
      auto cred = id_field(*o, "secret_credential_id", false);
      if (!cred) return std::move(cred).error();
      c.spec.secret_credential_id = *cred;
      break;
    }
    case channel_kind::email: {
      auto e = section(*o, "email", {"host", "port", "starttls", "username", "password", "from", "to"});
      if (!e) return std::move(e).error();
      if (auto r = parse_email(**e, c); !r) return std::move(r).error();
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams: {
      auto k = channel_kind_name(c.spec.kind);
      auto s = section(*o, k, {"webhook_url"});
      if (!s) return std::move(s).error();
      if (auto r = parse_hook(**s, k, c); !r) return std::move(r).error();
      break;
    }
  }
  return c;
}

result<store::catalog_object> make_channel_object(const new_channel& c, const kek* key, std::string id,
                                                  std::string project_id, time_ms now) {
  store::catalog_object o;
  o.id = std::move(id);
  o.project_id = std::move(project_id);
  o.kind = std::string(store::kind_channel);
  o.name = c.name;
  o.doc = channel_doc_json(c.spec);
  o.ref_id = c.spec.secret_credential_id;
  o.created_at = now;
  if (!c.secret.empty()) {
    if (!key)
      return make_error(errc::shutting_down, "no key-encryption key is loaded in this process: secrets cannot be sealed",
                        "key_file");
    auto secret = json::serialize(json::object{{"password", c.secret.password}, {"webhook_url", c.secret.webhook_url}});
    auto sealed = seal(*key, secret, aad_for(o, catalog::sealed_secret));
    std::fill(secret.begin(), secret.end(), '\0');
    if (!sealed) return std::move(sealed).error();
    o.sealed = std::move(*sealed);
  }
  return o;
}

result<channel_spec> parse_channel_doc(const store::catalog_object& o) {
  auto d = parse_doc(o);
  auto damaged = [&](std::string_view why) {
    return make_error(errc::store_failure, fmt::format("channel {} is damaged: {}", o.id, why), "channel_id");
  };
  channel_spec c;
  // A channel stored before kinds other than webhook existed has no "kind": a webhook.
  auto kind_text = text(d, "kind", false, 16);
  auto kind = parse_channel_kind(kind_text && !kind_text->empty() ? *kind_text : std::string("webhook"));
  if (!kind) return damaged("unknown kind");
  c.kind = *kind;
  switch (c.kind) {
    case channel_kind::webhook: {
      auto url = text(d, "url", true, 2048);
      if (!url) return damaged("no url");
      c.url = *url;
      auto cred = text(d, "secret_credential_id", false, 64);
      if (cred) c.secret_credential_id = *cred;
      break;
    }
    case channel_kind::email: {
      auto* e = d.if_contains("email");
      if (!e || !e->is_object()) return damaged("no email section");
      const auto& eo = e->as_object();
      auto str = [&](const char* k) { auto* p = eo.if_contains(k); return p && p->is_string() ? std::string(p->as_string()) : std::string(); };
      c.email.host = str("host");
      c.email.from = str("from");
      c.email.username = str("username");
      if (auto* p = eo.if_contains("port"); p && p->is_int64() && p->as_int64() > 0 && p->as_int64() <= 65535)
        c.email.port = static_cast<std::uint16_t>(p->as_int64());
      if (auto* p = eo.if_contains("starttls"); p && p->is_bool()) c.email.starttls = p->as_bool();
      if (auto* p = eo.if_contains("to"); p && p->is_array())
        for (const auto& a : p->as_array())
          if (a.is_string()) c.email.to.emplace_back(a.as_string());
      if (c.email.host.empty() || c.email.from.empty() || c.email.to.empty()) return damaged("incomplete email section");
      break;
    }
    case channel_kind::slack:
    case channel_kind::teams: {
      auto* s = d.if_contains(channel_kind_name(c.kind));
      if (s && s->is_object())
        if (auto* h = s->as_object().if_contains("webhook_host"); h && h->is_string()) c.webhook_host = std::string(h->as_string());
      if (o.sealed.empty()) return damaged("no sealed webhook_url");
      break;
    }
  }
  return c;
}

result<channel_secret> open_channel_secret(const kek& key, const store::catalog_object& o) {
  channel_secret s;
  if (o.sealed.empty()) return s;
  auto plain = open_sealed(key, o.sealed, aad_for(o, catalog::sealed_secret));
  if (!plain) return std::move(plain).error();
  boost::system::error_code ec;
  auto v = json::parse(*plain, ec);
  std::fill(plain->begin(), plain->end(), '\0');
  if (ec || !v.is_object()) return make_error(errc::store_failure, fmt::format("channel {}'s secret is damaged", o.id), "channel_id");
  auto get = [&](const char* k) {
    auto* p = v.as_object().if_contains(k);
    return p && p->is_string() ? std::string(p->as_string()) : std::string();
  };
  s.password = get("password");
  s.webhook_url = get("webhook_url");
  return s;
}

result<rule_spec> parse_rule_request(std::string_view body) {
  auto o = body_object(body, {"event", "channel_id", "template"});
  if (!o) return std::move(o).error();
  rule_spec r;
  auto ev = text(*o, "event", true, 64);
  if (!ev) return std::move(ev).error();
  const auto* def = find_event(*ev);
  if (!def) return bad("event", "event must be one of " + event_choices());
  r.event = *ev;
  auto ch = id_field(*o, "channel_id", true);
  if (!ch) return std::move(ch).error();
  r.channel_id = *ch;
  if (auto* t = o->if_contains("template"); t && !t->is_null()) {
    auto tpl = parse_template_override(*t, *def);
    if (!tpl) return std::move(tpl).error();
    json::object stored;
    if (!tpl->subject.empty()) stored["subject"] = tpl->subject;
    if (!tpl->body.empty()) stored["body"] = tpl->body;
    r.template_override = std::move(stored);
  }
  return r;
}

std::string rule_object_name(std::string_view event, std::string_view channel_id) {
  return fmt::format("{}{}", rule_name_prefix(event), channel_id);
}

std::string rule_name_prefix(std::string_view event) { return fmt::format("{}->", event); }

std::string rule_doc_json(const rule_spec& r) {
  json::object o{{"event", r.event}, {"channel_id", r.channel_id}};
  if (!r.template_override.is_null()) o["template"] = r.template_override;
  return json::serialize(o);
}

boost::json::object channel_view(const store::catalog_object& o) {
  auto v = document_view(o);
  v["secret_set"] = !o.sealed.empty();
  return v;
}

namespace {
constexpr std::array<std::string_view, 1> channel_users{store::kind_rule};
const std::array<catalog::kind, 2> notify_kinds{{
    {store::kind_channel, channel_view, channel_users, nullptr, catalog::sealed_secret},
    {store::kind_rule, nullptr, {}, nullptr},
}};
}  // namespace

std::span<const catalog::kind> kinds() noexcept { return notify_kinds; }

}  // namespace certfleet::notify
