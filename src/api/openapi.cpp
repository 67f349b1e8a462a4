#include "certfleet/api/openapi.hpp"

#include "certfleet/api/router.hpp"
#include "certfleet/core/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <array>
#include <map>
#include <stdexcept>

namespace certfleet::api {

namespace json = boost::json;

namespace {

// The request bodies, as the parsers accept them (requests.cpp, distribution/catalog.cpp,
// distribution/acme_catalog.cpp, session_routes.cpp). Members the parsers refuse are refused here
// too (additionalProperties: false), so a client generated from this document sends nothing the
// server rejects as unknown. `settings` is not here: it is generated from the settings table.
constexpr std::array<body_schema, 18> bodies{{
    {"session", R"json({"type":"object","required":["token"],"additionalProperties":false,
      "properties":{"token":{"type":"string","description":"An API token (cf_…)"}}})json"},
    {"project", R"json({"type":"object","required":["name"],"additionalProperties":false,
      "properties":{"name":{"$ref":"#/components/schemas/ProjectName"}}})json"},
    {"enqueue", R"json({"type":"object","required":["type"],"additionalProperties":false,
      "properties":{"type":{"type":"string","description":"A user-triggerable job type (noop, the checks, discovery, issue/renew/revoke)"},
        "payload":{"type":"object","description":"The job type's payload"},
        "idempotency_key":{"type":"string","description":"Unique per project: enqueueing it again returns the existing job"},
        "run_at":{"$ref":"#/components/schemas/TimeInput"}}})json"},
    {"certificate", R"json({"type":"object","required":["name","cert_pem","key_pem"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"cert_pem":{"type":"string","description":"The leaf, PEM"},
        "chain_pem":{"type":"string","description":"Intermediates, PEM"},
        "key_pem":{"type":"string","description":"The private key, PEM; sealed at rest, never returned"}}})json"},
    {"certificate_version", R"json({"type":"object","required":["cert_pem","key_pem"],"additionalProperties":false,
      "properties":{"cert_pem":{"type":"string"},"chain_pem":{"type":"string"},"key_pem":{"type":"string"}}})json"},
    {"certificate_issue", R"json({"type":"object","required":["name","domains","acme_account_id","dns_provider_id"],
      "additionalProperties":false,
      "properties":{"name":{"type":"string"},"domains":{"type":"array","items":{"type":"string"},"minItems":1},
        "acme_account_id":{"$ref":"#/components/schemas/ObjectId"},"dns_provider_id":{"$ref":"#/components/schemas/ObjectId"},
        "key_type":{"enum":["ecdsa-p256","ecdsa-p384","rsa-2048","rsa-3072"],"default":"ecdsa-p256"},
        "profile":{"type":"string","description":"An ACME profile the CA offers"},
        "auto_renew":{"type":"boolean","default":true}}})json"},
    {"certificate_revoke", R"json({"type":"object","additionalProperties":false,
      "properties":{"reason":{"type":["string","integer"],
        "description":"An RFC 5280 reason name (keyCompromise, superseded, …) or its code 0-10 (7 is unused); absent: no reason. A bad one: 400 naming reason, with the list"}}})json"},
    {"credential", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["ssh_key","password"]},
        "private_key_pem":{"type":"string","description":"kind ssh_key: an ed25519 or ECDSA key"},
        "passphrase":{"type":"string"},"password":{"type":"string","description":"kind password"}}})json"},
    {"target", R"json({"type":"object","required":["name","module"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"module":{"enum":["ssh","file","webhook"]},
        "ssh":{"type":"object","required":["host","user","host_key","cert_path","key_path"],
          "properties":{"host":{"type":"string"},"port":{"type":"integer","minimum":1,"maximum":65535,"default":22},
            "user":{"type":"string"},"credential_id":{"$ref":"#/components/schemas/ObjectId"},
            "host_key":{"type":"string","description":"The pinned host key, \"ssh-ed25519 AAAA…\""},
            "cert_path":{"type":"string"},"key_path":{"type":"string"},"chain_path":{"type":"string"},
            "cert_mode":{"type":"string","default":"0644"},"key_mode":{"type":"string","default":"0600"},
            "owner":{"type":"string"},"sudo":{"type":"boolean","default":false},"post_command":{"type":"string"}}},
        "file":{"type":"object","required":["cert_path","key_path"],
          "properties":{"cert_path":{"type":"string"},"key_path":{"type":"string"},"chain_path":{"type":"string"},
            "post_command":{"type":"string"}}},
        "webhook":{"type":"object","required":["url"],
          "properties":{"url":{"type":"string","format":"uri"},"secret_credential_id":{"$ref":"#/components/schemas/ObjectId"}}},
        "validate":{"type":"object","description":"{tls: {host, port, sni?}} or {remote_hash: true}"}}})json"},
    {"distribution", R"json({"type":"object","required":["name","certificate_id","target_ids"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"certificate_id":{"$ref":"#/components/schemas/ObjectId"},
        "target_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"}},
        "canary":{"type":"boolean","default":false},"failure_tolerance":{"type":"integer","minimum":0,"default":0},
        "fail_fast":{"type":"boolean","default":false},
        "auto_execute":{"type":"boolean","description":"Execute when the certificate gets a new version (default: true for ACME certificates)"}}})json"},
    {"rollback", R"json({"type":"object","additionalProperties":false,
      "properties":{"run_no":{"type":"integer","minimum":1,"description":"The delivery run whose replaced files come back (default: the last one)"}}})json"},
    {"notification_channel", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["webhook","email","slack","teams"]},
        "url":{"type":"string","format":"uri","description":"kind webhook"},
        "secret_credential_id":{"$ref":"#/components/schemas/ObjectId"},
        "email":{"type":"object","description":"kind email: the SMTP server, sender and recipients"},
        "slack":{"type":"object","description":"kind slack"},"teams":{"type":"object","description":"kind teams"}}})json"},
    {"notification_rule", R"json({"type":"object","required":["event","channel_id"],"additionalProperties":false,
      "properties":{"event":{"type":"string","description":"distribution.finished, certificate.expiring, …"},
        "channel_id":{"$ref":"#/components/schemas/ObjectId"},
        "template":{"type":"string","description":"The message text; empty: the event's default"}}})json"},
    {"acme_account", R"json({"type":"object","required":["name","directory_url","terms_agreed"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"directory_url":{"type":"string","format":"uri"},
        "contact_email":{"type":"string"},
        "eab":{"type":"object","required":["kid","hmac_key"],"properties":{"kid":{"type":"string"},"hmac_key":{"type":"string"}}},
        "ca_bundle_pem":{"type":"string"},"terms_agreed":{"const":true}}})json"},
    {"dns_provider", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["rfc2136","manual","exec","httpreq","powerdns"]},
        "rfc2136":{"type":"object","required":["server","tsig_key_name","tsig_secret"],
          "properties":{"server":{"type":"string","description":"host:port"},"zone":{"type":"string"},
            "tsig_key_name":{"type":"string"},"tsig_algorithm":{"type":"string","default":"hmac-sha256"},
            "tsig_secret":{"type":"string"}}},
        "manual":{"type":"object","properties":{"check_server":{"type":"string","description":"host:port"}}},
        "exec":{"type":"object","required":["program"],"additionalProperties":false,"description":"system-admin tokens only",
          "properties":{"program":{"type":"string","description":"absolute path, run as PROGRAM present|cleanup FQDN VALUE"},
            "timeout_s":{"type":"integer","minimum":1,"maximum":600,"default":60},
            "env":{"type":"object","additionalProperties":{"type":"string"},"description":"sealed; passed as environment variables"},
            "check_propagation":{"type":"boolean","default":true}}},
        "httpreq":{"type":"object","required":["endpoint"],"additionalProperties":false,
          "properties":{"endpoint":{"type":"string","description":"base URL: POST {endpoint}/present and /cleanup"},
            "username":{"type":"string"},"password":{"type":"string","description":"sealed"},
            "allow_plain_http":{"type":"boolean","default":false},"ca_bundle_pem":{"type":"string"},
            "timeout_s":{"type":"integer","minimum":1,"maximum":120,"default":30},
            "check_propagation":{"type":"boolean","default":true}}},
        "powerdns":{"type":"object","required":["api_url","api_key"],"additionalProperties":false,
          "properties":{"api_url":{"type":"string","description":"the server's base URL, e.g. https://pdns.example:8081"},
            "api_key":{"type":"string","description":"sealed"},"server_id":{"type":"string","default":"localhost"},
            "zone":{"type":"string"},"allow_plain_http":{"type":"boolean","default":false},"ca_bundle_pem":{"type":"string"},
            "timeout_s":{"type":"integer","minimum":1,"maximum":120,"default":30},
            "check_propagation":{"type":"boolean","default":true}}}}})json"},
    {"domain", R"json({"type":"object","required":["name"],"additionalProperties":false,
      "properties":{"name":{"type":"string","description":"a registered domain, like example.com"}}})json"},
    {"discovery_source", R"json({"type":"object","required":["name"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},
        "endpoints":{"type":"array","items":{"type":"string","description":"host:port or [v6]:port"}},
        "cidrs":{"type":"array","items":{"type":"string","description":"10.0.0.0/24"}},
        "ports":{"type":"array","items":{"type":"integer","minimum":1,"maximum":65535}},
        "sni":{"type":"array","items":{"type":"string"}},
        "schedule_s":{"type":"integer","description":"0, or 3600 to 2592000"}}})json"},
    {"discovered_import", R"json({"type":"object","required":["name","key_pem"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"key_pem":{"type":"string"},"chain_pem":{"type":"string"}}})json"},
}};

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

// PUT /api/v1/settings: one member per system setting of the settings table.
json::object settings_body_schema() {
  json::object props;
  for (const auto& d : all_settings()) {
    if (d.scope != setting_scope::system) continue;
    json::object p{{"description", d.doc}};
    if (d.type == setting_type::integer) {
      p["type"] = "integer";
      p["minimum"] = d.min;
      p["maximum"] = d.max;
    } else if (d.type == setting_type::choice) {
      json::array values;
      for (auto c : choice_values(d)) values.emplace_back(c);
      p["enum"] = std::move(values);
    } else {
      p["type"] = "string";
    }
    props[d.name] = std::move(p);
  }
  return json::object{{"type", "object"}, {"minProperties", 1}, {"additionalProperties", false},
                      {"properties", std::move(props)}};
}

json::value schema_of(std::string_view name) {
  if (name == "settings") return settings_body_schema();
  for (const auto& b : bodies)
    if (b.name == name) return json::parse(b.schema);
  // A routes.def row names a body this table lacks: a bug the route test catches.
  throw std::logic_error(fmt::format("routes.def names the body schema \"{}\", which openapi.cpp does not have", name));
}

json::object error_response(std::string_view description) {
  return json::object{{"description", description},
                      {"content", json::object{{"application/json",
                                                json::object{{"schema", json::object{{"$ref", "#/components/schemas/Error"}}}}}}}};
}

json::object operation(const route_def& r) {
  json::object op{{"summary", r.summary}};
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

  json::object responses;
  if (r.websocket) {
    op["description"] =
        "A WebSocket (send an Upgrade request): text messages {type: \"lines\", lines: […]} with the backlog after "
        "the `after` cursor, then live lines, then {type: \"end\", status} when the job is terminal.";
    responses["101"] = json::object{{"description", "Switching to the WebSocket"}};
  } else if (r.pattern == "/metrics") {
    responses["200"] = json::object{
        {"description", "Prometheus text exposition format"},
        {"content", json::object{{"text/plain", json::object{{"schema", json::object{{"type", "string"}}}}}}}};
  } else {
    responses["2XX"] = json::object{
        {"description", "Success: a JSON object (times in it are RFC 3339 UTC strings with milliseconds)"},
        {"content", json::object{{"application/json", json::object{{"schema", json::object{{"type", "object"}}}}}}}};
  }
  responses["default"] = error_response("An error: 400 bad input (field names it), 401, 403, 404, 405, 409 wrong "
                                        "state, 413, 429 (Retry-After), 503 (Retry-After)");
  op["responses"] = std::move(responses);

  if (!r.body.empty()) {
    // A body with required members must be sent; one without (rollback's) may be left out.
    const auto schema = schema_of(r.body);
    const bool required = schema.is_object() && schema.as_object().contains("required");
    op["requestBody"] = json::object{
        {"required", required},
        {"content", json::object{{"application/json",
                                  json::object{{"schema", json::object{{"$ref", fmt::format("#/components/schemas/{}_body",
                                                                                            r.body)}}}}}}}};
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

std::span<const body_schema> all_body_schemas() noexcept { return bodies; }

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
  schemas["Error"] = json::parse(R"json({"type":"object","required":["error"],
    "properties":{"error":{"type":"object","required":["code","message"],
      "properties":{"code":{"type":"string"},"message":{"type":"string"},
        "field":{"type":"string","description":"The request member, parameter or header at fault"}}}}})json");
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
                    {"securitySchemes",
                     json::object{{"bearer", json::object{{"type", "http"}, {"scheme", "bearer"}}},
                                  {"session", json::object{{"type", "apiKey"},
                                                           {"in", "cookie"},
                                                           {"name", "certfleet_session"}}}}}}}};
  return json::serialize(doc);
}

}  // namespace certfleet::api
