#include "server_state.hpp"

#include "certfleet/store/settings.hpp"

#include <spdlog/spdlog.h>

namespace certfleet::api {

server_state::server_state(boost::asio::any_io_executor e, store::store& s, queue::queue_service& q,
                           const clock_source& c, server_options o)
    : ex(e), st(s), queue(q), clock(c), opt(std::move(o)), hub(e, s, opt.log_poll_interval, opt.log_coalesce),
      catalog(s, q, c, opt.key, opt.cpu, opt.ca_pem) {}

void server_state::remember_token_name(const store::token_record& t) {
  if (token_names.size() >= 100'000) token_names.clear();
  token_names.try_emplace(t.id, t.name.empty() ? "token " + t.id.substr(0, 8) : t.name);
}

boost::asio::awaitable<std::int64_t> server_state::setting_int(std::string_view name) {
  if (!settings_valid || steady::now() - settings_loaded > opt.settings_cache_ttl) {
    auto r = co_await timed("system_settings", st.auth().system_settings());
    if (r) {
      system_settings = store::to_settings_map(*r);
      settings_loaded = steady::now();
      settings_valid = true;
    } else {
      spdlog::warn("reading the system settings failed: {}", r.error().message);
    }
  }
  co_return system_settings.integer(name);
}

boost::asio::awaitable<void> server_state::audit(const caller& c, std::string_view action, std::string_view object,
                                                 std::string_view outcome, std::string_view detail) {
  store::audit_entry e;
  e.project_id = c.project ? c.project->id : (c.token ? c.token->project_id : std::string());
  e.actor = c.token ? "token:" + c.token->id : "anonymous";
  e.action = std::string(action);
  e.object = std::string(object);
  e.outcome = std::string(outcome);
  e.detail = std::string(detail);
  e.at = clock.now_ms();
  if (opt.audit_sink) opt.audit_sink->write(e);
  auto r = co_await timed("audit_append", st.auth().append_audit(std::move(e)));
  if (!r) spdlog::error("audit entry not stored: {}", r.error().message);
}

}  // namespace certfleet::api
