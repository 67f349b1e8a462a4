// The AD CS enrollment policy (msca_jobs.hpp): one GetPolicies with a CA's credentials, a refresh
// kept on the CA (the API's ?refresh=1 and the msca_policy sweep), the sweep itself; and the
// settings the AD CS jobs read.
#include "certfleet/lifecycle/msca_jobs.hpp"

#include "lifecycle/msca_client.hpp"
#include "lifecycle/msca_common.hpp"

#include "certfleet/store/settings.hpp"

#include <fmt/format.h>

#include <limits>

namespace certfleet::lifecycle {

namespace asio = boost::asio;
using detail::msca_connection;
using detail::policy_fresh;
using detail::read_msca_settings;
using msca::failure_class;

namespace detail {

asio::awaitable<msca_settings> read_msca_settings(store::store& st) {
  auto s = co_await store::read_settings(st);
  msca_settings out;
  // The settings table validates the list; a value that no longer parses refuses everything.
  if (auto p = net::parse_egress_allow_list(s.text("msca_allow_list"), "msca_allow_list")) out.allow = std::move(*p);
  out.timeout = std::chrono::seconds(s.integer("msca_timeout_s"));
  out.poll_first_s = s.integer("msca_poll_first_delay_s");
  out.poll_max_s = s.integer("msca_poll_max_delay_s");
  out.give_up_h = s.integer("msca_poll_give_up_h");
  co_return out;
}

bool policy_fresh(const msca_cached_policy& p, time_ms now) {
  const std::int64_t hours = p.next_update_hours > 0 ? p.next_update_hours : 8;
  return p.fetched_at > 0 && now - p.fetched_at < hours * 3'600'000;
}

}  // namespace detail

asio::awaitable<result<msca_cached_policy>> fetch_msca_policy(store::store& st, const msca_ca_spec& ca,
                                                             const msca_ca_secret& secret, const msca_job_options& opt,
                                                             time_ms now) {
  auto s = co_await read_msca_settings(st);
  msca_connection c;
  c.ca = &ca;
  c.secret = &secret;
  c.extra_ca_pem = opt.ca_pem;
  c.cpu = opt.cpu;
  c.egress = &s.allow;
  c.timeout = s.timeout;
  auto answer = co_await detail::msca_get_policies(c);
  if (!answer.value) {
    // A refusal of the credentials names the one the operator gave.
    const std::string field = !answer.failure.field.empty()               ? answer.failure.field
                              : answer.failure.cls != failure_class::auth ? "cep_url"
                              : ca.auth_kind == "client_certificate"     ? "auth.cert_pem"
                              : ca.krb_credential == "keytab"            ? "auth.keytab_b64"
                                                                         : "auth.password";
    // The CA refusing the credentials given is a bad field, not a 401: the API's 401 means this
    // caller's own token (clients sign out on it, the audit log records it as anonymous).
    auto e = make_error(answer.failure.permanent ? errc::invalid_argument : errc::timeout, answer.failure.message, field);
    co_return e;
  }
  co_return cache_policy(*answer.value, now);
}

asio::awaitable<result<msca_cached_policy>> refresh_msca_policy(store::store& st, const store::catalog_object& ca,
                                                               const msca_job_options& opt, time_ms now) {
  if (!opt.key) co_return make_error(errc::config_invalid, "no key-encryption key: the CA's secret cannot be opened");
  auto spec = parse_msca_ca_doc(ca);
  if (!spec) co_return std::move(spec).error();
  auto secret = open_msca_ca_secret(*opt.key, ca);
  if (!secret) co_return std::move(secret).error();
  auto policy = co_await fetch_msca_policy(st, *spec, *secret, opt, now);
  if (!policy) co_return std::move(policy).error();
  spec->policy = *policy;
  // Only the policy changes: the rest of the CA as it is now (it may have been edited meanwhile).
  store::tx_fn save = [project = ca.project_id, id = ca.id, fresh = *policy](store::catalog_tx& tx) -> result<void> {
    auto o = tx.get_object(project, store::kind_msca_ca, id);
    if (!o) return std::move(o).error();
    auto current = parse_msca_ca_doc(*o);
    if (!current) return std::move(current).error();
    current->policy = fresh;
    return tx.update_object_doc(id, msca_ca_doc_json(*current));
  };
  if (auto w = co_await st.catalog().transact(std::move(save)); !w) co_return std::move(w).error();
  co_return std::move(*policy);
}

asio::awaitable<result<int>> refresh_stale_msca_policies(
    store::store& st, const clock_source& clock, const msca_job_options& opt,
    std::function<asio::awaitable<void>(std::string level, std::string message)> log) {
  const time_ms now = clock.now_ms();
  store::read_value_fn<std::vector<store::catalog_object>> read = [](store::catalog_read& rd) {
    return rd.objects_by_not_after(store::kind_msca_ca, std::numeric_limits<time_ms>::max(), 100'000);
  };
  auto cas = co_await store::read_value(st.catalog(), std::move(read));
  if (!cas) co_return std::move(cas).error();
  int refreshed = 0;
  for (const auto& ca : *cas) {
    auto spec = parse_msca_ca_doc(ca);
    if (!spec || policy_fresh(spec->policy, now)) continue;
    auto r = co_await refresh_msca_policy(st, ca, opt, now);
    if (r) {
      ++refreshed;
      if (log)
        co_await log("info", fmt::format("msca_policy: CA {} ({}): policy {} fetched again, {} template(s)", ca.name,
                                         ca.id, r->policy_id, r->templates.size()));
    } else if (log) {
      co_await log("warn", fmt::format("msca_policy: CA {} ({}) keeps its cached policy: {}", ca.name, ca.id,
                                       r.error().message));
    }
  }
  co_return refreshed;
}

}  // namespace certfleet::lifecycle
