// The allow-list grammar in core, and the settings table validating egress_allow_list and
// ssh_allow_list with it: the same refusal (errc, field, message) that PUT /api/v1/settings gave
// when the route ran the parser itself (tests/api routes_test and fanout_test check the status
// and field end to end).
#include "certfleet/core/allow_list.hpp"
#include "certfleet/core/settings.hpp"

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

using namespace certfleet;

namespace {
boost::asio::ip::address addr(const char* a) { return boost::asio::ip::make_address(a); }
}  // namespace

TEST(allow_list, grammar_parses_canonicalizes_and_names_the_setting) {
  auto p = parse_egress_allow_list(" 10.0.0.0/8,192.0.2.7\n::1\tHooks.Example.COM., *.corp.example ", "ssh_allow_list");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->to_string(), "10.0.0.0/8,192.0.2.7/32,::1/128,hooks.example.com,*.corp.example");
  auto again = parse_egress_allow_list(p->to_string());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->to_string(), p->to_string());
  EXPECT_TRUE(p->allows("x.corp.example", {addr("203.0.113.9")}));
  EXPECT_FALSE(p->allows("x.corp.example", {addr("127.0.0.1")})) << "a name entry never vouches for loopback";
  EXPECT_TRUE(p->allows("::1", {}));
  auto bad = parse_egress_allow_list("10.0.0.0/8 *", "ssh_allow_list");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::invalid_argument));
  EXPECT_EQ(bad.error().field, "ssh_allow_list");
  EXPECT_TRUE(valid_dns_name("a-b.example"));
  EXPECT_FALSE(valid_dns_name("10.0.0.256"));
}

TEST(settings, allow_lists_are_validated_by_the_table_as_the_api_refused_them) {
  struct bad_case {
    const char* value;
    const char* message;
  };
  const bad_case cases[] = {
      {"10.0.0.0/8, 10.0.0.1/8", "invalid entry \"10.0.0.1/8\": host bits are set (did you mean 10.0.0.0/8?)"},
      {"*", "invalid entry \"*\": a bare * is not accepted; to allow every address use 0.0.0.0/0 and ::/0"},
      {"a.*.example", "invalid entry \"a.*.example\": * is only accepted as the first label (*.example.com)"},
  };
  for (const char* name : {"egress_allow_list", "ssh_allow_list"}) {
    const auto* def = find_setting(name);
    ASSERT_NE(def, nullptr);
    for (const auto& bc : cases) {
      auto r = validate_setting(*def, bc.value);
      ASSERT_FALSE(r) << name << "=" << bc.value;
      EXPECT_TRUE(r.error().is(errc::invalid_argument));
      EXPECT_EQ(r.error().field, name);
      EXPECT_EQ(r.error().message, bc.message);
      // What the settings route answered when it ran the parser itself.
      auto route = parse_egress_allow_list(bc.value, name);
      ASSERT_FALSE(route);
      EXPECT_EQ(r.error().field, route.error().field);
      EXPECT_EQ(r.error().message, route.error().message);
      EXPECT_EQ(r.error().value(), route.error().value());
    }
    // A valid list is kept as written (the settings API shows it back unchanged).
    auto ok = validate_setting(*def, "10.0.0.0/8, 0.0.0.0/0 hooks.example.com");
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(*ok, "10.0.0.0/8, 0.0.0.0/0 hooks.example.com");
    EXPECT_EQ(*validate_setting(*def, ""), "");
    EXPECT_EQ(*validate_setting(*def, "a,b"), "a,b");
  }
}

// Stored settings are read with settings_map::set; a value that does not validate (stored before
// a rule existed, or written behind certfleet's back) must not open what it meant to close.
TEST(settings, an_invalid_stored_allow_list_fails_closed) {
  settings_map m;
  ASSERT_TRUE(m.set("ssh_allow_list", "10.0.0.0/8"));
  EXPECT_FALSE(m.set("ssh_allow_list", "10.0.0.1/8"));
  auto ssh = parse_egress_allow_list(m.text("ssh_allow_list"), "ssh_allow_list");
  ASSERT_TRUE(ssh) << m.text("ssh_allow_list");
  EXPECT_FALSE(ssh->empty()) << "an empty ssh_allow_list allows every destination";
  for (const char* a : {"10.0.0.1", "127.0.0.1", "203.0.113.9"}) EXPECT_FALSE(ssh->allows(a, {addr(a)})) << a;

  settings_map fresh;  // as stored settings are read: every setting at its default, then set once
  EXPECT_FALSE(fresh.set("egress_allow_list", "10.0.0.1/8"));
  auto egress = parse_egress_allow_list(fresh.text("egress_allow_list"));
  ASSERT_TRUE(egress);
  EXPECT_TRUE(egress->empty()) << "an empty egress_allow_list refuses every destination";
}
