// The delivery-module table and the one PEM -> fingerprint function every module uses.
#include <gtest/gtest.h>

#include <set>

#include "certfleet/delivery/module.hpp"
#include "certfleet/delivery/pem.hpp"
#include "certs.hpp"

using namespace certfleet::delivery;

TEST(delivery_module, names_round_trip_through_the_one_table) {
  std::set<std::string_view> names;
  for (const auto& m : all_modules()) {
    EXPECT_EQ(&module_of(m.kind), &m);
    EXPECT_EQ(module_name(m.kind), m.name);
    auto back = parse_module(m.name);
    ASSERT_TRUE(back) << m.name;
    EXPECT_EQ(*back, m.kind);
    names.insert(m.name);
  }
  EXPECT_EQ(names, (std::set<std::string_view>{"ssh", "file", "webhook"}));
  EXPECT_TRUE(module_of(module_kind::ssh).rolls_back);
  EXPECT_TRUE(module_of(module_kind::file).rolls_back);
  EXPECT_FALSE(module_of(module_kind::webhook).rolls_back);
  for (const char* n : {"", "SSH", "ssh ", "sftp", "http"}) EXPECT_FALSE(parse_module(n)) << n;
  EXPECT_EQ(module_choices(), "\"ssh\", \"file\" or \"webhook\"");
  EXPECT_STREQ(delivery_status_name(delivery_status::skipped_by_hash), "skipped");
}

TEST(delivery_module, one_fingerprint_for_the_catalog_the_bundle_check_and_rollbacks) {
  auto now = testbed::unix_now_ms();
  auto leaf = testbed::make_certificate({.common_name = "fp.example"});
  auto other = testbed::make_certificate({.common_name = "other.example"});
  auto info = parse_certificate_bundle(leaf.cert_pem, "", leaf.key_pem, now);
  ASSERT_TRUE(info) << info.error().message;
  auto fp = certificate_fingerprint(leaf.cert_pem);
  ASSERT_TRUE(fp);
  EXPECT_EQ(*fp, info->fingerprint_sha256);
  EXPECT_EQ(fp->size(), 64u);
  auto checked = check_bundle({leaf.cert_pem, leaf.key_pem, "", ""});
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_EQ(*checked, *fp);
  EXPECT_NE(*certificate_fingerprint(other.cert_pem), *fp);
  // The first certificate counts: a leaf followed by its chain names the leaf.
  EXPECT_EQ(*certificate_fingerprint(leaf.cert_pem + other.cert_pem), *fp);
  for (const std::string bad : {std::string(), std::string("not pem"), leaf.key_pem, leaf.cert_pem.substr(0, 100)})
    EXPECT_FALSE(certificate_fingerprint(bad)) << bad;
}

TEST(delivery_module, certificate_times_are_utc_whole_seconds) {
  EXPECT_EQ(certificate_time_text(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(certificate_time_text(1'764'403'518'999), "2025-11-29T08:05:18Z");
}
