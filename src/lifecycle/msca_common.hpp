#pragma once
// What the AD CS job, policy and workflow files share (private to src/lifecycle): the workflow's
// steps, the settings the jobs read, the subject in words, the policy's freshness rule.
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/lifecycle/msca_catalog.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/store/store.hpp"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace certfleet::lifecycle::detail {

// DESIGN §13's steps, in order: the job's progress is the step's number (1-based).
inline constexpr std::array<std::string_view, 8> msca_steps{"initialized",      "fetching_policy", "generating_key",
                                                            "submitting",       "pending_approval", "retrieving",
                                                            "storing",          "completed"};

struct msca_settings {
  net::egress_policy allow;
  std::chrono::milliseconds timeout{30000};
  std::int64_t poll_first_s = 60, poll_max_s = 3600, give_up_h = 168;
};

// msca_allow_list, msca_timeout_s and the poll settings, as the store holds them now.
boost::asio::awaitable<msca_settings> read_msca_settings(store::store& st);

// The requested subject, or its DNS names when it has none ("DNS:a, DNS:b").
std::string subject_summary(const catalog::certificate_msca& m);

// A policy older than the CA says to keep it (its nextUpdate, 8 hours when it gives none) is
// fetched again.
bool policy_fresh(const msca_cached_policy& p, time_ms now);

}  // namespace certfleet::lifecycle::detail
