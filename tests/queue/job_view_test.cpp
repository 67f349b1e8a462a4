// The pure tables behind what the UI shows about a job: the error hint and the trigger in words.
#include "certfleet/queue/error_hint.hpp"
#include "certfleet/queue/job_view.hpp"
#include "certfleet/queue/triggers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace certfleet::queue;

TEST(error_hint, each_kind_of_failure_gets_its_hint) {
  struct row {
    const char* type;
    const char* error;
    const char* expect;  // "" = no hint
  };
  const row rows[] = {
      {"distribution_execute", "all 2 targets failed: web1: resolve web1.invalid: Name or service not known", "dns"},
      {"distribution_execute", "web1: connect 127.0.0.1:22: Connection refused", "ssh_unreachable"},
      {"distribution_execute", "web1: handshake: timed out after 10000 ms", "timeout"},
      {"distribution_execute", "web1: AUTHENTICATION failed for user deploy", "credentials"},
      {"distribution_execute", "web1: the host key offered is not the pinned one", "host_key"},
      {"distribution_execute", "web1: 10.0.0.1 is outside ssh_allow_list", "egress_refused"},
      {"distribution_execute", "lost the job's lease while recording results", "lease_lost"},
      {"issue_certificate", "DNS server 127.0.0.1:5300 rejected TSIG key k1 for zone example.test (NOTAUTH, TSIG error BADSIG)", "dns_provider"},
      {"issue_certificate", "_acme-challenge.www.example.test TXT not visible at 127.0.0.1:5300 after 60000 ms (timed out)", "dns_provider"},
      {"renew_certificate", "CA problem urn:ietf:params:acme:error:rateLimited: too many certificates", "acme_ca"},
      {"validate_manual_dns", "DNS (manual): 127.0.0.1:5300 does not answer TXT _acme-challenge.www.example.test = \"x\" yet: "
                              "create the record(s) at your DNS provider, then POST …/jobs/0123/validate-dns", "manual_dns"},
      {"validate_manual_dns", "urn:ietf:params:acme:error:unauthorized: no TXT record — this order cannot be validated "
                              "any more: renew (POST …/certificates/{id}/renew) or issue again", "manual_dns"},
      {"revoke_certificate", "certificate 0123 was uploaded, not obtained from an ACME CA: certfleet revokes only …", "revoke_not_acme"},
      {"revoke_certificate", "certificate 0123 has no issued version to revoke", "revoke_not_acme"},
      {"revoke_certificate", "certificate 0123 is at version 3 (serial 0a) now, not the version with serial 09 this "
                             "revocation was asked for: nothing was revoked", "revoke_version_moved"},
      {"revoke_certificate", "revokeCert: the CA answered HTTP 403: urn:ietf:params:acme:error:unauthorized: no", "acme_ca"},
      {"cleanup_dns", "1 of 2 challenge record(s) not removed: TXT _acme-challenge.www.example.test in zone example.test "
                      "at 127.0.0.1:53 (provider knot): DNS server 127.0.0.1:53 rejected TSIG key k1 (NOTAUTH)", "dns_cleanup"},
      // Outside cleanup_dns the same words are the DNS provider's.
      {"issue_certificate", "TXT _acme-challenge.www.example.test not removed (NOTAUTH)", "dns_provider"},
      {"revocation_check", "revocation could not be checked for any of the 3 certificates: no CRL or OCSP responder "
                           "answered (see the log)", "revocation_check"},
      {"domain_expiration_check", "no registry answered for any of the 2 domains (see the log)", "domain_check"},
      {"discovery_execute", "no endpoint of source lab completed a TLS handshake (3 tried)", "discovery"},
      {"discovery_execute", "cidrs[0] 10.0.0.1 is outside discovery_allow_list (discovery_allow_list decides what may be "
                            "scanned)", "discovery"},
      {"noop", "noop: failing on purpose (attempt 1 of 3 planned failures)", "on_purpose"},
      // The noop row is for noop jobs only.
      {"distribution_execute", "failing on purpose", ""},
      {"noop", "broken on purpose", ""},
      {"noop", "", ""},
  };
  for (const auto& r : rows) {
    auto h = hint_for(r.type, r.error);
    if (!*r.expect) {
      EXPECT_FALSE(h) << r.error << " -> " << (h ? h->error_class : "");
      continue;
    }
    ASSERT_TRUE(h) << r.error;
    EXPECT_EQ(h->error_class, r.expect) << r.error;
    EXPECT_FALSE(h->hint.empty());
  }
}

// A job's stored class decides its hint; only a row stored before codes (neither code nor class)
// is told by its words.
TEST(error_hint, a_stored_class_decides_and_words_only_for_rows_before_codes) {
  auto stored = hint_of_job("noop", "msca_auth", "invalid_argument", "the connection timed out");
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->error_class, "msca_auth");
  EXPECT_FALSE(stored->hint.empty());
  // A class without a row of its own is shown without a hint.
  auto unknown = hint_of_job("noop", "msca_other", "", "x");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->error_class, "msca_other");
  EXPECT_TRUE(unknown->hint.empty());
  // Classified when stored, no row fitted: nothing is guessed again.
  EXPECT_FALSE(hint_of_job("noop", "", "timeout", "the connection timed out"));
  auto old = hint_of_job("noop", "", "", "the connection timed out");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->error_class, "timeout");
  EXPECT_FALSE(hint_of_class(""));
  for (const auto& h : all_error_hints()) EXPECT_EQ(hint_of_class(h.error_class)->hint, h.hint);
}

TEST(error_hint, classes_are_unique_and_every_row_can_be_reached) {
  std::set<std::string> names;
  for (const auto& h : all_error_hints()) {
    EXPECT_TRUE(names.insert(std::string(h.error_class)).second) << h.error_class;
    EXPECT_GT(h.hint.size(), 40u) << h.error_class;  // a sentence an operator can act on
  }
  EXPECT_EQ(names.size(), 24u);
}

TEST(trigger_in_words, system_triggers_read_as_words_and_tokens_are_left_to_the_api) {
  EXPECT_EQ(trigger_in_words("scheduler:host:123:abc"), "scheduler");
  EXPECT_EQ(trigger_in_words("retry_wave"), "retry wave");
  EXPECT_EQ(trigger_in_words("distribution_sweep"), "distribution sweep");
  EXPECT_EQ(trigger_in_words("distribution"), "fan-out");
  EXPECT_EQ(trigger_in_words("certificate_expiration_check"), "expiry sweep");
  EXPECT_EQ(trigger_in_words("cli"), "command line");
  EXPECT_EQ(trigger_in_words("revocation_check"), "revocation check");
  EXPECT_EQ(trigger_in_words("domain_expiration_check"), "domain check");
  EXPECT_EQ(trigger_in_words("something_new"), "something_new");
  EXPECT_FALSE(trigger_in_words("token:0123456789abcdef01234567"));
  EXPECT_FALSE(trigger_in_words(""));
}

// Every trigger a writer can name has words of its own: none reaches the UI as its raw name.
TEST(trigger_in_words, every_trigger_constant_has_words) {
  const std::string_view constants[] = {
      triggers::cli, triggers::certificate_expiration_check, triggers::revocation_check,
      triggers::domain_expiration_check, triggers::issue_certificate, triggers::renew_certificate,
      triggers::validate_manual_dns, triggers::revoke_certificate, triggers::renewal_sweep,
      triggers::dns_cleanup_sweep, triggers::acme_workflow, triggers::retry_wave,
      triggers::distribution_sweep, triggers::distribution, triggers::job_dead, triggers::kek_rotation,
      triggers::msca_workflow, triggers::msca_issue_certificate, triggers::msca_renew_certificate,
  };
  std::set<std::string_view> named{triggers::scheduler};
  for (auto c : constants) {
    auto words = trigger_in_words(c);
    ASSERT_TRUE(words) << c;
    EXPECT_NE(*words, c) << c << " has no words in trigger_table";
    EXPECT_TRUE(named.insert(c).second) << c << " twice";
  }
  EXPECT_EQ(trigger_in_words(scheduler_trigger("host:1:ab")), "scheduler");
  EXPECT_TRUE(from_scheduler(scheduler_trigger("h")));
  EXPECT_FALSE(from_scheduler(triggers::cli));
  // Every row is one of the constants above (a row without a constant is a string of its own).
  EXPECT_EQ(named.size(), trigger_table.size());
  for (const auto& r : trigger_table) EXPECT_TRUE(named.contains(r.name)) << r.name;
  // A person's trigger: the API shows the token's name.
  EXPECT_EQ(token_of(token_trigger("0123")), "0123");
  EXPECT_FALSE(token_of(scheduler_trigger("h")));
  EXPECT_FALSE(trigger_in_words(token_trigger("0123")));
}

TEST(trigger_in_words, docs_api_md_lists_every_trigger_in_words) {
  std::ifstream in(std::string(CERTFLEET_SOURCE_DIR) + "/docs/api.md");
  ASSERT_TRUE(in) << "docs/api.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  // The list wraps: compare with the line breaks as spaces.
  auto doc = ss.str();
  std::replace(doc.begin(), doc.end(), '\n', ' ');
  for (const auto& r : trigger_table)
    EXPECT_NE(doc.find("`" + std::string(r.words) + "`"), std::string::npos) << "docs/api.md lacks " << r.words;
}
