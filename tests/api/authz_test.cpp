// The authorization matrix: every route × viewer/operator/admin/owner × another project's owner ×
// a system admin × no token × an admin's browser session with and without the CSRF header, each
// cell's status asserted. A route missing from the table fails.
#include "answer_times.hpp"
#include "api_fixture.hpp"
#include "certfleet/api/router.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/store/catalog.hpp"

#include <filesystem>
#include <set>

#include "certs.hpp"
#include "sshd.hpp"

using namespace api_test;

namespace {

class api_authz : public api_fixture {
 public:
  // A catalog object put straight into the store (the authorization matrix needs fresh ones).
  std::string put_object(std::string_view kind, std::string doc = "{}") {
    auto o = std::make_shared<store::catalog_object>();
    o->id = new_object_id();
    o->project_id = project_id;
    o->kind = std::string(kind);
    o->name = o->id;
    o->doc = std::move(doc);
    o->created_at = clock.now_ms();
    store::tx_fn fn = [o](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_object(*o);
      if (!r) return std::move(r).error();
      return {};
    };
    auto r = run_sync(st->catalog().transact(std::move(fn)));
    EXPECT_TRUE(r) << r.error().message;
    return o->id;
  }
  std::string put_distribution() {
    auto d = std::make_shared<store::distribution_record>();
    d->project_id = project_id;
    d->name = new_object_id();
    d->certificate_id = put_object(store::kind_certificate);
    d->target_ids = {put_object(store::kind_target)};
    d->created_at = clock.now_ms();
    store::tx_fn fn = [d](store::catalog_tx& tx) -> result<void> {
      auto r = tx.insert_distribution(*d);
      if (!r) return std::move(r).error();
      *d = std::move(*r);
      return {};
    };
    auto r = run_sync(st->catalog().transact(std::move(fn)));
    EXPECT_TRUE(r) << r.error().message;
    return "/api/v1/projects/default/distributions/" + d->id;
  }
};

enum col { none, viewer, operator_, admin, owner, foreign, system_admin, n_cols };
const char* col_names[] = {"no token", "viewer", "operator", "admin", "owner", "foreign owner", "system admin"};
const char* col_tokens[] = {"", "viewer", "operator", "admin", "owner", "foreign", "system"};

struct row {
  api::route_id id;
  const char* method;
  // Builds the request target (fresh objects per cell, so a success never depends on an earlier cell).
  std::function<std::string(api_authz&)> target;
  std::string body;
  std::array<int, n_cols> expect;
  // An admin's session cookie with / without X-CSRF-Token. Unset: with it, the admin's answer (a
  // create that the owner's column finds taken is taken for it too); without it, a read answers
  // the same and a write is refused.
  std::optional<std::array<int, 2>> session = std::nullopt;
  std::string content_type = {};  // unset: application/json
};
const char* session_col_names[] = {"admin session with CSRF header", "admin session without CSRF header"};

std::array<int, 2> session_expect(const row& r) {
  if (r.session) return *r.session;
  int with = r.expect[admin] == 201 && r.expect[owner] == 409 ? 409 : r.expect[admin];
  bool read = std::string_view(r.method) == "GET" || std::string_view(r.method) == "WS";
  return {with, read ? with : 403};
}

TEST_F(api_authz, every_route_every_role) {
  start();
  const std::string p = "/api/v1/projects/default";
  auto pending_job = [](api_authz& t) { return t.job_path(t.enqueue()); };
  // Catalog bodies: valid, so the admin's create succeeds; the same name again conflicts.
  auto leaf = testbed::make_certificate({});
  const std::string cert_body = boost::json::serialize(
      boost::json::object{{"name", "c"}, {"cert_pem", leaf.cert_pem}, {"key_pem", leaf.key_pem}});
  auto next_leaf = testbed::make_certificate({});
  const std::string version_body = boost::json::serialize(
      boost::json::object{{"cert_pem", next_leaf.cert_pem}, {"key_pem", next_leaf.key_pem}});
  const std::string cred_id = put_object(store::kind_credential, R"({"kind":"ssh_key"})");
  // Local delivery is a system-level capability: file targets under this base dir, system admins only.
  const std::string base = (dir.path() / "file-base").string();
  std::filesystem::create_directories(base);
  {
    store::audit_entry e;
    e.project_id = project_id;
    e.actor = "test";
    e.action = "settings.update";
    e.object = "settings";
    e.outcome = "ok";
    e.at = clock.now_ms();
    ASSERT_TRUE(run_sync(st->auth().put_system_settings({{"file_target_base_dirs", base}, {"ssh_allow_list", "127.0.0.0/8"}}, e)));
  }
  auto file_body = [&](const std::string& name) {
    return boost::json::serialize(boost::json::object{
        {"name", name}, {"module", "file"},
        {"file", boost::json::object{{"cert_path", base + "/" + name + ".crt"}, {"key_path", base + "/" + name + ".key"},
                                     {"post_command", "/usr/bin/id"}}}});
  };
  int fresh_project = 0;
  auto new_project = [&](api_authz& t) {
    auto name = "authz-" + std::to_string(++fresh_project);
    EXPECT_TRUE(run_sync(t.st->projects().create(name, t.clock.now_ms())));
    return "/api/v1/projects/" + name;
  };
  const std::string chan_id = put_object(store::kind_channel, R"({"kind":"webhook","url":"https://127.0.0.1:9/"})");
  auto ssh_key = testbed::make_ssh_key(dir.path() / "hostkey", "host");
  testbed::closed_port closed;
  const std::string scan_doc = boost::json::serialize(boost::json::object{
      {"module", "ssh"},
      {"ssh", boost::json::object{{"host", "127.0.0.1"}, {"port", closed.port()}, {"user", "u"}, {"credential_id", cred_id},
                                  {"host_key", ssh_key.public_line}, {"cert_path", "/srv/c.pem"}, {"key_path", "/srv/k.pem"}}}});
  const std::string target_body = boost::json::serialize(boost::json::object{
      {"name", "t"},
      {"module", "ssh"},
      {"ssh", boost::json::object{{"host", "127.0.0.1"}, {"port", 22}, {"user", "u"}, {"credential_id", cred_id},
                                  {"host_key", ssh_key.public_line}, {"cert_path", "/srv/c.pem"}, {"key_path", "/srv/k.pem"}}}});
  auto target_line = [&](const char* name) {
    auto v = boost::json::parse(target_body);
    v.as_object()["name"] = name;
    return boost::json::serialize(v);
  };
  const std::string rule_body = boost::json::serialize(boost::json::object{{"event", "distribution.finished"}, {"channel_id", chan_id}});
  const std::string dist_body = [&] {
    auto c = put_object(store::kind_certificate);
    auto t = put_object(store::kind_target);
    return boost::json::serialize(boost::json::object{{"name", "d"}, {"certificate_id", c}, {"target_ids", boost::json::array{boost::json::value(t)}}});
  }();
  // ACME: an account's registration is synchronous, and its directory on 127.0.0.1 is refused by
  // acme_allow_list before anything connects (400 after the role check); a provider needs no
  // peer; an issuance names stored account/provider.
  const std::string acme_account_body = boost::json::serialize(boost::json::object{
      {"name", "ca"}, {"directory_url", "https://127.0.0.1:" + std::to_string(closed.port()) + "/dir"}, {"terms_agreed", true}});
  const std::string dns_provider_body = boost::json::serialize(boost::json::object{
      {"name", "dns"}, {"kind", "rfc2136"},
      {"rfc2136", boost::json::object{{"server", "127.0.0.1:53"}, {"tsig_key_name", "k."},
                                      {"tsig_secret", "bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI="}}}});
  const std::string issue_body = boost::json::serialize(boost::json::object{
      {"name", "acme-c"}, {"domains", boost::json::array{"www.example.test"}},
      {"acme_account_id", put_object(store::kind_acme_account, R"({"directory_url":"https://127.0.0.1:9/dir"})")},
      {"dns_provider_id", put_object(store::kind_dns_provider, R"({"kind":"rfc2136","rfc2136":{"server":"127.0.0.1:53"}})")}});
  // An AD CS CA as stored after its policy was fetched (nothing listens on its port).
  const std::string msca_ca_doc =
      R"({"cep_url":"https://127.0.0.1:9/CEP","auth":{"kind":"username_password","username":"u"},)"
      R"("renewal_mode":"new_key","policy":{"fetched_at":1,"policy_id":"p","templates":[{"name":"WebServer","min_key_size":2048}]}})";
  const std::string msca_ca_body = boost::json::serialize(boost::json::object{
      {"name", "adcs"}, {"cep_url", "https://127.0.0.1:" + std::to_string(closed.port()) + "/CEP"},
      {"auth", boost::json::object{{"kind", "username_password"}, {"username", "u"}, {"password", "p"}}}});
  const std::string enroll_body = boost::json::serialize(boost::json::object{
      {"name", "msca-c"}, {"msca_ca_id", put_object(store::kind_msca_ca, msca_ca_doc)}, {"template", "WebServer"},
      {"subject", "CN=web.corp.test"}});
  const std::vector<row> rows = {
      // The session routes: sign-in takes a token in the body (none here: 400 for everyone); the
      // session is read and ended with the cookie only.
      {api::route_id::session_create, "POST", [](auto&) { return "/api/v1/session"; }, "{}",
       {400, 400, 400, 400, 400, 400, 400}, std::array<int, 2>{400, 400}},
      {api::route_id::session_get, "GET", [](auto&) { return "/api/v1/session"; }, "",
       {401, 401, 401, 401, 401, 401, 401}, std::array<int, 2>{200, 200}},
      {api::route_id::session_delete, "DELETE", [](auto&) { return "/api/v1/session"; }, "",
       {401, 401, 401, 401, 401, 401, 401}, std::array<int, 2>{204, 403}},
      {api::route_id::healthz, "GET", [](auto&) { return "/healthz"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::readyz, "GET", [](auto&) { return "/readyz"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::metrics, "GET", [](auto&) { return "/metrics"; }, "", {200, 200, 200, 200, 200, 200, 200}},
      {api::route_id::projects, "GET", [](auto&) { return "/api/v1/projects"; }, "", {401, 200, 200, 200, 200, 200, 200}},
      {api::route_id::project_create, "POST", [](auto&) { return "/api/v1/projects"; }, R"({"name":"made-by-authz"})",
       {401, 403, 403, 403, 403, 403, 201}},
      // A fresh project per cell: no project token belongs to it (404, like any foreign object).
      {api::route_id::project_delete, "DELETE", new_project, "", {401, 404, 404, 404, 404, 404, 200}},
      // Their own project: the role check refuses them; the system admin is refused because
      // `default` still holds objects.
      {api::route_id::project_delete, "DELETE", [](auto&) { return "/api/v1/projects/default"; }, "",
       {401, 403, 403, 403, 403, 404, 409}},
      {api::route_id::dashboard, "GET", [&](auto&) { return p + "/dashboard"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::jobs_list, "GET", [&](auto&) { return p + "/jobs"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::jobs_enqueue, "POST", [&](auto&) { return p + "/jobs"; }, R"({"type":"noop"})",
       {401, 403, 403, 201, 201, 404, 201}},
      {api::route_id::job_get, "GET", pending_job, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::job_retry, "POST", [](api_authz& t) { return t.job_path(t.make_dead()) + "/retry"; }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::job_cancel, "POST", [=](api_authz& t) { return pending_job(t) + "/cancel"; }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      // A noop job has no manual DNS order: the role check passes, then 409 naming the job.
      {api::route_id::job_validate_dns, "POST", [=](api_authz& t) { return pending_job(t) + "/validate-dns"; }, "",
       {401, 403, 409, 409, 409, 404, 409}},
      {api::route_id::job_logs, "GET", [=](api_authz& t) { return pending_job(t) + "/logs"; }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::job_log_stream, "WS", [=](api_authz& t) { return pending_job(t) + "/logs/stream"; }, "",
       {401, 101, 101, 101, 101, 404, 101}},
      {api::route_id::audit, "GET", [&](auto&) { return p + "/audit"; }, "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::tokens_list, "GET", [&](auto&) { return p + "/tokens"; }, "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::token_create, "POST", [&](auto&) { return p + "/tokens"; },
       R"({"name":"made-by-authz","role":"viewer","ttl_s":3600})", {401, 403, 403, 201, 201, 404, 201}},
      // A fresh viewer token per cell, so each revoke finds one still active.
      {api::route_id::token_revoke, "DELETE",
       [&](api_authz& t) {
         auto made = run_sync(api::issue_token(t.st->auth(), t.project_id, store::role::viewer, false, "to revoke",
                                               "test", t.clock));
         EXPECT_TRUE(made);
         return p + "/tokens/" + (*made)->record.id;
       },
       "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::settings_get, "GET", [](auto&) { return "/api/v1/settings"; }, "", {401, 403, 403, 403, 403, 403, 200}},
      {api::route_id::settings_schema, "GET", [](auto&) { return "/api/v1/settings/schema"; }, "",
       {401, 403, 403, 403, 403, 403, 200}},
      // Any valid token, whatever its project or role (docs/api.md): the document is the same for all.
      {api::route_id::workers_list, "GET", [](auto&) { return "/api/v1/workers"; }, "",
       {401, 403, 403, 403, 403, 403, 200}},
      {api::route_id::openapi, "GET", [](auto&) { return "/api/v1/openapi.json"; }, "",
       {401, 200, 200, 200, 200, 200, 200}},
      {api::route_id::settings_put, "PUT", [](auto&) { return "/api/v1/settings"; }, R"({"jobs_page_size_default":30})",
       {401, 403, 403, 403, 403, 403, 200}},
      {api::route_id::certificates_list, "GET", [&](auto&) { return p + "/certificates"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::certificate_create, "POST", [&](auto&) { return p + "/certificates"; }, cert_body,
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::certificate_get, "GET", [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      // A new version of a real certificate (made through the API, so its key is sealed): every
      // admin-or-better column stores one.
      {api::route_id::certificate_version_create, "POST",
       [&](api_authz& t) {
         auto made = t.client().post(p + "/certificates",
                                     boost::json::serialize(boost::json::object{{"name", new_object_id()},
                                                                                {"cert_pem", leaf.cert_pem},
                                                                                {"key_pem", leaf.key_pem}}),
                                     t.tok["admin"]);
         EXPECT_EQ(made.status, 201) << made.body;
         return p + "/certificates/" + std::string(made.json().at("id").as_string()) + "/versions";
       },
       version_body, {401, 403, 403, 201, 201, 404, 201}, std::array<int, 2>{201, 403}},
      // The second issuance of the same name conflicts; the job is enqueued with the certificate.
      {api::route_id::certificate_issue, "POST", [&](auto&) { return p + "/certificates/issue"; }, issue_body,
       {401, 403, 403, 202, 409, 404, 409}, std::array<int, 2>{409, 403}},
      // An uploaded certificate is not renewed by ACME: refused after the role check.
      {api::route_id::certificate_renew, "POST",
       [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate) + "/renew"; }, "",
       {401, 403, 409, 409, 409, 404, 409}},
      // Bulk renewal is an operator's, like one renewal; the fixture's uploaded certificates are
      // never renewed (at most listed as skipped).
      {api::route_id::certificates_renew, "POST", [&](auto&) { return p + "/certificates/renew"; },
       R"({"expiring_within_days":30})", {401, 403, 202, 202, 202, 404, 202}},
      // Approval is admin's; an uploaded certificate awaits no approval: refused after the role check.
      {api::route_id::certificate_approve, "POST",
       [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate) + "/approve"; }, "",
       {401, 403, 403, 409, 409, 404, 409}},
      {api::route_id::certificate_reject, "POST",
       [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate) + "/reject"; },
       R"({"reason":"not ours"})", {401, 403, 403, 409, 409, 404, 409}},
      // A project's settings: its members read them, its admins change them.
      {api::route_id::project_settings_get, "GET", [&](auto&) { return p + "/settings"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::project_settings_schema, "GET", [&](auto&) { return p + "/settings/schema"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::project_settings_put, "PUT", [&](auto&) { return p + "/settings"; },
       R"({"issuance_requires_approval":"off"})", {401, 403, 403, 200, 200, 404, 200}},
      // Revocation is admin's; an uploaded certificate is refused after the role check.
      {api::route_id::certificate_revoke, "POST",
       [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate) + "/revoke"; },
       R"({"reason":"superseded"})", {401, 403, 403, 409, 409, 404, 409}},
      {api::route_id::acme_accounts_list, "GET", [&](auto&) { return p + "/acme-accounts"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::acme_account_create, "POST", [&](auto&) { return p + "/acme-accounts"; }, acme_account_body,
       {401, 403, 403, 400, 400, 404, 400}},
      {api::route_id::acme_account_get, "GET", [&](api_authz& t) { return p + "/acme-accounts/" + t.put_object(store::kind_acme_account); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::acme_account_delete, "DELETE", [&](api_authz& t) { return p + "/acme-accounts/" + t.put_object(store::kind_acme_account); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      // AD CS: msca_allow_list leaves loopback out by default, so the policy fetch is refused (400)
      // after the role check; the second enrollment of the same name conflicts.
      {api::route_id::msca_cas_list, "GET", [&](auto&) { return p + "/msca-cas"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::msca_ca_create, "POST", [&](auto&) { return p + "/msca-cas"; }, msca_ca_body,
       {401, 403, 403, 400, 400, 404, 400}},
      {api::route_id::msca_ca_get, "GET", [&](api_authz& t) { return p + "/msca-cas/" + t.put_object(store::kind_msca_ca, msca_ca_doc); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::msca_ca_templates, "GET",
       [&](api_authz& t) { return p + "/msca-cas/" + t.put_object(store::kind_msca_ca, msca_ca_doc) + "/templates"; }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::msca_ca_delete, "DELETE", [&](api_authz& t) { return p + "/msca-cas/" + t.put_object(store::kind_msca_ca, msca_ca_doc); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::certificate_enroll, "POST", [&](auto&) { return p + "/certificates/enroll"; }, enroll_body,
       {401, 403, 403, 202, 409, 404, 409}, std::array<int, 2>{409, 403}},
      {api::route_id::dns_providers_list, "GET", [&](auto&) { return p + "/dns-providers"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::dns_provider_create, "POST", [&](auto&) { return p + "/dns-providers"; }, dns_provider_body,
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::dns_provider_get, "GET", [&](api_authz& t) { return p + "/dns-providers/" + t.put_object(store::kind_dns_provider); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::dns_provider_delete, "DELETE", [&](api_authz& t) { return p + "/dns-providers/" + t.put_object(store::kind_dns_provider); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::certificate_delete, "DELETE", [&](api_authz& t) { return p + "/certificates/" + t.put_object(store::kind_certificate); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::credentials_list, "GET", [&](auto&) { return p + "/credentials"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::credential_create, "POST", [&](auto&) { return p + "/credentials"; }, R"({"name":"pw","kind":"password","password":"secret"})",
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::credential_get, "GET", [&](api_authz& t) { return p + "/credentials/" + t.put_object(store::kind_credential); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::credential_delete, "DELETE", [&](api_authz& t) { return p + "/credentials/" + t.put_object(store::kind_credential); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::targets_list, "GET", [&](auto&) { return p + "/targets"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::target_create, "POST", [&](auto&) { return p + "/targets"; }, target_body,
       {401, 403, 403, 201, 409, 404, 409}},
      // A file target writes and runs a command on the worker host: system admins only.
      {api::route_id::target_create, "POST", [&](auto&) { return p + "/targets"; }, file_body("local"),
       {401, 403, 403, 403, 403, 404, 201}},
      // The bulk import: the admin's row is stored; the owner's (same name) is a bad row, 400.
      {api::route_id::targets_import, "POST", [&](auto&) { return p + "/targets:import"; },
       target_line("imported") + "\n", {401, 403, 403, 201, 400, 404, 400}, std::array<int, 2>{400, 403},
       "application/x-ndjson"},
      {api::route_id::target_get, "GET", [&](api_authz& t) { return p + "/targets/" + t.put_object(store::kind_target); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::target_delete, "DELETE", [&](api_authz& t) { return p + "/targets/" + t.put_object(store::kind_target); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::channels_list, "GET", [&](auto&) { return p + "/notification-channels"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::channel_create, "POST", [&](auto&) { return p + "/notification-channels"; }, R"({"name":"hook","kind":"webhook","url":"https://127.0.0.1:9/hook"})",
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::channel_get, "GET", [&](api_authz& t) { return p + "/notification-channels/" + t.put_object(store::kind_channel); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::channel_delete, "DELETE", [&](api_authz& t) { return p + "/notification-channels/" + t.put_object(store::kind_channel); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      // The test message is refused by the (empty) egress allow-list: a 200 answer saying so.
      {api::route_id::channel_test, "POST",
       [&](api_authz& t) {
         return p + "/notification-channels/" +
                t.put_object(store::kind_channel, R"({"kind":"webhook","url":"https://127.0.0.1:9/"})") + "/test";
       },
       "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::rules_list, "GET", [&](auto&) { return p + "/notification-rules"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::rule_create, "POST", [&](auto&) { return p + "/notification-rules"; }, rule_body,
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::rule_get, "GET", [&](api_authz& t) { return p + "/notification-rules/" + t.put_object(store::kind_rule); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::rule_delete, "DELETE", [&](api_authz& t) { return p + "/notification-rules/" + t.put_object(store::kind_rule); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::domains_list, "GET", [&](auto&) { return p + "/domains"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::domain_create, "POST", [&](auto&) { return p + "/domains"; }, R"({"name":"authz.example"})",
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::domain_get, "GET", [&](api_authz& t) { return p + "/domains/" + t.put_object(store::kind_domain); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::domain_delete, "DELETE", [&](api_authz& t) { return p + "/domains/" + t.put_object(store::kind_domain); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::domain_check, "POST", [&](api_authz& t) { return p + "/domains/" + t.put_object(store::kind_domain) + "/check"; }, "",
       {401, 403, 202, 202, 202, 404, 202}},
      // discovery_allow_list is empty here: a source is refused after the role check, naming the entry.
      {api::route_id::discovery_sources_list, "GET", [&](auto&) { return p + "/discovery-sources"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::discovery_source_create, "POST", [&](auto&) { return p + "/discovery-sources"; },
       R"({"name":"lab","endpoints":["127.0.0.1:443"]})", {401, 403, 403, 400, 400, 404, 400}},
      {api::route_id::discovery_source_get, "GET", [&](api_authz& t) { return p + "/discovery-sources/" + t.put_object(store::kind_discovery_source); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::discovery_source_delete, "DELETE", [&](api_authz& t) { return p + "/discovery-sources/" + t.put_object(store::kind_discovery_source); }, "",
       {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::discovery_source_run, "POST", [&](api_authz& t) { return p + "/discovery-sources/" + t.put_object(store::kind_discovery_source) + "/run"; }, "",
       {401, 403, 202, 202, 202, 404, 202}},
      {api::route_id::discovered_certificates_list, "GET", [&](auto&) { return p + "/discovered-certificates?finding=expired"; }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::discovered_certificate_get, "GET", [&](api_authz& t) { return p + "/discovered-certificates/" + t.put_object(store::kind_discovered_certificate); }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      // The stored object holds no certificate: the upload's checks refuse it after the role check.
      {api::route_id::discovered_certificate_import, "POST",
       [&](api_authz& t) { return p + "/discovered-certificates/" + t.put_object(store::kind_discovered_certificate) + "/import"; },
       R"({"name":"imported","key_pem":"x"})", {401, 403, 403, 400, 400, 404, 400}},
      {api::route_id::distributions_list, "GET", [&](auto&) { return p + "/distributions"; }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::distribution_create, "POST", [&](auto&) { return p + "/distributions"; }, dist_body,
       {401, 403, 403, 201, 409, 404, 409}},
      {api::route_id::distribution_get, "GET", [](api_authz& t) { return t.put_distribution(); }, "", {401, 200, 200, 200, 200, 404, 200}},
      {api::route_id::distribution_delete, "DELETE", [](api_authz& t) { return t.put_distribution(); }, "", {401, 403, 403, 200, 200, 404, 200}},
      {api::route_id::distribution_execute, "POST", [](api_authz& t) { return t.put_distribution() + "/execute"; }, "",
       {401, 403, 202, 202, 202, 404, 202}},
      // Never run: nothing to retry or roll back, nothing to cancel; the role check comes first.
      {api::route_id::distribution_retry_failed, "POST", [](api_authz& t) { return t.put_distribution() + "/retry-failed"; }, "",
       {401, 403, 409, 409, 409, 404, 409}},
      {api::route_id::distribution_retry_targets, "POST", [](api_authz& t) { return t.put_distribution() + "/retry-targets"; },
       R"({"target_ids":["65f0c0ffee0000000000000a"]})", {401, 403, 409, 409, 409, 404, 409}},
      {api::route_id::distribution_rollback, "POST", [](api_authz& t) { return t.put_distribution() + "/rollback"; }, "",
       {401, 403, 400, 400, 400, 404, 400}},
      {api::route_id::distribution_cancel, "POST", [](api_authz& t) { return t.put_distribution() + "/cancel"; }, "",
       {401, 403, 409, 409, 409, 404, 409}},
      {api::route_id::distribution_results, "GET", [](api_authz& t) { return t.put_distribution() + "/results"; }, "",
       {401, 200, 200, 200, 200, 404, 200}},
      // Nothing listens on the target's port: the scan fails after the role check (502, the one
      // answer for every way of finding no SSH server).
      {api::route_id::target_scan_host_key, "POST", [&](api_authz& t) { return p + "/targets/" + t.put_object(store::kind_target, scan_doc) + "/scan-host-key"; }, "",
       {401, 403, 502, 502, 502, 404, 502}},
  };

  std::set<api::route_id> covered;
  for (const auto& r : rows) covered.insert(r.id);
  for (const auto& r : api::all_routes())
    EXPECT_TRUE(covered.contains(r.id)) << "route " << r.method << " " << r.pattern << " has no authorization row";

  auto c = client();
  // One cell: the route's request with a bearer token (may be empty) and more headers.
  auto call = [&](const row& r, const std::string& target, const std::string& token,
                  const std::map<std::string, std::string>& h) -> std::pair<int, std::string> {
    if (std::string_view(r.method) == "WS") {
      testbed::ws_client ws("127.0.0.1", port);
      int status = ws.connect(target, token, 0, h);
      std::string body = ws.rejection();
      ws.close();
      return {status, body};
    }
    auto headers = h;
    if (!r.content_type.empty()) headers["Content-Type"] = r.content_type;
    auto res = c.request(r.method, target, r.body, token, headers);
    return {res.status, res.body};
  };
  // Every answer this walk gets is also checked for DESIGN §6's one time format.
  int times_seen = 0;
  for (const auto& r : rows) {
    for (int col = 0; col < n_cols; ++col) {
      auto target = r.target(*this);
      std::string token = col_tokens[col][0] ? tok[col_tokens[col]] : std::string();
      auto [status, body] = call(r, target, token, {});
      EXPECT_EQ(status, r.expect[col]) << r.method << " " << target << " as " << col_names[col] << ": " << body;
      if (status >= 200 && status < 300 && (body.starts_with("{") || body.starts_with("[")) &&
          r.id != api::route_id::openapi) {
        boost::system::error_code ec;
        auto answer = boost::json::parse(body, ec);
        if (!ec) times_seen += testbed::expect_answer_times(answer, r.method + std::string(" ") + target);
      }
    }
    const auto expect = session_expect(r);
    for (int with_csrf = 1; with_csrf >= 0; --with_csrf) {
      auto target = r.target(*this);
      auto s = sign_in(c, "admin");
      auto [status, body] = call(r, target, "", with(s, with_csrf));
      EXPECT_EQ(status, expect[with_csrf ? 0 : 1])
          << r.method << " " << target << " as " << session_col_names[with_csrf ? 0 : 1] << ": " << body;
    }
  }
  // Jobs, projects, sessions, certificates (with versions), distributions, catalog objects.
  EXPECT_GT(times_seen, 100);
}

// Creating a file target as a project admin or owner is refused and stores nothing, even with a
// valid body under the base directories; the system admin's is stored with its grant.
TEST_F(api_authz, file_targets_are_for_system_admins_only) {
  start();
  auto c = client();
  const std::string base = (dir.path() / "base").string();
  std::filesystem::create_directories(base);
  ASSERT_EQ(c.put("/api/v1/settings", boost::json::serialize(boost::json::object{{"file_target_base_dirs", base}}),
                  tok["system"]).status, 200);
  auto body = [&](const std::string& name, const std::string& cert) {
    return boost::json::serialize(boost::json::object{
        {"name", name}, {"module", "file"},
        {"file", boost::json::object{{"cert_path", cert}, {"key_path", base + "/k.pem"}, {"post_command", "/usr/bin/id"}}}});
  };
  const std::string targets = "/api/v1/projects/default/targets";
  for (const char* who : {"admin", "owner"}) {
    auto r = c.post(targets, body("local", base + "/c.pem"), tok[who]);
    EXPECT_EQ(r.status, 403) << who << ": " << r.body;
    EXPECT_EQ(error_code_of(r), "forbidden");
    EXPECT_EQ(error_field_of(r), "module");
  }
  EXPECT_EQ(c.get(targets, tok["owner"]).json().at("total").as_int64(), 0);
  // Outside the base directories: 400 naming the field, for the system admin too.
  auto outside = c.post(targets, body("etc", "/etc/certfleet-test.pem"), tok["system"]);
  EXPECT_EQ(outside.status, 400) << outside.body;
  EXPECT_EQ(error_field_of(outside), "file.cert_path");
  auto dotdot = c.post(targets, body("dotdot", base + "/../escape.pem"), tok["system"]);
  EXPECT_EQ(dotdot.status, 400) << dotdot.body;
  EXPECT_EQ(error_field_of(dotdot), "file.cert_path");
  // A shell command line is refused: no shell runs it.
  auto shell = boost::json::serialize(boost::json::object{
      {"name", "sh"}, {"module", "file"},
      {"file", boost::json::object{{"cert_path", base + "/c.pem"}, {"key_path", base + "/k.pem"},
                                   {"post_command", "id; sha256sum /var/lib/certfleet/certfleet.key"}}}});
  auto sh = c.post(targets, shell, tok["system"]);
  EXPECT_EQ(sh.status, 400) << sh.body;
  EXPECT_EQ(error_field_of(sh), "file.post_command");
  // The grant cannot be forged in a body.
  auto forged = boost::json::serialize(boost::json::object{
      {"name", "forged"}, {"module", "file"}, {"created_by_system_admin", "token:x"},
      {"file", boost::json::object{{"cert_path", base + "/c.pem"}, {"key_path", base + "/k.pem"}}}});
  EXPECT_EQ(c.post(targets, forged, tok["admin"]).status, 400);
  EXPECT_EQ(c.get(targets, tok["owner"]).json().at("total").as_int64(), 0);
  auto ok = c.post(targets, body("local", base + "/c.pem"), tok["system"]);
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.json().at("created_by_system_admin"), "token:" + token_ids["system"]);
  // With the setting emptied, even the system admin's new file target is refused.
  ASSERT_EQ(c.put("/api/v1/settings", R"({"file_target_base_dirs":""})", tok["system"]).status, 200);
  auto none = c.post(targets, body("later", base + "/c2.pem"), tok["system"]);
  EXPECT_EQ(none.status, 400) << none.body;
  EXPECT_NE(none.body.find("file_target_base_dirs"), std::string::npos) << none.body;
  // The setting's own grammar.
  for (const char* bad : {"relative/dir", "/", "/srv/../etc", "/srv//x"}) {
    auto r = c.put("/api/v1/settings", boost::json::serialize(boost::json::object{{"file_target_base_dirs", bad}}), tok["system"]);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_EQ(error_field_of(r), "file_target_base_dirs") << bad;
  }
}

// Issue 33: an exec DNS provider runs a program on the worker host, like a file target: a project
// admin or owner is refused (403 naming kind) and nothing is stored; the system admin's is stored
// with its grant, and its view names the variables, never their values. The grant cannot be
// forged in a body.
TEST_F(api_authz, exec_dns_providers_are_for_system_admins_only) {
  start();
  auto c = client();
  const std::string providers = "/api/v1/projects/default/dns-providers";
  const auto body = boost::json::serialize(boost::json::object{
      {"name", "hook"}, {"kind", "exec"},
      {"exec", boost::json::object{{"program", "/usr/local/bin/dns-hook"},
                                   {"env", boost::json::object{{"API_TOKEN", "tok-0123456789"}}}}}});
  for (const char* who : {"admin", "owner"}) {
    auto r = c.post(providers, body, tok[who]);
    EXPECT_EQ(r.status, 403) << who << ": " << r.body;
    EXPECT_EQ(error_code_of(r), "forbidden");
    EXPECT_EQ(error_field_of(r), "kind");
  }
  EXPECT_EQ(c.get(providers, tok["owner"]).json().at("total").as_int64(), 0);
  auto forged = boost::json::serialize(boost::json::object{
      {"name", "forged"}, {"kind", "exec"}, {"created_by_system_admin", "token:x"},
      {"exec", boost::json::object{{"program", "/usr/local/bin/dns-hook"}}}});
  EXPECT_EQ(c.post(providers, forged, tok["system"]).status, 400);
  auto ok = c.post(providers, body, tok["system"]);
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(ok.body.find("tok-0123456789"), std::string::npos) << ok.body;
  EXPECT_EQ(ok.json().at("created_by_system_admin"), "token:" + token_ids["system"]);
  EXPECT_EQ(ok.json().at("exec").at("env_names").as_array().at(0), "API_TOKEN");
  // Other kinds stay a project admin's.
  auto pdns = boost::json::serialize(boost::json::object{
      {"name", "pdns"}, {"kind", "powerdns"},
      {"powerdns", boost::json::object{{"api_url", "https://pdns.example.com:8081"}, {"api_key", "k-0123456789"}}}});
  auto r = c.post(providers, pdns, tok["admin"]);
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.body.find("k-0123456789"), std::string::npos) << r.body;
}

// Issue 28: the certificate the listener serves (tls_certificate) is the process's HTTPS identity.
// A project admin may read it but not change it (a version with their own key, revocation,
// renewal, deletion); the refusal is audited; a system admin may; other certificates are as before.
TEST_F(api_authz, only_a_system_admin_changes_the_listener_certificate) {
  auto o = test_options();
  start(o);
  const std::string certs = "/api/v1/projects/default/certificates";
  auto upload = [&](const std::string& name) {
    auto leaf = testbed::make_certificate({});
    auto r = client().post(certs, boost::json::serialize(boost::json::object{
                                      {"name", name}, {"cert_pem", leaf.cert_pem}, {"key_pem", leaf.key_pem}}),
                           tok["admin"]);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? std::string(r.json().at("id").as_string()) : std::string();
  };
  const auto served = upload("listener");
  const auto other = upload("app");
  ASSERT_FALSE(served.empty());
  ASSERT_FALSE(other.empty());
  // The same store served again by a server whose listener names `served` (no TLS material: the
  // rule is what is under test, not the handshake).
  {
    std::promise<void> stopped;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await srv->stop();
          stopped.set_value();
        },
        asio::detached);
    stopped.get_future().wait();
  }
  o.tls_certificate = certificate_ref{"default", served};
  ASSERT_TRUE(on_loop([&] {
    srv = std::make_unique<api::server>(ioc.get_executor(), *st, *q, clock, o);
    auto bound = srv->start();
    port = srv->port();
    return bool(bound);
  }));
  auto c = client();
  auto version_body = [] {
    auto leaf = testbed::make_certificate({});
    return boost::json::serialize(boost::json::object{{"cert_pem", leaf.cert_pem}, {"key_pem", leaf.key_pem}});
  };
  for (const char* who : {"admin", "owner"}) {
    auto v = c.post(certs + "/" + served + "/versions", version_body(), tok[who]);
    EXPECT_EQ(v.status, 403) << who << ": " << v.body;
    EXPECT_EQ(error_field_of(v), "id");
    EXPECT_NE(v.body.find("tls_certificate"), std::string::npos) << v.body;
    EXPECT_EQ(c.post(certs + "/" + served + "/revoke", "{}", tok[who]).status, 403) << who;
    EXPECT_EQ(c.post(certs + "/" + served + "/renew", "{}", tok[who]).status, 403) << who;
    EXPECT_EQ(c.request("DELETE", certs + "/" + served, {}, tok[who]).status, 403) << who;
  }
  // Reading it is unchanged.
  auto read = c.get(certs + "/" + served, tok["viewer"]);
  EXPECT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.json().at("version").as_int64(), 1);
  // The refusals are in the project's audit log.
  auto audit = c.get("/api/v1/projects/default/audit", tok["owner"]);
  ASSERT_EQ(audit.status, 200) << audit.body;
  EXPECT_NE(audit.body.find("POST /api/v1/projects/{p}/certificates/{id}/versions"), std::string::npos) << audit.body;
  EXPECT_NE(audit.body.find("forbidden"), std::string::npos);
  // Another certificate of the project: the admin's as before.
  auto v_other = c.post(certs + "/" + other + "/versions", version_body(), tok["admin"]);
  EXPECT_EQ(v_other.status, 201) << v_other.body;
  // The system admin may change the served one.
  auto v_sys = c.post(certs + "/" + served + "/versions", version_body(), tok["system"]);
  EXPECT_EQ(v_sys.status, 201) << v_sys.body;
}

// A project token never learns whether another project's object exists: the same 404 for a real
// foreign job id as for a made-up one, on every job route.
TEST_F(api_authz, foreign_objects_are_indistinguishable_from_missing_ones) {
  start();
  auto c = client();
  auto foreign_job = enqueue("{}", 0, other_id);
  for (const char* suffix : {"", "/logs", "/retry", "/cancel"}) {
    bool post = std::string_view(suffix) == "/retry" || std::string_view(suffix) == "/cancel";
    auto real = c.request(post ? "POST" : "GET", job_path(foreign_job) + suffix, "", tok["owner"]);
    auto made_up = c.request(post ? "POST" : "GET", job_path("0123456789abcdef01234567") + suffix, "", tok["owner"]);
    EXPECT_EQ(real.status, 404) << suffix;
    EXPECT_EQ(made_up.status, 404) << suffix;
    EXPECT_EQ(error_code_of(real), error_code_of(made_up)) << suffix;
  }
  // And the foreign job is untouched.
  auto j = run_sync(st->jobs().get(other_id, foreign_job));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->status, store::job_status::pending);
}

}  // namespace
