#pragma once
// A hardened XML reader for what a CEP/CES server answers (DESIGN §13): libxml2 parses from memory
// with no network, no DTD and no entity substitution; a document with a DOCTYPE is refused at its
// first token (SOAP 1.2 part 1 §5 forbids DTDs in a SOAP message), as are documents over
// msca::max_answer_bytes, deeper than max_depth or with more than max_elements elements. The
// answer is a small owned tree matched by (namespace URI, local name), never by prefix: a server
// may pick any prefix. libxml2 itself stays in src/msca/.
#include "certfleet/core/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace certfleet::msca::detail {

struct xml_attribute {
  std::string ns;  // namespace URI ("" for an unqualified attribute)
  std::string name;
  std::string value;
};

struct xml_element {
  std::string ns;    // namespace URI ("" for none)
  std::string name;  // local name
  std::vector<xml_attribute> attributes;
  std::string text;  // the element's own character data, concatenated (CDATA included)
  std::vector<xml_element> children;

  bool is(std::string_view ns_uri, std::string_view local) const noexcept { return ns == ns_uri && name == local; }
  // The first child with this name, or nullptr.
  const xml_element* child(std::string_view ns_uri, std::string_view local) const noexcept;
  std::vector<const xml_element*> children_named(std::string_view ns_uri, std::string_view local) const;
  const std::string* attribute(std::string_view ns_uri, std::string_view local) const noexcept;
  // xsi:nil="true": the schema's "present but no value", which the parsers treat as absent.
  bool nil() const noexcept;
  // `text` without the XML whitespace around it (the schema types the parsers read collapse it).
  std::string_view trimmed_text() const noexcept;
};

struct xml_limits {
  std::size_t max_bytes;
  int max_depth = 64;
  std::size_t max_elements = 20000;
};
xml_limits default_xml_limits() noexcept;

// The document's root element. invalid_argument (field "xml") for a document that is not
// well-formed UTF-8 XML, has a DOCTYPE or entity declaration, or exceeds a limit.
result<xml_element> parse_xml(std::string_view text, const xml_limits& limits);
result<xml_element> parse_xml(std::string_view text);

// Text escaped for an XML element or a double-quoted attribute value. Characters XML 1.0 cannot
// carry at all (controls other than tab/CR/LF) are replaced by U+FFFD rather than written.
std::string xml_escape(std::string_view text);

inline constexpr std::string_view ns_xsi = "http://www.w3.org/2001/XMLSchema-instance";

}  // namespace certfleet::msca::detail
