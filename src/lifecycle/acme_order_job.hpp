#pragma once
// The issue_certificate / renew_certificate / validate_manual_dns job (private to src/lifecycle):
// one RFC 8555 order with DNS-01 through a DNS provider. Its steps are acme_order_job.cpp's (the
// account, the order, finalize and store, the manual path) and acme_dns_steps.cpp's (the records:
// where they go, presenting, propagation, removal).
#include "lifecycle/acme_job_common.hpp"

#include "certfleet/acme/client.hpp"
#include "certfleet/acme/dns.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/queue/handler.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::lifecycle::detail {

using namespace std::chrono_literals;

// Waits between propagation checks.
inline constexpr auto propagation_poll = 500ms;
// Each authorization and order poll.
inline constexpr auto acme_poll_limit = std::chrono::milliseconds(120'000);
inline constexpr std::uint32_t challenge_ttl = 60;
// The first validate_manual_dns of a manual order runs this long after the order was prepared
// (the operator's records rarely exist sooner; validate-dns asks again at once).
inline constexpr time_ms manual_first_check_ms = 30'000;

// What one job works with, read in one snapshot.
struct job_inputs {
  store::catalog_object cert, account, provider;
  catalog::certificate_doc doc;
  acme_account_spec account_spec;
  dns_provider_spec provider_spec;
};

struct presented_record {
  std::string id;  // its store::dns_record
  std::string fqdn, value;
};

class acme_job {
 public:
  // issue_certificate, renew_certificate, or validate_manual_dns (which carries on the order an
  // issue/renew job of a manual provider prepared).
  enum class mode { issue, renew, validate_manual };
  acme_job(queue::job_context& ctx, const acme_job_options& opt, mode m)
      : ctx_(ctx), opt_(opt), mode_(m), renewal_(m == mode::renew) {}

  boost::asio::awaitable<queue::outcome> run();

 private:
  boost::asio::awaitable<void> step(std::string_view name);
  boost::asio::awaitable<result<job_inputs>> load(std::string certificate_id);
  // The directory read and the account's URL known; a failure's outcome otherwise.
  boost::asio::awaitable<std::optional<queue::outcome>> open_account(acme::client& client, const job_inputs& in,
                                                              acme::directory& dir);
  // Everything from the directory to the stored version; records what it presented in presented_.
  // A manual provider's order stops at awaiting_validation instead (hand_to_operator).
  boost::asio::awaitable<queue::outcome> order_and_store(const job_inputs& in, const acme::account_key& akey,
                                                  const dns_provider_handle* provider);
  // From a ready order to the stored version: finalize with a new key, download, store.
  boost::asio::awaitable<queue::outcome> finish_order(const job_inputs& in, acme::client& client, const std::string& order_url);
  boost::asio::awaitable<queue::outcome> hand_to_operator(const job_inputs& in, const std::string& order_url,
                                                   std::vector<catalog::manual_challenge> challenges);
  // validate_manual_dns: the records checked at the provider's check_server, the challenges
  // answered, then finish_order.
  boost::asio::awaitable<queue::outcome> validate_manual(const job_inputs& in, const acme::account_key& akey,
                                                  const std::string& order_job_id);
  boost::asio::awaitable<result<void>> save_manual_statuses(const job_inputs& in, const catalog::manual_order& m);
  boost::asio::awaitable<result<std::vector<std::string>>> manual_check_targets(const job_inputs& in, const std::string& fqdn);
  // The addresses of the authoritative servers of the zone holding `fqdn`, found through the
  // system's resolver (acme_dns_resolver or /etc/resolv.conf); `who` prefixes the log lines.
  boost::asio::awaitable<result<std::vector<std::string>>> zone_servers(const std::string& fqdn, std::string_view who);
  // The system's resolver: acme_dns_resolver, else the first nameserver of /etc/resolv.conf.
  boost::asio::awaitable<result<std::string>> system_resolver();
  // Where the challenge record of `fqdn` goes: the end of a CNAME chain at it (DNS-01
  // delegation), else `fqdn`. A lookup that fails is logged and the name kept.
  boost::asio::awaitable<std::string> delegated_name(const std::string& fqdn);
  dns_call_options call_options();
  boost::asio::awaitable<result<void>> wait_for_propagation(const job_inputs& in);
  boost::asio::awaitable<void> remove_records(const job_inputs& in, const dns_provider_handle& provider);
  boost::asio::awaitable<result<void>> record_presented(const job_inputs& in, const presented_record& r);
  boost::asio::awaitable<void> record_failure(const job_inputs& in, const queue::outcome& o);
  queue::outcome dns_failure(const job_inputs& in, const error& e);

  queue::job_context& ctx_;
  const acme_job_options& opt_;
  mode mode_;
  bool renewal_;
  std::int64_t for_version_ = 0;  // a renewal's payload.version: the version it replaces (0: not given)
  std::vector<presented_record> presented_;
  std::string zone_;  // the zone the records went to
  acme::dns::client_options dns_opts_;
  net::egress_policy allow_;  // acme_allow_list, read at the job's start
  std::chrono::seconds propagation_timeout_{300};
  std::string resolver_;  // acme_dns_resolver ("": /etc/resolv.conf)
};

}  // namespace certfleet::lifecycle::detail
