// ACME documents and answer headers (pure): problems with subproblems and their classes, the
// directory (meta, EAB, profiles, renewalInfo), accounts, orders, authorizations; every bad
// document names its field. Retry-After, Link, RFC 3339.
#include <gtest/gtest.h>

#include "certfleet/acme/documents.hpp"

using namespace certfleet::acme;
using certfleet::parse_retry_after;
using certfleet::parse_rfc3339;

TEST(acme_problem, rfc8555_subproblems_example_verbatim) {
  // RFC 8555 §6.7.1.
  auto p = parse_problem(R"({
    "type": "urn:ietf:params:acme:error:malformed",
    "detail": "Some of the identifiers requested were rejected",
    "subproblems": [
        {"type": "urn:ietf:params:acme:error:malformed",
         "detail": "Invalid underscore in DNS name \"_example.org\"",
         "identifier": {"type": "dns", "value": "_example.org"}},
        {"type": "urn:ietf:params:acme:error:rejectedIdentifier",
         "detail": "This CA will not issue for \"example.net\"",
         "identifier": {"type": "dns", "value": "example.net"}}
    ]
  })");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->acme_type(), "malformed");
  ASSERT_EQ(p->subproblems.size(), 2u);
  ASSERT_TRUE(p->subproblems[1].ident);
  EXPECT_EQ(p->subproblems[1].ident->value, "example.net");
  EXPECT_EQ(p->subproblems[1].acme_type(), "rejectedIdentifier");
  EXPECT_EQ(p->text(),
            "urn:ietf:params:acme:error:malformed: Some of the identifiers requested were rejected; "
            "dns _example.org: urn:ietf:params:acme:error:malformed: Invalid underscore in DNS name \"_example.org\"; "
            "dns example.net: urn:ietf:params:acme:error:rejectedIdentifier: This CA will not issue for \"example.net\"");
  EXPECT_EQ(classify_problem(*p), failure_class::permanent);
}

TEST(acme_problem, classes_by_type) {
  auto cls = [](std::string type, int status = 400) {
    problem p;
    p.type = std::move(type);
    p.status = status;
    return classify_problem(p);
  };
  const std::string u = "urn:ietf:params:acme:error:";
  for (auto t : {"rejectedIdentifier", "unauthorized", "malformed", "badCSR", "externalAccountRequired",
                 "unsupportedIdentifier", "caa", "accountDoesNotExist", "badPublicKey", "badRevocationReason",
                 "alreadyRevoked", "dns", "incorrectResponse", "userActionRequired", "orderNotReady", "invalidContact"})
    EXPECT_EQ(cls(u + t), failure_class::permanent) << t;
  for (auto t : {"rateLimited", "serverInternal", "badNonce"}) EXPECT_EQ(cls(u + t, 500), failure_class::transient) << t;
  // Not an ACME type: by status.
  EXPECT_EQ(cls("about:blank", 503), failure_class::transient);
  EXPECT_EQ(cls("https://ca.example/problems/quota", 403), failure_class::permanent);
  EXPECT_EQ(cls("", 0), failure_class::transient);
  // compound: permanent when any subproblem is.
  problem c;
  c.type = u + "compound";
  problem rl;
  rl.type = u + "rateLimited";
  c.subproblems = {rl};
  EXPECT_EQ(classify_problem(c), failure_class::transient);
  problem rej;
  rej.type = u + "rejectedIdentifier";
  c.subproblems.push_back(rej);
  EXPECT_EQ(classify_problem(c), failure_class::permanent);
  EXPECT_EQ(failure_class_name(failure_class::permanent), "permanent");
}

TEST(acme_problem, bad_documents_name_the_field) {
  struct row {
    const char* json;
    const char* field;
  };
  for (auto [json, field] : {row{R"({"type": 5})", "problem.type"}, row{R"({"status": "400"})", "problem.status"},
                             row{R"({"subproblems": {}})", "problem.subproblems"},
                             row{R"({"subproblems": [{"identifier": {"type": "dns"}}]})", "problem.subproblems[0].identifier.value"},
                             row{R"([1])", "problem"}, row{"<html>oops</html>", "problem"}, row{R"({"type":"a","type":"b"})", "problem.type"}}) {
    auto p = parse_problem(json);
    ASSERT_FALSE(p) << json;
    EXPECT_EQ(p.error().field, field) << json << ": " << p.error().message;
  }
  // One line, whatever the CA put in its detail.
  auto p = parse_problem(R"({"type":"urn:ietf:params:acme:error:badCSR","detail":"line1\nline2"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->text(), "urn:ietf:params:acme:error:badCSR: line1 line2");
}

TEST(acme_directory, reads_urls_meta_profiles_and_renewal_info) {
  auto d = parse_directory(R"({
    "newNonce": "https://ca.example/acme/new-nonce",
    "newAccount": "https://ca.example/acme/new-acct",
    "newOrder": "https://ca.example/acme/new-order",
    "revokeCert": "https://ca.example/acme/revoke-cert",
    "keyChange": "https://ca.example/acme/key-change",
    "renewalInfo": "https://ca.example/acme/renewal-info",
    "randomKey": "https://community.example/t/adding-random-entries/1",
    "meta": {
      "termsOfService": "https://ca.example/acme/terms/2024",
      "website": "https://www.ca.example/",
      "caaIdentities": ["ca.example"],
      "externalAccountRequired": true,
      "profiles": {"classic": "The profile you know", "tlsserver": "https://ca.example/docs/profiles#tlsserver"}
    }
  })");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->new_nonce, "https://ca.example/acme/new-nonce");
  EXPECT_EQ(d->revoke_cert, "https://ca.example/acme/revoke-cert");
  EXPECT_EQ(d->renewal_info, "https://ca.example/acme/renewal-info");
  EXPECT_EQ(d->new_authz, "");
  EXPECT_EQ(d->meta.terms_of_service, "https://ca.example/acme/terms/2024");
  EXPECT_TRUE(d->meta.external_account_required);
  ASSERT_EQ(d->meta.caa_identities.size(), 1u);
  ASSERT_EQ(d->meta.profiles.size(), 2u);
  EXPECT_EQ(d->meta.profiles[0].name, "classic");
  EXPECT_EQ(d->meta.profiles[1].description, "https://ca.example/docs/profiles#tlsserver");
}

TEST(acme_directory, what_is_not_a_directory_says_why) {
  const std::string ok_rest = R"("newAccount":"https://a/b","newOrder":"https://a/c","revokeCert":"https://a/d")";
  struct row {
    std::string json;
    std::string field;
    std::string words;
  };
  for (const auto& [json, field, words] :
       {row{"{" + ok_rest + "}", "directory.newNonce", "directory.newNonce is missing"},
        row{R"({"newNonce": 7,)" + ok_rest + "}", "directory.newNonce", "must be a string"},
        row{R"({"newNonce": "/relative",)" + ok_rest + "}", "directory.newNonce", "not an absolute http(s) URL"},
        row{R"({"newNonce": "https://a/n",)" + ok_rest + R"(, "meta": {"externalAccountRequired": "yes"}})",
            "directory.meta.externalAccountRequired", "true or false"},
        row{R"({"newNonce": "https://a/n",)" + ok_rest + R"(, "meta": {"profiles": ["a"]}})", "directory.meta.profiles", "object"},
        row{R"({"hello": "world"})", "directory.newNonce", "missing"},
        row{"<!DOCTYPE html><html><body>Welcome</body></html>", "directory", "HTML"},
        row{"  ", "directory", "empty"},
        row{"[]", "directory", "not a JSON object"},
        row{"{\"newNonce\":", "directory", "not valid JSON"}}) {
    auto d = parse_directory(json);
    ASSERT_FALSE(d) << json;
    EXPECT_EQ(d.error().field, field) << json;
    EXPECT_NE(d.error().message.find(words), std::string::npos) << json << ": " << d.error().message;
  }
}

TEST(acme_documents, account_order_authorization_challenge) {
  auto a = parse_account(R"({"status":"valid","contact":["mailto:ops@example.org"],"orders":"https://ca.example/acct/1/orders"})");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->status, "valid");
  EXPECT_EQ(a->contact.front(), "mailto:ops@example.org");

  auto o = parse_order(R"({
    "status": "invalid", "expires": "2016-01-20T14:09:07.99Z",
    "identifiers": [{"type": "dns", "value": "www.example.org"}, {"type": "dns", "value": "*.example.org"}],
    "authorizations": ["https://ca.example/acme/authz/PAniVnsZcis", "https://ca.example/acme/authz/r4HqLzrSrpI"],
    "finalize": "https://ca.example/acme/order/TOlocE8rfgo/finalize",
    "replaces": "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE", "profile": "tlsserver",
    "error": {"type": "urn:ietf:params:acme:error:unauthorized", "detail": "no TXT record"}
  })");
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->status, order_status::invalid);
  EXPECT_EQ(o->identifiers[1].value, "*.example.org");
  EXPECT_EQ(o->authorizations.size(), 2u);
  EXPECT_EQ(o->replaces, "aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE");
  ASSERT_TRUE(o->error);
  EXPECT_EQ(o->error->acme_type(), "unauthorized");
  EXPECT_EQ(order_status_name(o->status), "invalid");

  auto z = parse_authorization(R"({
    "status": "pending", "expires": "2016-01-02T14:09:30Z",
    "identifier": {"type": "dns", "value": "example.org"}, "wildcard": true,
    "challenges": [
      {"type": "http-01", "url": "https://ca.example/acme/chall/prV_B7yEyA4", "status": "pending",
       "token": "DGyRejmCefe7v4NfDGDKfA"},
      {"type": "dns-01", "url": "https://ca.example/acme/chall/Rg5dV14Gh1Q", "status": "invalid",
       "token": "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA",
       "error": {"type": "urn:ietf:params:acme:error:dns", "detail": "NXDOMAIN"}},
      {"type": "tkauth-01", "url": "https://ca.example/acme/chall/x", "status": "pending"}
    ]
  })");
  ASSERT_TRUE(z) << z.error().message;
  EXPECT_TRUE(z->wildcard);
  ASSERT_NE(z->find("dns-01"), nullptr);
  EXPECT_EQ(z->find("dns-01")->status, challenge_status::invalid);
  EXPECT_EQ(z->find("dns-01")->error->detail, "NXDOMAIN");
  EXPECT_EQ(z->find("tls-alpn-01"), nullptr);

  auto c = parse_challenge(R"({"type":"dns-01","url":"https://ca.example/c/1","status":"valid","token":"evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA","validated":"2016-01-02T14:09:30Z"})");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->status, challenge_status::valid);
}

TEST(acme_documents, bad_orders_and_authorizations_name_the_field) {
  const std::string fin = R"("finalize":"https://a/f")";
  struct row {
    std::string json;
    std::string field;
  };
  for (const auto& [json, field] : {
           row{R"({"identifiers":[],"authorizations":[],)" + fin + "}", "order.status"},
           row{R"({"status":"done","identifiers":[],"authorizations":[],)" + fin + "}", "order.status"},
           row{R"({"status":"pending","identifiers":[{"type":"dns"}],"authorizations":[],)" + fin + "}", "order.identifiers[0].value"},
           row{R"({"status":"pending","identifiers":[],"authorizations":["https://a/z", 3],)" + fin + "}", "order.authorizations[1]"},
           row{R"({"status":"pending","identifiers":[],"authorizations":[]})", "order.finalize"},
           row{R"({"status":"valid","identifiers":[],"authorizations":[],)" + fin + "}", "order.certificate"},
           row{R"({"status":"invalid","identifiers":[],"authorizations":[],)" + fin + R"(,"error":"bad"})", "order.error"},
       }) {
    auto o = parse_order(json);
    ASSERT_FALSE(o) << json;
    EXPECT_EQ(o.error().field, field) << json << ": " << o.error().message;
  }
  const std::string id = R"("identifier":{"type":"dns","value":"a.example"})";
  for (const auto& [json, field] : {
           row{R"({"status":"pending","challenges":[]})", "authorization.identifier"},
           row{"{" + id + R"(,"status":"pending"})", "authorization.challenges"},
           row{"{" + id + R"(,"status":"pending","challenges":[{"type":"dns-01","url":"https://a/c","status":"pending"}]})",
               "authorization.challenges[0].token"},
           row{"{" + id + R"(,"status":"pending","challenges":[{"type":"dns-01","url":"https://a/c","status":"pending","token":"../../etc/passwd+++++++++++"}]})",
               "authorization.challenges[0].token"},
           row{"{" + id + R"(,"status":"pending","challenges":[{"type":"dns-01","url":"ftp://a/c","status":"pending","token":"evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ"}]})",
               "authorization.challenges[0].url"},
           row{"{" + id + R"(,"status":"pending","challenges":[{"type":"dns-01","url":"https://a/c","status":"waiting","token":"evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ"}]})",
               "authorization.challenges[0].status"},
           row{"{" + id + R"(,"status":"pending","challenges":[],"wildcard":"no"})", "authorization.wildcard"},
       }) {
    auto z = parse_authorization(json);
    ASSERT_FALSE(z) << json;
    EXPECT_EQ(z.error().field, field) << json << ": " << z.error().message;
  }
}

TEST(acme_headers, retry_after_seconds_and_http_dates) {
  // 1999-12-31T23:59:59Z is 946684799 s.
  const certfleet::time_ms now = 946684799LL * 1000 - 120'000;
  EXPECT_EQ(parse_retry_after("120", now), 120);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0);
  EXPECT_EQ(parse_retry_after("Fri, 31 Dec 1999 23:59:59 GMT", now), 120);
  EXPECT_EQ(parse_retry_after("Friday, 31-Dec-99 23:59:59 GMT", now), 120);
  EXPECT_EQ(parse_retry_after("Fri Dec 31 23:59:59 1999", now), 120);
  EXPECT_EQ(parse_retry_after("Fri, 31 Dec 1999 23:57:00 GMT", now), 0);  // in the past: now
  EXPECT_EQ(parse_retry_after("99999999999999", now), 86400);              // capped at a day
  for (auto bad : {"", "soon", "-5", "1.5", "Fri, 31 Dec 1999 23:59:59 PST", "Fri, 32 Dec 1999 23:59:59 GMT",
                   "Fri, 29 Feb 2001 00:00:00 GMT"})
    EXPECT_FALSE(parse_retry_after(bad, now)) << bad;
}

TEST(acme_headers, link_targets_by_rel) {
  std::vector<std::string> links{
      R"(<https://ca.example/acme/cert/1/alt/1>;rel="alternate", <https://ca.example/dir>;rel="index")",
      R"(<https://ca.example/acme/cert/1/alt/2>; rel=alternate)",
      R"(<https://ca.example/issuer>;title="a, b";rel="up alternate")"};
  EXPECT_EQ(link_targets(links, "alternate"),
            (std::vector<std::string>{"https://ca.example/acme/cert/1/alt/1", "https://ca.example/acme/cert/1/alt/2",
                                      "https://ca.example/issuer"}));
  EXPECT_EQ(link_targets(links, "index"), std::vector<std::string>{"https://ca.example/dir"});
  EXPECT_TRUE(link_targets({"garbage", "<unterminated"}, "up").empty());
}

TEST(acme_headers, rfc3339_times) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339("2025-01-02T04:00:00Z"), 1735790400000LL);
  EXPECT_EQ(parse_rfc3339("2025-01-02T04:00:00.5Z"), 1735790400500LL);
  EXPECT_EQ(parse_rfc3339("2025-01-02T05:30:00+01:30"), 1735790400000LL);
  EXPECT_EQ(parse_rfc3339("2024-02-29T00:00:00Z"), 1709164800000LL);
  for (auto bad : {"2025-01-02", "2025-01-02T04:00:00", "2025-13-02T04:00:00Z", "2023-02-29T00:00:00Z",
                   "2025-01-02T04:00:00.Z", "2025-01-02T04:00:00Zjunk", "x025-01-02T04:00:00Z"})
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
}

TEST(acme_requests, revoke_cert_payload_carries_the_der_and_the_reason_code) {
  const std::string der("\x30\x82\x01\x0a\xff", 5);
  auto with = revoke_cert_payload(der, 1);
  ASSERT_TRUE(with) << with.error().message;
  EXPECT_EQ(*with, R"({"certificate":"MIIBCv8","reason":1})");
  auto without = revoke_cert_payload(der, std::nullopt);
  ASSERT_TRUE(without);
  EXPECT_EQ(*without, R"({"certificate":"MIIBCv8"})");
  auto zero = revoke_cert_payload(der, 0);  // unspecified is sent as 0, not left out
  ASSERT_TRUE(zero);
  EXPECT_EQ(*zero, R"({"certificate":"MIIBCv8","reason":0})");
  for (int bad : {-1, 7, 11}) {
    auto r = revoke_cert_payload(der, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "reason");
  }
  auto empty = revoke_cert_payload("", 1);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().field, "certificate");
}
