#pragma once
// What the files of the service share (private to src/service): service.cpp (catalog
// objects), service_distributions.cpp, service_certificates.cpp, service_checks.cpp.
#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "certfleet/catalog/catalog.hpp"
#include "certfleet/core/clock.hpp"
#include "certfleet/service/service.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/delivery/ssh.hpp"
#include "certfleet/net/egress.hpp"
#include "certfleet/store/catalog.hpp"
#include "certfleet/store/store.hpp"

namespace certfleet::service::detail {

// The stored ssh_allow_list, for a route that contacts an SSH target (the create check,
// scan-host-key): a value that no longer parses is the caller's error (a job refuses every
// destination instead).
boost::asio::awaitable<result<net::egress_policy>> read_ssh_allow_list(store::store& st);
// `allow` must outlive the options.
delivery::ssh_options ssh_dial_options(boost::asio::thread_pool* cpu, const net::egress_policy& allow);
error no_key();
boost::json::object page_view(boost::json::array items, int page, int page_size, std::int64_t total);
boost::json::object result_view(const store::target_result& r);
// A kind's missing referenced object is bad input naming the field that referenced it. A webhook
// signing secret must be a password credential: anything else would send unsigned requests.
result<void> check_ref(store::catalog_read& rd, const std::string& project, std::string_view kind,
                       const std::string& id, std::string field);
// A new target's stored document after the rules its body alone cannot say (create and import
// alike): a file target needs a system-admin requester (forbidden) and paths under `base_dirs`,
// and is stamped with who granted it; an SSH target without ssh.auth logs in by key.
result<std::string> admit_target(catalog::new_target& t, const requester& who, const std::vector<std::string>& base_dirs);
// The target's credential exists in the project and suits it (an SSH login by key needs an
// ssh_key credential, by password a password one), each refusal naming the target's field.
result<void> check_target_credential(store::catalog_read& rd, const std::string& project_id,
                                     const catalog::target_spec& spec);
result<void> check_target_credential(store::catalog_read& rd, const std::string& project_id, delivery::module_kind module,
                                     const std::string& credential_id, delivery::ssh_auth auth);
// Enqueues a certificate's ACME job (issue, renew, revoke) inside the caller's transaction, with
// the job type's attempts from the type table.
result<store::enqueue_outcome> enqueue_certificate_job(store::catalog_tx& tx, const std::string& project_id,
                                                       const std::string& certificate_id, std::string_view type,
                                                       std::string payload, std::string key, const std::string& actor,
                                                       time_ms now);

// What a kind's creator gets from POST …/<kind>: the store, the KEK (may be null), the CPU pool,
// the CA bundle outbound TLS trusts, who asks, and the new object's id, project and time.
struct create_context {
  store::store& st;
  const kek* key;
  boost::asio::thread_pool* cpu;
  const std::string& ca_pem;
  const requester& who;
  std::string id;
  std::string project_id;
  time_ms now;
};
// A new object, and what its transaction checks before inserting it (that the objects it names
// exist and suit it, read in the same transaction): empty when nothing.
struct new_object {
  store::catalog_object obj;
  std::function<result<void>(store::catalog_tx&)> check_in_tx;
};
// One kind's creator: the body parsed and checked (a refusal names its field; nothing is stored),
// whatever must be asked of the outside world before storing (an ACME CA, an AD CS policy, an SSH
// destination's allow-list), and the object made. service::create runs one by the kind's row
// (service.cpp) and stores the object; each lives in its resource's file.
using creator = boost::asio::awaitable<result<new_object>> (*)(const create_context& c, std::string body);
// A new object of `kind` with the context's id, project and time, for a creator to fill.
new_object blank_object(const create_context& c, std::string_view kind);

// service_certificates.cpp
boost::asio::awaitable<result<new_object>> create_certificate(const create_context& c, std::string body);
// service_acme.cpp: registration is synchronous (DESIGN §9): the CA's refusal is the answer.
boost::asio::awaitable<result<new_object>> create_acme_account(const create_context& c, std::string body);
boost::asio::awaitable<result<new_object>> create_dns_provider(const create_context& c, std::string body);
// service_msca.cpp: the CA's policy is fetched with its credentials, so a wrong URL, password or
// client certificate is the answer.
boost::asio::awaitable<result<new_object>> create_msca_ca(const create_context& c, std::string body);
// service_targets.cpp
boost::asio::awaitable<result<new_object>> create_credential(const create_context& c, std::string body);
boost::asio::awaitable<result<new_object>> create_target(const create_context& c, std::string body);
// service_notify.cpp
boost::asio::awaitable<result<new_object>> create_channel(const create_context& c, std::string body);
boost::asio::awaitable<result<new_object>> create_rule(const create_context& c, std::string body);
// service_checks.cpp
boost::asio::awaitable<result<new_object>> create_discovery_source(const create_context& c, std::string body);
boost::asio::awaitable<result<new_object>> create_domain(const create_context& c, std::string body);

}  // namespace certfleet::service::detail
