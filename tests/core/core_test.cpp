#include "certfleet/core/clock.hpp"
#include "certfleet/core/errc_table.hpp"
#include "certfleet/core/error.hpp"
#include "certfleet/core/json.hpp"
#include "certfleet/core/object_id.hpp"
#include "certfleet/core/settings.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <map>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <set>

using namespace certfleet;

TEST(object_id, unique_hex_and_time_ordered) {
  std::set<std::string> seen;
  std::string prev;
  for (int i = 0; i < 10000; ++i) {
    auto id = new_object_id();
    ASSERT_TRUE(is_object_id(id)) << id;
    ASSERT_TRUE(seen.insert(id).second);
    if (!prev.empty()) ASSERT_LE(prev.substr(0, 8), id.substr(0, 8));  // seconds prefix never goes back
    prev = id;
  }
  EXPECT_FALSE(is_object_id("xyz"));
  EXPECT_FALSE(is_object_id("6b0bed38111270b9720880fg"));
  EXPECT_FALSE(is_object_id("6b0bed38111270b9720880f"));
}

TEST(clock, iso8601) {
  EXPECT_EQ(format_iso8601(1'700'000'000'123), "2023-11-14T22:13:20.123Z");
  EXPECT_EQ(format_iso8601(0), "");
}

TEST(json, check_object_names_the_field) {
  EXPECT_TRUE(json::check_object(R"({"a":1})", "payload"));
  auto arr = json::check_object("[1,2]", "payload");
  ASSERT_FALSE(arr);
  EXPECT_EQ(arr.error().field, "payload");
  EXPECT_NE(arr.error().message.find("must be a JSON object"), std::string::npos);
  auto bad = json::check_object("{\"a\":", "payload");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(bad.error().is(errc::invalid_argument));
  std::string big = "{\"a\":\"" + std::string(json::max_payload_bytes, 'x') + "\"}";
  auto too_big = json::check_object(big, "payload");
  ASSERT_FALSE(too_big);
  EXPECT_TRUE(too_big.error().is(errc::payload_too_large));
}

TEST(json, object_reader_types_and_unknown_fields) {
  auto r = json::object_reader::parse(R"({"type":"noop","n":3,"b":true,"p":{"x":[1]},"s":5})");
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->required_string("type"), "noop");
  EXPECT_EQ(**r->optional_int("n"), 3);
  EXPECT_EQ(**r->optional_bool("b"), true);
  EXPECT_EQ(**r->optional_raw("p", true), R"({"x":[1]})");
  auto s = r->optional_string("s");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().field, "s");
  EXPECT_FALSE(r->required_string("missing"));
  auto only = r->only({"type", "n", "b", "p"});
  ASSERT_FALSE(only);
  EXPECT_EQ(only.error().field, "s");
  EXPECT_FALSE(json::object_reader::parse("[]"));
  EXPECT_FALSE(json::object_reader::parse(""));
}

TEST(settings, ranges_are_validated_with_the_field_named) {
  settings_map m;
  EXPECT_EQ(m.integer("lease_ms"), 300000);
  auto r = m.set("lease_ms", "10");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "lease_ms");
  EXPECT_NE(r.error().message.find("from 1000 to 3600000"), std::string::npos);
  EXPECT_FALSE(m.set("lease_ms", "abc"));
  EXPECT_FALSE(m.set("mode", "banana"));
  EXPECT_FALSE(m.set("listen", "nope"));
  EXPECT_FALSE(m.set("nosuch", "1"));
  EXPECT_EQ(m.integer("lease_ms"), 300000);  // unchanged
  EXPECT_TRUE(m.set("distribution_fanout_threshold", "500"));
  EXPECT_FALSE(m.set("distribution_fanout_threshold", "501"));
  EXPECT_FALSE(m.set("distribution_fanout_batch_size", "-1"));
  EXPECT_FALSE(m.set("distribution_ssh_max_concurrency", "51"));
}

// A canonical value validates to itself (found by fuzz_api_settings_body: "/x/e /" was stored as
// "/x/e " and read back as "/x/e").
TEST(settings, file_target_base_dirs_canonical_form_is_stable) {
  const auto* def = find_setting("file_target_base_dirs");
  ASSERT_NE(def, nullptr);
  for (const char* in : {"/srv/certs/, /etc/tls", "/e/v/certs/e /,/srv", "/a/ /", "/srv/a b/c ", "/x/y//"}) {
    auto once = validate_setting(*def, in);
    ASSERT_TRUE(once) << in << ": " << once.error().message;
    auto twice = validate_setting(*def, *once);
    ASSERT_TRUE(twice) << *once;
    EXPECT_EQ(*twice, *once) << "from " << in;
  }
  EXPECT_EQ(*validate_setting(*def, "/srv/certs /"), "/srv/certs");
  EXPECT_FALSE(validate_setting(*def, "/ /"));  // the root directory, however it is spelled
}

TEST(settings, ui_base_url_is_an_http_origin_with_an_optional_path) {
  const auto& def = *find_setting("ui_base_url");
  EXPECT_EQ(*validate_setting(def, ""), "");
  EXPECT_EQ(*validate_setting(def, "https://certfleet.example.com/"), "https://certfleet.example.com");
  EXPECT_EQ(*validate_setting(def, "http://10.0.0.5:8080/certfleet/"), "http://10.0.0.5:8080/certfleet");
  EXPECT_EQ(*validate_setting(def, "https://[2001:db8::1]:8443"), "https://[2001:db8::1]:8443");
  for (auto bad : {"certfleet.example.com", "ftp://x.example", "https://", "https://user:pw@x.example",
                   "https://x.example/?a=b", "https://x.example/#top", "https://x example", "https://x.example/Ã©",
                   "https://x_y.example"}) {
    auto r = validate_setting(def, bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "ui_base_url");
  }
}

TEST(settings, config_file_env_and_flags_in_that_order) {
  testbed::temp_dir dir;
  auto file = dir.file("c.toml");
  std::ofstream(file) << "lease_ms = 5000\nworker_main_concurrency = 3\nmode = \"worker\"\n";
  setenv("CERTFLEET_WORKER_MAIN_CONCURRENCY", "4", 1);
  auto m = load_config(file, {{"mode", "api"}});
  unsetenv("CERTFLEET_WORKER_MAIN_CONCURRENCY");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->integer("lease_ms"), 5000);
  EXPECT_EQ(m->integer("worker_main_concurrency"), 4);
  EXPECT_EQ(m->text("mode"), "api");

  std::ofstream(file) << "lease_ms = \"soon\"\n";
  auto bad = load_config(file, {});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "lease_ms");
  EXPECT_TRUE(bad.error().is(errc::config_invalid));

  std::ofstream(file) << "bogus = 1\n";
  auto unknown = load_config(file, {});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().field, "bogus");

  std::ofstream(file) << "lease_ms = [\n";
  EXPECT_FALSE(load_config(file, {}));

  setenv("CERTFLEET_LEASE_MS", "1", 1);
  auto env_bad = load_config("", {});
  unsetenv("CERTFLEET_LEASE_MS");
  ASSERT_FALSE(env_bad);
  EXPECT_NE(env_bad.error().message.find("CERTFLEET_LEASE_MS"), std::string::npos);

  auto flag_bad = load_config("", {{"worker_poll_ms", "0"}});
  ASSERT_FALSE(flag_bad);
  EXPECT_EQ(flag_bad.error().field, "worker_poll_ms");
  // System-wide settings are not process configuration.
  EXPECT_FALSE(load_config("", {{"distribution_fanout_threshold", "5"}}));
}

TEST(errors, names_and_messages) {
  auto e = make_error(errc::conflict, "job is completed", "status");
  EXPECT_EQ(std::string(errc_name(e.value())), "conflict");
  EXPECT_EQ(e.code.category().name(), std::string("certfleet"));
  result<int> r = e;
  EXPECT_THROW(r.value(), bad_result_access);
}

// Every code's facts, pinned as the four switches had them before the table (issue 29): API
// bodies, HTTP statuses and the CLI's exit codes are what clients and scripts see.
TEST(errors, every_code_has_its_name_message_status_and_exit) {
  struct pinned {
    errc code;
    const char* name;
    const char* message;
    unsigned status;
    errc_exit exit;
  };
  using K = errc_exit;
  const pinned rows[] = {
      {errc::ok, "ok", "success", 500, K::failed},
      {errc::invalid_argument, "invalid_argument", "invalid argument", 400, K::usage},
      {errc::not_found, "not_found", "not found", 404, K::not_found},
      {errc::conflict, "conflict", "conflict with the object's current state", 409, K::conflict},
      {errc::unknown_job_type, "unknown_job_type", "unknown or unsupported job type", 400, K::usage},
      {errc::payload_too_large, "payload_too_large", "payload too large", 413, K::usage},
      {errc::lease_lost, "lease_lost", "lease lost: another worker holds the job", 409, K::failed},
      {errc::cancelled, "cancelled", "cancelled", 409, K::failed},
      {errc::rate_limited, "rate_limited", "rate limited", 429, K::unavailable},
      {errc::store_busy, "store_busy", "store busy", 503, K::unavailable},
      {errc::store_failure, "store_failure", "store failure", 500, K::failed},
      {errc::store_disk_full, "store_disk_full", "the store's disk is full", 507, K::unavailable},
      {errc::unauthorized, "unauthorized", "unauthorized", 401, K::failed},
      {errc::forbidden, "forbidden", "forbidden", 403, K::failed},
      {errc::shutting_down, "shutting_down", "shutting down", 503, K::failed},
      {errc::too_many_connections, "too_many_connections", "too many connections", 503, K::failed},
      {errc::timeout, "timeout", "timed out", 504, K::timeout},
      {errc::config_invalid, "config_invalid", "invalid configuration", 500, K::usage},
      {errc::ssh_unreachable, "ssh_unreachable", "no SSH server answered", 502, K::failed},
  };
  ASSERT_EQ(std::size(rows), static_cast<std::size_t>(errc::count_)) << "a code without its pinned row here";
  for (int i = 0; i < static_cast<int>(errc::count_); ++i) {
    const auto c = static_cast<errc>(i);
    const auto& want = rows[i];
    ASSERT_EQ(want.code, c) << i;
    const auto& row = errc_row_of(c);
    EXPECT_EQ(row.code, c) << want.name;
    EXPECT_STREQ(errc_name(c), want.name);
    EXPECT_EQ(make_error_code(c).message(), want.message) << want.name;
    EXPECT_EQ(row.http_status, want.status) << want.name;
    EXPECT_EQ(row.exit, want.exit) << want.name;
  }
  // A value of our category that is no code.
  const std::error_code stray{static_cast<int>(errc::count_), certfleet_category()};
  EXPECT_EQ(stray.message(), "unknown certfleet error");
  EXPECT_STREQ(errc_name(errc::count_), "unknown");
  EXPECT_EQ(errc_row_of(static_cast<errc>(-1)).http_status, 500u);
  EXPECT_EQ(errc_row_of(errc::count_).exit, errc_exit::failed);
}

// Issue 31: the Settings page shows system settings in sections; each is in exactly one, and a
// section names only system settings that exist.
TEST(settings, each_system_setting_is_in_exactly_one_group) {
  std::map<std::string, int> seen;
  for (const auto& g : setting_groups()) {
    EXPECT_FALSE(g.title.empty());
    EXPECT_FALSE(g.doc.empty());
    for (auto member : group_members(g)) {
      std::string name(member);
      auto* def = find_setting(name);
      ASSERT_NE(def, nullptr) << g.id << " names " << name;
      EXPECT_EQ(def->scope, setting_scope::system) << name;
      EXPECT_EQ(group_of(*def), g.id) << name;
      ++seen[name];
    }
  }
  for (const auto& d : all_settings()) {
    if (d.scope == setting_scope::system) {
      EXPECT_EQ(seen[std::string(d.name)], 1) << d.name;
    } else {
      EXPECT_EQ(group_of(d), "") << d.name;
    }
  }
}

TEST(settings, docs_configuration_md_carries_the_settings_table) {
  std::ifstream f(std::string(CERTFLEET_SOURCE_DIR) + "/docs/configuration.md");
  std::stringstream ss;
  ss << f.rdbuf();
  auto expected = settings_reference_markdown();
  EXPECT_NE(ss.str().find(expected), std::string::npos)
      << "docs/configuration.md is out of date; its table must read exactly:\n"
      << expected;
}

// packaging/certfleet.toml (installed as /etc/certfleet/certfleet.toml) is the settings table's
// sample with the install layout's data directory: it cannot drift from the table.
TEST(settings, packaging_certfleet_toml_is_the_generated_sample) {
  std::ifstream f(std::string(CERTFLEET_SOURCE_DIR) + "/packaging/certfleet.toml");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto expected = settings_sample_toml({{"data", "/var/lib/certfleet"}});
  if (ss.str() != expected) {
    auto path = std::filesystem::temp_directory_path() / "certfleet.toml.expected";
    std::ofstream(path) << expected;
    ADD_FAILURE() << "packaging/certfleet.toml is out of date; the expected text is in " << path
                  << " (copy it over packaging/certfleet.toml)";
  }
  // Every process setting is there, once; no system setting is.
  for (const auto& d : all_settings()) {
    const auto live = "\n" + std::string(d.name) + " = ";
    const auto commented = "\n#" + std::string(d.name) + " = ";
    const auto n = (expected.find(live) != std::string::npos) + (expected.find(commented) != std::string::npos);
    EXPECT_EQ(n, d.scope == setting_scope::process ? 1 : 0) << d.name;
  }
  // It loads as it is, and with every commented line switched on (each is the default, valid).
  auto m = load_config_text(expected, "sample", {});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->text("data"), "/var/lib/certfleet");
  const auto all_on = std::regex_replace(expected, std::regex("\n#([a-z_]+ = )"), "\n$1");
  auto all = load_config_text(all_on, "sample with every line on", {});
  ASSERT_TRUE(all) << all.error().message;
  settings_map defaults;
  for (const auto& d : all_settings())
    if (d.scope == setting_scope::process && d.name != "data") EXPECT_EQ(all->text(d.name), defaults.text(d.name)) << d.name;
}

TEST(settings, tls_certificate_and_metrics_listen_grammar) {
  settings_map m;
  EXPECT_TRUE(m.set("tls_certificate", "default/0123456789abcdef01234567"));
  EXPECT_TRUE(m.set("tls_certificate", ""));
  for (const char* bad : {"default", "/0123456789abcdef01234567", "default/0123", "Default/0123456789abcdef01234567",
                          "default/0123456789ABCDEF01234567", "default/0123456789abcdef01234567/x"}) {
    auto r = m.set("tls_certificate", bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().field, "tls_certificate");
  }
  auto ref = parse_certificate_ref("prod-eu/0123456789abcdef01234567");
  ASSERT_TRUE(ref);
  EXPECT_EQ(ref->project, "prod-eu");
  EXPECT_EQ(ref->id, "0123456789abcdef01234567");
  EXPECT_TRUE(m.set("metrics_listen", "127.0.0.1:9100"));
  EXPECT_TRUE(m.set("metrics_listen", ""));
  auto bad = m.set("metrics_listen", "9100");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().field, "metrics_listen");
  EXPECT_NE(bad.error().message.find("metrics_listen must be ADDR:PORT"), std::string::npos);
  EXPECT_FALSE(m.set("tls_certificate_poll_ms", "999"));
}
