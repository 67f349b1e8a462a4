// The ACME catalog bodies and the renewal decision of the sweep, pure (no I/O): what is accepted,
// what each refusal names, what the stored documents read back as, and when a certificate is due.
#include "certfleet/lifecycle/acme_catalog.hpp"
#include "certfleet/lifecycle/acme_jobs.hpp"
#include "certfleet/lifecycle/approval.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/lifecycle/dns_providers.hpp"
#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace {

using namespace certfleet;
namespace json = boost::json;

constexpr const char* secret = "bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI=";

TEST(acme_catalog, an_account_body_is_read_and_its_document_never_holds_the_hmac_key) {
  auto a = lifecycle::parse_acme_account_request(
      R"({"name":"le","directory_url":"https://acme.example/dir","contact_email":["a@example.com","b@example.org"],
          "terms_agreed":true,"eab":{"kid":"kid-1","hmac_key":"zWNDZM6eQGHWpSRT"}})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->spec.contact, (std::vector<std::string>{"mailto:a@example.com", "mailto:b@example.org"}));
  EXPECT_EQ(a->secret.eab_hmac_key, "zWNDZM6eQGHWpSRT");
  auto doc = lifecycle::acme_account_doc_json(a->spec);
  EXPECT_EQ(doc.find("zWNDZM6eQGHWpSRT"), std::string::npos);
  store::catalog_object o;
  o.doc = doc;
  auto back = lifecycle::parse_acme_account_doc(o);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->eab_kid, "kid-1");
  EXPECT_EQ(back->contact, a->spec.contact);
}

TEST(acme_catalog, bad_bodies_name_their_field) {
  struct tc {
    std::string body, field;
  };
  const std::vector<tc> account = {
      {R"({"name":"x","directory_url":"https://a.example/d"})", "terms_agreed"},
      {R"({"name":"x","directory_url":"ftp://a.example/d","terms_agreed":true})", "directory_url"},
      {R"({"name":"x","directory_url":"https://a.example/d","terms_agreed":true,"contact_email":"no-at"})", "contact_email"},
      {R"({"name":"x","directory_url":"https://a.example/d","terms_agreed":true,"eab":{"kid":"k"}})", "eab.hmac_key"},
      {R"({"name":"x","directory_url":"https://a.example/d","terms_agreed":true,"eab":{"kid":"k","hmac_key":"a","x":1}})", "eab.x"},
      {R"({"name":"x","directory_url":"https://a.example/d","terms_agreed":true,"ca_bundle_pem":"nope"})", "ca_bundle_pem"},
      {R"({"name":"x","directory_url":"https://a.example/d","terms_agreed":true,"extra":1})", "extra"},
  };
  for (const auto& t : account) {
    auto r = lifecycle::parse_acme_account_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
  }
  auto provider = [](std::string inner) {
    return std::string(R"({"name":"d","kind":"rfc2136","rfc2136":)") + inner + "}";
  };
  const std::vector<tc> providers = {
      {provider(R"({"server":"127.0.0.1:0","tsig_key_name":"k","tsig_secret":")" + std::string(secret) + R"("})"), "rfc2136.server"},
      {provider(R"({"server":"127.0.0.1:53","tsig_key_name":"k","tsig_secret":"***"})"), "rfc2136.tsig_secret"},
      {provider(R"({"server":"127.0.0.1:53","tsig_key_name":"k","tsig_algorithm":"hmac-sha1","tsig_secret":")" + std::string(secret) + R"("})"),
       "rfc2136.tsig_algorithm"},
      {provider(R"({"server":"127.0.0.1:53","zone":"bad zone","tsig_key_name":"k","tsig_secret":")" + std::string(secret) + R"("})"),
       "rfc2136.zone"},
      {provider(R"({"server":"127.0.0.1:53","tsig_secret":")" + std::string(secret) + R"("})"), "rfc2136.tsig_key_name"},
      {R"({"name":"d","kind":"manual","manual":{"check_server":""},"rfc2136":{}})", "rfc2136"},
      {R"({"name":"d","kind":"manual","manual":{"check_server":"[::1"}})", "manual.check_server"},
      {R"({"name":"d","kind":"manual","manual":{"zone":"example.test"}})", "manual.zone"},
      {R"({"name":"d","kind":"rfc2136","manual":{}})", "manual"},
      {R"({"name":"d","kind":"route53"})", "kind"},
      {R"({"name":"d","kind":"rfc2136"})", "rfc2136"},
  };
  for (const auto& t : providers) {
    auto r = lifecycle::parse_dns_provider_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
    EXPECT_EQ(r.error().message.find(secret), std::string::npos);
  }
  const std::string ids = R"("acme_account_id":"0123456789abcdef01234567","dns_provider_id":"0123456789abcdef01234568")";
  const std::vector<tc> issues = {
      {R"({"name":"c",)" + ids + "}", "domains"},
      {R"({"name":"c","domains":[],)" + ids + "}", "domains"},
      {R"({"name":"c","domains":["a.example.test","A.example.test"],)" + ids + "}", "domains[1]"},
      {R"({"name":"c","domains":["a.example.test","x.*.example.test"],)" + ids + "}", "domains[1]"},
      {R"({"name":"c","domains":[1],)" + ids + "}", "domains[0]"},
      {R"({"name":"c","domains":["a.example.test"],"acme_account_id":"nope","dns_provider_id":"0123456789abcdef01234568"})", "acme_account_id"},
      {R"({"name":"c","domains":["a.example.test"],"key_type":"ed25519",)" + ids + "}", "key_type"},
      {R"({"name":"c","domains":["a.example.test"],"auto_renew":"yes",)" + ids + "}", "auto_renew"},
  };
  for (const auto& t : issues) {
    auto r = lifecycle::parse_acme_issue_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
  }
}

// The exec provider (issue 33): every bad body names its field and quotes no value of exec.env;
// a good one keeps only the variables' names in its document and reads back the same.
TEST(acme_catalog, an_exec_provider_body_is_checked_field_by_field_and_its_env_values_stay_secret) {
  struct tc {
    std::string body, field;
  };
  auto exec = [](std::string inner) { return std::string(R"({"name":"hook","kind":"exec","exec":)") + inner + "}"; };
  const std::vector<tc> bad = {
      {R"({"name":"hook","kind":"exec"})", "exec"},
      {exec("{}"), "exec.program"},
      {exec(R"({"program":"dns-hook"})"), "exec.program"},
      {exec(R"({"program":"/usr/local/bin/../../bin/sh"})"), "exec.program"},
      {exec(R"({"program":"/usr/bin/dns hook"})"), "exec.program"},
      {exec(R"({"program":"/usr/bin/hook","timeout_s":0})"), "exec.timeout_s"},
      {exec(R"({"program":"/usr/bin/hook","timeout_s":601})"), "exec.timeout_s"},
      {exec(R"({"program":"/usr/bin/hook","timeout_s":"60"})"), "exec.timeout_s"},
      {exec(R"({"program":"/usr/bin/hook","args":["-v"]})"), "exec.args"},
      {exec(R"({"program":"/usr/bin/hook","env":{"LD_PRELOAD":"/tmp/x.so"}})"), "exec.env.LD_PRELOAD"},
      {exec(R"({"program":"/usr/bin/hook","env":{"PATH":"/tmp"}})"), "exec.env.PATH"},
      {exec(R"({"program":"/usr/bin/hook","env":{"1ST":"s3cr3t-value"}})"), "exec.env"},
      {exec(R"({"program":"/usr/bin/hook","env":{"API_TOKEN":42}})"), "exec.env.API_TOKEN"},
      {exec(R"({"program":"/usr/bin/hook","env":["API_TOKEN"]})"), "exec.env"},
      {exec(R"({"program":"/usr/bin/hook","check_propagation":"no"})"), "exec.check_propagation"},
      {R"({"name":"hook","kind":"exec","exec":{"program":"/usr/bin/hook"},"rfc2136":{}})", "rfc2136"},
      {R"({"name":"hook","kind":"rfc2136","exec":{"program":"/usr/bin/hook"}})", "exec"},
  };
  for (const auto& t : bad) {
    auto r = lifecycle::parse_dns_provider_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
    EXPECT_EQ(r.error().message.find("s3cr3t-value"), std::string::npos) << r.error().message;
  }
  auto good = lifecycle::parse_dns_provider_request(
      exec(R"({"program":"/usr/local/bin/dns-hook","timeout_s":5,"env":{"API_TOKEN":"s3cr3t-value","ZONE":"example.test"},
               "check_propagation":false})"));
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_TRUE(good->spec.exec());
  EXPECT_EQ(good->spec.timeout_s, 5);
  EXPECT_FALSE(good->spec.check_propagation);
  good->spec.created_by_system_admin = "token:abc";
  auto doc = lifecycle::dns_provider_doc_json(good->spec);
  EXPECT_EQ(doc.find("s3cr3t-value"), std::string::npos) << doc;
  store::catalog_object o;
  o.doc = doc;
  auto back = lifecycle::parse_dns_provider_doc(o);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->program, "/usr/local/bin/dns-hook");
  EXPECT_EQ(back->env_names, (std::vector<std::string>{"API_TOKEN", "ZONE"}));
  EXPECT_EQ(back->created_by_system_admin, "token:abc");
  EXPECT_FALSE(back->check_propagation);
  EXPECT_EQ(back->where(), "exec /usr/local/bin/dns-hook");
  auto defaults = lifecycle::parse_dns_provider_request(exec(R"({"program":"/usr/local/bin/dns-hook"})"));
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->spec.timeout_s, lifecycle::exec_timeout_default_s);
  EXPECT_TRUE(defaults->spec.check_propagation);
}

// lego's interface: `PROGRAM present|cleanup FQDN. VALUE`, the environment only PATH, LC_ALL
// and the provider's variables; the output a viewer sees has every secret value replaced.
TEST(acme_catalog, an_exec_call_is_legos_interface_and_its_output_is_redacted) {
  lifecycle::dns_provider_spec spec;
  spec.kind = "exec";
  spec.program = "/usr/local/bin/dns-hook";
  std::vector<std::pair<std::string, std::string>> env{{"API_TOKEN", "s3cr3t-value"}, {"DEBUG", "1"}};
  auto c = lifecycle::make_exec_call(spec, env, "present", "_acme-challenge.www.example.test", "abc-def");
  EXPECT_EQ(c.argv, (std::vector<std::string>{"/usr/local/bin/dns-hook", "present", "_acme-challenge.www.example.test.",
                                              "abc-def"}));
  ASSERT_EQ(c.env.size(), 4u);
  EXPECT_EQ(c.env[0].rfind("PATH=", 0), 0u);
  EXPECT_EQ(c.env[1], "LC_ALL=C");
  EXPECT_EQ(c.env[2], "API_TOKEN=s3cr3t-value");
  auto same = lifecycle::make_exec_call(spec, env, "cleanup", "_acme-challenge.www.example.test.", "abc-def");
  EXPECT_EQ(same.argv[2], "_acme-challenge.www.example.test.");  // one trailing dot, never two
  auto out = lifecycle::redact_provider_output("curl -H 'Authorization: s3cr3t-value' failed (1)\n-----BEGIN PRIVATE KEY-----\nMIIB\n"
                                "-----END PRIVATE KEY-----\n",
                                env);
  EXPECT_EQ(out.find("s3cr3t-value"), std::string::npos) << out;
  EXPECT_EQ(out.find("MIIB"), std::string::npos) << out;
  EXPECT_NE(out.find("failed (1)"), std::string::npos) << out;  // "1" is too short to be a secret worth hiding
}

// httpreq and powerdns bodies (issue 33): each refusal names its field and never quotes the
// password or the API key; https unless allow_plain_http; the secrets are sealed, not in the doc.
TEST(acme_catalog, httpreq_and_powerdns_bodies_name_their_field_and_keep_their_secret_sealed) {
  struct tc {
    std::string body, field;
  };
  auto httpreq = [](std::string inner) { return std::string(R"({"name":"api","kind":"httpreq","httpreq":)") + inner + "}"; };
  auto pdns = [](std::string inner) { return std::string(R"({"name":"pdns","kind":"powerdns","powerdns":)") + inner + "}"; };
  const std::vector<tc> bad = {
      {R"({"name":"api","kind":"httpreq"})", "httpreq"},
      {httpreq("{}"), "httpreq.endpoint"},
      {httpreq(R"({"endpoint":"ftp://dns.example/acme"})"), "httpreq.endpoint"},
      {httpreq(R"({"endpoint":"http://dns.example/acme"})"), "httpreq.endpoint"},
      {httpreq(R"({"endpoint":"https://user:s3cr3t-pass@dns.example/acme"})"), "httpreq.endpoint"},
      {httpreq(R"({"endpoint":"https://dns.example/acme?token=1"})"), "httpreq.endpoint"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","username":"u"})"), "httpreq.password"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","password":"s3cr3t-pass"})"), "httpreq.password"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","username":"a:b","password":"s3cr3t-pass"})"), "httpreq.username"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","timeout_s":121})"), "httpreq.timeout_s"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","ca_bundle_pem":"nope"})"), "httpreq.ca_bundle_pem"},
      {httpreq(R"({"endpoint":"https://dns.example/acme","mode":"RAW"})"), "httpreq.mode"},
      {R"({"name":"pdns","kind":"powerdns"})", "powerdns"},
      {pdns(R"({"api_key":"s3cr3t-pass"})"), "powerdns.api_url"},
      {pdns(R"({"api_url":"https://pdns.example:8081"})"), "powerdns.api_key"},
      {pdns(R"({"api_url":"http://127.0.0.1:8081","api_key":"s3cr3t-pass"})"), "powerdns.api_url"},
      {pdns(R"({"api_url":"https://pdns.example:8081","api_key":"s3cr3t-pass","zone":"bad zone"})"), "powerdns.zone"},
      {pdns(R"({"api_url":"https://pdns.example:8081","api_key":"s3cr3t-pass","server_id":"../x"})"), "powerdns.server_id"},
      {pdns(R"({"api_url":"https://pdns.example:8081","api_key":"s3cr3t-pass","timeout_s":0})"), "powerdns.timeout_s"},
      {R"({"name":"pdns","kind":"powerdns","powerdns":{"api_url":"https://p.example","api_key":"k"},"httpreq":{}})", "httpreq"},
  };
  for (const auto& t : bad) {
    auto r = lifecycle::parse_dns_provider_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
    EXPECT_EQ(r.error().message.find("s3cr3t-pass"), std::string::npos) << r.error().message;
  }
  auto h = lifecycle::parse_dns_provider_request(httpreq(R"({"endpoint":"http://127.0.0.1:9000/acme/","allow_plain_http":true,
                                                  "username":"acme","password":"s3cr3t-pass"})"));
  ASSERT_TRUE(h) << h.error().message;
  EXPECT_EQ(h->spec.endpoint, "http://127.0.0.1:9000/acme");  // the trailing slash dropped: {endpoint}/present
  EXPECT_EQ(h->spec.timeout_s, lifecycle::http_provider_timeout_default_s);
  EXPECT_EQ(h->spec.where(), "httpreq http://127.0.0.1:9000/acme");
  EXPECT_EQ(lifecycle::dns_provider_doc_json(h->spec).find("s3cr3t-pass"), std::string::npos);
  auto d = lifecycle::parse_dns_provider_request(pdns(R"({"api_url":"https://pdns.example:8081/api/v1","api_key":"s3cr3t-pass",
                                               "zone":"example.test."})"));
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->spec.api_url, "https://pdns.example:8081");
  EXPECT_EQ(d->spec.zone, "example.test");
  EXPECT_EQ(d->spec.server_id, "localhost");
  auto doc = lifecycle::dns_provider_doc_json(d->spec);
  EXPECT_EQ(doc.find("s3cr3t-pass"), std::string::npos) << doc;
  store::catalog_object o;
  o.doc = doc;
  auto back = lifecycle::parse_dns_provider_doc(o);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_TRUE(back->powerdns());
  EXPECT_EQ(back->api_url, "https://pdns.example:8081");
  EXPECT_EQ(back->zone, "example.test");
}

// PowerDNS's documents, read without I/O: the longest zone containing the name, the TXT values
// already at the name (kept when one is added), and the PATCH that replaces or deletes the RRset.
TEST(acme_catalog, powerdns_zone_choice_rrset_reading_and_patch_bodies) {
  const std::string zones =
      R"([{"id":"example.test.","name":"example.test."},{"id":"sub.example.test.","name":"sub.example.test."},
          {"id":"other.test.","name":"other.test."},{"name":42}])";
  auto z = lifecycle::powerdns_zone_for(zones, "_acme-challenge.www.sub.example.test");
  ASSERT_TRUE(z);
  EXPECT_EQ(z->name, "sub.example.test.");
  EXPECT_EQ(lifecycle::powerdns_zone_for(zones, "_acme-challenge.example.test.")->name, "example.test.");
  EXPECT_FALSE(lifecycle::powerdns_zone_for(zones, "_acme-challenge.notexample.test"));
  EXPECT_FALSE(lifecycle::powerdns_zone_for("not json", "x.example.test"));
  EXPECT_FALSE(lifecycle::powerdns_zone_for(R"({"error":"Unauthorized"})", "x.example.test"));

  const std::string zone = R"({"name":"example.test.","rrsets":[
      {"name":"_acme-challenge.example.test.","type":"TXT","ttl":120,"records":[{"content":"\"first\"","disabled":false}]},
      {"name":"_acme-challenge.example.test.","type":"A","ttl":60,"records":[{"content":"127.0.0.1"}]},
      {"name":"www.example.test.","type":"TXT","ttl":60,"records":[{"content":"\"other\""}]}]})";
  auto rr = lifecycle::powerdns_txt_of(zone, "_ACME-challenge.example.test");
  EXPECT_TRUE(rr.found);
  EXPECT_EQ(rr.ttl, 120u);
  EXPECT_EQ(rr.contents, (std::vector<std::string>{"\"first\""}));
  EXPECT_FALSE(lifecycle::powerdns_txt_of(zone, "_acme-challenge.www.example.test").found);
  EXPECT_FALSE(lifecycle::powerdns_txt_of("[", "x").found);

  auto replace = boost::json::parse(lifecycle::powerdns_patch_body("_acme-challenge.example.test", {"\"first\"", "\"second\""}, 120));
  const auto& set = replace.at("rrsets").as_array().at(0).as_object();
  EXPECT_EQ(set.at("name"), "_acme-challenge.example.test.");
  EXPECT_EQ(set.at("changetype"), "REPLACE");
  EXPECT_EQ(set.at("ttl").as_int64(), 120);
  EXPECT_EQ(set.at("records").as_array().size(), 2u);
  auto del = boost::json::parse(lifecycle::powerdns_patch_body("_acme-challenge.example.test.", {}, 60));
  EXPECT_EQ(del.at("rrsets").as_array().at(0).at("changetype"), "DELETE");
}

TEST(acme_catalog, an_issue_body_becomes_an_unissued_acme_certificate) {
  auto r = lifecycle::parse_acme_issue_request(
      R"({"name":"www","domains":["WWW.Example.test","*.example.test"],"acme_account_id":"0123456789abcdef01234567",
          "dns_provider_id":"0123456789abcdef01234568","key_type":"rsa-2048","auto_renew":false})");
  ASSERT_TRUE(r) << r.error().message;
  auto o = lifecycle::make_unissued_acme_certificate(*r, "0123456789abcdef01234569", "p", 1000);
  EXPECT_FALSE(catalog::parse_certificate_doc(o)) << "an unissued certificate must not be delivered";
  auto d = catalog::parse_certificate_doc(o, true);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->version, 0);
  EXPECT_EQ(d->source, "acme");
  EXPECT_EQ(d->status, "pending");
  ASSERT_TRUE(d->acme);
  EXPECT_EQ(d->acme->domains, (std::vector<std::string>{"www.example.test", "*.example.test"}));
  EXPECT_EQ(d->acme->key_type, "rsa-2048");
  EXPECT_FALSE(d->acme->auto_renew);
  EXPECT_EQ(lifecycle::issue_job_key("c1"), "issue:c1");
  EXPECT_EQ(lifecycle::renew_job_key("c1", 1'800'000'000'999), "renew:c1:1800000000");
}

// Issuance approval, pure: the project settings' reading, the reject body, who may decide, and
// what each decision leaves on the certificate (stored and read back).
TEST(acme_catalog, an_approval_is_decided_once_by_someone_other_than_the_requester) {
  EXPECT_FALSE(lifecycle::issuance_requires_approval(lifecycle::project_settings_from_doc("")));
  EXPECT_FALSE(lifecycle::issuance_requires_approval(lifecycle::project_settings_from_doc("[not json")));
  EXPECT_TRUE(lifecycle::issuance_requires_approval(lifecycle::project_settings_from_doc(R"({"issuance_requires_approval":"on"})")));
  // A stored value that no longer validates, or a setting of another scope, reads as the default.
  auto odd = lifecycle::project_settings_from_doc(R"({"issuance_requires_approval":"maybe","jobs_page_size_default":"30"})");
  EXPECT_FALSE(lifecycle::issuance_requires_approval(odd));
  EXPECT_EQ(odd.count("jobs_page_size_default"), 0u);
  EXPECT_EQ(lifecycle::project_settings_from_doc(lifecycle::project_settings_doc({{"issuance_requires_approval", "on"}})).at("issuance_requires_approval"), "on");

  auto reason = lifecycle::parse_reject_request(R"({"reason":"  not ours  "})");
  ASSERT_TRUE(reason) << reason.error().message;
  EXPECT_EQ(*reason, "not ours");
  for (const char* body : {"", "{}", R"({"reason":null})", R"({"reason":" "})", "{\"reason\":\"a\\u0007b\"}", R"({"reason":1})"}) {
    auto r = lifecycle::parse_reject_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().field, "reason") << body << ": " << r.error().message;
  }
  EXPECT_FALSE(lifecycle::parse_reject_request(R"({"reason":")" + std::string(501, 'x') + R"("})"));
  EXPECT_TRUE(lifecycle::parse_reject_request(R"({"reason":")" + std::string(500, 'x') + R"("})"));
  EXPECT_EQ(lifecycle::parse_reject_request(R"({"reason":"x","more":1})").error().field, "more");

  auto r = lifecycle::parse_acme_issue_request(
      R"({"name":"www","domains":["www.example.test"],"acme_account_id":"0123456789abcdef01234567",
          "dns_provider_id":"0123456789abcdef01234568"})");
  ASSERT_TRUE(r);
  auto o = lifecycle::make_unissued_acme_certificate(*r, "0123456789abcdef01234569", "p", 1000);
  auto d = catalog::parse_certificate_doc(o, true);
  ASSERT_TRUE(d);
  // Not waiting: nobody decides anything.
  EXPECT_EQ(lifecycle::check_approval_decision(*d, "c", "token:b").error().field, "status");
  d->status = "awaiting_approval";
  d->acme->approval = lifecycle::approval_request("token:a", 2000);
  EXPECT_TRUE(lifecycle::check_approval_decision(*d, "c", "token:a").error().is(errc::forbidden));
  EXPECT_TRUE(lifecycle::check_approval_decision(*d, "c", "token:b"));
  auto rejected = *d;
  lifecycle::reject_issuance(rejected, "token:b", "no", 3000);
  EXPECT_EQ(rejected.status, "rejected");
  EXPECT_EQ(lifecycle::check_approval_decision(rejected, "c", "token:c").error().field, "status");
  lifecycle::approve_issuance(*d, "token:b", 3000);
  EXPECT_EQ(d->status, "pending");
  EXPECT_NE(lifecycle::check_approval_decision(*d, "c", "token:c").error().message.find("approved already"), std::string::npos);
  o.doc = catalog::certificate_doc_json(*d);
  auto back = catalog::parse_certificate_doc(o, true);
  ASSERT_TRUE(back && back->acme && back->acme->approval);
  EXPECT_EQ(back->acme->approval->requested_by, "token:a");
  EXPECT_EQ(back->acme->approval->decided_by, "token:b");
  EXPECT_EQ(back->acme->approval->decision, "approved");
  EXPECT_EQ(back->acme->approval->decided_at, 3000);
  auto view = catalog::certificate_view(o);
  EXPECT_EQ(view.at("approval").at("decision"), "approved");
  auto data = lifecycle::approval_event_data("c", "www", *back, "j1");
  EXPECT_EQ(data.at("requested_by"), "token:a");
  EXPECT_EQ(data.at("job_id"), "j1");
}

// The view's renewal window (DESIGN §9): none before the first version; then the last third of
// the lifetime, or the CA's window (ARI) the sweep kept for this version's serial; and the last
// issue/renew job.
TEST(acme_catalog, a_bulk_renew_body_takes_ids_or_a_window_never_both_and_names_the_field) {
  auto by_ids = lifecycle::parse_bulk_renew_request(R"({"certificate_ids":["0123456789abcdef01234567","0123456789abcdef01234568"]})");
  ASSERT_TRUE(by_ids) << by_ids.error().message;
  EXPECT_EQ(by_ids->certificate_ids.size(), 2u);
  EXPECT_EQ(by_ids->expiring_within_days, 0);
  auto window = lifecycle::parse_bulk_renew_request(R"({"expiring_within_days":365})");
  ASSERT_TRUE(window);
  EXPECT_EQ(window->expiring_within_days, 365);
  EXPECT_TRUE(window->certificate_ids.empty());
  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {"{}", "body"},
           {R"({"expiring_within_days":1,"certificate_ids":["0123456789abcdef01234567"]})", "body"},
           {R"({"expiring_within_days":-1})", "expiring_within_days"},
           {R"({"expiring_within_days":true})", "expiring_within_days"},
           {R"({"certificate_ids":[1]})", "certificate_ids[0]"},
           {R"({"certificate_ids":["0123456789abcdef01234567","0123456789ABCDEF01234567x"]})", "certificate_ids[1]"},
           {R"({"certificate_ids":{}})", "certificate_ids"},
           {R"({"ids":[]})", "ids"}}) {
    auto r = lifecycle::parse_bulk_renew_request(body);
    ASSERT_FALSE(r) << body;
    EXPECT_EQ(r.error().field, field) << body << ": " << r.error().message;
  }
}

TEST(acme_catalog, the_view_shows_the_renewal_window_and_the_last_job) {
  auto r = lifecycle::parse_acme_issue_request(
      R"({"name":"www","domains":["www.example.test"],"acme_account_id":"0123456789abcdef01234567",
          "dns_provider_id":"0123456789abcdef01234568"})");
  ASSERT_TRUE(r);
  auto o = lifecycle::make_unissued_acme_certificate(*r, "0123456789abcdef01234569", "p", 1000);
  auto v0 = catalog::certificate_view(o);
  EXPECT_TRUE(v0.at("renewal").is_null());
  EXPECT_TRUE(v0.at("last_job_id").is_null());

  auto d = *catalog::parse_certificate_doc(o, true);
  const time_ms day = 86'400'000, nb = 1'800'000'000'000;
  d.version = 1;
  d.serial = "0a";
  d.not_before = nb;
  d.not_after = nb + 90 * day;
  d.acme->last_job_id = "0123456789abcdef0123456a";
  o.doc = catalog::certificate_doc_json(d);
  auto v1 = catalog::certificate_view(o);
  const auto& lifetime = v1.at("renewal").as_object();
  EXPECT_EQ(lifetime.at("source"), "lifetime");
  EXPECT_EQ(lifetime.at("window_start"), json::value(format_iso8601(nb + 60 * day)));
  EXPECT_EQ(lifetime.at("window_end"), json::value(format_iso8601(nb + 90 * day)));
  EXPECT_TRUE(lifetime.at("checked_at").is_null());
  EXPECT_EQ(v1.at("last_job_id"), "0123456789abcdef0123456a");

  d.acme->ari = {"0a", nb + 70 * day, nb + 72 * day, nb + 10 * day};
  o.doc = catalog::certificate_doc_json(d);
  const auto v2 = catalog::certificate_view(o);
  const auto& ari = v2.at("renewal").as_object();
  EXPECT_EQ(ari.at("source"), "ari");
  EXPECT_EQ(ari.at("window_start"), json::value(format_iso8601(nb + 70 * day)));
  EXPECT_EQ(ari.at("window_end"), json::value(format_iso8601(nb + 72 * day)));
  EXPECT_EQ(ari.at("checked_at"), json::value(format_iso8601(nb + 10 * day)));
  // A window read for another version's serial is not this version's.
  d.serial = "0b";
  o.doc = catalog::certificate_doc_json(d);
  EXPECT_EQ(catalog::certificate_view(o).at("renewal").at("source"), "lifetime");
}

TEST(acme_catalog, a_revoke_body_takes_a_reason_name_or_code_and_refuses_anything_else_naming_reason) {
  struct ok_case {
    const char* body;
    std::optional<int> reason;
  };
  const ok_case oks[] = {
      {"", std::nullopt},
      {"  \n", std::nullopt},
      {"{}", std::nullopt},
      {R"({"reason":null})", std::nullopt},
      {R"({"reason":"keyCompromise"})", 1},
      {R"({"reason":"superseded"})", 4},
      {R"({"reason":"cessationOfOperation"})", 5},
      {R"({"reason":"unspecified"})", 0},
      {R"({"reason":0})", 0},
      {R"({"reason":10})", 10},
  };
  for (const auto& c : oks) {
    auto r = lifecycle::parse_revoke_request(c.body);
    ASSERT_TRUE(r) << c.body << ": " << r.error().message;
    EXPECT_EQ(r->reason, c.reason) << c.body;
  }
  const char* bad_reasons[] = {
      R"({"reason":"KeyCompromise"})", R"({"reason":"bogus"})", R"({"reason":7})",   R"({"reason":11})",
      R"({"reason":-1})",              R"({"reason":1.5})",     R"({"reason":"1"})", R"({"reason":true})",
      R"({"reason":["keyCompromise"]})", R"({"reason":{}})",    R"({"reason":""})",
  };
  for (const char* b : bad_reasons) {
    auto r = lifecycle::parse_revoke_request(b);
    ASSERT_FALSE(r) << b;
    EXPECT_EQ(r.error().field, "reason") << b;
    EXPECT_NE(r.error().message.find("keyCompromise"), std::string::npos) << "the choices are listed: " << r.error().message;
  }
  auto extra = lifecycle::parse_revoke_request(R"({"reason":"superseded","why":"x"})");
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().field, "why");
  EXPECT_FALSE(lifecycle::parse_revoke_request("not json"));
  EXPECT_FALSE(lifecycle::parse_revoke_request("[]"));
}

TEST(acme_catalog, the_revoke_and_cleanup_payloads_read_back_and_name_their_fields) {
  const std::string id = "0123456789abcdef01234567";
  auto p = lifecycle::parse_revoke_job_payload(lifecycle::revoke_job_payload(lifecycle::revoke_job{id, "0a1b", 4}));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->certificate_id, id);
  EXPECT_EQ(p->serial, "0a1b");
  EXPECT_EQ(p->reason, 4);
  auto bare = lifecycle::parse_revoke_job_payload(R"({"certificate_id":"0123456789abcdef01234567"})");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->serial.empty());
  EXPECT_FALSE(bare->reason);
  // POST …/jobs may give the reason by name too.
  auto named = lifecycle::parse_revoke_job_payload(R"({"certificate_id":"0123456789abcdef01234567","reason":"keyCompromise"})");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->reason, 1);
  struct bad_case {
    const char* payload;
    const char* field;
  };
  const bad_case bads[] = {
      {R"({})", "payload.certificate_id"},
      {R"({"certificate_id":"nope"})", "payload.certificate_id"},
      {R"({"certificate_id":"0123456789abcdef01234567","serial":"xyz"})", "payload.serial"},
      {R"({"certificate_id":"0123456789abcdef01234567","reason":7})", "payload.reason"},
  };
  for (const auto& b : bads) {
    auto r = lifecycle::parse_revoke_job_payload(b.payload);
    ASSERT_FALSE(r) << b.payload;
    EXPECT_EQ(r.error().field, b.field) << b.payload << ": " << r.error().message;
  }
  EXPECT_EQ(lifecycle::revoke_job_key(id, 3), "revoke:0123456789abcdef01234567:3");

  auto c = lifecycle::parse_cleanup_dns_payload(lifecycle::cleanup_dns_payload(id, 7));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->job_id, id);
  EXPECT_EQ(c->fence, 7);
  EXPECT_EQ(lifecycle::cleanup_dns_key(id, 7), "cleanup_dns:0123456789abcdef01234567:7");
  EXPECT_EQ(lifecycle::parse_cleanup_dns_payload(R"({"job_id":"0123456789abcdef01234567"})").error().field, "payload.fence");
  EXPECT_EQ(lifecycle::parse_cleanup_dns_payload(R"({"job_id":"0123456789abcdef01234567","fence":-1})").error().field, "payload.fence");
  EXPECT_EQ(lifecycle::parse_cleanup_dns_payload(R"({"job_id":"x","fence":1})").error().field, "payload.job_id");
}

TEST(acme_renewal, due_in_the_last_third_of_the_lifetime_only_when_issued_and_auto_renewing) {
  catalog::certificate_doc d;
  d.version = 1;
  d.not_before = 0;
  d.not_after = 90 * 86'400'000LL;
  d.acme = catalog::certificate_acme{};
  constexpr time_ms day = 86'400'000;
  EXPECT_FALSE(lifecycle::acme_renewal_due(d, 59 * day).due);
  EXPECT_TRUE(lifecycle::acme_renewal_due(d, 60 * day + 1).due);
  EXPECT_TRUE(lifecycle::acme_renewal_due(d, 100 * day).due) << "an expired certificate is renewed now";
  auto off = d;
  off.acme->auto_renew = false;
  EXPECT_FALSE(lifecycle::acme_renewal_due(off, 80 * day).due);
  auto unissued = d;
  unissued.version = 0;
  EXPECT_FALSE(lifecycle::acme_renewal_due(unissued, 80 * day).due);
  auto uploaded = d;
  uploaded.acme.reset();
  EXPECT_FALSE(lifecycle::acme_renewal_due(uploaded, 80 * day).due);
}

}  // namespace
