// The table of catalog object kinds (service/kinds.hpp, joined from the owners' lists): every kind
// a catalog route serves has its row, and the view and delete rules the service reads come from it.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "certfleet/api/router.hpp"
#include "certfleet/catalog/catalog.hpp"
#include "certfleet/notify/channel.hpp"
#include "certfleet/service/kinds.hpp"

using namespace certfleet;

TEST(catalog_kinds, every_kind_a_route_serves_has_one_row) {
  std::set<std::string_view> names;
  for (const auto& k : service::catalog_kinds()) EXPECT_TRUE(names.insert(k.name).second) << "two rows for " << k.name;
  std::set<std::string_view> served;
  // Distributions are records of their own (store::distribution_record, service_distributions.cpp),
  // not catalog objects.
  for (const auto& r : api::all_routes())
    if (!r.object_kind.empty() && r.object_kind != "distribution") served.insert(r.object_kind);
  ASSERT_FALSE(served.empty());
  for (auto kind : served) EXPECT_NE(service::find_catalog_kind(kind), nullptr) << kind << " has no row in its owner's kinds()";
  EXPECT_EQ(service::find_catalog_kind("no_such_kind"), nullptr);
}

TEST(catalog_kinds, an_object_is_refused_deletion_while_the_kinds_that_name_it_exist) {
  auto users = [](std::string_view kind) {
    std::set<std::string_view> out;
    for (auto by : service::find_catalog_kind(kind)->used_by) out.insert(by);
    return out;
  };
  EXPECT_EQ(users(store::kind_credential), (std::set<std::string_view>{store::kind_target, store::kind_channel}));
  EXPECT_EQ(users(store::kind_channel), (std::set<std::string_view>{store::kind_rule}));
  EXPECT_EQ(users(store::kind_acme_account), (std::set<std::string_view>{store::kind_certificate}));
  EXPECT_TRUE(users(store::kind_target).empty());
  // Certificates and DNS providers check more than ref_id (distributions, jobs, documents).
  EXPECT_NE(service::find_catalog_kind(store::kind_certificate)->before_delete, nullptr);
  EXPECT_NE(service::find_catalog_kind(store::kind_dns_provider)->before_delete, nullptr);
}

// What each kind seals is a column of its row: KEK rotation re-seals exactly these kinds, and the
// word ends each envelope's additional data. A kind that seals and has no word here would keep
// envelopes of a retired key after a rotation.
TEST(catalog_kinds, the_kinds_that_seal_say_what_they_seal) {
  std::map<std::string_view, std::string_view> sealing;
  for (const auto& k : service::catalog_kinds())
    if (!k.sealed.empty()) sealing[k.name] = k.sealed;
  const std::map<std::string_view, std::string_view> expected{
      {store::kind_certificate, catalog::sealed_key},     {store::kind_certificate_version, catalog::sealed_key},
      {store::kind_credential, catalog::sealed_secret},   {store::kind_acme_account, catalog::sealed_secret},
      {store::kind_dns_provider, catalog::sealed_secret}, {store::kind_channel, catalog::sealed_secret},
      {store::kind_msca_ca, catalog::sealed_secret},      {store::kind_msca_request, catalog::sealed_key}};
  EXPECT_EQ(sealing, expected);
  EXPECT_NE(catalog::find_sealed(service::catalog_kinds(), store::kind_msca_request), nullptr);
  EXPECT_EQ(catalog::find_sealed(service::catalog_kinds(), store::kind_target), nullptr);  // a row, nothing sealed
  EXPECT_EQ(catalog::find_sealed(service::catalog_kinds(), "no_such_kind"), nullptr);
}

TEST(catalog_kinds, a_view_shows_the_document_and_never_a_sealed_secret) {
  store::catalog_object channel;
  channel.id = "0123456789abcdef01234567";
  channel.kind = std::string(store::kind_channel);
  channel.name = "ops";
  channel.doc = R"({"kind":"slack"})";
  channel.sealed = "SEALED-BYTES";
  auto v = service::object_view(channel);
  EXPECT_EQ(v.at("kind").as_string(), "slack");
  EXPECT_EQ(v.at("secret_set").as_bool(), true);
  EXPECT_EQ(boost::json::serialize(v).find("SEALED-BYTES"), std::string::npos);
  channel.sealed.clear();
  EXPECT_EQ(service::object_view(channel).at("secret_set").as_bool(), false);

  // A kind without a view of its own: its document with id, name and created_at.
  store::catalog_object rule;
  rule.id = "0123456789abcdef01234568";
  rule.kind = std::string(store::kind_rule);
  rule.name = "job.dead->x";
  rule.doc = R"({"event":"job.dead"})";
  auto r = service::object_view(rule);
  EXPECT_EQ(r.at("event").as_string(), "job.dead");
  EXPECT_EQ(r.at("id").as_string(), rule.id);
  EXPECT_EQ(r.at("name").as_string(), "job.dead->x");
  EXPECT_TRUE(r.contains("created_at"));
}
