// The OpenAPI document (openapi.hpp) assembled from the route table: paths and operations, each
// route's success and error answers, the shared components. The schemas it is made of are
// openapi_schemas.cpp's.
#include "certfleet/api/openapi.hpp"

#include "certfleet/api/router.hpp"
#include "certfleet/api/requests.hpp"
#include "certfleet/core/errc_table.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <map>
#include <vector>

#include "openapi_schemas.hpp"

namespace certfleet::api {

namespace json = boost::json;

using namespace detail;

namespace {

// The items whose lists answer the shared page envelope (<item>Page).
constexpr std::string_view paged_items[] = {"Certificate",         "Credential",       "Target",     "Distribution",
                                            "NotificationChannel", "NotificationRule", "AcmeAccount", "DnsProvider",
                                            "Domain",              "DiscoverySource",  "DiscoveredCertificate", "MscaCa"};

std::string_view role_name(access a) {
  switch (a) {
    case access::none: return "none";
    case access::any_token: return "any_token";
    case access::viewer: return "viewer";
    case access::operator_: return "operator";
    case access::admin: return "admin";
    case access::owner: return "owner";
    case access::system_admin: return "system_admin";
  }
  return "none";
}

// The error answers, one component each; a route lists those its row makes possible
// (route_errors), and `default` covers the rest (431 from the session, a 500 bug).
struct error_status {
  unsigned status;
  std::string_view name;
  std::string_view description;
};
constexpr error_status error_statuses[] = {
    {400, "BadRequest", "Bad input: `field` names the member, query parameter or header at fault; nothing changed"},
    {401, "Unauthorized", "No valid token or session (or, for sign-in, a token that is not valid)"},
    {403, "Forbidden", "The token's role is below this route's x-certfleet-role, or a session change lacks X-CSRF-Token"},
    {404, "NotFound", "No such project or object, or one the token cannot see"},
    {405, "MethodNotAllowed", "The path exists, not with this method; Allow lists the methods it has"},
    {409, "Conflict", "The object's state does not allow it, or the name is taken; `message` says which"},
    {413, "PayloadTooLarge", "The body is larger than 1 MiB (64 MiB for POST …/targets:import)"},
    {415, "UnsupportedMediaType", "The body is not `application/json` (Content-Type must say so; POST …/targets:import takes application/x-ndjson or text/csv)"},
    {429, "TooManyRequests", "Rate limited (job_retry_per_minute): Retry-After says when to try again"},
    {502, "BadGateway", "The peer this route talks to (an SSH server) did not answer"},
    {503, "ServiceUnavailable", "The store is busy, the server is shutting down or at its connection limit; Retry-After"},
    {507, "InsufficientStorage", "The store's disk is full: nothing was written"},
};

json::object error_response(std::string_view description) {
  return json::object{{"description", description},
                      {"content", json::object{{"application/json",
                                                json::object{{"schema", json::object{{"$ref", "#/components/schemas/Error"}}}}}}}};
}

// The error statuses a route can answer, from its row: what it reads (body, query, ids), who may
// call it, and whether it changes state.
std::vector<unsigned> route_errors(const route_def& r) {
  const bool has_p = r.pattern.find("{p}") != std::string_view::npos;
  const bool has_id = r.pattern.find("{id}") != std::string_view::npos;
  const bool sign_in = r.id == route_id::session_create;
  const bool takes_body = !r.body.empty() || r.method == "POST" || r.method == "PUT";
  std::vector<unsigned> out;
  if (takes_body || has_p || has_id || r.websocket || !route_query_params(r.id).empty()) out.push_back(400);
  if (r.need != access::none || sign_in) out.push_back(401);
  if ((r.need != access::none && r.need != access::any_token) || (r.changes_state && r.need != access::none))
    out.push_back(403);
  if (has_p || has_id) out.push_back(404);
  out.push_back(405);
  if (r.changes_state && !sign_in && r.id != route_id::session_delete) out.push_back(409);
  if (takes_body || sign_in) {
    out.push_back(413);
    out.push_back(415);
  }
  if (r.id == route_id::job_retry || r.id == route_id::distribution_retry_failed) out.push_back(429);
  if (r.id == route_id::target_scan_host_key) out.push_back(502);
  if (r.need != access::none || r.id == route_id::readyz) out.push_back(503);
  if (r.changes_state) out.push_back(507);
  return out;
}

json::object json_content(json::value schema) {
  return json::object{{"application/json", json::object{{"schema", std::move(schema)}}}};
}

json::object ref(std::string_view name) { return json::object{{"$ref", fmt::format("#/components/schemas/{}", name)}}; }

// Each route's success answers. A switch without default: a new route draws -Wswitch here, and
// api_openapi.operations_have_ids_answers_and_errors fails until its answer is written.
struct success {
  unsigned status;
  std::string_view description;
  std::string_view schema;        // a components/schemas name; empty: no body
  std::string_view content_type = "application/json";
};
std::vector<success> success_of(route_id id) {
  using R = route_id;
  switch (id) {
    case R::healthz: return {{200, "The process runs", "Health"}};
    case R::readyz: return {{200, "The store answers", "Ready"}};
    case R::metrics: return {{200, "Prometheus text exposition format 0.0.4", "", "text/plain"}};
    case R::session_create: return {{201, "Signed in: the session cookie is set (HttpOnly, SameSite=Strict)", "Session"}};
    case R::session_get: return {{200, "The current sign-in", "Session"}};
    case R::session_delete: return {{204, "Signed out: the cookie is cleared", "", ""}};
    case R::projects: return {{200, "The projects the token can see", "ProjectList"}};
    case R::project_create: return {{201, "Created", "Project"}};
    case R::project_delete: return {{200, "Deleted", "ProjectDeleted"}};
    case R::dashboard: return {{200, "What needs an operator in this project, now", "Dashboard"}};
    case R::jobs_list: return {{200, "One page of jobs with the exact count of each tab", "JobPage"}};
    case R::jobs_enqueue:
      return {{201, "Enqueued", "Job"}, {200, "The idempotency key named an existing job: that job (created: false)", "Job"}};
    case R::job_get: return {{200, "The job", "Job"}};
    case R::job_retry: return {{200, "Pending again, attempts reset", "Job"}};
    case R::job_cancel:
      return {{200, "Cancelled (it was waiting)", "Job"}, {202, "Cancel requested: the running attempt stops at its next step", "Job"}};
    case R::job_validate_dns: return {{202, "validate_manual_dns enqueued (or the one already enqueued)", "JobAccepted"}};
    case R::job_logs: return {{200, "Lines after the cursor", "LogPage"}};
    case R::job_log_stream: return {};
    case R::audit: return {{200, "One page of audit entries, newest first", "AuditPage"}};
    case R::tokens_list: return {{200, "The project's tokens", "TokenList"}};
    case R::token_create: return {{201, "Created: the answer holds the token's text, once", "TokenCreated"}};
    case R::token_revoke: return {{200, "Revoked", "Token"}};
    case R::settings_get: return {{200, "Every system setting's value in effect", "Settings"}};
    case R::settings_put: return {{200, "Every system setting's value in effect, after the change", "Settings"}};
    case R::settings_schema: return {{200, "The settings table", "SettingsSchema"}};
    case R::workers_list: return {{200, "The worker registry", "WorkerList"}};
    case R::openapi: return {{200, "This document", "OpenApiDocument"}};
    case R::certificates_list: return {{200, "One page of certificates", "CertificatePage"}};
    case R::certificate_create:
    case R::certificate_version_create:
    case R::discovered_certificate_import: return {{201, "The certificate", "Certificate"}};
    case R::certificate_get: return {{200, "The certificate", "Certificate"}};
    case R::certificate_issue: return {{202, "The certificate is created and its issue_certificate job enqueued", "IssueAccepted"}};
    case R::certificate_enroll:
      return {{202, "The certificate is created and its msca_issue_certificate job enqueued", "IssueAccepted"}};
    case R::certificates_renew:
      return {{202, "One renew_certificate per certificate (created: false where one was already queued)", "BulkRenewAccepted"}};
    case R::certificate_renew: return {{202, "renew_certificate enqueued (or the one already enqueued for this version)", "JobAccepted"}};
    case R::certificate_approve: return {{202, "Approved: the issue_certificate job is enqueued", "IssueAccepted"}};
    case R::certificate_reject: return {{200, "Rejected: the certificate, status rejected, nothing issued", "Certificate"}};
    case R::project_settings_get: return {{200, "Every project setting's value", "ProjectSettings"}};
    case R::project_settings_schema: return {{200, "The project settings of the settings table", "SettingsSchema"}};
    case R::project_settings_put: return {{200, "Every project setting's value, after the change", "ProjectSettings"}};
    case R::certificate_revoke: return {{202, "revoke_certificate enqueued (or the one already enqueued)", "JobAccepted"}};
    case R::credentials_list: return {{200, "One page of credentials", "CredentialPage"}};
    case R::credential_create: return {{201, "Stored and sealed", "Credential"}};
    case R::credential_get: return {{200, "The credential", "Credential"}};
    case R::targets_list: return {{200, "One page of targets", "TargetPage"}};
    case R::target_create: return {{201, "Created", "Target"}};
    case R::targets_import: return {{201, "Every row stored, in one transaction", "TargetImport"}};
    case R::target_get: return {{200, "The target", "Target"}};
    case R::target_scan_host_key: return {{200, "The host keys the server offered, to pin after checking", "HostKeyScan"}};
    case R::channels_list: return {{200, "One page of notification channels", "NotificationChannelPage"}};
    case R::channel_create: return {{201, "Created", "NotificationChannel"}};
    case R::channel_get: return {{200, "The channel", "NotificationChannel"}};
    case R::channel_test: return {{200, "What the channel's peer answered", "ChannelTest"}};
    case R::rules_list: return {{200, "One page of notification rules", "NotificationRulePage"}};
    case R::rule_create: return {{201, "Created", "NotificationRule"}};
    case R::rule_get: return {{200, "The rule", "NotificationRule"}};
    case R::acme_accounts_list: return {{200, "One page of ACME accounts", "AcmeAccountPage"}};
    case R::msca_cas_list: return {{200, "One page of AD CS CAs", "MscaCaPage"}};
    case R::msca_ca_create: return {{201, "Its policy fetched with its credentials; stored", "MscaCa"}};
    case R::msca_ca_get: return {{200, "The CA", "MscaCa"}};
    case R::msca_ca_templates: return {{200, "The CA's templates", "MscaTemplates"}};
    case R::acme_account_create: return {{201, "Registered at the CA", "AcmeAccount"}};
    case R::acme_account_get: return {{200, "The account", "AcmeAccount"}};
    case R::dns_providers_list: return {{200, "One page of DNS providers", "DnsProviderPage"}};
    case R::dns_provider_create: return {{201, "Created", "DnsProvider"}};
    case R::dns_provider_get: return {{200, "The provider", "DnsProvider"}};
    case R::domains_list: return {{200, "One page of watched domains", "DomainPage"}};
    case R::domain_create: return {{201, "Watched; its first lookup is enqueued", "Domain"}};
    case R::domain_get: return {{200, "The domain", "Domain"}};
    case R::domain_check: return {{202, "domain_expiration_check enqueued", "JobAccepted"}};
    case R::discovery_sources_list: return {{200, "One page of discovery sources", "DiscoverySourcePage"}};
    case R::discovery_source_create: return {{201, "Created", "DiscoverySource"}};
    case R::discovery_source_get: return {{200, "The source", "DiscoverySource"}};
    case R::discovery_source_run: return {{202, "discovery_execute enqueued", "JobAccepted"}};
    case R::discovered_certificates_list: return {{200, "One page of discovered certificates", "DiscoveredCertificatePage"}};
    case R::discovered_certificate_get: return {{200, "The discovered certificate", "DiscoveredCertificate"}};
    case R::certificate_delete:
    case R::credential_delete:
    case R::target_delete:
    case R::channel_delete:
    case R::rule_delete:
    case R::acme_account_delete:
    case R::msca_ca_delete:
    case R::dns_provider_delete:
    case R::domain_delete:
    case R::discovery_source_delete:
    case R::distribution_delete: return {{200, "Deleted", "Deleted"}};
    case R::distributions_list: return {{200, "One page of distributions", "DistributionPage"}};
    case R::distribution_create: return {{201, "Created", "Distribution"}};
    case R::distribution_get: return {{200, "The distribution with its current run", "Distribution"}};
    case R::distribution_execute: return {{202, "A new run is open; its jobs are enqueued", "RunAccepted"}};
    case R::distribution_rollback: return {{202, "A rollback run is open", "RunAccepted"}};
    case R::distribution_retry_failed: return {{202, "The failed targets run again", "RunAccepted"}};
    case R::distribution_retry_targets: return {{202, "The targets run again in the last run, which is running again", "RedriveAccepted"}};
    case R::distribution_cancel: return {{202, "Cancel requested: waiting jobs are cancelled, running ones asked to stop", "RunCancel"}};
    case R::distribution_results: return {{200, "One page of per-target results of a run", "ResultPage"}};
  }
  return {};
}

json::object operation(const route_def& r) {
  json::object op{{"operationId", r.name}, {"summary", r.summary}};
  op["x-certfleet-role"] = role_name(r.need);
  if (r.need == access::none) op["security"] = json::array{};
  std::string tag = "system";
  if (r.pattern.starts_with("/api/v1/projects/{p}/")) {
    auto rest = r.pattern.substr(std::string_view("/api/v1/projects/{p}/").size());
    tag = std::string(rest.substr(0, rest.find('/')));
  } else if (r.pattern.starts_with("/api/v1/")) {
    auto rest = r.pattern.substr(std::string_view("/api/v1/").size());
    tag = std::string(rest.substr(0, rest.find('/')));
    if (tag == "openapi.json") tag = "system";
  }
  op["tags"] = json::array{json::value(tag)};

  json::array params;
  for (const auto& q : route_query_params(r.id))
    params.push_back(json::object{{"name", q.name},
                                  {"in", "query"},
                                  {"required", false},
                                  {"description", q.description},
                                  {"schema", json::parse(q.schema)}});
  if (!params.empty()) op["parameters"] = std::move(params);

  json::object responses;
  if (r.websocket) {
    op["description"] =
        "A WebSocket (send an Upgrade request): text messages {type: \"lines\", lines: […]} with the backlog after "
        "the `after` cursor, then live lines, then {type: \"end\", status} when the job is terminal.";
    responses["101"] = json::object{{"description", "Switching to the WebSocket"}};
  } else {
    for (const auto& ok : success_of(r.id)) {
      json::object answer{{"description", ok.description}};
      if (ok.content_type == "application/json") answer["content"] = json_content(ref(ok.schema));
      else if (!ok.content_type.empty())
        answer["content"] = json::object{{ok.content_type, json::object{{"schema", json::object{{"type", "string"}}}}}};
      responses[std::to_string(ok.status)] = std::move(answer);
    }
  }
  for (auto status : route_errors(r))
    for (const auto& e : error_statuses)
      if (e.status == status)
        responses[std::to_string(status)] = json::object{{"$ref", fmt::format("#/components/responses/{}", e.name)}};
  responses["default"] = error_response("Any other error (431 header too large; 500, a bug: see the server log)");
  op["responses"] = std::move(responses);

  if (!r.body.empty()) {
    // A body with required members must be sent; one without (rollback's) may be left out.
    const auto schema = schema_of(r.body);
    const bool required = schema.is_object() && schema.as_object().contains("required");
    json::object content;
    for (auto media : body_media_types(r))
      content[media] = json::object{{"schema", json::object{{"$ref", fmt::format("#/components/schemas/{}_body", r.body)}}}};
    op["requestBody"] = json::object{{"required", required || takes_bulk_body(r)}, {"content", std::move(content)}};
  }
  return op;
}

json::array path_parameters(std::string_view pattern) {
  json::array params;
  if (pattern.find("{p}") != std::string_view::npos)
    params.push_back(json::object{{"name", "p"},
                                  {"in", "path"},
                                  {"required", true},
                                  {"description", "The project's name (the first one is `default`)"},
                                  {"schema", json::object{{"$ref", "#/components/schemas/ProjectName"}}}});
  if (pattern.find("{id}") != std::string_view::npos)
    params.push_back(json::object{{"name", "id"},
                                  {"in", "path"},
                                  {"required", true},
                                  {"description", "The object's id"},
                                  {"schema", json::object{{"$ref", "#/components/schemas/ObjectId"}}}});
  return params;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

std::string openapi_document(std::string_view version) {
  json::object paths;
  std::map<std::string, json::value, std::less<>> schemas;
  for (const auto& r : all_routes()) {
    auto& item = paths[r.pattern];
    if (!item.is_object()) {
      item = json::object{};
      auto params = path_parameters(r.pattern);
      if (!params.empty()) item.as_object()["parameters"] = std::move(params);
    }
    item.as_object()[lower(r.method)] = operation(r);
    if (!r.body.empty()) schemas[fmt::format("{}_body", r.body)] = schema_of(r.body);
  }
  schemas["ObjectId"] = json::object{{"type", "string"}, {"pattern", "^[0-9a-fA-F]{24}$"}};
  schemas["ProjectName"] = json::object{{"type", "string"}, {"pattern", "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"}};
  schemas["Time"] = json::object{
      {"type", "string"},
      {"format", "date-time"},
      {"description", "Times in answers: RFC 3339, UTC, with milliseconds (2026-11-29T09:05:18.123Z)"}};
  schemas["TimeInput"] = json::object{
      {"description", "A time in a request body: RFC 3339 like answers, or milliseconds since the epoch"},
      {"oneOf", json::array{json::object{{"$ref", "#/components/schemas/Time"}},
                            json::object{{"type", "integer"}, {"minimum", 0}}}}};
  // Error codes: each errc's name (core/errc_table.hpp) and the two the HTTP session answers itself.
  json::array codes;
  for (const auto& row : errc_table)
    if (row.code != errc::ok) codes.emplace_back(row.name);
  codes.emplace_back("method_not_allowed");
  codes.emplace_back("unsupported_media_type");
  schemas["Error"] = json::object{
      {"type", "object"},
      {"required", json::array{"error"}},
      {"additionalProperties", false},
      {"properties",
       json::object{{"error",
                     json::object{{"type", "object"},
                                  {"required", json::array{"code", "message"}},
                                  {"additionalProperties", false},
                                  {"properties",
                                   json::object{{"code", json::object{{"enum", std::move(codes)}}},
                                                {"message", json::object{{"type", "string"}}},
                                                {"field", json::object{{"type", "string"},
                                                                       {"description", "The request member, parameter or header at fault"}}}}}}},
                    {"error_count", json::object{{"type", "integer"},
                                                 {"description", "POST …/targets:import: how many rows are bad"}}},
                    {"errors",
                     json::object{{"type", "array"},
                                  {"description", "POST …/targets:import: the bad rows (the first 100), each by its line (0: the body as a whole)"},
                                  {"items", json::object{{"type", "object"},
                                                         {"required", json::array{"line", "field", "message"}},
                                                         {"properties", json::object{{"line", json::object{{"type", "integer"}}},
                                                                                     {"field", json::object{{"type", "string"}}},
                                                                                     {"message", json::object{{"type", "string"}}}}}}}}}}}};
  for (const auto& rs : all_response_schemas()) schemas[std::string(rs.name)] = json::parse(rs.schema);
  schemas["Settings"] = settings_answer_schema(setting_scope::system);
  schemas["ProjectSettings"] = settings_answer_schema(setting_scope::project);
  // A created token: the Token answer and its text, once (derived, so the two cannot drift).
  {
    auto created = schemas.at("Token").as_object();
    created["required"].as_array().emplace_back("token");
    created["properties"].as_object()["token"] =
        json::object{{"type", "string"}, {"description", "The token's text (cf_…): in this answer only, never again"}};
    schemas["TokenCreated"] = std::move(created);
  }
  // A list's answer: one page of its items, the envelope every list shares.
  for (std::string_view item : paged_items)
    schemas[fmt::format("{}Page", item)] = json::object{
        {"type", "object"},
        {"required", json::array{"items", "page", "page_size", "total"}},
        {"properties", json::object{{"items", json::object{{"type", "array"}, {"items", ref(item)}}},
                                    {"page", json::object{{"type", "integer"}}},
                                    {"page_size", json::object{{"type", "integer"}}},
                                    {"total", json::object{{"type", "integer"}}}}}};
  // The discovered certificates' page also lists the findings a filter may name.
  {
    auto& page = schemas["DiscoveredCertificatePage"].as_object();
    page["required"].as_array().push_back("finding_table");
    page["properties"].as_object()["finding_table"] = json::object{
        {"type", "array"},
        {"description", "Every finding a filter may name, in the table's order"},
        {"items", json::object{{"type", "object"},
                               {"required", json::array{"name", "severity", "text"}},
                               {"properties", json::object{{"name", json::object{{"type", "string"}}},
                                                           {"severity", json::object{{"type", "string"}, {"enum", json::array{"critical", "warning"}}}},
                                                           {"text", json::object{{"type", "string"}}}}}}}};
  }
  json::object error_responses;
  for (const auto& e : error_statuses) error_responses[e.name] = error_response(e.description);
  json::object schema_obj;
  for (auto& [k, v] : schemas) schema_obj[k] = std::move(v);

  json::object doc{
      {"openapi", "3.1.0"},
      {"info",
       json::object{
           {"title", "certfleet API"},
           {"version", version},
           {"description",
            "Durable jobs and certificate distribution (docs/api.md). Times: every time in an answer is an RFC 3339 "
            "UTC string with milliseconds (2026-11-29T09:05:18.123Z); a request body may give a time that way or "
            "as milliseconds since the epoch. Authentication: `Authorization: Bearer <token>`, or the web UI's "
            "session cookie with `X-CSRF-Token` on changes; each operation's x-certfleet-role is the least role "
            "it needs in the project (any_token: any valid token; system_admin: a --system token). Errors: "
            "{\"error\": {\"code\", \"message\", \"field\"?}}. Every response carries X-Request-Id (the "
            "client's, when it sent 1-64 characters of [A-Za-z0-9._-]); the server's log lines name it."}}},
      {"servers", json::array{json::object{{"url", "/"}}}},
      {"security", json::array{json::object{{"bearer", json::array{}}}, json::object{{"session", json::array{}}}}},
      {"paths", std::move(paths)},
      {"components",
       json::object{{"schemas", std::move(schema_obj)},
                    {"responses", std::move(error_responses)},
                    {"securitySchemes",
                     json::object{{"bearer", json::object{{"type", "http"}, {"scheme", "bearer"}}},
                                  {"session", json::object{{"type", "apiKey"},
                                                           {"in", "cookie"},
                                                           {"name", "certfleet_session"}}}}}}}};
  return json::serialize(doc);
}

}  // namespace certfleet::api
