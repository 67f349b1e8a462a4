#pragma once
// What the ACME job handlers share (private to src/lifecycle): acme_jobs.cpp (the registration of
// all, account registration), acme_order_job.cpp and acme_dns_steps.cpp (issue, renew,
// validate_manual_dns), acme_revoke.cpp, acme_cleanup.cpp, acme_renewal.cpp (the sweep).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <optional>
#include <string>

#include "certfleet/acme/client.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/queue/handler.hpp"
#include "certfleet/queue/make_job.hpp"

namespace certfleet::lifecycle::detail {

// A failed ACME step as the job's outcome: permanent when the CA said so, else retried after the
// CA's Retry-After (capped).
queue::outcome from_failure(const acme::failure& f);
// acme_allow_list: the one egress policy of every CA URL and DNS-01 server (docs/acme.md).
net::egress_policy acme_allow_list_of(const settings_map& settings);
// The client for an account: its directory, trust anchors, the egress policy, the job's log.
acme::client_options client_options_for(const acme_account_spec& account, const acme_job_options& opt,
                                        queue::job_context& ctx, const net::egress_policy& allow);

// CPU work (key generation) on the pool; back on the caller's executor after.
template <class T, class F>
boost::asio::awaitable<T> on_cpu(boost::asio::thread_pool* cpu, F fn) {
  if (!cpu) co_return fn();
  // co_spawn's value must be default-constructible; result<T> is not.
  auto out = co_await boost::asio::co_spawn(
      cpu->get_executor(), [fn = std::move(fn)]() -> boost::asio::awaitable<std::optional<T>> { co_return fn(); },
      boost::asio::use_awaitable);
  co_return std::move(*out);
}

// An account's CA bundle with the process's extra trust anchors (tests).
std::string trust_anchors(const std::string& account_ca, const std::string& extra);

// A CA's Retry-After is honoured up to this (the queue's backoff takes over beyond).
inline constexpr std::int64_t retry_after_cap_s = 3600;

// cleanup_dns for one attempt's records (key cleanup_dns:<job>:<fence>).
queue::enqueue_request cleanup_job(std::string project_id, const std::string& job_id, std::int64_t fence,
                                   std::string_view trigger);

// The revoke_certificate and cleanup_dns handlers.
boost::asio::awaitable<queue::outcome> run_revoke(queue::job_context& ctx, const acme_job_options& opt);
boost::asio::awaitable<queue::outcome> run_cleanup(queue::job_context& ctx, const acme_job_options& opt);

}  // namespace certfleet::lifecycle::detail
