#pragma once
// What the ACME job handlers share (private to src/lifecycle): acme_jobs.cpp (issue, renew,
// validate_manual_dns, and the registration of all), acme_revoke.cpp, acme_cleanup.cpp.
#include <boost/asio/awaitable.hpp>

#include "certfleet/acme/client.hpp"
#include "certfleet/core/settings.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/queue/handler.hpp"

namespace certfleet::lifecycle::detail {

// A failed ACME step as the job's outcome: permanent when the CA said so, else retried after the
// CA's Retry-After (capped).
queue::outcome from_failure(const acme::failure& f);
// acme_allow_list: the one egress policy of every CA URL and DNS-01 server (docs/acme.md).
net::egress_policy acme_allow_list_of(const settings_map& settings);
// The client for an account: its directory, trust anchors, the egress policy, the job's log.
acme::client_options client_options_for(const acme_account_spec& account, const acme_job_options& opt,
                                        queue::job_context& ctx, const net::egress_policy& allow);

// The revoke_certificate and cleanup_dns handlers.
boost::asio::awaitable<queue::outcome> run_revoke(queue::job_context& ctx, const acme_job_options& opt);
boost::asio::awaitable<queue::outcome> run_cleanup(queue::job_context& ctx, const acme_job_options& opt);

}  // namespace certfleet::lifecycle::detail
