// AD CS certificates end to end (DESIGN §13) through a real certfleet process and the testbed's
// CEP/CES server (tests/testbed/msca_server.py, written from MS-XCEP and MS-WSTEP with a test CA
// made by python3-cryptography): a CA added with its policy fetched, enrollments issued at once,
// held for a certificate manager then approved or denied, refused for the template or by policy;
// renewals in both modes, by the route and by the scheduler's renewal sweep; both authentication
// methods, a wrong password and an expired client certificate; bad bodies named by field.
#include "msca_env.hpp"
#include "kdc.hpp"

#include "certfleet/core/base64.hpp"

namespace dist_test {
namespace {


TEST(msca_jobs, enroll_issues_at_once_then_renewals_store_the_next_versions_in_both_modes) {
  msca_env m;
  auto created = m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("corp")), 201);
  const auto ca_id = str(created, "id");
  // The password is sealed: never in an answer; the policy came with the creation.
  EXPECT_EQ(json::serialize(created).find("alice-password"), std::string::npos);
  EXPECT_EQ(json::serialize(m.env.ok("GET", "msca-cas/" + ca_id)).find("alice-password"), std::string::npos);
  auto templates = m.env.ok("GET", "msca-cas/" + ca_id + "/templates");
  std::set<std::string> names;
  for (const auto& t : templates.at("templates").as_array()) names.insert(str(t, "name"));
  EXPECT_TRUE(names.contains("WebServer") && names.contains("WebServerApproval") && names.contains("ECWebServer"))
      << json::serialize(templates);
  EXPECT_GT(time_of(templates, "fetched_at"), 0);
  const auto before = m.ca->stats().cep_calls;
  m.env.ok("GET", "msca-cas/" + ca_id + "/templates?refresh=1");
  EXPECT_EQ(m.ca->stats().cep_calls, before + 1);
  EXPECT_EQ(m.env.call("GET", "msca-cas/" + ca_id + "/templates?refresh=yes").status, 400);

  auto [cert, job] = m.enroll(m.enroll_body("web01", ca_id, "", "web01.corp.test"));
  auto done = m.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << json::serialize(done) << "\n" << m.log_text(job);
  const auto& flow = done.at("workflow");
  EXPECT_EQ(str(flow, "kind"), "msca");
  EXPECT_EQ(str(flow, "step"), "completed");
  EXPECT_EQ(str(flow, "template"), "WebServer");
  EXPECT_EQ(str(flow, "subject"), "CN=web01.corp.test");
  EXPECT_EQ(str(flow, "renewal_mode"), "new_key");
  EXPECT_EQ(str(flow, "terminal_reason"), "issued");
  EXPECT_FALSE(str(flow, "request_id").empty()) << json::serialize(flow);
  EXPECT_EQ(flow.at("steps").as_array().size(), 8u);
  EXPECT_EQ(flow.at("skipped_steps"), (json::array{json::value("pending_approval"), json::value("retrieving")}));

  auto v1 = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v1, "version"), 1) << json::serialize(v1);
  EXPECT_EQ(str(v1, "source"), "msca");
  EXPECT_EQ(str(v1, "status"), "active");
  EXPECT_EQ(str(v1, "template"), "WebServer");
  EXPECT_EQ(str(v1, "key_type"), "rsa-2048");  // the smallest key the template accepts
  EXPECT_EQ(v1.at("sans"), json::array{json::value("web01.corp.test")});
  EXPECT_EQ(str(v1.at("msca"), "disposition"), "issued");
  EXPECT_TRUE(chains_to(str(v1, "cert_pem"), str(v1, "chain_pem"), m.ca->ca_pem()));
  // One request at the CA, issued, for this subject.
  auto reqs = m.ca->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].status, "issued");
  EXPECT_EQ(reqs[0].tmpl, "WebServer");
  EXPECT_EQ(hex_number(reqs[0].serial), hex_number(str(v1, "serial")));

  // Renewal with a new key (the CA's default mode), by the route; the same version's renewal
  // again is the same job.
  auto renew = m.env.ok("POST", "certificates/" + cert + "/renew", "", 202);
  EXPECT_EQ(str(m.env.ok("POST", "certificates/" + cert + "/renew", "", 202), "job_id"), str(renew, "job_id"));
  auto renewed = m.wait_job(str(renew, "job_id"));
  ASSERT_EQ(str(renewed, "status"), "completed") << m.log_text(str(renew, "job_id"));
  EXPECT_EQ(str(renewed, "type"), "msca_renew_certificate");
  auto v2 = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(num(v2, "version"), 2);
  EXPECT_NE(str(v2, "serial"), str(v1, "serial"));
  EXPECT_EQ(v2.at("versions").as_array().size(), 2u);
  reqs = m.ca->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_FALSE(reqs[1].renewal);

  // A CA that renews with the current certificate: the CA sees a renewal signed by version 2's key.
  auto body = m.password_ca("corp-renew");
  body["renewal_mode"] = "renew_with_current";
  const auto ca2 = str(m.env.ok("POST", "msca-cas", json::serialize(body), 201), "id");
  auto [cert2, job2] = m.enroll(m.enroll_body("web02", ca2, "WebServer", "web02.corp.test"));
  ASSERT_EQ(str(m.wait_job(job2), "status"), "completed") << m.log_text(job2);
  auto r2 = m.env.ok("POST", "certificates/" + cert2 + "/renew", "", 202);
  auto renewed2 = m.wait_job(str(r2, "job_id"));
  ASSERT_EQ(str(renewed2, "status"), "completed") << m.log_text(str(r2, "job_id"));
  EXPECT_EQ(str(renewed2.at("workflow"), "renewal_mode"), "renew_with_current");
  reqs = m.ca->requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_TRUE(reqs[3].renewal) << "the CA did not see a renewal request";
  EXPECT_EQ(num(m.env.ok("GET", "certificates/" + cert2), "version"), 2);

  // In use: the CA cannot be deleted under its certificates.
  EXPECT_EQ(m.env.call("DELETE", "msca-cas/" + ca_id).status, 409);
}

TEST(msca_jobs, a_pending_request_is_polled_until_a_manager_approves_or_denies_it) {
  msca_env m;
  const auto ca_id = str(m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("corp")), 201), "id");
  auto [cert, job] = m.enroll(m.enroll_body("approved", ca_id, "WebServerApproval", "app01.corp.test"));
  auto first = m.wait_job(job);
  ASSERT_EQ(str(first, "status"), "completed") << m.log_text(job);
  EXPECT_EQ(str(first.at("workflow"), "step"), "pending_approval");
  EXPECT_EQ(str(first.at("workflow"), "terminal_reason"), "pending approval at the CA");
  auto pending = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(pending, "status"), "pending");
  EXPECT_EQ(str(pending.at("msca"), "disposition"), "pending");
  const auto request_id = str(pending.at("msca"), "request_id");
  ASSERT_FALSE(request_id.empty());
  // Polls run while the request waits (one chain: each poll's key names its number).
  for (auto until = std::chrono::steady_clock::now() + 20s;
       m.jobs_of("msca_poll_pending").size() < 2 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(100ms);
  ASSERT_GE(m.jobs_of("msca_poll_pending").size(), 2u);
  ASSERT_TRUE(m.ca->approve(std::stoll(request_id)));
  auto issued = m.wait_certificate(cert, [](const json::value& c) { return num(c, "version") == 1; });
  EXPECT_EQ(str(issued, "status"), "active");
  EXPECT_EQ(str(issued.at("msca"), "disposition"), "issued");
  EXPECT_TRUE(chains_to(str(issued, "cert_pem"), str(issued, "chain_pem"), m.ca->ca_pem()));
  auto reqs = m.ca->requests();
  ASSERT_EQ(reqs.size(), 1u) << "one request at the CA";
  EXPECT_EQ(hex_number(reqs[0].serial), hex_number(str(issued, "serial")));
  // The poll that retrieved it shows the workflow to its end.
  auto polls = m.jobs_of("msca_poll_pending");
  json::value last;
  for (const auto& p : polls)
    if (str(p, "status") == "completed") {
      auto d = m.env.ok("GET", "jobs/" + str(p, "id"));
      if (str(d.at("workflow"), "step") == "completed") last = d;
    }
  ASSERT_TRUE(last.is_object()) << json::serialize(polls);
  EXPECT_EQ(str(last.at("workflow"), "request_id"), request_id);
  EXPECT_GE(num(last.at("workflow"), "poll_count"), 2);
  // The count outlives the held request (gone with the store): on the certificate, and on the
  // issue job's card, which shows the same request.
  EXPECT_EQ(num(issued.at("msca"), "polls"), num(last.at("workflow"), "poll_count")) << json::serialize(issued);
  auto issue_job = m.env.ok("GET", "jobs/" + job);
  EXPECT_EQ(num(issue_job.at("workflow"), "poll_count"), num(last.at("workflow"), "poll_count"));
  // No poll is left waiting once the certificate is in.
  std::this_thread::sleep_for(3s);
  for (const auto& p : m.jobs_of("msca_poll_pending")) EXPECT_NE(str(p, "status"), "pending") << json::serialize(p);

  // Denied by the manager: the certificate failed, the poll dead with the CA's reason and a hint.
  auto [cert2, job2] = m.enroll(m.enroll_body("denied", ca_id, "WebServerApproval", "app02.corp.test"));
  ASSERT_EQ(str(m.wait_job(job2), "status"), "completed");
  const auto rid2 = str(m.env.ok("GET", "certificates/" + cert2).at("msca"), "request_id");
  ASSERT_TRUE(m.ca->deny(std::stoll(rid2), "not for this host"));
  auto failed = m.wait_certificate(cert2, [](const json::value& c) { return str(c, "status") == "failed"; });
  EXPECT_NE(str(failed, "last_error").find("not for this host"), std::string::npos) << json::serialize(failed);
  EXPECT_NE(str(failed, "last_error").find("[msca_denied]"), std::string::npos) << json::serialize(failed);
  json::value dead;
  for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until && !dead.is_object();
       std::this_thread::sleep_for(100ms))
    for (const auto& p : m.jobs_of("msca_poll_pending"))
      if (str(p, "status") == "dead") dead = m.env.ok("GET", "jobs/" + str(p, "id"));
  ASSERT_TRUE(dead.is_object());
  EXPECT_EQ(str(dead, "error_class"), "msca_denied") << json::serialize(dead);
  EXPECT_NE(str(dead.at("workflow"), "terminal_reason").find("not for this host"), std::string::npos);
  EXPECT_EQ(str(dead.at("workflow"), "failed_step"), "pending_approval");
}

TEST(msca_jobs, refusals_end_the_job_with_the_cas_reason_and_change_nothing) {
  msca_env m;
  const auto ca_id = str(m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("corp")), 201), "id");
  // A template the account may not enroll: the CA's fault, its HRESULT, the hint.
  auto [cert, job] = m.enroll(m.enroll_body("subca", ca_id, "SubCA", "sub.corp.test"));
  auto dead = m.wait_job(job);
  ASSERT_EQ(str(dead, "status"), "dead") << m.log_text(job);
  EXPECT_EQ(str(dead, "error_class"), "msca_template_not_allowed") << json::serialize(dead);
  EXPECT_NE(str(dead, "error").find("0x80094012"), std::string::npos) << str(dead, "error");
  EXPECT_EQ(str(dead.at("workflow"), "failed_step"), "submitting");
  auto c = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(c, "status"), "failed");
  EXPECT_EQ(num(c, "version"), 0);
  EXPECT_EQ(str(c.at("msca"), "error_code"), "0x80094012");

  // Denied by the policy module.
  auto [cert2, job2] = m.enroll(m.enroll_body("policy", ca_id, "DeniedByPolicy", "pol.corp.test"));
  auto dead2 = m.wait_job(job2);
  ASSERT_EQ(str(dead2, "status"), "dead");
  EXPECT_NE(str(dead2, "error").find("Denied by Policy Module"), std::string::npos) << str(dead2, "error");

  // A template that is not in the policy, a key the template does not take, bad bodies: refused
  // before anything is stored, naming the field.
  const auto certs_before = num(m.env.ok("GET", "certificates"), "total");
  auto refused = [&](json::object body, const std::string& field) {
    auto r = m.env.call("POST", "certificates/enroll", json::serialize(body));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(field_of(r), field) << r.body;
  };
  refused(m.enroll_body("x", ca_id, "NoSuchTemplate", "x.corp.test"), "template");
  auto ec = m.enroll_body("x", ca_id, "ECWebServer", "x.corp.test");
  ec["key_type"] = "rsa-2048";
  refused(ec, "key_type");
  refused(json::object{{"name", "x"}, {"msca_ca_id", ca_id}}, "subject");
  refused(json::object{{"name", "x"}, {"msca_ca_id", "nothex"}, {"subject", "CN=x"}}, "msca_ca_id");
  refused(json::object{{"name", "x"}, {"msca_ca_id", ca_id}, {"sans", json::array{1}}}, "sans[0]");
  refused(json::object{{"name", "x"}, {"msca_ca_id", ca_id}, {"subject", "CN=x"}, {"extra", 1}}, "extra");
  EXPECT_EQ(num(m.env.ok("GET", "certificates"), "total"), certs_before);

  // The CA down: the job retries (not dead at once) and says so.
  m.ca->set_faults({.unavailable = true});
  auto [cert3, job3] = m.enroll(m.enroll_body("down", ca_id, "WebServer", "down.corp.test"));
  for (auto until = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(100ms)) {
    auto j = m.env.ok("GET", "jobs/" + job3);
    if (num(j, "attempts") >= 1 && str(j, "status") != "active") break;
  }
  auto j3 = m.env.ok("GET", "jobs/" + job3);
  EXPECT_NE(str(j3, "status"), "dead") << json::serialize(j3);
  EXPECT_EQ(str(j3, "error_class"), "msca_ca_unavailable") << json::serialize(j3);
  m.ca->set_faults({});
}

TEST(msca_jobs, credentials_are_checked_at_creation_and_client_certificates_enroll) {
  msca_env m;
  // A wrong password: the policy service's answer, nothing stored, the password never quoted.
  auto wrong = m.env.call("POST", "msca-cas", json::serialize(m.password_ca("bad", "not-the-password")));
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_EQ(field_of(wrong), "auth.password");
  EXPECT_NE(wrong.body.find("[msca_auth]"), std::string::npos) << wrong.body;
  EXPECT_EQ(wrong.body.find("not-the-password"), std::string::npos);
  EXPECT_EQ(num(m.env.ok("GET", "msca-cas"), "total"), 0);

  // Loopback is refused unless msca_allow_list lists it.
  m.env.set_settings(json::object{{"msca_allow_list", "10.0.0.0/8"}});
  auto egress = m.env.call("POST", "msca-cas", json::serialize(m.password_ca("far")));
  EXPECT_EQ(egress.status, 400) << egress.body;
  EXPECT_NE(egress.body.find("msca_allow_list"), std::string::npos) << egress.body;
  m.env.set_settings(json::object{{"msca_allow_list", "127.0.0.1"}});

  // A client certificate: the TLS port that requires one.
  auto client = m.ca->issue_client_certificate("alice");
  json::object body{{"name", "corp-cert"},
                    {"cep_url", m.ca->cep_cert_url()},
                    {"auth", json::object{{"kind", "client_certificate"}, {"cert_pem", client.cert_pem}, {"key_pem", client.key_pem}}},
                    {"ca_bundle_pem", m.ca->ca_pem()}};
  auto created = m.env.ok("POST", "msca-cas", json::serialize(body), 201);
  EXPECT_EQ(json::serialize(created).find("PRIVATE KEY"), std::string::npos);
  EXPECT_EQ(str(created.at("auth"), "cert_subject"), "CN=alice");
  auto [cert, job] = m.enroll(m.enroll_body("viacert", str(created, "id"), "ECWebServer", "ec.corp.test"));
  auto done = m.wait_job(job);
  ASSERT_EQ(str(done, "status"), "completed") << m.log_text(job);
  auto c = m.env.ok("GET", "certificates/" + cert);
  EXPECT_EQ(str(c, "key_type"), "ecdsa-p256");
  auto reqs = m.ca->requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().user, "alice");

  // An expired client certificate is refused when the CA is added, naming it.
  auto old = m.ca->issue_client_certificate("alice", true);
  body["name"] = "expired";
  body["auth"] = json::object{{"kind", "client_certificate"}, {"cert_pem", old.cert_pem}, {"key_pem", old.key_pem}};
  auto r = m.env.call("POST", "msca-cas", json::serialize(body));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(field_of(r), "auth.cert_pem") << r.body;

  // Bad CA bodies, each naming its field.
  auto refused = [&](json::object b, const std::string& field) {
    auto x = m.env.call("POST", "msca-cas", json::serialize(b));
    EXPECT_EQ(x.status, 400) << x.body;
    EXPECT_EQ(field_of(x), field) << x.body;
  };
  auto plain = m.password_ca("plain");
  plain["cep_url"] = "http://127.0.0.1/CEP";
  refused(plain, "cep_url");
  auto kerberos = m.password_ca("krb");
  kerberos["auth"] = json::object{{"kind", "kerberos"}, {"principal", "svc@CORP.TEST"}};
  refused(kerberos, "auth.realm");
  auto mode = m.password_ca("mode");
  mode["renewal_mode"] = "sometimes";
  refused(mode, "renewal_mode");
  auto tmpl = m.password_ca("tmpl");
  tmpl["default_template"] = "NoSuchTemplate";
  refused(tmpl, "default_template");
  auto nopass = m.password_ca("nopass");
  nopass["auth"].as_object().erase("password");
  refused(nopass, "auth.password");
}

TEST(msca_jobs, the_renewal_sweep_enrolls_again_in_the_last_third_of_the_lifetime) {
  // 45-second certificates: due 30 s after issuance. One scheduler cycle a second.
  testbed::msca_server_options so;
  so.validity_s = 45;
  msca_env m(so, {"scheduler_interval_ms=1000", "scheduler_lease_ms=3000"});
  const auto ca_id = str(m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("corp")), 201), "id");
  auto [cert, job] = m.enroll(m.enroll_body("short", ca_id, "WebServer", "short.corp.test"));
  ASSERT_EQ(str(m.wait_job(job), "status"), "completed") << m.log_text(job);
  auto renewed = m.wait_certificate(cert, [](const json::value& c) { return num(c, "version") >= 2; }, 90s);
  EXPECT_GE(num(renewed, "version"), 2);
  auto renewals = m.jobs_of("msca_renew_certificate");
  ASSERT_FALSE(renewals.empty());
  bool by_sweep = false;
  for (const auto& j : renewals) by_sweep |= str(j, "triggered_by") == "renewal_sweep";
  EXPECT_TRUE(by_sweep) << json::serialize(renewals);
}

std::string base64(const std::string& bytes) { return certfleet::base64_encode(bytes); }

// Kerberos through a real MIT KDC: the test server's kerberos port verifies the SPNEGO token with
// the HTTP/127.0.0.1 key from the same realm (python3-gssapi), before any SOAP, as IIS does.
TEST(msca_jobs, kerberos_logs_in_with_a_password_or_a_keytab_and_refusals_name_the_credential) {
  testbed::temp_dir realm_dir("certfleet-kdc");
  testbed::kdc realm(realm_dir.path());
  realm.add_user("alice", "alice-krb-password");
  const auto service_keytab = realm.add_keytab("HTTP/127.0.0.1");
  const auto svc_keytab = testbed::kdc::read_file(realm.add_keytab("svc-certfleet"));
  testbed::msca_server_options so;
  so.kerberos_keytab = service_keytab;
  so.krb5_conf = realm.krb5_conf();
  // The server's own krb5.conf names the realm too, for a CA that gives no kdc.
  msca_env m(so, {}, realm.client_env());
  ASSERT_NE(m.ca->kerberos_port(), 0);

  auto kerberos_ca = [&](const std::string& name, json::object auth) {
    auth["kind"] = "kerberos";
    auth["realm"] = realm.realm();
    return json::object{{"name", name}, {"cep_url", m.ca->cep_kerberos_url()}, {"auth", std::move(auth)},
                        {"ca_bundle_pem", m.ca->ca_pem()}, {"default_template", "WebServer"}};
  };

  // A password, the KDC named: the policy comes through the kerberos port, the view shows which
  // credential is sealed but never it.
  auto with_password = m.env.ok(
      "POST", "msca-cas",
      json::serialize(kerberos_ca("krb-password", json::object{{"principal", "alice"}, {"password", "alice-krb-password"},
                                                               {"kdc", realm.address()}})),
      201);
  EXPECT_EQ(str(with_password.at("auth"), "credential"), "password");
  EXPECT_EQ(str(with_password.at("auth"), "principal"), "alice");
  EXPECT_EQ(json::serialize(with_password).find("alice-krb-password"), std::string::npos);
  EXPECT_GE(with_password.at("policy").at("templates").as_array().size(), 5u);
  auto [cert1, job1] = m.enroll(m.enroll_body("krb1", str(with_password, "id"), "WebServer", "krb1.corp.test"));
  ASSERT_EQ(str(m.wait_job(job1), "status"), "completed") << m.log_text(job1);
  auto c1 = m.env.ok("GET", "certificates/" + cert1);
  EXPECT_TRUE(chains_to(str(c1, "cert_pem"), str(c1, "chain_pem"), m.ca->ca_pem()));
  auto reqs = m.ca->requests();
  ASSERT_FALSE(reqs.empty());
  EXPECT_EQ(reqs.back().user, "alice");  // the initiator principal the server verified

  // A keytab, no kdc: the realm's KDC from krb5.conf (KRB5_CONFIG of the certfleet process). The
  // policy's endpoint for Kerberos (authentication 2) is where the CES request goes.
  auto with_keytab = m.env.ok("POST", "msca-cas",
                              json::serialize(kerberos_ca("krb-keytab", json::object{{"principal", "svc-certfleet@" + realm.realm()},
                                                                                     {"keytab_b64", base64(svc_keytab)}})),
                              201);
  EXPECT_EQ(str(with_keytab.at("auth"), "credential"), "keytab");
  EXPECT_EQ(json::serialize(with_keytab).find(base64(svc_keytab)), std::string::npos);
  auto [cert2, job2] = m.enroll(m.enroll_body("krb2", str(with_keytab, "id"), "ECWebServer", "krb2.corp.test"));
  ASSERT_EQ(str(m.wait_job(job2), "status"), "completed") << m.log_text(job2);
  EXPECT_EQ(m.ca->requests().back().user, "svc-certfleet");
  EXPECT_EQ(m.ca->stats().negotiate_refused, 0);

  const auto cas_before = num(m.env.ok("GET", "msca-cas"), "total");
  auto refused = [&](const json::object& body, int status, const std::string& field, const std::string& words) {
    auto r = m.env.call("POST", "msca-cas", json::serialize(body));
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(field_of(r), field) << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("wrong-krb-password"), std::string::npos) << r.body;
    return r;
  };
  // A wrong password: the KDC's refusal (preauthentication failed), naming the password.
  refused(kerberos_ca("krb-wrong", json::object{{"principal", "alice"}, {"password", "wrong-krb-password"}, {"kdc", realm.address()}}),
          400, "auth.password", "[msca_auth]");
  // A keytab of another principal: no key for alice in it.
  refused(kerberos_ca("krb-tab", json::object{{"principal", "alice"}, {"keytab_b64", base64(svc_keytab)}}), 400,
          "auth.keytab_b64", "[msca_auth]");
  // A KDC outside msca_allow_list is never asked.
  refused(kerberos_ca("krb-far", json::object{{"principal", "alice"}, {"password", "alice-krb-password"},
                                              {"kdc", "127.0.0.2:" + std::to_string(realm.port())}}),
          400, "auth.kdc", "msca_allow_list");
  // A policy service outside msca_allow_list ([::1]; the list holds 127.0.0.1) is refused before
  // the KDC is asked for a ticket to it: otherwise the KDC would refuse the unknown HTTP/::1
  // first and the answer would be [msca_auth].
  {
    auto outside = kerberos_ca("krb-outside", json::object{{"principal", "alice"}, {"password", "alice-krb-password"},
                                                           {"kdc", realm.address()}});
    outside["cep_url"] = "https://[::1]:" + std::to_string(m.ca->kerberos_port()) + "/ADPolicyProvider_CEP_Kerberos/service.svc/CEP";
    auto r = m.env.call("POST", "msca-cas", json::serialize(outside));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("msca_allow_list does not allow ::1"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("[msca_auth]"), std::string::npos) << r.body;
  }
  // Bodies refused before anything is asked.
  auto both = kerberos_ca("krb-both", json::object{{"principal", "alice"}, {"password", "x"}, {"keytab_b64", base64(svc_keytab)}});
  refused(both, 400, "auth.password", "exactly one");
  refused(kerberos_ca("krb-notab", json::object{{"principal", "alice"}, {"keytab_b64", base64("not a keytab")}}), 400,
          "auth.keytab_b64", "keytab");
  auto other_realm = kerberos_ca("krb-realm", json::object{{"principal", "alice@OTHER.TEST"}, {"password", "x"}});
  refused(other_realm, 400, "auth.principal", "auth.realm");
  auto bad_kdc = kerberos_ca("krb-kdc", json::object{{"principal", "alice"}, {"password", "x"}, {"kdc", "dc01\n]x = y:88"}});
  refused(bad_kdc, 400, "auth.kdc", "host:port");

  // The service's key changed at the KDC: the server can no longer read the tickets, answers
  // 401 with a Negotiate challenge, and certfleet says the service refused the credentials.
  realm.rekey("HTTP/127.0.0.1");
  refused(kerberos_ca("krb-rekeyed", json::object{{"principal", "alice"}, {"password", "alice-krb-password"}, {"kdc", realm.address()}}),
          400, "auth.password", "did not accept");
  EXPECT_GE(m.ca->stats().negotiate_refused, 1);
  EXPECT_EQ(num(m.env.ok("GET", "msca-cas"), "total"), cas_before);
}

// The msca_policy sweep (one scheduler cycle a second): a CA whose cached policy is older than
// its nextUpdateHours gets it fetched again; one whose credentials stopped working keeps its own
// and the sweep says why. "Older" is made by ageing the cached policy in the store file.
TEST(msca_jobs, the_policy_sweep_fetches_stale_policies_again_and_a_failing_ca_keeps_its_own) {
  testbed::temp_dir realm_dir("certfleet-kdc");
  testbed::kdc realm(realm_dir.path());
  realm.add_user("alice", "alice-krb-password");
  testbed::msca_server_options so;
  so.kerberos_keytab = realm.add_keytab("HTTP/127.0.0.1");
  so.krb5_conf = realm.krb5_conf();
  msca_env m(so, {"scheduler_interval_ms=1000", "scheduler_lease_ms=3000"});
  const auto good = str(m.env.ok("POST", "msca-cas", json::serialize(m.password_ca("good")), 201), "id");
  json::object krb{{"name", "krb"},
                   {"cep_url", m.ca->cep_kerberos_url()},
                   {"auth", json::object{{"kind", "kerberos"}, {"principal", "alice"}, {"realm", realm.realm()},
                                         {"password", "alice-krb-password"}, {"kdc", realm.address()}}},
                   {"ca_bundle_pem", m.ca->ca_pem()}};
  const auto stale = str(m.env.ok("POST", "msca-cas", json::serialize(krb), 201), "id");
  realm.set_password("alice", "a-new-password");  // the CA's sealed password is now wrong

  auto fetched_at = [&](const std::string& id) {
    auto [rc, out] = testbed::run_command({"/usr/bin/sqlite3", "-cmd", ".timeout 5000",
                                           (fs::path(m.env.data()) / "certfleet.db").string(),
                                           "SELECT json_extract(doc, '$.policy.fetched_at') FROM objects WHERE id = '" + id + "'"});
    EXPECT_EQ(rc, 0) << out;
    return std::atoll(out.c_str());
  };
  auto [rc, out] = testbed::run_command({"/usr/bin/sqlite3", "-cmd", ".timeout 5000",
                                         (fs::path(m.env.data()) / "certfleet.db").string(),
                                         "UPDATE objects SET doc = json_set(doc, '$.policy.fetched_at', 1000) WHERE kind = 'msca_ca'"});
  ASSERT_EQ(rc, 0) << out;
  ASSERT_EQ(fetched_at(good), 1000);

  for (auto until = std::chrono::steady_clock::now() + 60s; fetched_at(good) == 1000 && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(200ms);
  EXPECT_GT(fetched_at(good), testbed::unix_now_ms() - 120'000);
  EXPECT_EQ(fetched_at(stale), 1000);  // kept: the login failed
  // The sweep's log says which CA kept its policy and why.
  bool said = false;
  for (auto until = std::chrono::steady_clock::now() + 30s; !said && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(200ms))
    for (const auto& j : m.jobs_of("maintenance_sweep")) {
      const auto text = m.log_text(str(j, "id"));
      if (text.find("msca_policy: CA krb (" + stale + ") keeps its cached policy") != std::string::npos &&
          text.find("[msca_auth]") != std::string::npos) {
        said = true;
        break;
      }
    }
  EXPECT_TRUE(said);
  // The templates still answer from the policy kept.
  EXPECT_GE(m.env.ok("GET", "msca-cas/" + stale + "/templates").at("templates").as_array().size(), 5u);
}

}  // namespace
}  // namespace dist_test
