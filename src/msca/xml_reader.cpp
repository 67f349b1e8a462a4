// The hardened reader over libxml2 (xml_reader.hpp). Each parse has its own parser context, its
// own structured error handler and its own SAX hooks, so parses on several threads share nothing
// but libxml2's one-time initialisation.
#include "msca/xml_reader.hpp"

#include "certfleet/msca/protocol.hpp"

#include <libxml/parser.h>
#include <libxml/entities.h>
#include <libxml/parserInternals.h>
#include <libxml/tree.h>
#include <libxml/xmlerror.h>

#include <climits>
#include <memory>
#include <mutex>

namespace certfleet::msca::detail {

namespace {

void init_libxml_once() {
  static std::once_flag once;
  std::call_once(once, [] { xmlInitParser(); });
}

// libxml2's generic error channel is per thread (its global state is thread-local in a threaded
// build): silence it on each thread that parses, so nothing is ever printed to stderr.
void ignore_generic_error(void*, const char*, ...) {}

void silence_generic_errors() {
  thread_local bool silenced = false;
  if (!silenced) {
    xmlSetGenericErrorFunc(nullptr, ignore_generic_error);
    silenced = true;
  }
}

// What one parse knows besides libxml2's context: the caps and why it was stopped.
struct parse_state {
  xml_limits limits;
  std::size_t elements = 0;
  std::string refusal;      // set by our own hooks: the reason we stopped the parser
  std::string first_error;  // libxml2's first error message
  startElementNsSAX2Func start_element = nullptr;
};

parse_state* state_of(void* ctx) {
  auto* ctxt = static_cast<xmlParserCtxtPtr>(ctx);
  return ctxt ? static_cast<parse_state*>(ctxt->_private) : nullptr;
}

void refuse(void* ctx, std::string why) {
  auto* st = state_of(ctx);
  if (st && st->refusal.empty()) st->refusal = std::move(why);
  xmlStopParser(static_cast<xmlParserCtxtPtr>(ctx));
}

// A DOCTYPE (internal or external subset) stops the parse at once: no entity is ever declared,
// let alone expanded (billion laughs, external entities).
void on_internal_subset(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) {
  refuse(ctx, "the document has a DOCTYPE (a SOAP message may not have one)");
}
void on_external_subset(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) {
  refuse(ctx, "the document has a DOCTYPE (a SOAP message may not have one)");
}
void on_entity_decl(void* ctx, const xmlChar*, int, const xmlChar*, const xmlChar*, xmlChar*) {
  refuse(ctx, "the document declares an entity");
}
xmlEntityPtr on_get_entity(void* ctx, const xmlChar* name) {
  // Only the five predefined entities exist without a DTD; libxml2 resolves those itself.
  if (auto* e = xmlGetPredefinedEntity(name)) return e;
  refuse(ctx, "the document refers to an undeclared entity");
  return nullptr;
}

void on_start_element(void* ctx, const xmlChar* localname, const xmlChar* prefix, const xmlChar* uri,
                      int nb_namespaces, const xmlChar** namespaces, int nb_attributes, int nb_defaulted,
                      const xmlChar** attributes) {
  auto* ctxt = static_cast<xmlParserCtxtPtr>(ctx);
  auto* st = state_of(ctx);
  if (++st->elements > st->limits.max_elements) {
    refuse(ctx, "the document has more than " + std::to_string(st->limits.max_elements) + " elements");
    return;
  }
  // nameNr counts the open elements around this one (it is pushed after this callback).
  if (ctxt->nameNr >= st->limits.max_depth) {
    refuse(ctx, "the document nests deeper than " + std::to_string(st->limits.max_depth) + " elements");
    return;
  }
  st->start_element(ctx, localname, prefix, uri, nb_namespaces, namespaces, nb_attributes, nb_defaulted, attributes);
}

void on_error(void* ctx, xmlErrorPtr err) {
  auto* st = state_of(ctx);
  if (!st || !err || !st->first_error.empty()) return;
  std::string msg = err->message ? err->message : "malformed XML";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  st->first_error = "line " + std::to_string(err->line) + ": " + msg;
}

struct ctxt_free {
  void operator()(xmlParserCtxtPtr c) const noexcept { xmlFreeParserCtxt(c); }
};
struct doc_free {
  void operator()(xmlDocPtr d) const noexcept { xmlFreeDoc(d); }
};

std::string text_of(const xmlChar* s) { return s ? reinterpret_cast<const char*>(s) : std::string(); }

// The libxml2 tree as our own, iteratively bounded by the caps the SAX hooks already enforced.
void convert(xmlNodePtr node, xml_element& out) {
  out.name = text_of(node->name);
  out.ns = node->ns ? text_of(node->ns->href) : std::string();
  for (xmlAttrPtr a = node->properties; a; a = a->next) {
    xml_attribute attr;
    attr.name = text_of(a->name);
    attr.ns = a->ns ? text_of(a->ns->href) : std::string();
    for (xmlNodePtr v = a->children; v; v = v->next)
      if (v->type == XML_TEXT_NODE && v->content) attr.value += text_of(v->content);
    out.attributes.push_back(std::move(attr));
  }
  for (xmlNodePtr c = node->children; c; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      out.children.emplace_back();
      convert(c, out.children.back());
    } else if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && c->content) {
      out.text += text_of(c->content);
    }
  }
}

bool is_xml_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

}  // namespace

xml_limits default_xml_limits() noexcept {
  xml_limits l;
  l.max_bytes = max_answer_bytes;
  return l;
}

const xml_element* xml_element::child(std::string_view ns_uri, std::string_view local) const noexcept {
  for (const auto& c : children)
    if (c.is(ns_uri, local)) return &c;
  return nullptr;
}

std::vector<const xml_element*> xml_element::children_named(std::string_view ns_uri, std::string_view local) const {
  std::vector<const xml_element*> out;
  for (const auto& c : children)
    if (c.is(ns_uri, local)) out.push_back(&c);
  return out;
}

const std::string* xml_element::attribute(std::string_view ns_uri, std::string_view local) const noexcept {
  for (const auto& a : attributes)
    if (a.ns == ns_uri && a.name == local) return &a.value;
  return nullptr;
}

bool xml_element::nil() const noexcept {
  const auto* v = attribute(ns_xsi, "nil");
  if (!v) return false;
  std::string_view s = *v;
  while (!s.empty() && is_xml_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_xml_space(s.back())) s.remove_suffix(1);
  return s == "true" || s == "1";
}

std::string_view xml_element::trimmed_text() const noexcept {
  std::string_view s = text;
  while (!s.empty() && is_xml_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_xml_space(s.back())) s.remove_suffix(1);
  return s;
}

result<xml_element> parse_xml(std::string_view text) { return parse_xml(text, default_xml_limits()); }

result<xml_element> parse_xml(std::string_view text, const xml_limits& limits) {
  if (text.size() > limits.max_bytes || text.size() > static_cast<std::size_t>(INT_MAX))
    return make_error(errc::invalid_argument,
                      "the answer is " + std::to_string(text.size()) + " bytes, more than the " +
                          std::to_string(limits.max_bytes) + " accepted",
                      "xml");
  if (text.empty()) return make_error(errc::invalid_argument, "the answer is empty", "xml");
  init_libxml_once();
  silence_generic_errors();

  // UTF-16 and UTF-32 spell every ASCII character with a NUL byte; refusing NUL (never legal
  // in XML) and ignoring the declaration's encoding hint keeps the parse in UTF-8 (what CES
  // sends), so no transcoding can change what the caps and hooks see.
  if (text.find('\0') != std::string_view::npos)
    return make_error(errc::invalid_argument, "malformed XML: a NUL byte (only UTF-8 is accepted)", "xml");

  std::unique_ptr<xmlParserCtxt, ctxt_free> ctxt(xmlCreateMemoryParserCtxt(text.data(), static_cast<int>(text.size())));
  if (!ctxt || !ctxt->sax) return make_error(errc::invalid_argument, "the XML parser could not be created", "xml");
  // NONET: nothing is fetched. NOCDATA: CDATA arrives as text. IGNORE_ENC: see above. No NOENT
  // (no substitution), no DTDLOAD/DTDATTR/DTDVALID, no XINCLUDE, no HUGE (libxml2's own limits
  // stay on). Set before the hooks: the options rewrite some SAX fields.
  xmlCtxtUseOptions(ctxt.get(), XML_PARSE_NONET | XML_PARSE_NOCDATA | XML_PARSE_NOERROR | XML_PARSE_NOWARNING |
                                    XML_PARSE_IGNORE_ENC);
  parse_state st;
  st.limits = limits;
  ctxt->_private = &st;
  // The hooks: structured errors to this parse only; DOCTYPE and entity declarations refused;
  // element count and depth capped while parsing (not after a huge tree is built).
  ctxt->sax->initialized = XML_SAX2_MAGIC;
  ctxt->sax->serror = on_error;
  ctxt->sax->internalSubset = on_internal_subset;
  ctxt->sax->externalSubset = on_external_subset;
  ctxt->sax->entityDecl = on_entity_decl;
  ctxt->sax->getEntity = on_get_entity;
  ctxt->sax->getParameterEntity = nullptr;
  ctxt->sax->resolveEntity = nullptr;
  st.start_element = ctxt->sax->startElementNs;
  if (!st.start_element) return make_error(errc::invalid_argument, "the XML parser has no namespace support", "xml");
  ctxt->sax->startElementNs = on_start_element;

  xmlParseDocument(ctxt.get());
  // The document is the context's until taken; the context does not free it.
  std::unique_ptr<xmlDoc, doc_free> doc(ctxt->myDoc);
  ctxt->myDoc = nullptr;
  if (!st.refusal.empty()) return make_error(errc::invalid_argument, "refused XML: " + st.refusal, "xml");
  // nsWellFormed: a namespace error (an undeclared prefix) leaves the document well-formed XML
  // but not a namespace-well-formed one, and names would not be what they say.
  if (!doc || !ctxt->wellFormed || !ctxt->nsWellFormed) {
    std::string why = st.first_error.empty() ? std::string("not well-formed") : st.first_error;
    return make_error(errc::invalid_argument, "malformed XML: " + why, "xml");
  }
  if (doc->intSubset || doc->extSubset)
    return make_error(errc::invalid_argument, "refused XML: the document has a DOCTYPE (a SOAP message may not have one)",
                      "xml");
  xmlNodePtr root = xmlDocGetRootElement(doc.get());
  if (!root) return make_error(errc::invalid_argument, "malformed XML: no root element", "xml");
  xml_element out;
  convert(root, out);
  return out;
}

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      // Written as references so attribute-value normalisation keeps them.
      case '\t': out += "&#9;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (c < 0x20)
          out += "\xEF\xBF\xBD";  // U+FFFD: XML 1.0 cannot carry this character at all
        else
          out += ch;
    }
  }
  return out;
}

}  // namespace certfleet::msca::detail
