// The schemas the OpenAPI document is made of (openapi.hpp): the request bodies, as the parsers
// accept them, and the answers, as the handlers build them, written down once here; the
// settings' schemas come from the settings table. openapi.cpp puts them into the document.
#include "certfleet/api/openapi.hpp"

#include "certfleet/core/settings.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <array>
#include <stdexcept>

#include "openapi_schemas.hpp"

namespace certfleet::api {

namespace json = boost::json;

namespace {

// The request bodies, as the parsers accept them (requests.cpp, src/catalog/, src/notify/channel.cpp,
// src/lifecycle/acme_catalog.cpp, session_routes.cpp). Members the parsers refuse are refused here
// too (additionalProperties: false), so a client generated from this document sends nothing the
// server rejects as unknown. `settings` is not here: it is generated from the settings table.
constexpr std::array<body_schema, 25> bodies{{
    {"session", R"json({"type":"object","required":["token"],"additionalProperties":false,
      "properties":{"token":{"type":"string","description":"An API token (cf_…)"}}})json"},
    {"project", R"json({"type":"object","required":["name"],"additionalProperties":false,
      "properties":{"name":{"$ref":"#/components/schemas/ProjectName"}}})json"},
    {"token", R"json({"type":"object","required":["name","role"],"additionalProperties":false,
      "properties":{"name":{"type":"string","minLength":1,"maxLength":100,"description":"What the token is for (like ci-deploy)"},
        "role":{"$ref":"#/components/schemas/Role","description":"Up to the caller's own role (a system admin: any)"},
        "ttl_s":{"type":"integer","default":7776000,"description":"Seconds until it expires: 0 (never) or 60-63244800; absent: 90 days. No later than the calling token's own expiry"}}})json"},
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
    {"certificate_enroll", R"json({"type":"object","required":["name","msca_ca_id"],"additionalProperties":false,
      "description":"subject or sans (or both) is required",
      "properties":{"name":{"type":"string"},"msca_ca_id":{"$ref":"#/components/schemas/ObjectId"},
        "template":{"type":"string","description":"A template of the CA's policy (GET …/msca-cas/{id}/templates); absent: the CA's default_template"},
        "subject":{"type":"string","maxLength":1024,"description":"RFC 4514, e.g. CN=web01.corp.example,O=Example"},
        "sans":{"type":"array","items":{"type":"string"},"maxItems":100,"description":"DNS names"},
        "key_type":{"enum":["ecdsa-p256","ecdsa-p384","rsa-2048","rsa-3072"],"description":"Absent: the smallest the template accepts"},
        "auto_renew":{"type":"boolean","default":true}}})json"},
    {"certificate_bulk_renew", R"json({"type":"object","additionalProperties":false,
      "description":"Exactly one of certificate_ids and expiring_within_days",
      "properties":{"certificate_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"},"minItems":1,"maxItems":1000,
          "uniqueItems":true,"description":"Issued ACME certificates of the project; one that is not refuses the whole call"},
        "expiring_within_days":{"type":"integer","minimum":1,"maximum":365,
          "description":"Every issued ACME certificate whose not_after is within this many days (expired ones too)"}}})json"},
    {"certificate_reject", R"json({"type":"object","additionalProperties":false,"required":["reason"],"properties":{
      "reason":{"type":"string","minLength":1,"maxLength":500,"description":"Why the issue request is rejected; the requester reads it"}}})json"},
    {"certificate_revoke", R"json({"type":"object","additionalProperties":false,
      "properties":{"reason":{"type":["string","integer"],
        "description":"An RFC 5280 reason name (keyCompromise, superseded, …) or its code 0-10 (7 is unused); absent: no reason. A bad one: 400 naming reason, with the list"}}})json"},
    {"credential", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["ssh_key","password"]},
        "private_key_pem":{"type":"string","description":"kind ssh_key: an ed25519 or ECDSA key"},
        "passphrase":{"type":"string"},"password":{"type":"string","description":"kind password"}}})json"},
    {"target_import", R"json({"type":"string","description":"Many targets, all stored or none (at most 100,000; 64 MiB). application/x-ndjson (or application/jsonl): one target_body JSON object per line, blank lines skipped. text/csv: a header row naming target_body's members, dotted for nested ones (name,module,ssh.host,ssh.port,ssh.user,ssh.credential_id,ssh.host_key,ssh.cert_path,ssh.key_path,…), then one target per row; an empty cell leaves the member out; ssh.port and validate.tls.port are read as integers, ssh.sudo, webhook.allow_plain_http and validate.remote_hash as true/false"})json"},
    {"target", R"json({"type":"object","required":["name","module"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"module":{"enum":["ssh","file","webhook"]},
        "ssh":{"type":"object","required":["host","user","host_key","cert_path","key_path","credential_id"],"additionalProperties":false,
          "properties":{"host":{"type":"string"},"port":{"type":"integer","minimum":1,"maximum":65535,"default":22},
            "user":{"type":"string"},"credential_id":{"$ref":"#/components/schemas/ObjectId"},
            "auth":{"enum":["key","password"],"description":"How to sign in: the credential's kind decides when left out"},
            "host_key":{"type":"string","description":"The pinned host key, \"ssh-ed25519 AAAA…\""},
            "cert_path":{"type":"string"},"key_path":{"type":"string"},"chain_path":{"type":"string"},
            "cert_mode":{"type":"string","default":"0644"},"key_mode":{"type":"string","default":"0600"},
            "owner":{"type":"string"},"sudo":{"type":"boolean","default":false},"post_command":{"type":"string"}}},
        "file":{"type":"object","required":["cert_path","key_path"],"additionalProperties":false,
          "properties":{"cert_path":{"type":"string"},"key_path":{"type":"string"},"chain_path":{"type":"string"},
            "cert_mode":{"type":"string","default":"0644"},"key_mode":{"type":"string","default":"0600"},
            "post_command":{"type":"string","minLength":1}}},
        "webhook":{"type":"object","required":["url","secret_credential_id"],"additionalProperties":false,
          "properties":{"url":{"type":"string","format":"uri","description":"https:// unless allow_plain_http"},
            "secret_credential_id":{"$ref":"#/components/schemas/ObjectId","description":"A password credential: the HMAC key that signs each delivery"},
            "allow_plain_http":{"type":"boolean","default":false,"description":"Allow an http:// receiver (the body carries the private key)"}}},
        "validate":{"type":"object","additionalProperties":false,"description":"ssh targets: check the result after delivery (one of tls, remote_hash)",
          "properties":{"tls":{"type":"object","required":["host","port"],"additionalProperties":false,
              "properties":{"host":{"type":"string"},"port":{"type":"integer","minimum":1,"maximum":65535},"sni":{"type":"string"}}},
            "remote_hash":{"type":"boolean"}}}}})json"},
    {"distribution", R"json({"type":"object","required":["name","certificate_id","target_ids"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"certificate_id":{"$ref":"#/components/schemas/ObjectId"},
        "target_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"}},
        "canary":{"type":"boolean","default":false},"failure_tolerance":{"type":"number","minimum":0,"maximum":1,"default":0,
          "description":"The share of targets that may fail before the run stops (0: none, 0.1: one in ten)"},
        "fail_fast":{"type":"boolean","default":false},
        "auto_execute":{"type":"boolean","description":"Execute when the certificate gets a new version (default: true for ACME certificates)"}}})json"},
    {"rollback", R"json({"type":"object","additionalProperties":false,
      "properties":{"run_no":{"type":"integer","minimum":1,"description":"The delivery run whose replaced files come back (default: the last one)"}}})json"},
    {"retry_targets", R"json({"type":"object","additionalProperties":false,
      "description":"Exactly one of job_id and target_ids",
      "properties":{"job_id":{"$ref":"#/components/schemas/ObjectId","description":"A job of the last run: its targets whose last result failed or was cancelled"},
        "target_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"},"minItems":1,"maxItems":1000,"uniqueItems":true,
          "description":"Targets of the last run whose last result failed or was cancelled; one that is not refuses the whole call"}}})json"},
    {"notification_channel", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["webhook","email","slack","teams"]},
        "url":{"type":"string","format":"uri","description":"kind webhook"},
        "secret_credential_id":{"$ref":"#/components/schemas/ObjectId"},
        "email":{"type":"object","required":["host","from","to"],"additionalProperties":false,
          "description":"kind email: the SMTP server, sender and recipients",
          "properties":{"host":{"type":"string","maxLength":253},"port":{"type":"integer","minimum":1,"maximum":65535,"default":587},
            "starttls":{"type":"boolean","default":true,"description":"false only for a loopback relay"},
            "username":{"type":"string"},"password":{"type":"string","description":"sealed"},
            "from":{"type":"string","maxLength":254},"to":{"type":"array","minItems":1,"items":{"type":"string"}}}},
        "slack":{"type":"object","required":["webhook_url"],"additionalProperties":false,"description":"kind slack",
          "properties":{"webhook_url":{"type":"string","format":"uri","description":"https://; sealed (the URL is the secret)"}}},
        "teams":{"type":"object","required":["webhook_url"],"additionalProperties":false,"description":"kind teams",
          "properties":{"webhook_url":{"type":"string","format":"uri","description":"https://; sealed (the URL is the secret)"}}}}})json"},
    {"notification_rule", R"json({"type":"object","required":["event","channel_id"],"additionalProperties":false,
      "properties":{"event":{"type":"string","description":"distribution.finished, certificate.expiring, …"},
        "channel_id":{"$ref":"#/components/schemas/ObjectId"},
        "template":{"type":"object","additionalProperties":false,"minProperties":1,
          "description":"Overrides the event's default message; left out: the default",
          "properties":{"subject":{"type":"string","minLength":1},"body":{"type":"string","minLength":1}}}}})json"},
    {"acme_account", R"json({"type":"object","required":["name","directory_url","terms_agreed"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"directory_url":{"type":"string","format":"uri"},
        "contact_email":{"oneOf":[{"type":"string"},{"type":"array","items":{"type":"string"},"minItems":1}],
          "description":"An e-mail address or a list of them (the account's mailto: contacts)"},
        "eab":{"type":"object","required":["kid","hmac_key"],"additionalProperties":false,"properties":{"kid":{"type":"string"},"hmac_key":{"type":"string"}}},
        "ca_bundle_pem":{"type":"string"},"terms_agreed":{"const":true}}})json"},
    {"msca_ca", R"json({"type":"object","required":["name","cep_url","auth"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"cep_url":{"type":"string","format":"uri","description":"The policy service (CEP), https://"},
        "ces_url":{"type":"string","format":"uri","description":"The enrollment service (CES), https://; absent: the policy's endpoint for the template"},
        "auth":{"oneOf":[
          {"type":"object","required":["kind","username","password"],"additionalProperties":false,"properties":{
            "kind":{"const":"username_password"},"username":{"type":"string"},"password":{"type":"string","description":"Sealed at rest, never returned"}}},
          {"type":"object","required":["kind","cert_pem","key_pem"],"additionalProperties":false,"properties":{
            "kind":{"const":"client_certificate"},"cert_pem":{"type":"string"},"key_pem":{"type":"string","description":"Sealed at rest, never returned"}}},
          {"type":"object","required":["kind","principal","realm","password"],"additionalProperties":false,"properties":{
            "kind":{"const":"kerberos"},"principal":{"type":"string","description":"svc-certfleet or svc-certfleet@REALM"},
            "realm":{"type":"string","description":"The Kerberos realm, e.g. CORP.EXAMPLE"},
            "password":{"type":"string","description":"Sealed at rest, never returned"},
            "kdc":{"type":"string","description":"host:port of a KDC, held to msca_allow_list; absent: the realm's KDCs from krb5.conf"}}},
          {"type":"object","required":["kind","principal","realm","keytab_b64"],"additionalProperties":false,"properties":{
            "kind":{"const":"kerberos"},"principal":{"type":"string","description":"svc-certfleet or svc-certfleet@REALM"},
            "realm":{"type":"string","description":"The Kerberos realm, e.g. CORP.EXAMPLE"},
            "keytab_b64":{"type":"string","format":"byte","description":"A keytab file in base64; sealed at rest, never returned"},
            "kdc":{"type":"string","description":"host:port of a KDC, held to msca_allow_list; absent: the realm's KDCs from krb5.conf"}}}]},
        "ca_bundle_pem":{"type":"string","description":"Trust anchors of the services' TLS"},
        "default_template":{"type":"string"},"renewal_mode":{"enum":["new_key","renew_with_current"],"default":"new_key"}}})json"},
    {"dns_provider", R"json({"type":"object","required":["name","kind"],"additionalProperties":false,
      "properties":{"name":{"type":"string"},"kind":{"enum":["rfc2136","manual","exec","httpreq","powerdns"]},
        "rfc2136":{"type":"object","required":["server","tsig_key_name","tsig_secret"],"additionalProperties":false,
          "properties":{"server":{"type":"string","description":"host:port"},"zone":{"type":"string"},
            "tsig_key_name":{"type":"string"},"tsig_algorithm":{"type":"string","default":"hmac-sha256"},
            "tsig_secret":{"type":"string"}}},
        "manual":{"type":"object","additionalProperties":false,"properties":{"check_server":{"type":"string","description":"host:port"}}},
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

// The answers, as the handlers build them (src/api/*_routes.cpp, queue/job_view.cpp, the
// distribution module's views). Members listed here are always there unless not `required`; an
// answer may gain members in a later version, so objects stay open (the contract test closes
// them to prove nothing undocumented is sent today).
constexpr response_schema answers[] = {
    {"Health", R"json({"type":"object","required":["status"],"properties":{"status":{"const":"ok"}}})json"},
    {"Ready", R"json({"type":"object","required":["status"],"properties":{"status":{"const":"ready"},
      "workers_alive":{"type":"integer","minimum":0,"description":"Live workers in the worker registry (once the first check ran)"},
      "warning":{"type":"string","description":"Present when no worker is alive: jobs wait"}}})json"},
    {"Session", R"json({"type":"object","required":["csrf_token","project","role","system","token_name","token_id","expires_at"],
      "properties":{"csrf_token":{"type":"string","description":"Send it as X-CSRF-Token on every change made with the cookie"},
        "project":{"type":["string","null"]},"role":{"$ref":"#/components/schemas/Role"},"system":{"type":"boolean"},
        "token_name":{"type":"string"},"token_id":{"$ref":"#/components/schemas/ObjectId","description":"The signed-in token's id: token:<id> in a job's triggered_by or a certificate's approval is this token"},
        "expires_at":{"$ref":"#/components/schemas/Time"}}})json"},
    {"Role", R"json({"enum":["viewer","operator","admin","owner"]})json"},
    {"Project", R"json({"type":"object","required":["id","name","created_at"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"$ref":"#/components/schemas/ProjectName"},
      "created_at":{"$ref":"#/components/schemas/Time"}}})json"},
    {"ProjectList", R"json({"type":"object","required":["items"],"properties":{
      "items":{"type":"array","items":{"$ref":"#/components/schemas/Project"}}}})json"},
    {"ProjectDeleted", R"json({"type":"object","required":["id","name","deleted"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"$ref":"#/components/schemas/ProjectName"},"deleted":{"const":true}}})json"},
    {"Token", R"json({"type":"object","required":["id","project_id","name","role","system","status","created_by","created_at","expires_at","last_used_at","revoked_at"],
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"project_id":{"$ref":"#/components/schemas/ObjectId"},
        "name":{"type":"string"},"role":{"$ref":"#/components/schemas/Role"},"system":{"type":"boolean"},
        "status":{"enum":["active","expired","revoked"]},
        "created_by":{"type":"string","description":"token:<id> of the token that made it, cli, or bootstrap"},
        "created_at":{"$ref":"#/components/schemas/Time"},
        "expires_at":{"$ref":"#/components/schemas/NullableTime","description":"null: never expires"},
        "last_used_at":{"$ref":"#/components/schemas/NullableTime","description":"To the minute; null: never used"},
        "revoked_at":{"$ref":"#/components/schemas/NullableTime"}}})json"},
    {"TokenList", R"json({"type":"object","required":["items"],"properties":{
      "items":{"type":"array","items":{"$ref":"#/components/schemas/Token"},"description":"Newest first, revoked and expired ones included"}}})json"},
    {"Deleted", R"json({"type":"object","required":["id","deleted"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"deleted":{"const":true}}})json"},
    {"NullableTime", R"json({"oneOf":[{"$ref":"#/components/schemas/Time"},{"type":"null"}]})json"},
    {"NullableText", R"json({"type":["string","null"]})json"},
    {"JobStatus", R"json({"enum":["pending","active","completed","failed","dead","cancelled"]})json"},
    {"Job", R"json({"type":"object","required":["id","project_id","type","lane","status","attempts","max_attempts","created_at","payload"],
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"project_id":{"$ref":"#/components/schemas/ObjectId"},
        "type":{"type":"string"},"lane":{"type":"string"},"status":{"$ref":"#/components/schemas/JobStatus"},
        "result_status":{"$ref":"#/components/schemas/NullableText"},
        "attempts":{"type":"integer","minimum":0},"max_attempts":{"type":"integer","minimum":1},
        "fence":{"type":"integer","description":"Bumped at each claim: a stale worker's writes are refused"},
        "run_at":{"$ref":"#/components/schemas/NullableTime","description":"When a waiting job becomes ready"},
        "held":{"type":"boolean"},"locked_by":{"$ref":"#/components/schemas/NullableText"},
        "worker":{"$ref":"#/components/schemas/NullableText","description":"The worker of the current or last attempt"},
        "locked_until":{"$ref":"#/components/schemas/NullableTime"},
        "idempotency_key":{"$ref":"#/components/schemas/NullableText"},"parent_job_id":{"$ref":"#/components/schemas/NullableText"},
        "certificate_id":{"$ref":"#/components/schemas/NullableText"},"distribution_id":{"$ref":"#/components/schemas/NullableText"},
        "triggered_by":{"$ref":"#/components/schemas/NullableText"},
        "triggered_by_name":{"$ref":"#/components/schemas/NullableText","description":"Who or what started it, in words"},
        "created_at":{"$ref":"#/components/schemas/Time"},"started_at":{"$ref":"#/components/schemas/NullableTime"},
        "completed_at":{"$ref":"#/components/schemas/NullableTime"},"duration_ms":{"type":["integer","null"]},
        "error":{"$ref":"#/components/schemas/NullableText"},
        "error_code":{"$ref":"#/components/schemas/NullableText","description":"How the failed attempt ended, stored with the error: an error code name (timeout, invalid_argument, lease_lost, cancelled, handler_error, …); null when the handler gave none"},
        "error_class":{"$ref":"#/components/schemas/NullableText","description":"The hint table's class of the error, stored with it (docs/ui.md, Error hints)"},"error_hint":{"$ref":"#/components/schemas/NullableText"},
        "progress":{"type":"object","required":["current","total"],"properties":{"current":{"type":"integer"},"total":{"type":"integer"}}},
        "cancel_requested":{"type":"boolean"},
        "payload":{"description":"The job type's payload (null when it cannot be read)"},
        "created":{"type":"boolean","description":"Enqueue only: false when the idempotency key named an existing job"},
        "message":{"type":"string","description":"Cancel only: what happened"},
        "waiting":{"type":"object","description":"Get, pending or failed jobs: what decides when a worker takes it",
          "properties":{"lane":{"type":"string"},"ready_at":{"$ref":"#/components/schemas/Time"},"ready":{"type":"boolean"},
            "held":{"type":"boolean"},"cancel_requested":{"type":"boolean"},"lane_concurrency":{"type":["integer","null"]},
            "lane_active":{"type":["integer","null"]}}},
        "lease":{"type":"object","description":"Get, active jobs: the lease and the worker holding it",
          "properties":{"locked_by":{"type":"string"},"locked_until":{"$ref":"#/components/schemas/Time"},"lease_expired":{"type":"boolean"},
            "worker":{"type":"object","properties":{"id":{"type":"string"},"host":{"type":"string"},"alive":{"type":"boolean"},
              "heartbeat_age_ms":{"type":"integer"},"reason":{"type":"string"}}}}},
        "workflow":{"type":"object","description":"Get, ACME and AD CS jobs: the workflow's steps (kind acme: DESIGN §9; kind msca: §13)"}}})json"},
    {"JobPage", R"json({"type":"object","required":["items","page","page_size","total","counts","next_cursor"],"properties":{
      "items":{"type":"array","items":{"$ref":"#/components/schemas/Job"}},
      "page":{"type":"integer"},"page_size":{"type":"integer"},"total":{"type":"integer","description":"Jobs matching the filter"},
      "counts":{"type":"object","description":"Exact count per tab (all and each status) of the type filter",
        "properties":{"all":{"type":"integer"},"pending":{"type":"integer"},"active":{"type":"integer"},"completed":{"type":"integer"},
          "failed":{"type":"integer"},"dead":{"type":"integer"},"cancelled":{"type":"integer"}}},
      "next_cursor":{"type":["string","null"],"description":"Give it as cursor for the next page; null on the last"}}})json"},
    {"JobAccepted", R"json({"type":"object","required":["job_id","created"],"properties":{
      "job_id":{"$ref":"#/components/schemas/ObjectId"},
      "created":{"type":"boolean","description":"false: the same request already enqueued this job (its key)"}}})json"},
    {"TabCounts", R"json({"type":"object","required":["all","pending","active","completed","failed","dead","cancelled"],
      "properties":{"all":{"type":"integer"},"pending":{"type":"integer"},"active":{"type":"integer"},"completed":{"type":"integer"},
        "failed":{"type":"integer"},"dead":{"type":"integer"},"cancelled":{"type":"integer"}}})json"},
    {"Dashboard", R"json({"type":"object","required":["generated_at","jobs","certificates","distributions","checks","truncated"],"properties":{
      "generated_at":{"type":"string","format":"date-time"},
      "jobs":{"type":"object","required":["counts","by_type","by_lane"],"properties":{
        "counts":{"$ref":"#/components/schemas/TabCounts"},
        "by_type":{"type":"array","description":"Job types this project has jobs of","items":{"type":"object",
          "required":["type","lane","counts"],"properties":{"type":{"type":"string"},"lane":{"type":"string"},
          "counts":{"$ref":"#/components/schemas/TabCounts"}}}},
        "by_lane":{"type":"array","items":{"type":"object","required":["lane","counts"],"properties":{
          "lane":{"type":"string"},"counts":{"$ref":"#/components/schemas/TabCounts"}}}}}},
      "certificates":{"type":"object","required":["total","expired","expiring_soon","window_days","not_issued","soonest"],"properties":{
        "total":{"type":"integer"},"expired":{"type":"integer"},
        "expiring_soon":{"type":"integer","description":"not_after within window_days (certificate_expiry_thresholds_days' largest), not passed"},
        "window_days":{"type":"integer"},"not_issued":{"type":"integer","description":"ACME certificates without a version yet"},
        "soonest":{"type":"array","maxItems":10,"items":{"type":"object","required":["id","name","not_after","source","status"],"properties":{
          "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"not_after":{"type":"string","format":"date-time"},
          "source":{"enum":["uploaded","acme"]},"status":{"type":"string"}}}}}},
      "distributions":{"type":"object","required":["total","running","failed","running_list","failed_list"],"properties":{
        "total":{"type":"integer"},"running":{"type":"integer"},"failed":{"type":"integer","description":"Last run failed or partial"},
        "running_list":{"type":"array","maxItems":10,"items":{"$ref":"#/components/schemas/DashboardRun"}},
        "failed_list":{"type":"array","maxItems":10,"items":{"$ref":"#/components/schemas/DashboardRun"}}}},
      "checks":{"type":"object","required":["domains","discovered","findings"],"properties":{
        "domains":{"type":"object","required":["total","ok","expiring","error","unknown"],"properties":{"total":{"type":"integer"},
          "ok":{"type":"integer"},"expiring":{"type":"integer"},"error":{"type":"integer"},"unknown":{"type":"integer"}}},
        "discovered":{"type":"object","required":["total","with_findings"],"properties":{"total":{"type":"integer"},"with_findings":{"type":"integer"}}},
        "findings":{"type":"array","items":{"type":"object","required":["name","severity","count"],"properties":{
          "name":{"type":"string"},"severity":{"type":"string"},"count":{"type":"integer"}}}}}},
      "truncated":{"type":"boolean","description":"A kind held more than 100,000 objects: its counts are lower bounds"}}})json"},
    {"DashboardRun", R"json({"type":"object","required":["id","name","status","run_no","started_at","finished_at","error"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"status":{"type":"string"},"run_no":{"type":"integer"},
      "started_at":{"type":["string","null"],"format":"date-time"},"finished_at":{"type":["string","null"],"format":"date-time"},
      "error":{"type":["string","null"]}}})json"},
    {"BulkRenewAccepted", R"json({"type":"object","required":["requested","created","jobs","skipped"],"properties":{
      "requested":{"type":"integer","description":"Certificates renewed (jobs answered)"},
      "created":{"type":"integer","description":"Of those, new jobs; the others were already queued under the same key"},
      "jobs":{"type":"array","items":{"type":"object","required":["certificate_id","name","job_id","created"],"properties":{
        "certificate_id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},
        "job_id":{"$ref":"#/components/schemas/ObjectId"},"created":{"type":"boolean"}}}},
      "skipped":{"type":"array","description":"expiring_within_days: matching certificates that cannot be renewed over ACME",
        "items":{"type":"object","required":["certificate_id","name","reason"],"properties":{
          "certificate_id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"reason":{"type":"string"}}}}}})json"},
    {"IssueAccepted", R"json({"type":"object","required":["certificate_id","job_id","status"],"properties":{
      "certificate_id":{"$ref":"#/components/schemas/ObjectId"},
      "job_id":{"oneOf":[{"$ref":"#/components/schemas/ObjectId"},{"type":"null"}],"description":"The issue job; null while the request awaits approval"},
      "status":{"enum":["pending","awaiting_approval"],"description":"pending: the issue job is enqueued; awaiting_approval: the project's issuance_requires_approval is on and an admin other than the requester decides (POST …/certificates/{id}/approve or /reject)"}}})json"},
    {"CertificateVersion", R"json({"type":"object","required":["version","serial","fingerprint_sha256","not_before","not_after","created_at"],
      "properties":{"version":{"type":"integer"},"serial":{"type":"string"},"fingerprint_sha256":{"type":"string"},
        "not_before":{"$ref":"#/components/schemas/NullableTime"},"not_after":{"$ref":"#/components/schemas/NullableTime"},
        "created_at":{"$ref":"#/components/schemas/NullableTime"}}})json"},
    {"Certificate", R"json({"type":"object","required":["id","name","created_at","source","status","version","sans","not_before","not_after","versions"],
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
        "source":{"type":"string","description":"upload, acme, msca (AD CS) or discovery"},
        "status":{"type":"string","description":"active, expired, pending (ACME, not issued yet), awaiting_approval (an issue request an admin has not decided), rejected (an issue request an admin rejected), failed, revoked"},
        "version":{"type":"integer","description":"The current version (0: none issued yet)"},
        "serial":{"type":"string"},"subject":{"type":"string"},"issuer":{"type":"string"},
        "sans":{"type":"array","items":{"type":"string"}},
        "not_before":{"$ref":"#/components/schemas/NullableTime"},"not_after":{"$ref":"#/components/schemas/NullableTime"},
        "fingerprint_sha256":{"type":"string"},"expired":{"type":"boolean"},"cert_pem":{"type":"string"},"chain_pem":{"type":"string"},
        "versions":{"type":"array","items":{"$ref":"#/components/schemas/CertificateVersion"}},
        "domains":{"type":"array","items":{"type":"string"},"description":"ACME certificates"},
        "msca_ca_id":{"type":"string","description":"AD CS certificates"},"template":{"type":"string"},
        "requested_subject":{"type":"string"},"requested_sans":{"type":"array","items":{"type":"string"}},
        "msca":{"type":"object","description":"AD CS certificates: the last request at the CA","properties":{
          "request_id":{"$ref":"#/components/schemas/NullableText"},"disposition":{"$ref":"#/components/schemas/NullableText"},
          "disposition_message":{"$ref":"#/components/schemas/NullableText"},"error_code":{"$ref":"#/components/schemas/NullableText"},
          "polls":{"type":"integer","description":"How often the last request was asked about before the CA issued it"}}},
        "key_type":{"type":"string"},"acme_account_id":{"type":"string"},"dns_provider_id":{"type":"string"},"profile":{"type":"string"},
        "auto_renew":{"type":"boolean"},"last_error":{"type":"string"},"last_job_id":{"$ref":"#/components/schemas/NullableText"},
        "approval":{"oneOf":[{"type":"null"},{"type":"object","required":["requested_by","requested_at","decision","decided_by","decided_at","reason"],"additionalProperties":false,"properties":{
          "requested_by":{"type":"string","description":"token:<id> of the requesting token, or cli"},"requested_at":{"$ref":"#/components/schemas/NullableTime"},
          "decision":{"enum":["pending","approved","rejected"]},"decided_by":{"$ref":"#/components/schemas/NullableText"},
          "decided_at":{"$ref":"#/components/schemas/NullableTime"},"reason":{"$ref":"#/components/schemas/NullableText"}}}],
          "description":"ACME certificates: the approval its issue request waited for (issuance_requires_approval); null: none was needed"},
        "renewal":{"oneOf":[{"type":"null"},{"type":"object","required":["window_start","window_end","source"],"properties":{
          "window_start":{"$ref":"#/components/schemas/NullableTime"},"window_end":{"$ref":"#/components/schemas/NullableTime"},
          "source":{"type":"string"},"checked_at":{"$ref":"#/components/schemas/NullableTime"}}}]},
        "revocation":{"type":"object","properties":{"serial":{"type":"string"},"reason":{"type":["string","null"]},
          "revoked_at":{"$ref":"#/components/schemas/NullableTime"},"job_id":{"type":["string","null"]},"source":{"type":"string"}}},
        "revocation_check":{"oneOf":[{"type":"null"},{"type":"object","properties":{"status":{"type":"string","description":"good, revoked, unknown, error"},
          "source":{"type":"string","description":"ocsp or crl"},"detail":{"type":"string"},
          "checked_at":{"$ref":"#/components/schemas/NullableTime"},"next_update":{"$ref":"#/components/schemas/NullableTime"}}}],
          "description":"The last OCSP/CRL answer about the current version; null: none yet"},
        "auto_execute":{"type":"object","description":"Version upload only: the distributions it opened a run in, or deferred",
          "properties":{"runs_opened":{"type":"array","items":{"type":"string"}},"runs_deferred":{"type":"array","items":{"type":"string"}}}}}})json"},
    {"Credential", R"json({"type":"object","required":["id","name","created_at","kind"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "kind":{"enum":["ssh_key","password"]},"public_key_fingerprint":{"type":"string"},"public_key":{"type":"string"},
      "key_type":{"type":"string"}}})json"},
    {"Target", R"json({"type":"object","required":["id","name","created_at","module"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "module":{"enum":["ssh","file","webhook"]},"ssh":{"type":"object"},"file":{"type":"object"},"webhook":{"type":"object"},
      "created_by_system_admin":{"type":"string","description":"File targets made by a system admin (who may write outside file_target_base_dirs): who"},
      "validate":{"type":"object"}}})json"},
    {"TargetImport", R"json({"type":"object","required":["imported","ids"],"properties":{
      "imported":{"type":"integer","description":"How many targets were stored"},
      "ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"},"description":"The new targets' ids, in the body's order"}}})json"},
    {"HostKeyScan", R"json({"type":"object","required":["target_id","host","port","pinned","offered","trusted"],"properties":{
      "target_id":{"$ref":"#/components/schemas/ObjectId"},"host":{"type":"string"},"port":{"type":"integer"},
      "pinned":{"type":"string"},"offered":{"type":"array","items":{"type":"object","required":["line","fingerprint"],
        "properties":{"line":{"type":"string"},"fingerprint":{"type":"string"}}}},
      "trusted":{"const":false},"note":{"type":"string"}}})json"},
    {"ChannelTest", R"json({"type":"object","required":["channel_id","kind","delivered","event_id","duration_ms"],"properties":{
      "channel_id":{"$ref":"#/components/schemas/ObjectId"},"kind":{"type":"string"},"delivered":{"type":"boolean"},
      "event_id":{"type":"string"},"duration_ms":{"type":"integer"},"error_class":{"type":"string"},"error":{"type":"string"},
      "retryable":{"type":"boolean"},"reply":{"type":"string"},"http_status":{"type":"integer"},"retry_after_s":{"type":"integer"}}})json"},
    {"Distribution", R"json({"type":"object","required":["id","name","status","run_no","certificate_id","target_ids","canary",
        "failure_tolerance","fail_fast","auto_execute","created_at","updated_at"],
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},
        "status":{"type":"string","description":"idle, running, succeeded, partial, failed, cancelled, rolled_back, …"},
        "run_no":{"type":"integer","description":"The current or last run (0: never run)"},
        "certificate_id":{"$ref":"#/components/schemas/ObjectId"},"target_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"}},
        "canary":{"type":"boolean"},"failure_tolerance":{"type":"number"},"fail_fast":{"type":"boolean"},"auto_execute":{"type":"boolean"},
        "created_at":{"$ref":"#/components/schemas/NullableTime"},"updated_at":{"$ref":"#/components/schemas/NullableTime"},
        "mode":{"type":"string","description":"deliver, rollback or fan_out (once it ran)"},
        "run_redrives":{"type":"integer","description":"Re-drives of this run (POST …/retry-targets), each a new end and a new distribution.finished"},
        "run_started_at":{"$ref":"#/components/schemas/NullableTime"},"run_finished_at":{"$ref":"#/components/schemas/NullableTime"},
        "run_certificate_version":{"type":"integer"},"run_trigger":{"type":"string"},"error":{"type":"string"},
        "job_ids":{"type":"array","items":{"type":"string"}},
        "summary":{"type":"object","required":["targets","succeeded","failed","skipped","cancelled","pending"],"properties":{
          "targets":{"type":"integer"},"succeeded":{"type":"integer"},"failed":{"type":"integer"},"skipped":{"type":"integer"},
          "cancelled":{"type":"integer"},"pending":{"type":"integer"}}},
        "long_tail":{"$ref":"#/components/schemas/LongTail"},
        "fan_out":{"type":"object","description":"Fan-out runs: the batch and retry children's counters"}}})json"},
    {"LongTail", R"json({"type":"object","required":["timed_targets","phases","slowest"],"properties":{
      "timed_targets":{"type":"integer"},
      "phases":{"type":"array","items":{"type":"object","properties":{"phase":{"type":"string"},"count":{"type":"integer"},
        "p50_ms":{"type":"integer"},"p90_ms":{"type":"integer"},"p99_ms":{"type":"integer"},"max_ms":{"type":"integer"}}}},
      "slowest":{"type":"array","items":{"type":"object","properties":{"target_id":{"type":"string"},"status":{"type":"string"},
        "total_ms":{"type":"integer"},"timings_ms":{"type":"object"}}}}}})json"},
    {"RunAccepted", R"json({"type":"object","required":["distribution_id","run_no","mode","job_ids","targets"],"properties":{
      "distribution_id":{"$ref":"#/components/schemas/ObjectId"},"run_no":{"type":"integer"},"mode":{"type":"string"},
      "job_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"}},"targets":{"type":"integer"}}})json"},
    {"RedriveAccepted", R"json({"type":"object","required":["distribution_id","run_no","job_id","retry_attempt","redrive","target_ids"],"properties":{
      "distribution_id":{"$ref":"#/components/schemas/ObjectId"},"run_no":{"type":"integer","description":"The run, reopened until the job reports"},
      "job_id":{"$ref":"#/components/schemas/ObjectId","description":"The retry job"},
      "retry_attempt":{"type":"integer","description":"The wave its results carry: one above the highest these targets reached"},
      "redrive":{"type":"integer","description":"How many times this run has been re-driven, this one included"},
      "target_ids":{"type":"array","items":{"$ref":"#/components/schemas/ObjectId"}}}})json"},
    {"RunCancel", R"json({"type":"object","required":["distribution_id","run_no","cancelled_jobs","stop_requested_jobs","status"],"properties":{
      "distribution_id":{"$ref":"#/components/schemas/ObjectId"},"run_no":{"type":"integer"},
      "cancelled_jobs":{"type":"integer"},"stop_requested_jobs":{"type":"integer"},"status":{"type":"string"}}})json"},
    {"Result", R"json({"type":"object","required":["target_id","status"],"properties":{
      "target_id":{"$ref":"#/components/schemas/ObjectId"},"status":{"type":"string","description":"pending, succeeded, failed, skipped, cancelled, …"},
      "retry_attempt":{"type":"integer"},"job_id":{"type":"string"},"started_at":{"$ref":"#/components/schemas/NullableTime"},
      "finished_at":{"$ref":"#/components/schemas/NullableTime"},"hash_skipped":{"type":"boolean"},"error_class":{"type":"string"},
      "error":{"type":"string"},"fingerprint_sha256":{"type":"string"},"files_from_run":{"type":"integer"},
      "timings_ms":{"type":"object"},"session_wait_ms":{"type":"integer"},"reused_connection":{"type":"boolean"},
      "error_detail":{"description":"Admins only: the peer's own words"}}})json"},
    {"ResultPage", R"json({"type":"object","required":["items","page","page_size","total","run","targets","facets","long_tail"],"properties":{
      "items":{"type":"array","items":{"$ref":"#/components/schemas/Result"}},
      "page":{"type":"integer"},"page_size":{"type":"integer"},"total":{"type":"integer","description":"Results matching the filters"},
      "run":{"type":"integer"},"targets":{"type":"integer","description":"Targets of the run"},
      "facets":{"type":"object","description":"Counts by status and by error class"},"long_tail":{"$ref":"#/components/schemas/LongTail"}}})json"},
    {"LogLine", R"json({"type":"object","required":["seq","ts","level","message"],"properties":{
      "seq":{"type":"integer"},"ts":{"$ref":"#/components/schemas/Time"},"level":{"type":"string"},"message":{"type":"string"},
      "detail":{"description":"Structured detail of the line (JSON), when it has some"}}})json"},
    {"LogPage", R"json({"type":"object","required":["lines","next_cursor","done"],"properties":{
      "lines":{"type":"array","items":{"$ref":"#/components/schemas/LogLine"}},
      "next_cursor":{"type":"integer","description":"Give it as after for the next lines"},
      "done":{"type":"boolean","description":"The job is terminal and every line was read"}}})json"},
    {"AuditPage", R"json({"type":"object","required":["items","page","page_size","total"],"properties":{
      "items":{"type":"array","items":{"type":"object","required":["seq","actor","action","object","outcome","at"],"properties":{
        "seq":{"type":"integer"},"actor":{"type":"string"},"action":{"type":"string"},"object":{"type":"string"},
        "outcome":{"type":"string","description":"ok, or the error code"},"at":{"$ref":"#/components/schemas/Time"},
        "detail":{"description":"What was asked (JSON), or null"}}}},
      "page":{"type":"integer"},"page_size":{"type":"integer"},"total":{"type":"integer"}}})json"},
    {"SettingsSchema", R"json({"type":"object","required":["items","groups"],"properties":{"items":{"type":"array","items":{
      "type":"object","required":["name","type","default","doc","group"],"properties":{"name":{"type":"string"},
        "type":{"enum":["integer","string","choice"]},"min":{"type":"integer"},"max":{"type":"integer"},
        "choices":{"type":"array","items":{"type":"string"}},"default":{"type":["integer","string"]},"doc":{"type":"string"},
        "group":{"type":"string","description":"The id of its section in groups"}}}},
      "groups":{"type":"array","description":"The sections the settings are shown in, in page order",
        "items":{"type":"object","required":["id","title","doc","settings"],"properties":{"id":{"type":"string"},
          "title":{"type":"string"},"doc":{"type":"string"},
          "settings":{"type":"array","items":{"type":"string"},"description":"Its settings' names, in page order"}}}}}})json"},
    {"WorkerList", R"json({"type":"object","required":["items","alive","total"],"properties":{
      "items":{"type":"array","items":{"type":"object","required":["id","host","pid","version","lanes","state","running_jobs",
          "started_at","last_heartbeat_at","heartbeat_age_ms"],
        "properties":{"id":{"type":"string"},"host":{"type":"string"},"pid":{"type":"integer"},"version":{"type":"string"},
          "lanes":{"type":"string"},"state":{"type":"string"},"running_jobs":{"type":"integer"},
          "started_at":{"$ref":"#/components/schemas/Time"},"last_heartbeat_at":{"$ref":"#/components/schemas/Time"},
          "heartbeat_age_ms":{"type":"integer"},"dead_at":{"$ref":"#/components/schemas/Time"},"dead_reason":{"type":"string"},
          "released_jobs":{"type":"integer"}}}},
      "alive":{"type":"integer"},"total":{"type":"integer"}}})json"},
    {"NotificationChannel", R"json({"type":"object","required":["id","name","created_at","kind","secret_set"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "kind":{"enum":["webhook","email","slack","teams"]},"url":{"type":"string"},"secret_credential_id":{"type":"string"},
      "email":{"type":"object","properties":{"host":{"type":"string"},"port":{"type":"integer"},"starttls":{"type":"boolean"},
        "username":{"type":"string"},"from":{"type":"string"},"to":{"type":"array","items":{"type":"string"}}}},
      "slack":{"type":"object","properties":{"webhook_host":{"type":"string"}}},"teams":{"type":"object","properties":{"webhook_host":{"type":"string"}}},
      "secret_set":{"type":"boolean","description":"Whether a sealed secret (an SMTP password, a Slack/Teams URL) is stored; never the secret"}}})json"},
    {"NotificationRule", R"json({"type":"object","required":["id","name","created_at","event","channel_id"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "event":{"type":"string"},"channel_id":{"$ref":"#/components/schemas/ObjectId"},
      "template":{"type":"object","properties":{"subject":{"type":"string"},"body":{"type":"string"}}}}})json"},
    {"AcmeAccount", R"json({"type":"object","required":["id","name","created_at","directory_url"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "directory_url":{"type":"string"},"contact":{"type":"array","items":{"type":"string"}},"terms_agreed":{"type":"boolean"},
      "eab_kid":{"type":"string"},"ca_bundle_pem":{"type":"string"},"account_url":{"type":"string"},"status":{"type":"string"},
      "key_type":{"type":"string"}}})json"},
    {"MscaCa", R"json({"type":"object","required":["id","name","created_at","cep_url","auth","renewal_mode","policy"],
      "description":"Never its password or client key",
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
        "cep_url":{"type":"string"},"ces_url":{"$ref":"#/components/schemas/NullableText"},
        "auth":{"type":"object","required":["kind"],"properties":{"kind":{"type":"string"},"username":{"type":"string"},
          "cert_subject":{"type":"string"},"cert_not_after":{"$ref":"#/components/schemas/NullableTime"},
          "principal":{"type":"string"},"realm":{"type":"string"},"kdc":{"$ref":"#/components/schemas/NullableText"},
          "credential":{"enum":["password","keytab"],"description":"Which Kerberos secret is sealed (never the secret)"}}},
        "ca_bundle_pem":{"$ref":"#/components/schemas/NullableText"},"default_template":{"$ref":"#/components/schemas/NullableText"},
        "renewal_mode":{"enum":["new_key","renew_with_current"]},"policy":{"$ref":"#/components/schemas/MscaTemplates"}}})json"},
    {"MscaTemplates", R"json({"type":"object","required":["fetched_at","policy_id","templates"],"properties":{
      "fetched_at":{"$ref":"#/components/schemas/NullableTime"},"policy_id":{"type":"string"},
      "templates":{"type":"array","items":{"type":"object","required":["name","oid","key_algorithm","min_key_size"],"properties":{
        "name":{"type":"string"},"display_name":{"type":"string"},"oid":{"type":"string"},"key_algorithm":{"type":"string"},
        "min_key_size":{"type":"integer"},"key_spec":{"type":"integer"},
        "ces_urls":{"type":"array","items":{"type":"object","properties":{"url":{"type":"string"},"authentication":{"type":"string"},
          "renewal_only":{"type":"boolean"}}}}}}}}})json"},
    {"DnsProvider", R"json({"type":"object","required":["id","name","created_at","kind"],"description":"Never its secrets (TSIG secret, API key, password, env values)",
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "kind":{"enum":["rfc2136","manual","exec","httpreq","powerdns"]},"rfc2136":{"type":"object"},"manual":{"type":"object"},
      "exec":{"type":"object"},"httpreq":{"type":"object"},"powerdns":{"type":"object"}}})json"},
    {"Domain", R"json({"type":"object","required":["id","name","created_at","state"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "state":{"type":"string","description":"unknown (not looked up yet), ok, expiring, expired, error"},
      "expires_at":{"$ref":"#/components/schemas/NullableTime"},"registrar":{"type":["string","null"]},
      "statuses":{"type":"array","items":{"type":"string"}},"source":{"type":["string","null"],"description":"rdap or whois"},
      "server":{"type":["string","null"]},"checked_at":{"$ref":"#/components/schemas/NullableTime"},"last_error":{"type":["string","null"]}}})json"},
    {"DiscoverySource", R"json({"type":"object","required":["id","name","created_at","endpoints","cidrs","ports","sni","schedule_s"],"properties":{
      "id":{"$ref":"#/components/schemas/ObjectId"},"name":{"type":"string"},"created_at":{"$ref":"#/components/schemas/Time"},
      "endpoints":{"type":"array","items":{"type":"string"}},"cidrs":{"type":"array","items":{"type":"string"}},
      "ports":{"type":"array","items":{"type":"integer"}},"sni":{"type":"array","items":{"type":"string"}},
      "schedule_s":{"type":"integer"},"targets":{"type":"integer","description":"Endpoints the source scans"},
      "last_run":{"type":["object","null"],"description":"The last scan: when, how many endpoints answered, errors"}}})json"},
    {"DiscoveredCertificate", R"json({"type":"object","required":["id","fingerprint_sha256","subject","issuer","sans","not_before","not_after","findings","endpoints"],
      "properties":{"id":{"$ref":"#/components/schemas/ObjectId"},"fingerprint_sha256":{"type":"string"},
      "subject":{"type":"string"},"issuer":{"type":"string"},"sans":{"type":"array","items":{"type":"string"}},
      "not_before":{"$ref":"#/components/schemas/NullableTime"},"not_after":{"$ref":"#/components/schemas/NullableTime"},
      "key_type":{"type":"string"},"key_bits":{"type":"integer"},"chain_length":{"type":"integer"},
      "findings":{"type":"array","items":{"type":"object","required":["name","severity","text"],"properties":{
        "name":{"type":"string"},"severity":{"type":"string"},"text":{"type":"string"}}}},
      "endpoints":{"type":"array","items":{"type":"object","properties":{"source_id":{"type":"string"},"endpoint":{"type":"string"},
        "address":{"type":"string"},"sni":{"type":"string"},"protocol":{"type":"string"},"last_seen_at":{"$ref":"#/components/schemas/NullableTime"}}}},
      "first_seen_at":{"$ref":"#/components/schemas/NullableTime"},"last_seen_at":{"$ref":"#/components/schemas/NullableTime"},
      "managed_certificate_id":{"type":["string","null"]}}})json"},
    {"OpenApiDocument", R"json({"type":"object","required":["openapi","info","paths"],"description":"This document",
      "properties":{"openapi":{"type":"string"},"info":{"type":"object"},"servers":{"type":"array"},"security":{"type":"array"},
        "paths":{"type":"object"},"components":{"type":"object"}}})json"},
};

// PUT /api/v1/settings (system) and PUT …/projects/{p}/settings (project): one member per setting
// of that scope in the settings table.
json::object settings_body_schema(setting_scope scope) {
  json::object props;
  for (const auto& d : all_settings()) {
    if (d.scope != scope) continue;
    json::object p{{"description", d.doc}};
    if (d.type == setting_type::integer) {
      // The parser takes the number or its decimal text ("30"), as the config file and the UI's
      // form fields give it.
      p["type"] = json::array{"integer", "string"};
      p["minimum"] = d.min;
      p["maximum"] = d.max;
      p["pattern"] = "^-?[0-9]+$";
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

}  // namespace

namespace detail {

json::object settings_answer_schema(setting_scope scope) {
  json::object props;
  json::array required;
  for (const auto& d : all_settings()) {
    if (d.scope != scope) continue;
    props[d.name] = json::object{{"type", d.type == setting_type::integer ? "integer" : "string"}};
    required.emplace_back(d.name);
  }
  return json::object{{"type", "object"}, {"required", std::move(required)}, {"properties", std::move(props)}};
}

json::value schema_of(std::string_view name) {
  if (name == "settings") return settings_body_schema(setting_scope::system);
  if (name == "project_settings") return settings_body_schema(setting_scope::project);
  for (const auto& b : bodies)
    if (b.name == name) return json::parse(b.schema);
  // A routes.def row names a body this table lacks: a bug the route test catches.
  throw std::logic_error(fmt::format("routes.def names the body schema \"{}\", which openapi.cpp does not have", name));
}

}  // namespace detail

std::span<const body_schema> all_body_schemas() noexcept { return bodies; }
std::span<const response_schema> all_response_schemas() noexcept { return answers; }

}  // namespace certfleet::api
