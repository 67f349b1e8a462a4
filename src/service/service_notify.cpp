// Notification channels and rules as the service creates them (service_common.hpp's creators), and
// a channel's test message. A rule names its channel, and a channel its secret's credential: both
// are checked in the transaction that inserts the object, so one deleted meanwhile is refused.
#include "certfleet/service/service.hpp"

#include "service/service_common.hpp"

#include "certfleet/notify/channel.hpp"
#include "certfleet/notify/send.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

namespace certfleet::service {

namespace json = boost::json;

namespace detail {

boost::asio::awaitable<result<new_object>> create_channel(const create_context& ctx, std::string body) {
  auto c = notify::parse_channel_request(body);
  if (!c) co_return std::move(c).error();
  if (!c->secret.empty() && !ctx.key) co_return no_key();
  auto o = notify::make_channel_object(*c, ctx.key, ctx.id, ctx.project_id, ctx.now);
  if (!o) co_return std::move(o).error();
  new_object out{std::move(*o), {}};
  out.check_in_tx = [project_id = ctx.project_id, credential_id = c->spec.secret_credential_id](store::catalog_tx& tx) {
    return check_ref(tx, project_id, store::kind_credential, credential_id, "secret_credential_id");
  };
  co_return std::move(out);
}

boost::asio::awaitable<result<new_object>> create_rule(const create_context& ctx, std::string body) {
  auto r = notify::parse_rule_request(body);
  if (!r) co_return std::move(r).error();
  auto out = blank_object(ctx, store::kind_rule);
  out.obj.name = notify::rule_object_name(r->event, r->channel_id);  // one rule per event and channel
  out.obj.doc = notify::rule_doc_json(*r);
  out.obj.ref_id = r->channel_id;
  const bool templated = !r->template_override.is_null();
  out.check_in_tx = [project_id = ctx.project_id, channel_id = r->channel_id, templated](store::catalog_tx& tx) -> result<void> {
    if (auto ok = check_ref(tx, project_id, store::kind_channel, channel_id, "channel_id"); !ok) return ok;
    if (!templated) return {};
    // A rule with a template: its channel must render one.
    auto ch = tx.get_object(project_id, store::kind_channel, channel_id);
    if (!ch) return std::move(ch).error();
    auto spec = notify::parse_channel_doc(*ch);
    if (spec && spec->kind == notify::channel_kind::webhook)
      return make_error(errc::invalid_argument,
                        fmt::format("channel {} is a webhook channel: it receives the event as JSON, so a template "
                                    "has nothing to shape (templates are for email, slack and teams channels)",
                                    channel_id),
                        "template");
    return {};
  };
  co_return std::move(out);
}

}  // namespace detail

op<json::value> service::test_channel(std::string project_id, std::string channel_id) {
  notify::notify_options opt;
  opt.key = key_;
  opt.cpu = cpu_;
  opt.ca_pem = ca_pem_;
  auto r = co_await notify::send_test_message(st_, project_id, channel_id, std::move(opt), clock_.now_ms());
  if (!r) co_return std::move(r).error();
  co_return json::value(notify::send_report_view(*r, channel_id));
}

}  // namespace certfleet::service
