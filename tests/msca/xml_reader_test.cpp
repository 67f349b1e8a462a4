// The hardened XML reader under every answer of a CEP/CES server: hostile documents are refused
// with a clear error before anything is expanded or fetched, and names match by namespace URI.
#include "msca/xml_reader.hpp"

#include "certfleet/msca/protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

using certfleet::errc;
using namespace certfleet::msca::detail;

namespace {

std::string error_of(std::string_view xml) {
  auto r = parse_xml(xml);
  EXPECT_FALSE(r) << "parsed: " << xml.substr(0, 80);
  if (r) return {};
  EXPECT_TRUE(r.error().is(errc::invalid_argument));
  EXPECT_EQ(r.error().field, "xml");
  return r.error().message;
}

}  // namespace

TEST(msca_xml_reader, reads_namespaces_attributes_and_text) {
  auto r = parse_xml(
      "<?xml version=\"1.0\" encoding=\"utf-8\"?><p:a xmlns:p=\"urn:x\" xmlns=\"urn:y\" p:k=\"v&amp;w\" n=\"1\">"
      "<b>t&lt;1</b><p:c><![CDATA[<raw>]]></p:c><b xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" xsi:nil=\"true\"/></p:a>");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->is("urn:x", "a"));
  ASSERT_NE(r->attribute("urn:x", "k"), nullptr);
  EXPECT_EQ(*r->attribute("urn:x", "k"), "v&w");
  ASSERT_NE(r->attribute("", "n"), nullptr);
  EXPECT_EQ(r->attribute("urn:y", "n"), nullptr);  // default namespaces do not apply to attributes
  ASSERT_EQ(r->children.size(), 3u);
  EXPECT_TRUE(r->children[0].is("urn:y", "b"));
  EXPECT_EQ(r->children[0].text, "t<1");
  EXPECT_EQ(r->child("urn:x", "c")->text, "<raw>");
  EXPECT_EQ(r->children_named("urn:y", "b").size(), 2u);
  EXPECT_FALSE(r->children[0].nil());
  EXPECT_TRUE(r->children[2].nil());
  // Prefixes are not names: the same local name in another namespace is another element.
  EXPECT_EQ(r->child("urn:x", "b"), nullptr);
}

TEST(msca_xml_reader, refuses_billion_laughs) {
  const std::string lol =
      "<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\">"
      "<!ENTITY lol1 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">"
      "<!ENTITY lol2 \"&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;\">"
      "<!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">"
      "<!ENTITY lol4 \"&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;\">"
      "<!ENTITY lol5 \"&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;\">"
      "<!ENTITY lol6 \"&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;\">"
      "<!ENTITY lol7 \"&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;\">"
      "<!ENTITY lol8 \"&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;\">"
      "<!ENTITY lol9 \"&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;\">]>"
      "<lolz>&lol9;</lolz>";
  const auto msg = error_of(lol);
  EXPECT_NE(msg.find("DOCTYPE"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("lollol"), std::string::npos);
}

TEST(msca_xml_reader, refuses_external_entity_without_reading_it) {
  const auto msg = error_of("<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]><x>&e;</x>");
  EXPECT_NE(msg.find("DOCTYPE"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("root:"), std::string::npos);
}

TEST(msca_xml_reader, refuses_any_doctype) {
  EXPECT_NE(error_of("<!DOCTYPE x><x/>").find("DOCTYPE"), std::string::npos);
  EXPECT_NE(error_of("<!DOCTYPE x SYSTEM \"http://127.0.0.1:1/x.dtd\"><x/>").find("DOCTYPE"), std::string::npos);
  EXPECT_NE(error_of("<!DOCTYPE x PUBLIC \"-//x//y\" \"x.dtd\" [<!ELEMENT x ANY>]><x/>").find("DOCTYPE"),
            std::string::npos);
}

TEST(msca_xml_reader, refuses_undeclared_entities) {
  const auto msg = error_of("<x>&nope;</x>");
  EXPECT_FALSE(msg.empty());
}

TEST(msca_xml_reader, refuses_oversize_documents) {
  std::string big = "<x>";
  big.append(5 * 1024 * 1024, 'a');
  big += "</x>";
  const auto msg = error_of(big);
  EXPECT_NE(msg.find("bytes"), std::string::npos) << msg;
}

TEST(msca_xml_reader, refuses_deep_nesting) {
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep += "<a>";
  for (int i = 0; i < 10000; ++i) deep += "</a>";
  const auto msg = error_of(deep);
  EXPECT_NE(msg.find("deeper"), std::string::npos) << msg;
  // 64 levels are fine, 65 are not.
  std::string ok, over;
  for (int i = 0; i < 64; ++i) ok += "<a>";
  for (int i = 0; i < 64; ++i) ok += "</a>";
  EXPECT_TRUE(parse_xml(ok));
  over = "<b>" + ok + "</b>";
  EXPECT_FALSE(parse_xml(over));
}

TEST(msca_xml_reader, refuses_too_many_elements) {
  std::string many = "<x>";
  for (int i = 0; i < 20001; ++i) many += "<y/>";
  many += "</x>";
  const auto msg = error_of(many);
  EXPECT_NE(msg.find("elements"), std::string::npos) << msg;
}

TEST(msca_xml_reader, refuses_malformed_and_non_utf8) {
  EXPECT_FALSE(error_of("").empty());
  EXPECT_FALSE(error_of("<x>").empty());
  EXPECT_FALSE(error_of("<x></y>").empty());
  EXPECT_FALSE(error_of("not xml").empty());
  EXPECT_FALSE(error_of("<x>\xff\xfe</x>").empty());
  // UTF-16: every ASCII character has a NUL byte.
  EXPECT_FALSE(error_of(std::string("\xff\xfe<\0x\0/\0>\0", 10)).empty());
  EXPECT_FALSE(error_of("<p:x/>").empty());  // undeclared prefix
}

TEST(msca_xml_reader, parses_on_many_threads_at_once) {
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t, &ok] {
      for (int i = 0; i < 200; ++i) {
        auto good = parse_xml("<a xmlns=\"urn:t\"><b>" + std::to_string(i) + "</b></a>");
        auto bad = parse_xml("<!DOCTYPE a [<!ENTITY e \"x\">]><a>&e;</a>");
        if (good && good->children.size() == 1 && !bad) ++ok[static_cast<std::size_t>(t)];
      }
    });
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_EQ(v, 200);
}

TEST(msca_xml_reader, escapes_everything_it_writes) {
  EXPECT_EQ(xml_escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(xml_escape("x\ny\tz\r"), "x&#10;y&#9;z&#13;");
  EXPECT_EQ(xml_escape(std::string("a\x01" "b", 3)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(xml_escape("p\xC3\xA9"), "p\xC3\xA9");
}
