// notification.send and the channel test (send.hpp): one path from a stored channel and an
// event to a delivered (or classified, refused) message.
#include "certfleet/notify/send.hpp"

#include "certfleet/core/json.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/net/mime.hpp"
#include "certfleet/net/smtp.hpp"
#include "certfleet/delivery/webhook.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/notify/channel.hpp"
#include "certfleet/notify/events.hpp"
#include "certfleet/notify/template.hpp"
#include "certfleet/queue/job_types.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

namespace certfleet::notify {

namespace asio = boost::asio;
namespace json = boost::json;
using net::error_class;

namespace {

constexpr auto retry_after_cap = std::chrono::hours(1);

// A stored channel with what it needs to send: its spec, its sealed secret opened, and for a
// webhook the signing secret of its credential.
struct loaded_channel {
  store::catalog_object obj;
  channel_spec spec;
  channel_secret secret;
  std::string hmac_secret;
};

struct outgoing {
  const event_def* def = nullptr;
  std::string event_id;
  json::object data;
  message_template override_tpl;
};

asio::awaitable<result<loaded_channel>> load_channel(store::store& st, const std::string& project,
                                                     const std::string& channel_id, const kek* key) {
  auto ch = std::make_shared<loaded_channel>();
  auto cred = std::make_shared<std::optional<store::catalog_object>>();
  store::read_fn read = [ch, cred, project, channel_id](store::catalog_read& rd) -> result<void> {
    auto c = rd.get_object(project, store::kind_channel, channel_id);
    if (!c) return std::move(c).error();
    ch->obj = std::move(*c);
    if (!ch->obj.ref_id.empty()) {
      auto s = rd.get_object(project, store::kind_credential, ch->obj.ref_id);
      if (s) *cred = std::move(*s);
    }
    return {};
  };
  if (auto r = co_await st.catalog().read(std::move(read)); !r) co_return std::move(r).error();
  auto spec = parse_channel_doc(ch->obj);
  if (!spec) co_return std::move(spec).error();
  ch->spec = std::move(*spec);
  if (!ch->obj.sealed.empty() || cred->has_value()) {
    if (!key) co_return make_error(errc::shutting_down, "no key-encryption key loaded: channel secrets cannot be opened", "key_file");
    if (!ch->obj.sealed.empty()) {
      auto s = open_channel_secret(*key, ch->obj);
      if (!s) co_return std::move(s).error();
      ch->secret = std::move(*s);
    }
    if (cred->has_value()) {
      auto s = catalog::open_credential(*key, **cred);
      if (!s) co_return std::move(s).error();
      ch->hmac_secret = std::move(s->password);
    }
  }
  co_return std::move(*ch);
}

asio::awaitable<std::string> project_name(store::store& st, const std::string& project_id) {
  auto all = co_await st.projects().list();
  if (all)
    for (const auto& p : *all)
      if (p.id == project_id) co_return p.name;
  co_return project_id;
}

// A reply body for operators: one line of printable ASCII, at most 120 characters.
std::string short_text(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, 120)) out += (c >= 0x20 && c < 0x7f) ? c : ' ';
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

send_report from_http(std::string kind, delivery::webhook_result r, bool body_is_safe) {
  send_report out;
  out.channel_kind = std::move(kind);
  out.cls = r.cls;
  out.http_status = r.status;
  out.retry_after = r.retry_after;
  out.timings = std::move(r.timings);
  // Slack and Teams answer with a reason ("invalid_payload", "channel_is_archived"): worth
  // showing. A generic webhook receiver may echo what it got, so its body is never shown.
  std::string said = body_is_safe ? short_text(r.body) : std::string();
  if (r.status) out.reply = fmt::format("HTTP {}{}", r.status, said.empty() ? "" : " " + said);
  out.error = r.error;
  if (!r.ok() && r.status && !said.empty()) out.error += fmt::format(" ({})", said);
  if (!r.ok() && r.status == 429)
    out.error += r.retry_after.count() ? fmt::format(" (rate limited: Retry-After {} s)", r.retry_after.count())
                                       : std::string(" (rate limited)");
  return out;
}

std::string domain_of(std::string_view mailbox) {
  auto at = mailbox.rfind('@');
  return at == std::string_view::npos ? std::string() : std::string(mailbox.substr(at + 1));
}

asio::awaitable<send_report> deliver(const loaded_channel& ch, const outgoing& ev, const settings_map& settings,
                                     const notify_options& opt, const std::string& project, time_ms now) {
  auto egress = net::parse_egress_allow_list(settings.text("egress_allow_list"));
  const net::egress_policy* policy = egress ? &*egress : nullptr;
  const std::string kind(channel_kind_name(ch.spec.kind));

  if (ch.spec.kind == channel_kind::webhook) {
    // The machine-readable event, as webhook receivers have always had it.
    json::object body{{"event_id", ev.event_id}, {"event", ev.def->name}, {"channel_id", ch.obj.id}, {"data", machine_data(*ev.def, ev.data)}};
    delivery::webhook_request req;
    req.url = ch.spec.url;
    req.body = json::serialize(body);
    req.headers.emplace_back("X-Certfleet-Event-Id", ev.event_id);
    req.hmac_secret = ch.hmac_secret;
    req.egress = policy;
    req.ca_pem = opt.ca_pem;
    req.resolve_pool = opt.cpu;
    co_return from_http(kind, co_await delivery::post_json(std::move(req)), false);
  }

  auto link = event_link(*ev.def, ev.data, settings.text("ui_base_url"), project);
  auto values = event_values(*ev.def, ev.data, ev.event_id, project, link);
  auto content = compose(*ev.def, template_for(*ev.def, ev.override_tpl), values);

  if (ch.spec.kind == channel_kind::email) {
    auto mail = render_email(content);
    net::mail_parts parts;
    parts.from = ch.spec.email.from;
    parts.to = ch.spec.email.to;
    parts.subject = mail.subject;
    parts.text = std::move(mail.text);
    parts.html = std::move(mail.html);
    parts.message_id = net::message_id_for(ev.event_id, domain_of(ch.spec.email.from));
    parts.date = now;
    parts.headers.emplace_back("X-Certfleet-Event-Id", ev.event_id);
    parts.headers.emplace_back("X-Certfleet-Event", std::string(ev.def->name));
    net::smtp_envelope env;
    env.from = ch.spec.email.from;
    env.to = ch.spec.email.to;
    env.message = net::build_mime_message(parts);
    net::smtp_options so;
    so.host = ch.spec.email.host;
    so.port = ch.spec.email.port;
    so.starttls = ch.spec.email.starttls;
    so.username = ch.spec.email.username;
    so.password = ch.secret.password;
    so.egress = policy;
    so.ca_pem = opt.ca_pem;
    so.resolve_pool = opt.cpu;
    auto r = co_await net::send_mail(std::move(env), std::move(so));
    send_report out;
    out.channel_kind = kind;
    out.cls = r.cls;
    out.error = std::move(r.error);
    out.reply = std::move(r.reply);
    out.timings = std::move(r.timings);
    co_return out;
  }

  // Slack and Teams: the URL is the secret (a bearer token in its path); it is never logged,
  // and errors name only its host.
  json::object payload = ch.spec.kind == channel_kind::slack ? render_slack(content) : render_teams(content);
  delivery::webhook_request req;
  req.url = ch.secret.webhook_url;
  req.body = json::serialize(payload);
  req.headers.emplace_back("X-Certfleet-Event-Id", ev.event_id);
  req.egress = policy;
  req.ca_pem = opt.ca_pem;
  req.resolve_pool = opt.cpu;
  co_return from_http(kind, co_await delivery::post_json(std::move(req)), true);
}

// The payload of a notification.send job, read defensively (it is ours, but stored).
result<outgoing> parse_outgoing(std::string_view payload, std::string& channel_id) {
  auto v = certfleet::json::parse_value(payload, "payload", 32);
  if (!v) return std::move(v).error();
  if (!v->is_object()) return make_error(errc::invalid_argument, "payload must be a JSON object", "payload");
  const auto& o = v->as_object();
  auto text = [&](const char* k) -> std::string {
    auto* p = o.if_contains(k);
    return p && p->is_string() ? std::string(p->as_string()) : std::string();
  };
  outgoing out;
  channel_id = text("channel_id");
  out.event_id = text("event_id");
  if (channel_id.empty() || out.event_id.empty())
    return make_error(errc::invalid_argument, "payload needs channel_id and event_id", "payload");
  out.def = find_event(text("event"));
  if (!out.def) return make_error(errc::invalid_argument, fmt::format("unknown event \"{}\"", text("event")), "payload.event");
  if (auto* d = o.if_contains("data"); d && d->is_object()) out.data = d->as_object();
  if (auto* t = o.if_contains("template"); t && !t->is_null()) {
    auto tpl = parse_template_override(*t, *out.def);
    // Checked when the rule was made; one that no longer fits this build's table falls back to
    // the default rather than losing the message.
    if (tpl) out.override_tpl = std::move(*tpl);
    else spdlog::warn("notification for event {}: the rule's template no longer fits ({}); using the default",
                      out.event_id, tpl.error().message);
  }
  return out;
}

asio::awaitable<queue::outcome> send_notification(queue::job_context& ctx, std::shared_ptr<const notify_options> opt) {
  std::string channel_id;
  auto ev = parse_outgoing(ctx.payload(), channel_id);
  if (!ev) co_return queue::outcome::permanent_failure(ev.error());
  const std::string project = ctx.job().project_id;
  auto ch = co_await load_channel(ctx.store(), project, channel_id, opt->key);
  if (!ch) co_return queue::outcome::permanent_failure(fmt::format("channel {}: {}", channel_id, ch.error().message));
  auto settings = co_await store::read_settings(ctx.store());
  auto name = co_await project_name(ctx.store(), project);
  auto r = co_await deliver(*ch, *ev, settings, *opt, name, ctx.clock().now_ms());
  if (r.ok()) {
    auto line = fmt::format("event {} delivered to channel {} ({}: {})", ev->event_id, ch->obj.name, r.channel_kind,
                            r.reply.empty() ? std::string("ok") : r.reply);
    co_await ctx.log("info", std::move(line));
    co_return queue::outcome::ok();
  }
  auto line = fmt::format("event {} to channel {} ({}): [{}] {}", ev->event_id, ch->obj.name, r.channel_kind,
                          net::error_class_name(r.cls), r.error);
  co_await ctx.log("error", std::move(line));
  if (!r.retryable()) co_return queue::outcome::permanent_failure(r.error);
  auto wait = std::min<std::chrono::milliseconds>(r.retry_after, retry_after_cap);
  co_return queue::outcome::failure(r.error, wait);
}

}  // namespace

bool send_report::retryable() const { return cls == error_class::network || cls == error_class::io_transient; }

asio::awaitable<result<send_report>> send_test_message(store::store& st, std::string project_id, std::string channel_id,
                                                        notify_options opt, time_ms now) {
  auto ch = co_await load_channel(st, project_id, channel_id, opt.key);
  if (!ch) co_return std::move(ch).error();
  auto settings = co_await store::read_settings(st);
  auto name = co_await project_name(st, project_id);
  outgoing ev;
  ev.def = &test_event();
  ev.event_id = fmt::format("{}:{}:{}", test_event().name, channel_id, now);
  ev.data = json::object{{"channel", ch->obj.name}, {"kind", std::string(channel_kind_name(ch->spec.kind))}};
  auto started = std::chrono::steady_clock::now();
  auto r = co_await deliver(*ch, ev, settings, opt, name, now);
  r.event_id = ev.event_id;
  r.duration = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  co_return r;
}

json::object send_report_view(const send_report& r, const std::string& channel_id) {
  json::object v{{"channel_id", channel_id},
                 {"kind", r.channel_kind},
                 {"delivered", r.ok()},
                 {"event_id", r.event_id},
                 {"duration_ms", r.duration.count()}};
  if (!r.ok()) {
    v["error_class"] = net::error_class_name(r.cls);
    v["error"] = r.error;
    v["retryable"] = r.retryable();
  }
  if (!r.reply.empty()) v["reply"] = r.reply;
  if (r.http_status) v["http_status"] = r.http_status;
  if (r.retry_after.count()) v["retry_after_s"] = r.retry_after.count();
  return v;
}

void register_notification_handler(queue::handler_registry& r, std::shared_ptr<const notify_options> options) {
  r.add(std::string(queue::job_names::notification_send),
        [options](queue::job_context& ctx) { return send_notification(ctx, options); });
}

}  // namespace certfleet::notify
