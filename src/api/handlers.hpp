#pragma once
// The route handlers: one function per route_id, in one file per resource (jobs, catalog,
// distributions, projects, admin). A handler takes our own request and reply types, not Beast's:
// the HTTP session parses, dispatch.cpp authorizes and picks the handler by the route's id.
#include "certfleet/api/router.hpp"
#include "certfleet/store/job.hpp"
#include "auth.hpp"
#include "reply.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace certfleet::api {

struct server_state;

// One authorized call of a route.
struct route_call {
  const caller& who;
  const route_match& match;  // match.route is the row; match.id is a valid object id when the pattern has {id}
  const query_params& query;
  const std::string& body;
  const credentials& cred;  // the session routes read the cookie themselves
  std::string_view content_type;  // one of body_media_types(route), checked by the session
};

using route_handler = boost::asio::awaitable<reply> (*)(server_state&, const route_call&);

// The request as dispatch needs it, read from the HTTP message by the session.
struct request_view {
  std::string_view method;
  std::string_view target;
  credentials cred;
  const std::string& body;
  bool health_only = false;  // from the metrics listener: /healthz, /readyz and /metrics only
  std::string_view content_type = {};
};

// Routes, authorizes, audits a refusal and calls the route's handler. `route_name` gets the
// matched pattern (for the request metrics).
boost::asio::awaitable<reply> dispatch(server_state& s, const request_view& req, std::string& route_name);

// admin_routes.cpp: health, metrics, settings, audit.
boost::asio::awaitable<reply> get_healthz(server_state&, const route_call&);
boost::asio::awaitable<reply> get_readyz(server_state&, const route_call&);
boost::asio::awaitable<reply> get_metrics(server_state&, const route_call&);
boost::asio::awaitable<reply> get_settings(server_state&, const route_call&);
boost::asio::awaitable<reply> put_settings(server_state&, const route_call&);
boost::asio::awaitable<reply> get_settings_schema(server_state&, const route_call&);
boost::asio::awaitable<reply> list_workers(server_state&, const route_call&);
boost::asio::awaitable<reply> get_openapi(server_state&, const route_call&);
boost::asio::awaitable<reply> list_audit(server_state&, const route_call&);

// session_routes.cpp: the browser's sign-in (DESIGN §8).
boost::asio::awaitable<reply> create_session(server_state&, const route_call&);
boost::asio::awaitable<reply> get_session(server_state&, const route_call&);
boost::asio::awaitable<reply> delete_session(server_state&, const route_call&);

// ui_routes.cpp: the web UI's pages and assets, for a GET of a path outside the route table
// and outside /api/; nullopt for any other request.
std::optional<reply> serve_ui(const server_state&, std::string_view method, std::string_view path);

// project_routes.cpp
boost::asio::awaitable<reply> list_projects(server_state&, const route_call&);
boost::asio::awaitable<reply> create_project(server_state&, const route_call&);
boost::asio::awaitable<reply> delete_project(server_state&, const route_call&);

// token_routes.cpp: a project's access tokens (issue 35 §3).
boost::asio::awaitable<reply> list_project_tokens(server_state&, const route_call&);
boost::asio::awaitable<reply> create_project_token(server_state&, const route_call&);
boost::asio::awaitable<reply> revoke_project_token(server_state&, const route_call&);

// job_routes.cpp
boost::asio::awaitable<reply> list_jobs(server_state&, const route_call&);
boost::asio::awaitable<reply> enqueue_job(server_state&, const route_call&);
boost::asio::awaitable<reply> get_job(server_state&, const route_call&);
boost::asio::awaitable<reply> retry_job(server_state&, const route_call&);
boost::asio::awaitable<reply> cancel_job(server_state&, const route_call&);
boost::asio::awaitable<reply> validate_job_dns(server_state&, const route_call&);
boost::asio::awaitable<reply> read_job_logs(server_state&, const route_call&);

// catalog_routes.cpp: certificates, credentials, targets, notification channels and rules, by
// the row's object_kind.
boost::asio::awaitable<reply> list_catalog_objects(server_state&, const route_call&);
boost::asio::awaitable<reply> create_catalog_object(server_state&, const route_call&);
boost::asio::awaitable<reply> import_targets(server_state&, const route_call&);
boost::asio::awaitable<reply> get_catalog_object(server_state&, const route_call&);
boost::asio::awaitable<reply> delete_catalog_object(server_state&, const route_call&);
// POST …/certificates/issue (202 {certificate_id, job_id}) and …/certificates/{id}/renew (202 {job_id}).
boost::asio::awaitable<reply> issue_acme_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> enroll_msca_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> get_msca_templates(server_state&, const route_call&);
boost::asio::awaitable<reply> approve_acme_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> reject_acme_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> get_project_settings(server_state&, const route_call&);
boost::asio::awaitable<reply> get_project_settings_schema(server_state&, const route_call&);
boost::asio::awaitable<reply> put_project_settings(server_state&, const route_call&);
boost::asio::awaitable<reply> renew_acme_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> renew_acme_certificates(server_state&, const route_call&);
// POST …/certificates/{id}/revoke {reason?} (202 {job_id}).
boost::asio::awaitable<reply> revoke_acme_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> scan_target_host_key(server_state&, const route_call&);
// POST …/domains/{id}/check (202 {job_id, created}).
boost::asio::awaitable<reply> check_domain(server_state&, const route_call&);
// POST …/discovery-sources/{id}/run (202 {job_id, created}); GET …/discovered-certificates
// (?source=&finding=&page=&page_size=); POST …/discovered-certificates/{id}/import (201).
boost::asio::awaitable<reply> run_discovery_source(server_state&, const route_call&);
boost::asio::awaitable<reply> list_discovered_certificates(server_state&, const route_call&);
boost::asio::awaitable<reply> import_discovered_certificate(server_state&, const route_call&);
boost::asio::awaitable<reply> add_certificate_version(server_state&, const route_call&);
boost::asio::awaitable<reply> test_notification_channel(server_state&, const route_call&);

// distribution_routes.cpp
boost::asio::awaitable<reply> list_distributions(server_state&, const route_call&);
boost::asio::awaitable<reply> create_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> get_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> delete_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> execute_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> rollback_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> retry_failed_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> retry_targets_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> cancel_distribution(server_state&, const route_call&);
boost::asio::awaitable<reply> distribution_results(server_state&, const route_call&);

// job_routes.cpp, shared with dashboard_routes.cpp: the Jobs page's tab counts as the API shows
// them, {all, pending, active, completed, failed, dead, cancelled}.
boost::json::object tab_counts_json(const store::status_counts& c);

// dashboard_routes.cpp
boost::asio::awaitable<reply> get_dashboard(server_state&, const route_call&);

// catalog_routes.cpp, shared with distribution_routes.cpp: the distribution service's answer
// as a reply. Times it (metric "<kind>_<verb>", "<kind>_read" for an empty verb) and audits
// "<kind>.<verb>" when the route changes state.
boost::asio::awaitable<reply> catalog_answer(server_state& s, const route_call& call, std::string_view verb,
                                             unsigned ok_status, result<boost::json::value> r,
                                             std::chrono::steady_clock::time_point t0);

}  // namespace certfleet::api
