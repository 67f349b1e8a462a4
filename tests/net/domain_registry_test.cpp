// Domain registration data (DESIGN §12, domain_expiration_check): the RDAP bootstrap (the shipped
// IANA snapshot and overrides), RDAP domain answers and WHOIS answers in real-world shapes
// (tests/net/data/domain_registry/), registry dates; then the lookups against real servers on
// 127.0.0.1 — tests/testbed/registry_server.py, one RDAP listener and named WHOIS listeners,
// started and stopped by PID: RDAP ok / 404 / 429 / 5xx / hang, the WHOIS fallback, referrals
// (followed, bounded, loops), rate limits, malformed answers, deadlines and egress refusal.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "certfleet/core/time_text.hpp"
#include "certfleet/net/domain_registry.hpp"
#include "registry_server.hpp"
#include "run_sync.hpp"
#include "sshd.hpp"  // closed_port
#include "temp_dir.hpp"

using namespace certfleet;
using namespace certfleet::net;
using namespace std::chrono_literals;

namespace {

std::string data_path(const std::string& name) {
  return std::string(CERTFLEET_SOURCE_DIR) + "/tests/net/data/domain_registry/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string data(const std::string& name) { return slurp(data_path(name)); }

time_ms ms(std::string_view rfc3339) {
  auto t = parse_rfc3339(rfc3339);
  if (!t) throw std::runtime_error("bad test date " + std::string(rfc3339));
  return *t;
}

egress_policy policy(std::string_view text) {
  auto p = parse_egress_allow_list(text);
  if (!p) throw std::runtime_error("bad test policy: " + p.error().message);
  return *p;
}

rdap_bootstrap table_for(std::string_view tld, const std::string& base) {
  auto t = parse_rdap_bootstrap(R"({"version": "1.0", "services": [[[")" + std::string(tld) + R"("], [")" + base + R"("]]]})");
  if (!t) throw std::runtime_error("bad test bootstrap: " + t.error().message);
  return *t;
}

// ---- bootstrap ------------------------------------------------------------------------------

TEST(rdap_bootstrap, shipped_snapshot_parses_once_and_maps_real_registries) {
  const auto& t = shipped_rdap_bootstrap();
  EXPECT_EQ(&t, &shipped_rdap_bootstrap());
  EXPECT_EQ(t.publication, "2026-03-23T19:00:02Z");
  EXPECT_GT(t.services.size(), 1000u);
  EXPECT_EQ(rdap_base_for(t, "example.com"), "https://rdap.verisign.com/com/v1/");
  EXPECT_EQ(rdap_base_for(t, "example.net"), "https://rdap.verisign.com/net/v1/");
  EXPECT_EQ(rdap_base_for(t, "www.Example.ORG."), "https://rdap.publicinterestregistry.org/rdap/");
  EXPECT_EQ(rdap_base_for(t, "web.dev"), "https://pubapi.registry.google/rdap/");
  EXPECT_EQ(rdap_base_for(t, "nic.app"), "https://pubapi.registry.google/rdap/");
  EXPECT_EQ(rdap_base_for(t, "example.nl"), "https://rdap.sidn.nl/");
  EXPECT_EQ(rdap_base_for(t, "example.no-such-tld"), std::nullopt);
  EXPECT_EQ(rdap_base_for(t, ""), std::nullopt);
}

TEST(rdap_bootstrap, longest_label_suffix_wins_and_https_comes_first) {
  auto t = parse_rdap_bootstrap(R"({"version": "1.0", "publication": "2026-01-01T00:00:00Z", "services": [
      [["uk"], ["https://rdap.nominet.uk/uk/"]],
      [["CO.UK", "xn--p1ai"], ["http://plain.example/rdap/", "https://secure.example/rdap"]],
      [["uk"], ["https://second.example/"]]]})");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->publication, "2026-01-01T00:00:00Z");
  EXPECT_EQ(rdap_base_for(*t, "shop.example.co.uk"), "https://secure.example/rdap/");  // '/' added
  EXPECT_EQ(t->services.at("co.uk"), (std::vector<std::string>{"https://secure.example/rdap/", "http://plain.example/rdap/"}));
  EXPECT_EQ(rdap_base_for(*t, "example.uk"), "https://rdap.nominet.uk/uk/");  // first listing kept
  EXPECT_EQ(rdap_base_for(*t, "XN--80AB.XN--P1AI"), "https://secure.example/rdap/");
  EXPECT_EQ(rdap_base_for(*t, "example.co"), std::nullopt);
}

TEST(rdap_bootstrap, errors_name_the_field) {
  struct bad_case {
    std::string text, field;
  };
  for (const auto& c : std::vector<bad_case>{
           {"not json", "rdap_bootstrap"},
           {"[]", "rdap_bootstrap"},
           {R"({"version": "1.0"})", "rdap_bootstrap.services"},
           {R"({"version": "2.0", "services": []})", "rdap_bootstrap.version"},
           {R"({"services": {}})", "rdap_bootstrap.services"},
           {R"({"services": [[["com"]]]})", "rdap_bootstrap.services[0]"},
           {R"({"services": [[["com"], ["https://a.example/"]], [["org"], ["ftp://b.example/"]]]})",
            "rdap_bootstrap.services[1][1][0]"},
           {R"({"services": [[["com", 7], ["https://a.example/"]]]})", "rdap_bootstrap.services[0][0][1]"},
           {R"({"services": [[["bad label!"], ["https://a.example/"]]]})", "rdap_bootstrap.services[0][0][0]"},
           {R"({"services": [[["com"], []]]})", "rdap_bootstrap.services[0][1]"},
           {R"({"services": [[["com"], ["https://a.example/?q=1"]]]})", "rdap_bootstrap.services[0][1][0]"},
           {R"({"services": [], "services": []})", "rdap_bootstrap.services"},
       }) {
    auto r = parse_rdap_bootstrap(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << c.text;
    EXPECT_EQ(r.error().field, c.field) << c.text << ": " << r.error().message;
  }
  // An operator's override is named by the setting it came from.
  auto named = parse_rdap_bootstrap("{}", "rdap_bootstrap_override");
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().field, "rdap_bootstrap_override.services");
  auto huge = parse_rdap_bootstrap(std::string(max_rdap_bootstrap_bytes + 1, ' '));
  ASSERT_FALSE(huge);
  EXPECT_TRUE(huge.error().is(errc::payload_too_large));
}

// ---- RDAP domain answers ------------------------------------------------------------------------

TEST(rdap_domain, verisign_shaped_answer) {
  auto r = parse_rdap_domain(data("rdap_verisign_example.com.json"), "example.com");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->ldh_name, "EXAMPLE.COM");
  EXPECT_EQ(r->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  EXPECT_EQ(r->registered_at_ms, ms("1995-08-14T04:00:00Z"));
  EXPECT_EQ(r->last_changed_at_ms, ms("2025-08-14T07:01:39Z"));
  EXPECT_EQ(r->statuses, (std::vector<std::string>{"client delete prohibited", "client transfer prohibited",
                                                   "client update prohibited"}));
  EXPECT_EQ(r->registrar, "RESERVED-Internet Assigned Numbers Authority");
  EXPECT_EQ(r->registrar_iana_id, "376");
}

TEST(rdap_domain, pir_shaped_answer_with_fractions_and_offsets) {
  auto r = parse_rdap_domain(data("rdap_pir_example.org.json"), "EXAMPLE.org.");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->expires_at_ms, ms("2027-08-30T04:00:00Z"));
  EXPECT_EQ(r->last_changed_at_ms, ms("2026-01-24T18:01:12.617Z"));
  EXPECT_EQ(r->registrar, "Example Registrar, Inc.");  // not the registrant
  EXPECT_EQ(r->registrar_iana_id, "9999");
  EXPECT_EQ(r->statuses.size(), 4u);
}

TEST(rdap_domain, missing_expiration_is_unknown_not_an_error) {
  auto r = parse_rdap_domain(data("rdap_no_expiration.json"), "example.de");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->expires_at_ms);
  EXPECT_EQ(r->last_changed_at_ms, ms("2025-12-01T09:00:00Z"));
  EXPECT_EQ(r->registrar, "DENIC-99995-EXAMPLE");  // no vCard: the handle
  EXPECT_EQ(r->registrar_iana_id, "");
  EXPECT_EQ(r->statuses, std::vector<std::string>{"active"});
}

TEST(rdap_domain, error_documents_and_wrong_answers_are_errors_naming_them) {
  auto nf = parse_rdap_domain(data("rdap_error_404.json"), "nosuchdomain.com");
  ASSERT_FALSE(nf);
  EXPECT_TRUE(nf.error().is(errc::not_found));
  EXPECT_NE(nf.error().message.find("Not Found"), std::string::npos) << nf.error().message;
  EXPECT_NE(nf.error().message.find("did not find a domain"), std::string::npos) << nf.error().message;

  auto rl = parse_rdap_domain(data("rdap_error_429.json"), "example.com");
  ASSERT_FALSE(rl);
  EXPECT_TRUE(rl.error().is(errc::rate_limited));

  struct bad_case {
    std::string text, field;
  };
  for (const auto& c : std::vector<bad_case>{
           {R"({"errorCode": 500, "title": "Internal Error"})", "rdap.errorCode"},
           {R"({"objectClassName": "entity", "handle": "X"})", "rdap.objectClassName"},
           {R"({"objectClassName": "domain"})", "rdap.ldhName"},
           {R"({"objectClassName": "domain", "ldhName": "other.com"})", "rdap.ldhName"},
           {R"({"objectClassName": "domain", "ldhName": "example.com",
                "events": [{"eventAction": "expiration", "eventDate": "next year"}]})",
            "rdap.events[0].eventDate"},
           {R"({"objectClassName": "domain", "ldhName": "example.com", "events": [{"eventDate": "2026-01-01T00:00:00Z"}]})",
            "rdap.events[0].eventAction"},
           {R"({"objectClassName": "domain", "ldhName": "example.com", "status": ["ok", 3]})", "rdap.status[1]"},
           {R"({"objectClassName": "domain", "ldhName": "example.com", "events": {}})", "rdap.events"},
           {"<html>502</html>", "rdap"},
       }) {
    auto r = parse_rdap_domain(c.text, "example.com");
    ASSERT_FALSE(r) << c.text;
    EXPECT_TRUE(r.error().is(errc::invalid_argument)) << c.text;
    EXPECT_EQ(r.error().field, c.field) << c.text << ": " << r.error().message;
  }
  // Unreadable dates of the events the check does not depend on are left unknown.
  auto lenient = parse_rdap_domain(R"({"objectClassName": "domain", "ldhName": "example.com",
      "events": [{"eventAction": "registration", "eventDate": "long ago"},
                 {"eventAction": "expiration", "eventDate": "2026-08-13T04:00:00.5-04:00"}]})",
                                   "example.com");
  ASSERT_TRUE(lenient) << lenient.error().message;
  EXPECT_FALSE(lenient->registered_at_ms);
  EXPECT_EQ(lenient->expires_at_ms, ms("2026-08-13T08:00:00.500Z"));
}

// ---- dates --------------------------------------------------------------------------------------

TEST(registry_dates, the_shapes_registries_write) {
  const auto day = ms("2026-08-13T00:00:00Z");
  std::vector<std::pair<std::string, time_ms>> good{
      {"2026-08-13T04:00:00Z", ms("2026-08-13T04:00:00Z")},
      {"2026-08-13T04:00:00.123Z", ms("2026-08-13T04:00:00.123Z")},
      {"2026-08-13T04:00:00", ms("2026-08-13T04:00:00Z")},
      {"2026-08-13T04:00:00+0000", ms("2026-08-13T04:00:00Z")},
      {"2026-08-13T04:00:00-07:00", ms("2026-08-13T11:00:00Z")},
      {"2026-08-13 04:00:00+03", ms("2026-08-13T01:00:00Z")},
      {"2026-08-13 04:00:00 UTC", ms("2026-08-13T04:00:00Z")},
      {"2026-08-13 04:00:00 (JST)", ms("2026-08-13T04:00:00Z")},
      {"2026-08-13", day},
      {"  2026-08-13  ", day},
      {"2026.08.13", day},
      {"2026/08/13", day},
      {"2026. 08. 13.", day},
      {"13-aug-2026", day},
      {"13-Aug-2026 04:00:00 UTC", ms("2026-08-13T04:00:00Z")},
      {"13 August 2026", day},
      {"13.08.2026", day},
      {"13.08.2026 04:00:00", ms("2026-08-13T04:00:00Z")},
      {"20260813", day},
      {"2024-02-29", ms("2024-02-29T00:00:00Z")},
  };
  for (const auto& [text, want] : good) EXPECT_EQ(parse_registry_date(text), want) << text;
  for (std::string bad : {"", "next year", "2026-13-01", "2026-02-30", "2025-02-29", "13-foo-2026", "2026-08-13 junk here",
                          "2026-08", "202608130", "99-08-2026", "2026-08-13T25:00:00Z", "1850-01-01"})
    EXPECT_EQ(parse_registry_date(bad), std::nullopt) << bad;
}

// ---- WHOIS answers --------------------------------------------------------------------------------

TEST(whois_answer, verisign_thick_answer) {
  auto r = parse_whois(data("whois_verisign_thick.txt"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  EXPECT_EQ(r->registered_at_ms, ms("1995-08-14T04:00:00Z"));
  EXPECT_EQ(r->registrar, "RESERVED-Internet Assigned Numbers Authority");
  EXPECT_EQ(r->statuses, (std::vector<std::string>{"clientDeleteProhibited", "clientTransferProhibited",
                                                   "clientUpdateProhibited"}));
  EXPECT_EQ(r->referral_host, "whois.iana.org");
  EXPECT_EQ(r->referral_port, 0);
}

TEST(whois_answer, registry_date_outranks_the_registrars_copy) {
  auto r = parse_whois("Registrar Registration Expiration Date: 2027-01-01T00:00:00Z\n"
                       "Registry Expiry Date: 2026-08-13T04:00:00Z\n"
                       "Registrar: Example Registrar\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  auto only_registrar = parse_whois("Registrar Registration Expiration Date: 2027-01-01T00:00:00Z\n");
  ASSERT_TRUE(only_registrar);
  EXPECT_EQ(only_registrar->expires_at_ms, ms("2027-01-01T00:00:00Z"));
}

TEST(whois_answer, thin_answer_names_the_registrars_server) {
  auto r = parse_whois(data("whois_thin_referral.txt"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->expires_at_ms);  // "Registrar Registration Expiration Date:" is empty
  EXPECT_EQ(r->registrar, "MarkMonitor Inc.");
  EXPECT_EQ(r->referral_host, "whois.markmonitor.com");
  EXPECT_EQ(r->statuses, std::vector<std::string>{"clientUpdateProhibited"});

  auto registrar = parse_whois(data("whois_registrar_thick.txt"));
  ASSERT_TRUE(registrar) << registrar.error().message;
  EXPECT_EQ(registrar->expires_at_ms, ms("2028-09-13T07:00:00Z"));
  EXPECT_EQ(registrar->statuses, (std::vector<std::string>{"clientUpdateProhibited", "clientTransferProhibited"}));

  auto iana = parse_whois(data("whois_iana_referral.txt"));
  ASSERT_TRUE(iana) << iana.error().message;
  EXPECT_EQ(iana->referral_host, "whois.verisign-grs.com");
  EXPECT_FALSE(iana->expires_at_ms);

  for (std::string text : {"refer: whois://whois.example.net:4343/\n", "Registrar WHOIS Server: WHOIS.Example.NET.:4343\n"}) {
    auto p = parse_whois(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(p->referral_host, "whois.example.net") << text;
    EXPECT_EQ(p->referral_port, 4343) << text;
  }
  auto junk_referral = parse_whois("Registrar WHOIS Server: not a host!\nRegistrar: X\n");
  ASSERT_TRUE(junk_referral);
  EXPECT_EQ(junk_referral->referral_host, "");
}

TEST(whois_answer, other_registry_shapes) {
  // Nominet (.uk): the registrar on the line after its key, dates as 13-Aug-2026.
  auto uk = parse_whois("\n    Domain name:\n        example.co.uk\n\n    Registrar:\n        Example Ltd [Tag = EXAMPLE]\n"
                        "        URL: https://www.example.test\n\n    Relevant dates:\n        Registered on: 13-Aug-1999\n"
                        "        Expiry date:  13-Aug-2026\n        Last updated:  02-Jul-2025\n\n"
                        "    Registration status:\n        Registered until expiry date.\n");
  ASSERT_TRUE(uk) << uk.error().message;
  EXPECT_EQ(uk->registrar, "Example Ltd");
  EXPECT_EQ(uk->expires_at_ms, ms("2026-08-13T00:00:00Z"));
  EXPECT_EQ(uk->registered_at_ms, ms("1999-08-13T00:00:00Z"));
  // .ru: paid-till, a comma list of states; free-date is only a stand-in.
  auto ru = parse_whois("% TCI Whois Service.\n\ndomain:        EXAMPLE.RU\nstate:         REGISTERED, DELEGATED, VERIFIED\n"
                        "registrar:     RU-CENTER-RU\ncreated:       1999-01-01T00:00:00Z\n"
                        "free-date:     2026-09-13\npaid-till:     2026-08-13T21:00:00Z\nsource:        TCI\n");
  ASSERT_TRUE(ru) << ru.error().message;
  EXPECT_EQ(ru->expires_at_ms, ms("2026-08-13T21:00:00Z"));
  EXPECT_EQ(ru->statuses, (std::vector<std::string>{"REGISTERED", "DELEGATED", "VERIFIED"}));
  EXPECT_EQ(ru->registrar, "RU-CENTER-RU");
  // Other keys and date shapes.
  for (std::string text : {"Expiration Date: 2026.08.13\n", "expires: 20260813\n", "Expiry date: 13-aug-2026\n",
                           "Expires On: 2026-08-13\n", "Registry Expiry Date: 2026-08-13T00:00:00Z\n"}) {
    auto r = parse_whois(text);
    ASSERT_TRUE(r) << text;
    EXPECT_EQ(r->expires_at_ms, ms("2026-08-13T00:00:00Z")) << text;
  }
}

TEST(whois_answer, no_match_rate_limit_and_malformed_answers) {
  auto nm = parse_whois(data("whois_no_match.txt"));
  ASSERT_FALSE(nm);
  EXPECT_TRUE(nm.error().is(errc::not_found)) << nm.error().message;
  auto rl = parse_whois(data("whois_rate_limit.txt"));
  ASSERT_FALSE(rl);
  EXPECT_TRUE(rl.error().is(errc::rate_limited)) << rl.error().message;
  auto bad = parse_whois(data("whois_malformed.txt"));
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::invalid_argument));
  EXPECT_EQ(bad.error().field, "whois");

  for (std::string text : {"NOT FOUND\n", "%% No entries found for the selected source(s).\n",
                           "Domain: example.de\nStatus: free\n", "The queried object does not exist: DOMAIN NOT FOUND\n"}) {
    auto r = parse_whois(text);
    ASSERT_FALSE(r) << text;
    EXPECT_TRUE(r.error().is(errc::not_found)) << text << ": " << r.error().message;
  }
  for (std::string text : {"Your connection limit exceeded. Please slow down and try again later.\n",
                           "Too many queries from your IP, try again later\n", "Query rate limit reached\n"}) {
    auto r = parse_whois(text);
    ASSERT_FALSE(r) << text;
    EXPECT_TRUE(r.error().is(errc::rate_limited)) << text;
  }
  for (std::string text : {std::string(), std::string("\r\n\r\n"), std::string("random words without keys\n")}) {
    auto r = parse_whois(text);
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::invalid_argument));
  }
  auto huge = parse_whois(std::string(max_whois_bytes + 1, 'x'));
  ASSERT_FALSE(huge);
  EXPECT_TRUE(huge.error().is(errc::payload_too_large));
}

// ---- real servers on 127.0.0.1 -------------------------------------------------------------------

boost::json::object file_entry(const std::string& name, int status = 200) {
  return {{"status", status}, {"file", data_path(name)}};
}

// The RDAP and WHOIS servers most tests share.
boost::json::object standard_config() {
  boost::json::object rdap{
      {"/rdap/domain/example.com", file_entry("rdap_verisign_example.com.json")},
      {"/rdap/domain/nosuchdomain.com", file_entry("rdap_error_404.json", 404)},
      {"/rdap/domain/busy.com", {{"status", 429}, {"file", data_path("rdap_error_429.json")},
                                 {"headers", {{"Retry-After", "7"}}}}},
      {"/rdap/domain/broken.com", {{"status", 503}, {"body", "upstream down"}}},
      {"/rdap/domain/limited.com", {{"status", 500}, {"body", "internal error"}}},
      {"/rdap/domain/slow.com", {{"hang", true}}},
  };
  boost::json::object registry{
      {"broken.com", {{"file", data_path("whois_verisign_thick.txt")}}},
      {"example.io", {{"file", data_path("whois_verisign_thick.txt")}}},
      {"example-brand.com", {{"file", data_path("whois_referral_to_registrar.txt")}}},
      {"limited.com", {{"file", data_path("whois_rate_limit.txt")}}},
      {"garbled.com", {{"file", data_path("whois_malformed.txt")}}},
      {"slow.com", {{"hang", true}}},
  };
  boost::json::object registrar{{"*", {{"file", data_path("whois_registrar_thick.txt")}}}};
  return {{"rdap", rdap}, {"whois", {{"registry", registry}, {"registrar", registrar}}}};
}

const egress_policy& loopback() {
  static const egress_policy p = policy("127.0.0.1, ::1");
  return p;
}

TEST(rdap_lookup_io, answer_is_read_and_asked_for_as_rdap_json) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  auto r = testbed::run_sync(rdap_lookup(srv.rdap_base(), "Example.COM.", 5s, &loopback()));
  ASSERT_TRUE(r) << r.error().message << "\n" << srv.log();
  EXPECT_EQ(r->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  EXPECT_EQ(r->registrar_iana_id, "376");
  EXPECT_EQ(srv.count("request rdap GET /rdap/domain/example.com accept=application/rdap+json"), 1) << srv.log();
}

TEST(rdap_lookup_io, not_found_rate_limited_and_server_errors) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  auto nf = testbed::run_sync(rdap_lookup(srv.rdap_base(), "nosuchdomain.com", 5s, nullptr));
  ASSERT_FALSE(nf);
  EXPECT_TRUE(nf.error().is(errc::not_found)) << nf.error().message;

  auto rl = testbed::run_sync(rdap_lookup(srv.rdap_base(), "busy.com", 5s, nullptr));
  ASSERT_FALSE(rl);
  EXPECT_TRUE(rl.error().is(errc::rate_limited)) << rl.error().message;
  EXPECT_EQ(rl.error().retry_after_s, 7);

  auto down = testbed::run_sync(rdap_lookup(srv.rdap_base(), "broken.com", 5s, nullptr));
  ASSERT_FALSE(down);
  EXPECT_TRUE(down.error().is(errc::timeout)) << down.error().message;  // worth a retry
  EXPECT_NE(down.error().message.find("HTTP 503"), std::string::npos) << down.error().message;

  auto bad_name = testbed::run_sync(rdap_lookup(srv.rdap_base(), "not a domain", 5s, nullptr));
  ASSERT_FALSE(bad_name);
  EXPECT_EQ(bad_name.error().field, "domain");
}

TEST(lookup_domain_registration_io, rdap_first_then_whois_when_rdap_fails) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  auto table = table_for("com", srv.rdap_base());
  registration_options o;
  o.bootstrap = &table;
  o.whois_server = "127.0.0.1";
  o.whois_port = srv.whois_port("registry");
  o.egress = &loopback();
  o.rdap_timeout = 5s;
  o.whois_timeout = 5s;

  auto rdap = testbed::run_sync(lookup_domain_registration("example.com", o));
  ASSERT_TRUE(rdap) << rdap.error().message;
  EXPECT_EQ(rdap->source, "rdap");
  EXPECT_EQ(rdap->server, srv.rdap_base());
  EXPECT_EQ(rdap->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  EXPECT_EQ(rdap->registrar, "RESERVED-Internet Assigned Numbers Authority");
  EXPECT_EQ(rdap->rdap_skipped, "");

  // RDAP answers 503: WHOIS answers instead, and says why.
  auto fallback = testbed::run_sync(lookup_domain_registration("broken.com", o));
  ASSERT_TRUE(fallback) << fallback.error().message << "\n" << srv.log();
  EXPECT_EQ(fallback->source, "whois");
  EXPECT_EQ(fallback->server, "127.0.0.1:" + std::to_string(srv.whois_port("registry")));
  EXPECT_EQ(fallback->expires_at_ms, ms("2026-08-13T04:00:00Z"));
  EXPECT_EQ(fallback->statuses.size(), 3u);
  EXPECT_NE(fallback->rdap_skipped.find("HTTP 503"), std::string::npos) << fallback->rdap_skipped;

  // A TLD without an RDAP server goes to WHOIS directly.
  auto no_base = testbed::run_sync(lookup_domain_registration("example.io", o));
  ASSERT_TRUE(no_base) << no_base.error().message;
  EXPECT_EQ(no_base->source, "whois");
  EXPECT_EQ(no_base->rdap_skipped, "no RDAP server for .io");
  EXPECT_EQ(srv.count("request rdap GET /rdap/domain/example.io"), 0);

  // RDAP's 404 is the registry's answer: WHOIS is not asked.
  const int whois_before = srv.count("connect whois");
  auto nf = testbed::run_sync(lookup_domain_registration("nosuchdomain.com", o));
  ASSERT_FALSE(nf);
  EXPECT_TRUE(nf.error().is(errc::not_found)) << nf.error().message;
  EXPECT_EQ(srv.count("connect whois"), whois_before);

  // Both failing: the WHOIS error, naming the RDAP one.
  auto both = testbed::run_sync(lookup_domain_registration("limited.com", o));
  ASSERT_FALSE(both);
  EXPECT_TRUE(both.error().is(errc::rate_limited)) << both.error().message;
  EXPECT_NE(both.error().message.find("RDAP"), std::string::npos) << both.error().message;

  // Without the fallback, RDAP's failure is the answer.
  o.whois_fallback = false;
  auto no_fallback = testbed::run_sync(lookup_domain_registration("broken.com", o));
  ASSERT_FALSE(no_fallback);
  EXPECT_TRUE(no_fallback.error().is(errc::timeout)) << no_fallback.error().message;
}

TEST(whois_lookup_io, referral_is_followed_once_and_bounded) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  const auto registry = srv.whois_port("registry"), registrar = srv.whois_port("registrar");
  auto r = testbed::run_sync(whois_lookup("127.0.0.1", registry, "example-brand.com", 5s, 3, &loopback()));
  ASSERT_TRUE(r) << r.error().message << "\n" << srv.log();
  EXPECT_EQ(r->referrals_followed, 1);
  EXPECT_EQ(r->server, "127.0.0.1:" + std::to_string(registrar));
  EXPECT_EQ(r->info.expires_at_ms, ms("2028-09-13T07:00:00Z"));
  EXPECT_EQ(r->info.registrar, "MarkMonitor, Inc.");
  EXPECT_EQ(srv.count("query whois registry example-brand.com"), 1);
  EXPECT_EQ(srv.count("query whois registrar example-brand.com"), 1);

  // No referrals allowed: the registry's answer, registrar and statuses but no date.
  auto none = testbed::run_sync(whois_lookup("127.0.0.1", registry, "example-brand.com", 5s, 0, &loopback()));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->referrals_followed, 0);
  EXPECT_FALSE(none->info.expires_at_ms);
  EXPECT_EQ(none->info.registrar, "MarkMonitor Inc.");
  EXPECT_EQ(none->info.statuses, std::vector<std::string>{"clientUpdateProhibited"});
  EXPECT_EQ(srv.count("query whois registrar"), 1);

  // A registry answer that already has the date is not followed further.
  auto thick = testbed::run_sync(whois_lookup("127.0.0.1", registry, "broken.com", 5s, 3, &loopback()));
  ASSERT_TRUE(thick) << thick.error().message;
  EXPECT_EQ(thick->referrals_followed, 0);
  EXPECT_EQ(thick->info.referral_host, "whois.iana.org");
}

TEST(whois_lookup_io, referral_loop_stops_at_a_server_already_asked) {
  testbed::temp_dir dir("cf-registry");
  boost::json::object config{
      {"whois",
       {{"registry", {{"*", {{"file", data_path("whois_referral_to_registrar.txt")}}}}},
        {"registrar", {{"*", {{"file", data_path("whois_referral_back_to_registry.txt")}}}}}}}};
  testbed::registry_server srv(dir, config);
  auto r = testbed::run_sync(whois_lookup("127.0.0.1", srv.whois_port("registry"), "example-brand.com", 5s, 8, nullptr));
  ASSERT_TRUE(r) << r.error().message << "\n" << srv.log();
  EXPECT_EQ(r->referrals_followed, 1);
  EXPECT_FALSE(r->info.expires_at_ms);
  EXPECT_EQ(r->info.registrar, "MarkMonitor, Inc.");
  EXPECT_EQ(srv.count("query whois registry"), 1) << srv.log();
  EXPECT_EQ(srv.count("query whois registrar"), 1) << srv.log();
}

TEST(whois_lookup_io, answers_that_are_not_data) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  const auto port = srv.whois_port("registry");
  auto rl = testbed::run_sync(whois_lookup("127.0.0.1", port, "limited.com", 5s, 2, nullptr));
  ASSERT_FALSE(rl);
  EXPECT_TRUE(rl.error().is(errc::rate_limited)) << rl.error().message;
  auto bad = testbed::run_sync(whois_lookup("127.0.0.1", port, "garbled.com", 5s, 2, nullptr));
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::invalid_argument)) << bad.error().message;
  EXPECT_NE(bad.error().message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << bad.error().message;
  auto nf = testbed::run_sync(whois_lookup("127.0.0.1", port, "unknown-to-it.com", 5s, 2, nullptr));
  ASSERT_FALSE(nf);
  EXPECT_TRUE(nf.error().is(errc::not_found)) << nf.error().message;

  testbed::closed_port closed;
  auto refused = testbed::run_sync(whois_lookup("127.0.0.1", closed.port(), "example.com", 5s, 2, nullptr));
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(errc::timeout)) << refused.error().message;
  EXPECT_NE(refused.error().message.find("cannot connect"), std::string::npos) << refused.error().message;

  // A name is resolved off the loop, then judged by the addresses it resolved to.
  auto by_name = testbed::run_sync(whois_lookup("localhost", port, "broken.com", 5s, 0, &loopback()));
  ASSERT_TRUE(by_name) << by_name.error().message;
  EXPECT_EQ(by_name->server, "localhost:" + std::to_string(port));
}

TEST(deadlines, hanging_servers_end_with_timeout_within_the_deadline) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  auto timed = [](auto awaitable) {
    auto start = std::chrono::steady_clock::now();
    auto r = testbed::run_sync(std::move(awaitable));
    return std::make_pair(std::move(r), std::chrono::steady_clock::now() - start);
  };
  auto [w, w_took] = timed(whois_lookup("127.0.0.1", srv.whois_port("registry"), "slow.com", 400ms, 2, nullptr));
  ASSERT_FALSE(w);
  EXPECT_TRUE(w.error().is(errc::timeout)) << w.error().message;
  EXPECT_GE(w_took, 350ms);
  EXPECT_LT(w_took, 2s);
  EXPECT_EQ(srv.count("query whois registry slow.com"), 1);  // it was asked, and did not answer

  auto [r, r_took] = timed(rdap_lookup(srv.rdap_base(), "slow.com", 400ms, nullptr));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(errc::timeout)) << r.error().message;
  EXPECT_LT(r_took, 2s);

  // Both hanging: RDAP's deadline, then WHOIS's.
  auto table = table_for("com", srv.rdap_base());
  registration_options o;
  o.bootstrap = &table;
  o.whois_server = "127.0.0.1";
  o.whois_port = srv.whois_port("registry");
  o.rdap_timeout = 300ms;
  o.whois_timeout = 300ms;
  auto [both, both_took] = timed(lookup_domain_registration("slow.com", o));
  ASSERT_FALSE(both);
  EXPECT_TRUE(both.error().is(errc::timeout)) << both.error().message;
  EXPECT_LT(both_took, 2500ms);
}

TEST(egress, a_destination_outside_the_allow_list_is_refused_before_connecting) {
  testbed::temp_dir dir("cf-registry");
  testbed::registry_server srv(dir, standard_config());
  const auto port = srv.whois_port("registry");
  const egress_policy elsewhere = policy("10.0.0.0/8, whois.example.net");  // not this host
  const egress_policy nothing;

  for (const egress_policy* p : {&elsewhere, &nothing}) {
    auto w = testbed::run_sync(whois_lookup("127.0.0.1", port, "broken.com", 5s, 2, p));
    ASSERT_FALSE(w);
    EXPECT_TRUE(w.error().is(errc::forbidden)) << w.error().message;
    EXPECT_EQ(w.error().field, "egress_allow_list");
    auto r = testbed::run_sync(rdap_lookup(srv.rdap_base(), "example.com", 5s, p));
    ASSERT_FALSE(r);
    EXPECT_TRUE(r.error().is(errc::forbidden)) << r.error().message;
  }
  // A name is judged by what it resolved to: localhost is loopback, which the list lacks.
  auto by_name = testbed::run_sync(whois_lookup("localhost", port, "broken.com", 5s, 2, &elsewhere));
  ASSERT_FALSE(by_name);
  EXPECT_TRUE(by_name.error().is(errc::forbidden)) << by_name.error().message;

  // The whole lookup: RDAP refused, WHOIS refused.
  auto table = table_for("com", srv.rdap_base());
  registration_options o;
  o.bootstrap = &table;
  o.whois_server = "127.0.0.1";
  o.whois_port = port;
  o.egress = &elsewhere;
  auto all = testbed::run_sync(lookup_domain_registration("example.com", o));
  ASSERT_FALSE(all);
  EXPECT_TRUE(all.error().is(errc::forbidden)) << all.error().message;

  // Nothing reached the servers; an allowed request then does, so the log is known to be current.
  ASSERT_TRUE(testbed::run_sync(whois_lookup("127.0.0.1", port, "broken.com", 5s, 0, &loopback())));
  ASSERT_TRUE(testbed::run_sync(rdap_lookup(srv.rdap_base(), "example.com", 5s, &loopback())));
  EXPECT_EQ(srv.count("connect whois"), 1) << srv.log();
  EXPECT_EQ(srv.count("connect rdap"), 1) << srv.log();
}

}  // namespace
