// The ACME catalog bodies and the renewal decision of the sweep, pure (no I/O): what is accepted,
// what each refusal names, what the stored documents read back as, and when a certificate is due.
#include "certfleet/distribution/acme_catalog.hpp"
#include "certfleet/distribution/acme_jobs.hpp"
#include "certfleet/distribution/catalog.hpp"
#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

namespace {

using namespace certfleet;
using namespace certfleet::distribution;
namespace json = boost::json;

constexpr const char* secret = "bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI=";

TEST(acme_catalog, an_account_body_is_read_and_its_document_never_holds_the_hmac_key) {
  auto a = parse_acme_account_request(
      R"({"name":"le","directory_url":"https://acme.example/dir","contact_email":["a@example.com","b@example.org"],
          "terms_agreed":true,"eab":{"kid":"kid-1","hmac_key":"zWNDZM6eQGHWpSRT"}})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->spec.contact, (std::vector<std::string>{"mailto:a@example.com", "mailto:b@example.org"}));
  EXPECT_EQ(a->secret.eab_hmac_key, "zWNDZM6eQGHWpSRT");
  auto doc = acme_account_doc_json(a->spec);
  EXPECT_EQ(doc.find("zWNDZM6eQGHWpSRT"), std::string::npos);
  store::catalog_object o;
  o.doc = doc;
  auto back = parse_acme_account_doc(o);
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
    auto r = parse_acme_account_request(t.body);
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
    auto r = parse_dns_provider_request(t.body);
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
    auto r = parse_acme_issue_request(t.body);
    ASSERT_FALSE(r) << t.body;
    EXPECT_EQ(r.error().field, t.field) << t.body << " -> " << r.error().message;
  }
}

TEST(acme_catalog, an_issue_body_becomes_an_unissued_acme_certificate) {
  auto r = parse_acme_issue_request(
      R"({"name":"www","domains":["WWW.Example.test","*.example.test"],"acme_account_id":"0123456789abcdef01234567",
          "dns_provider_id":"0123456789abcdef01234568","key_type":"rsa-2048","auto_renew":false})");
  ASSERT_TRUE(r) << r.error().message;
  auto o = make_unissued_acme_certificate(*r, "0123456789abcdef01234569", "p", 1000);
  EXPECT_FALSE(parse_certificate_doc(o)) << "an unissued certificate must not be delivered";
  auto d = parse_certificate_doc(o, true);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->version, 0);
  EXPECT_EQ(d->source, "acme");
  EXPECT_EQ(d->status, "pending");
  ASSERT_TRUE(d->acme);
  EXPECT_EQ(d->acme->domains, (std::vector<std::string>{"www.example.test", "*.example.test"}));
  EXPECT_EQ(d->acme->key_type, "rsa-2048");
  EXPECT_FALSE(d->acme->auto_renew);
  EXPECT_EQ(issue_job_key("c1"), "issue:c1");
  EXPECT_EQ(renew_job_key("c1", 1'800'000'000'999), "renew:c1:1800000000");
}

// The view's renewal window (DESIGN §9): none before the first version; then the last third of
// the lifetime, or the CA's window (ARI) the sweep kept for this version's serial; and the last
// issue/renew job.
TEST(acme_catalog, the_view_shows_the_renewal_window_and_the_last_job) {
  auto r = parse_acme_issue_request(
      R"({"name":"www","domains":["www.example.test"],"acme_account_id":"0123456789abcdef01234567",
          "dns_provider_id":"0123456789abcdef01234568"})");
  ASSERT_TRUE(r);
  auto o = make_unissued_acme_certificate(*r, "0123456789abcdef01234569", "p", 1000);
  auto v0 = certificate_view(o);
  EXPECT_TRUE(v0.at("renewal").is_null());
  EXPECT_TRUE(v0.at("last_job_id").is_null());

  auto d = *parse_certificate_doc(o, true);
  const time_ms day = 86'400'000, nb = 1'800'000'000'000;
  d.version = 1;
  d.serial = "0a";
  d.not_before = nb;
  d.not_after = nb + 90 * day;
  d.acme->last_job_id = "0123456789abcdef0123456a";
  o.doc = certificate_doc_json(d);
  auto v1 = certificate_view(o);
  const auto& lifetime = v1.at("renewal").as_object();
  EXPECT_EQ(lifetime.at("source"), "lifetime");
  EXPECT_EQ(lifetime.at("window_start"), json::value(format_iso8601(nb + 60 * day)));
  EXPECT_EQ(lifetime.at("window_end"), json::value(format_iso8601(nb + 90 * day)));
  EXPECT_TRUE(lifetime.at("checked_at").is_null());
  EXPECT_EQ(v1.at("last_job_id"), "0123456789abcdef0123456a");

  d.acme->ari = {"0a", nb + 70 * day, nb + 72 * day, nb + 10 * day};
  o.doc = certificate_doc_json(d);
  const auto v2 = certificate_view(o);
  const auto& ari = v2.at("renewal").as_object();
  EXPECT_EQ(ari.at("source"), "ari");
  EXPECT_EQ(ari.at("window_start"), json::value(format_iso8601(nb + 70 * day)));
  EXPECT_EQ(ari.at("window_end"), json::value(format_iso8601(nb + 72 * day)));
  EXPECT_EQ(ari.at("checked_at"), json::value(format_iso8601(nb + 10 * day)));
  // A window read for another version's serial is not this version's.
  d.serial = "0b";
  o.doc = certificate_doc_json(d);
  EXPECT_EQ(certificate_view(o).at("renewal").at("source"), "lifetime");
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
    auto r = parse_revoke_request(c.body);
    ASSERT_TRUE(r) << c.body << ": " << r.error().message;
    EXPECT_EQ(r->reason, c.reason) << c.body;
  }
  const char* bad_reasons[] = {
      R"({"reason":"KeyCompromise"})", R"({"reason":"bogus"})", R"({"reason":7})",   R"({"reason":11})",
      R"({"reason":-1})",              R"({"reason":1.5})",     R"({"reason":"1"})", R"({"reason":true})",
      R"({"reason":["keyCompromise"]})", R"({"reason":{}})",    R"({"reason":""})",
  };
  for (const char* b : bad_reasons) {
    auto r = parse_revoke_request(b);
    ASSERT_FALSE(r) << b;
    EXPECT_EQ(r.error().field, "reason") << b;
    EXPECT_NE(r.error().message.find("keyCompromise"), std::string::npos) << "the choices are listed: " << r.error().message;
  }
  auto extra = parse_revoke_request(R"({"reason":"superseded","why":"x"})");
  ASSERT_FALSE(extra);
  EXPECT_EQ(extra.error().field, "why");
  EXPECT_FALSE(parse_revoke_request("not json"));
  EXPECT_FALSE(parse_revoke_request("[]"));
}

TEST(acme_catalog, the_revoke_and_cleanup_payloads_read_back_and_name_their_fields) {
  const std::string id = "0123456789abcdef01234567";
  auto p = parse_revoke_job_payload(revoke_job_payload(revoke_job{id, "0a1b", 4}));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->certificate_id, id);
  EXPECT_EQ(p->serial, "0a1b");
  EXPECT_EQ(p->reason, 4);
  auto bare = parse_revoke_job_payload(R"({"certificate_id":"0123456789abcdef01234567"})");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->serial.empty());
  EXPECT_FALSE(bare->reason);
  // POST …/jobs may give the reason by name too.
  auto named = parse_revoke_job_payload(R"({"certificate_id":"0123456789abcdef01234567","reason":"keyCompromise"})");
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
    auto r = parse_revoke_job_payload(b.payload);
    ASSERT_FALSE(r) << b.payload;
    EXPECT_EQ(r.error().field, b.field) << b.payload << ": " << r.error().message;
  }
  EXPECT_EQ(revoke_job_key(id, 3), "revoke:0123456789abcdef01234567:3");

  auto c = parse_cleanup_dns_payload(cleanup_dns_payload(id, 7));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->job_id, id);
  EXPECT_EQ(c->fence, 7);
  EXPECT_EQ(cleanup_dns_key(id, 7), "cleanup_dns:0123456789abcdef01234567:7");
  EXPECT_EQ(parse_cleanup_dns_payload(R"({"job_id":"0123456789abcdef01234567"})").error().field, "payload.fence");
  EXPECT_EQ(parse_cleanup_dns_payload(R"({"job_id":"0123456789abcdef01234567","fence":-1})").error().field, "payload.fence");
  EXPECT_EQ(parse_cleanup_dns_payload(R"({"job_id":"x","fence":1})").error().field, "payload.job_id");
}

TEST(acme_renewal, due_in_the_last_third_of_the_lifetime_only_when_issued_and_auto_renewing) {
  certificate_doc d;
  d.version = 1;
  d.not_before = 0;
  d.not_after = 90 * 86'400'000LL;
  d.acme = certificate_acme{};
  constexpr time_ms day = 86'400'000;
  EXPECT_FALSE(acme_renewal_due(d, 59 * day).due);
  EXPECT_TRUE(acme_renewal_due(d, 60 * day + 1).due);
  EXPECT_TRUE(acme_renewal_due(d, 100 * day).due) << "an expired certificate is renewed now";
  auto off = d;
  off.acme->auto_renew = false;
  EXPECT_FALSE(acme_renewal_due(off, 80 * day).due);
  auto unissued = d;
  unissued.version = 0;
  EXPECT_FALSE(acme_renewal_due(unissued, 80 * day).due);
  auto uploaded = d;
  uploaded.acme.reset();
  EXPECT_FALSE(acme_renewal_due(uploaded, 80 * day).due);
}

}  // namespace
