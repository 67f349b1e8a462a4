// The Ansible INI inventory reader: the format as Ansible's INI plugin reads it (comments,
// sections, host lines, ranges, name:port), the merge of variables by group depth, priority and
// name, the group filter, and the errors, each naming its line. Unit scale: no I/O.
#include "certfleet/catalog/ansible_inventory.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace certfleet;
using namespace certfleet::catalog;

namespace {

using strings = std::vector<std::string>;

inventory parsed(std::string_view text, std::string_view group = "") {
  auto r = parse_ansible_ini_inventory(text, group);
  EXPECT_TRUE(r.has_value()) << r.error().field << ": " << r.error().message;
  return r ? std::move(*r) : inventory{};
}

strings names(const inventory& inv) {
  strings out;
  for (const auto& h : inv.hosts) out.push_back(h.name);
  return out;
}

const inventory_host& host(const inventory& inv, std::string_view name) {
  for (const auto& h : inv.hosts)
    if (h.name == name) return h;
  ADD_FAILURE() << "no host " << name;
  static const inventory_host none;
  return none;
}

// The error is invalid_argument about `line`, and its message says `what`.
void expect_line_error(std::string_view text, std::size_t line, std::string_view what) {
  auto r = parse_ansible_ini_inventory(text);
  ASSERT_FALSE(r.has_value()) << "accepted: " << text;
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "line " + std::to_string(line)) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("line " + std::to_string(line) + ": ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find(what), std::string::npos) << r.error().message;
}

}  // namespace

TEST(ansible_inventory, hosts_before_any_section_are_ungrouped_and_comments_are_skipped) {
  auto inv = parsed(
      "# fleet\n"
      "mail.example.com\n"
      "\n"
      "; also a comment\n"
      "[web]   # front ends\n"
      "web1.example.com  # the first\n"
      "  web2.example.com\t\n"
      "[db]\n"
      "db1.example.com\n");
  EXPECT_EQ(names(inv), (strings{"mail.example.com", "web1.example.com", "web2.example.com", "db1.example.com"}));
  EXPECT_EQ(host(inv, "mail.example.com").groups, strings{"ungrouped"});
  EXPECT_EQ(host(inv, "mail.example.com").line, 2u);
  EXPECT_EQ(host(inv, "web2.example.com").groups, strings{"web"});
  EXPECT_EQ(host(inv, "web2.example.com").line, 7u);
  EXPECT_EQ(host(inv, "db1.example.com").line, 9u);
  EXPECT_TRUE(host(inv, "web1.example.com").vars.empty());
}

TEST(ansible_inventory, crlf_line_ends_and_a_bom_are_read_as_plain_text) {
  auto inv = parsed("\xEF\xBB\xBF[web]\r\nweb1 ansible_user=deploy\r\n\r\n[web:vars]\r\nansible_port = 2222\r\n");
  ASSERT_EQ(names(inv), strings{"web1"});
  EXPECT_EQ(host(inv, "web1").var("ansible_user"), "deploy");
  EXPECT_EQ(host(inv, "web1").var("ansible_port"), "2222");
  EXPECT_EQ(host(inv, "web1").groups, strings{"web"});
  expect_line_error("[web]\r\nweb1\r\n[bad group]\r\n", 3, "not a section header");
}

TEST(ansible_inventory, host_line_variables_are_unquoted_strings_and_a_word_starting_with_hash_ends_the_line) {
  auto inv = parsed(
      "[web]\n"
      "web1 a=1 b=\"two words\" c='single' d=pa#ss e=\"say \\\"hi\\\"\" f=x\\ y g= # h=ignored\n"
      "web2 json='{\"k\": [1, 2]}' yes=True\n");
  const auto& w1 = host(inv, "web1");
  EXPECT_EQ(w1.var("a"), "1");
  EXPECT_EQ(w1.var("b"), "two words");
  EXPECT_EQ(w1.var("c"), "single");
  EXPECT_EQ(w1.var("d"), "pa#ss");
  EXPECT_EQ(w1.var("e"), "say \"hi\"");
  EXPECT_EQ(w1.var("f"), "x y");
  EXPECT_EQ(w1.var("g"), "");
  EXPECT_EQ(w1.var("h"), "");
  ASSERT_EQ(w1.vars.size(), 7u);  // g is set, empty; h is in the comment
  for (std::size_t i = 1; i < w1.vars.size(); ++i) EXPECT_LT(w1.vars[i - 1].first, w1.vars[i].first);
  EXPECT_EQ(host(inv, "web2").var("json"), "{\"k\": [1, 2]}");
  EXPECT_EQ(host(inv, "web2").var("yes"), "True");
  EXPECT_EQ(host(inv, "web2").var("absent"), "");
}

TEST(ansible_inventory, name_colon_port_sets_ansible_port_and_an_ipv6_address_stands_alone) {
  auto inv = parsed(
      "[web]\n"
      "web1.example.com:2222\n"
      "web2.example.com:2222 ansible_port=22\n"
      "192.0.2.7:8022 ansible_user=root\n"
      "2001:db8::1 ansible_user=admin\n"
      "fe80::1%eth0\n");
  EXPECT_EQ(names(inv), (strings{"web1.example.com", "web2.example.com", "192.0.2.7", "2001:db8::1", "fe80::1%eth0"}));
  EXPECT_EQ(host(inv, "web1.example.com").var("ansible_port"), "2222");
  EXPECT_EQ(host(inv, "web2.example.com").var("ansible_port"), "22");  // the line's own key=value wins
  EXPECT_EQ(host(inv, "192.0.2.7").var("ansible_port"), "8022");
  EXPECT_EQ(host(inv, "2001:db8::1").var("ansible_port"), "");
  EXPECT_EQ(host(inv, "2001:db8::1").var("ansible_user"), "admin");

  expect_line_error("[web]\nweb1:\n", 2, "port");
  expect_line_error("[web]\nweb1:ssh\n", 2, "port");
  expect_line_error("[web]\nweb1:0\n", 2, "1 to 65535");
  expect_line_error("[web]\nweb1:65536\n", 2, "1 to 65535");
  expect_line_error("\n:22\n", 2, "host name is empty");
  expect_line_error("[web]\nweb1:22:33\n", 2, "IPv6");
  expect_line_error("[web]\n[2001:db8::1]:22\n", 2, "IPv6 address is written without brackets");
}

TEST(ansible_inventory, group_vars_take_key_value_with_blanks_and_quotes_and_keep_hashes_in_values) {
  auto inv = parsed(
      "[web]\n"
      "web1\n"
      "[web:vars]\n"
      "ansible_user=deploy\n"
      "  proxy = http://proxy.example.com:3128  \n"
      "greeting = \"hello world\"\n"
      "single='x'\n"
      "note=keep # this, as Ansible does\n"
      "empty=\n"
      "# a comment\n"
      "; another\n"
      "eq=a=b\n");
  const auto& w = host(inv, "web1");
  EXPECT_EQ(w.var("ansible_user"), "deploy");
  EXPECT_EQ(w.var("proxy"), "http://proxy.example.com:3128");
  EXPECT_EQ(w.var("greeting"), "hello world");
  EXPECT_EQ(w.var("single"), "x");
  EXPECT_EQ(w.var("note"), "keep # this, as Ansible does");
  EXPECT_EQ(w.var("eq"), "a=b");
  EXPECT_EQ(w.vars.size(), 7u);

  expect_line_error("[web]\nweb1\n[web:vars]\nno_equals_sign\n", 4, "expected key=value in [web:vars]");
  expect_line_error("[web]\nweb1\n[web:vars]\n=value\n", 4, "expected key=value");
  expect_line_error("[web]\nweb1\n[web:vars]\ntwo words=value\n", 4, "expected key=value");
}

TEST(ansible_inventory, children_make_members_of_every_ancestor_and_ungrouped_is_only_for_the_groupless) {
  auto inv = parsed(
      "lonely\n"
      "both\n"
      "[atlanta]\n"
      "host1\n"
      "host2\n"
      "[raleigh]\n"
      "host2\n"
      "host3\n"
      "both\n"
      "[southeast:children]\n"
      "atlanta\n"
      "raleigh  # trailing comment\n"
      "[usa:children]\n"
      "southeast\n"
      "northeast\n"
      "[northeast]\n"
      "[all]\n"
      "allonly\n");
  EXPECT_EQ(names(inv), (strings{"lonely", "both", "host1", "host2", "host3", "allonly"}));
  EXPECT_EQ(host(inv, "lonely").groups, strings{"ungrouped"});
  EXPECT_EQ(host(inv, "both").groups, (strings{"raleigh", "southeast", "usa"}));
  EXPECT_EQ(host(inv, "both").line, 2u);
  EXPECT_EQ(host(inv, "host1").groups, (strings{"atlanta", "southeast", "usa"}));
  EXPECT_EQ(host(inv, "host2").groups, (strings{"atlanta", "raleigh", "southeast", "usa"}));
  EXPECT_EQ(host(inv, "allonly").groups, strings{"ungrouped"});
}

TEST(ansible_inventory, variables_merge_all_then_parents_then_children_then_the_host_line) {
  auto inv = parsed(
      "[all:vars]\n"
      "level=all\n"
      "from_all=1\n"
      "[usa:children]\n"
      "southeast\n"
      "[southeast:children]\n"
      "atlanta\n"
      "[atlanta]\n"
      "host1 level=host\n"
      "host2\n"
      "host1 extra=later\n"
      "[atlanta:vars]\n"
      "level=atlanta\n"
      "from_atlanta=1\n"
      "[usa:vars]\n"
      "level=usa\n"
      "from_usa=1\n"
      "[southeast:vars]\n"
      "level=southeast\n"
      "[atlanta:vars]\n"
      "from_atlanta=2\n");
  const auto& h1 = host(inv, "host1");
  EXPECT_EQ(h1.var("level"), "host");
  EXPECT_EQ(h1.var("extra"), "later");
  const auto& h2 = host(inv, "host2");
  EXPECT_EQ(h2.var("level"), "atlanta");  // the deepest group wins, wherever it is written
  EXPECT_EQ(h2.var("from_all"), "1");
  EXPECT_EQ(h2.var("from_usa"), "1");
  EXPECT_EQ(h2.var("from_atlanta"), "2");  // in one group, the later line wins
  EXPECT_EQ(h1.line, 9u);
}

TEST(ansible_inventory, same_depth_groups_merge_by_priority_then_name_and_a_hosts_later_line_wins) {
  // Ansible loads sibling groups sorted by (ansible_group_priority, name): the last one wins,
  // whatever order the file defines them in.
  auto inv = parsed(
      "[zeta]\n"
      "h1\n"
      "h2 who=line1\n"
      "[alpha]\n"
      "h1\n"
      "h2 who=line2\n"
      "[zeta:vars]\n"
      "who=zeta\n"
      "[alpha:vars]\n"
      "who=alpha\n"
      "[prio]\n"
      "h3\n"
      "[zeta2]\n"
      "h3\n"
      "[prio:vars]\n"
      "who=prio\n"
      "ansible_group_priority=10\n"
      "[zeta2:vars]\n"
      "who=zeta2\n");
  EXPECT_EQ(host(inv, "h1").var("who"), "zeta");
  EXPECT_EQ(host(inv, "h2").var("who"), "line2");
  EXPECT_EQ(host(inv, "h3").var("who"), "prio");
  EXPECT_EQ(host(inv, "h3").var("ansible_group_priority"), "10");
  expect_line_error("[g]\nh\n[g:vars]\nansible_group_priority=high\n", 4, "ansible_group_priority must be an integer");
}

TEST(ansible_inventory, a_host_in_several_groups_and_lines_is_one_host) {
  auto inv = parsed(
      "[a]\n"
      "h ansible_user=one\n"
      "[b]\n"
      "h ansible_user=two\n"
      "[a]\n"
      "h\n");
  ASSERT_EQ(names(inv), strings{"h"});
  EXPECT_EQ(host(inv, "h").groups, (strings{"a", "b"}));
  EXPECT_EQ(host(inv, "h").var("ansible_user"), "two");
  EXPECT_EQ(host(inv, "h").line, 2u);
}

TEST(ansible_inventory, ranges_expand_with_padding_letters_steps_and_several_brackets) {
  EXPECT_EQ(names(parsed("[web]\nweb[08:11].example.com\n")),
            (strings{"web08.example.com", "web09.example.com", "web10.example.com", "web11.example.com"}));
  EXPECT_EQ(names(parsed("[web]\nweb[8:11]\n")), (strings{"web8", "web9", "web10", "web11"}));
  EXPECT_EQ(names(parsed("[db]\ndb-[a:d]\n")), (strings{"db-a", "db-b", "db-c", "db-d"}));
  EXPECT_EQ(names(parsed("[db]\ndb-[y:B]\n")), (strings{"db-y", "db-z", "db-A", "db-B"}));
  EXPECT_EQ(names(parsed("[web]\nweb[1:10:3]\n")), (strings{"web1", "web4", "web7", "web10"}));
  EXPECT_EQ(names(parsed("[web]\nw[:2]\n")), (strings{"w0", "w1", "w2"}));
  EXPECT_EQ(names(parsed("[web]\nr[1:2]-n[a:b]\n")), (strings{"r1-na", "r1-nb", "r2-na", "r2-nb"}));
  EXPECT_EQ(names(parsed("[web]\n[a:b].example.com\n")), (strings{"a.example.com", "b.example.com"}));

  auto inv = parsed("[web]\nweb[1:3]:2222 ansible_user=deploy\n");
  ASSERT_EQ(names(inv), (strings{"web1", "web2", "web3"}));
  for (const auto& h : inv.hosts) {
    EXPECT_EQ(h.var("ansible_port"), "2222");
    EXPECT_EQ(h.var("ansible_user"), "deploy");
    EXPECT_EQ(h.line, 2u);
  }
}

TEST(ansible_inventory, bad_ranges_name_their_line) {
  expect_line_error("[web]\nok\nweb[10:1]\n", 3, "end comes before the start");
  expect_line_error("[web]\nweb[1:c]\n", 2, "numbers or both single letters");
  expect_line_error("[web]\nweb[aa:c]\n", 2, "numbers or both single letters");
  expect_line_error("[web]\nweb[1:10:0]\n", 2, "step");
  expect_line_error("[web]\nweb[1:10:x]\n", 2, "step");
  expect_line_error("[web]\nweb[01:100]\n", 2, "as many digits");
  expect_line_error("[web]\nweb[1:]\n", 2, "end is missing");
  expect_line_error("[web]\nweb[1]\n", 2, "[start:end]");
  expect_line_error("[web]\nweb[1:2:3:4]\n", 2, "[start:end]");
  expect_line_error("[web]\nweb[1:3\n", 2, "not closed");
  expect_line_error("[web]\nweb[1:[2:3]]\n", 2, "not closed");
}

TEST(ansible_inventory, expansion_is_capped_before_it_is_made) {
  expect_line_error("[web]\nweb[1:100001]\n", 2, "more than 100000 hosts");
  expect_line_error("[web]\nw[1:1000]-[1:1000]\n", 2, "more than 100000 hosts");
  expect_line_error("[web]\nw[0:999999999999999999]\n", 2, "more than 100000 hosts");
  // Long names times many hosts: refused by size before one name is built.
  expect_line_error("[web]\n" + std::string(60000, 'x') + "[1:9999]\n", 2, "MiB");
  // Exactly the cap is fine; one more host on a later line is not.
  auto r = parse_ansible_ini_inventory("[web]\nw[1:100000]\n[db]\nw1\n");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->hosts.size(), max_inventory_hosts);
  EXPECT_EQ(r->hosts.back().name, "w100000");
  expect_line_error("[web]\nw[1:100000]\n[db]\nw1\nextra\n", 5, "more than 100000 hosts");
}

TEST(ansible_inventory, a_long_chain_of_groups_over_many_hosts_is_refused_not_expanded) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "[g" + std::to_string(i) + ":children]\ng" + std::to_string(i + 1) + "\n";
  text += "[g3000]\nh[1:10000]\n";
  auto r = parse_ansible_ini_inventory(text);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().field, "line 6002");
  // The same chain over one host is an ordinary (if odd) inventory.
  auto one = parse_ansible_ini_inventory(text.substr(0, text.size() - 11) + "h\n");
  ASSERT_TRUE(one.has_value()) << one.error().message;
  EXPECT_EQ(one->hosts.at(0).groups.size(), 3001u);
}

TEST(ansible_inventory, cycles_in_children_are_errors_at_the_line_that_closes_them) {
  expect_line_error("[a:children]\nb\n[b:children]\nc\n[c:children]\na\n", 6, "cycle");
  expect_line_error("[a:children]\na\n", 2, "cycle");
  expect_line_error("[a:children]\nall\n", 2, "can't be a child");
  // A diamond is not a cycle, and the listed order of sections does not matter.
  auto inv = parsed("[top:children]\nleft\nright\n[left:children]\nbottom\n[right:children]\nbottom\n[bottom]\nh\n");
  EXPECT_EQ(host(inv, "h").groups, (strings{"bottom", "left", "right", "top"}));
}

TEST(ansible_inventory, groups_must_be_defined_somewhere_as_ansible_requires) {
  expect_line_error("[web]\nw1\n[web:children]\ndb\ncache\n[db]\nd1\n", 5,
                    "[web:children] names group cache, which is not defined");
  expect_line_error("[web]\nw1\n[dbx:vars]\na=1\n", 3, "[dbx:vars] is for group dbx, which is not defined");
  // Defined later, or by :children alone, is defined.
  auto inv = parsed("[dbx:vars]\na=1\n[all:children]\ndbx\n[dbx:children]\ndb\n[db]\nd1\n");
  EXPECT_EQ(host(inv, "d1").groups, (strings{"db", "dbx"}));
  EXPECT_EQ(host(inv, "d1").var("a"), "1");
}

TEST(ansible_inventory, malformed_lines_name_their_line) {
  expect_line_error("[web]\nw1\n[web:hosts:x]\n", 3, "not a section header");
  expect_line_error("[web]\n[web:extra]\n", 2, "unknown type");
  expect_line_error("[]\n", 1, "not a section header");
  expect_line_error("[web]\nw1 user\n", 2, "expected key=value after the host name, got user");
  expect_line_error("[web]\nw1 =x\n", 2, "expected key=value");
  expect_line_error("[web]\nw1 \"a b\"=x\n", 2, "expected key=value");
  expect_line_error("[web]\nw1 a=\"open\n", 2, "quote is not closed");
  expect_line_error("[web]\nw1 a='open\n", 2, "quote is not closed");
  expect_line_error("[web]\nw1 a=b\\\n", 2, "backslash");
  expect_line_error("[web]\nansible_user=root\n", 2, "not a host name");
  expect_line_error("[web]\n\"\" a=1\n", 2, "host name is empty");
  expect_line_error("---\nall:\n", 1, "YAML");
  expect_line_error("[web:children]\nbad:name\n", 2, "expected a group name");
  expect_line_error("[web]\nw1\x01\n", 2, "control character 0x01");
  expect_line_error("[web]\nw\xff\xfe\n", 2, "not UTF-8");
  expect_line_error("[web]\nw\xc0\xaf\n", 2, "not UTF-8");  // an overlong '/'
  expect_line_error("[web]\n" + std::string(max_inventory_line + 1, 'w') + "\n", 2, "longer than");
  // Non-UTF-8 comments are accepted, as Ansible accepts them.
  EXPECT_EQ(names(parsed("# caf\xe9\n[web]\nw1 note=caf\xc3\xa9\n")), strings{"w1"});
}

TEST(ansible_inventory, the_group_filter_takes_a_group_with_its_children) {
  std::string_view text =
      "solo\n"
      "[atlanta]\n"
      "host1\n"
      "[raleigh]\n"
      "host2\n"
      "[southeast:children]\n"
      "atlanta\n"
      "raleigh\n"
      "[usa:children]\n"
      "southeast\n"
      "[other]\n"
      "host3\n";
  EXPECT_EQ(names(parsed(text)), (strings{"solo", "host1", "host2", "host3"}));
  EXPECT_EQ(names(parsed(text, "all")), (strings{"solo", "host1", "host2", "host3"}));
  EXPECT_EQ(names(parsed(text, "usa")), (strings{"host1", "host2"}));
  EXPECT_EQ(names(parsed(text, "raleigh")), strings{"host2"});
  EXPECT_EQ(names(parsed(text, "ungrouped")), strings{"solo"});
  EXPECT_EQ(names(parsed("[empty:children]\n[web]\nw\n", "empty")), strings{});
  auto r = parse_ansible_ini_inventory(text, "europe");
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "group");
  EXPECT_NE(r.error().message.find("europe"), std::string::npos);
}

TEST(ansible_inventory, a_megabyte_of_input_is_linear_whatever_it_holds) {
  std::string many;
  for (int i = 0; many.size() < (1 << 20); ++i) many += "[g" + std::to_string(i % 500) + "]\nhost" + std::to_string(i) + " a=1\n";
  auto r = parse_ansible_ini_inventory(many);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->hosts.size(), 40000u);

  std::string junk;
  for (std::uint32_t x = 1; junk.size() < (1 << 20);) junk += static_cast<char>((x = x * 1103515245 + 12345) >> 16);
  EXPECT_FALSE(parse_ansible_ini_inventory(junk).has_value());

  // One long line of ranges and words, under the line cap.
  std::string wide = "[web]\nh";
  while (wide.size() < max_inventory_line - 100) wide += " k" + std::to_string(wide.size()) + "=v";
  EXPECT_TRUE(parse_ansible_ini_inventory(wide + "\n").has_value());
  EXPECT_FALSE(parse_ansible_ini_inventory(std::string(1 << 20, '[')).has_value());
  EXPECT_TRUE(parse_ansible_ini_inventory(std::string(1 << 20, '\n')).has_value());
}
