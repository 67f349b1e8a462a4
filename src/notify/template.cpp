// Templates and per-format rendering (template.hpp).
#include "certfleet/notify/template.hpp"

#include "certfleet/core/clock.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>

namespace certfleet::notify {

namespace json = boost::json;

namespace {

constexpr std::size_t max_subject_out = 250;
constexpr std::size_t max_fact_value = 300;
constexpr std::string_view open_text = "Open in certfleet";

bool name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'; }

std::string as_is(std::string_view s) { return std::string(s); }

std::string trim_right(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t')) s.pop_back();
  return s;
}

std::string one_line(std::string_view s) {
  std::string out = clean_text(s, false);
  return out;
}

// The value at a dotted path ("summary.failed") of `data`; nullptr when absent.
const json::value* at_path(const json::object& data, std::string_view path) {
  const json::object* o = &data;
  while (true) {
    auto dot = path.find('.');
    auto* v = o->if_contains(path.substr(0, dot));
    if (!v || dot == std::string_view::npos) return v;
    if (!v->is_object()) return nullptr;
    o = &v->as_object();
    path.remove_prefix(dot + 1);
  }
}

std::string value_text(field_type t, const json::value& v) {
  switch (t) {
    case field_type::text: return v.is_string() ? clean_text(v.as_string(), true) : std::string();
    case field_type::integer:
      if (v.is_int64()) return std::to_string(v.as_int64());
      if (v.is_uint64()) return std::to_string(v.as_uint64());
      return {};
    case field_type::time:
      if (v.is_int64() && v.as_int64() > 0) return format_iso8601(v.as_int64());
      if (v.is_uint64() && v.as_uint64() > 0 && v.as_uint64() < (1ull << 62))
        return format_iso8601(static_cast<time_ms>(v.as_uint64()));
      return {};
    case field_type::list: {
      if (!v.is_array()) return {};
      std::string out;
      for (const auto& x : v.as_array())
        if (x.is_string()) out += (out.empty() ? "" : ", ") + clean_text(x.as_string(), false);
      return out;
    }
  }
  return {};
}

std::string percent_encode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
        c == '~')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string placeholder_list(const event_def& e) {
  std::string out;
  for (const auto& f : e.fields) out += fmt::format("{}{{{{{}}}}}", out.empty() ? "" : ", ", f.name);
  for (const auto& b : builtin_placeholders()) out += fmt::format(", {{{{{}}}}}", b.name);
  return out;
}

}  // namespace

std::string clean_text(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  constexpr std::string_view replacement = "\xEF\xBF\xBD";
  for (std::size_t i = 0; i < n;) {
    unsigned char c = p[i];
    if (c < 0x80) {
      if (c == '\n') out += keep_newlines ? '\n' : ' ';
      else if (c == '\t' || c == '\r') out += ' ';
      else if (c >= 0x20 && c != 0x7f) out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A well-formed sequence (RFC 3629: no overlongs, no surrogates, at most U+10FFFF).
    std::size_t len = 0;
    unsigned cp = 0;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      else cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if (ok && len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ok = false;
    if (ok && len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ok = false;
    if (!ok) {
      out += replacement;
      ++i;
      continue;
    }
    if (cp >= 0x80 && cp <= 0x9F) out += ' ';  // C1 controls
    else out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string truncate_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  constexpr std::string_view ellipsis = "\xE2\x80\xA6";
  if (max < ellipsis.size()) return {};
  std::size_t cut = max - ellipsis.size();
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return std::string(s.substr(0, cut)) + std::string(ellipsis);
}

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string escape_slack(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      default: out += c;
    }
  }
  return out;
}

result<std::vector<template_part>> parse_template_text(std::string_view text, std::string_view field) {
  auto bad = [&](std::string msg) { return make_error(errc::invalid_argument, std::move(msg), std::string(field)); };
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n') || c == 0x7f)
      return bad(fmt::format("{} must not contain control characters other than line breaks", field));
  std::vector<template_part> parts;
  std::size_t i = 0;
  while (i < text.size()) {
    auto open = text.find("{{", i);
    if (open == std::string_view::npos) {
      parts.push_back({false, std::string(text.substr(i))});
      break;
    }
    if (open > i) parts.push_back({false, std::string(text.substr(i, open - i))});
    auto close = text.find("}}", open + 2);
    if (close == std::string_view::npos)
      return bad(fmt::format("{}: \"{{{{\" at character {} is never closed with \"}}}}\"", field, open + 1));
    auto inner = text.substr(open + 2, close - open - 2);
    while (!inner.empty() && inner.front() == ' ') inner.remove_prefix(1);
    while (!inner.empty() && inner.back() == ' ') inner.remove_suffix(1);
    if (inner.empty() || inner.size() > 64 || !std::all_of(inner.begin(), inner.end(), name_char))
      return bad(fmt::format("{}: \"{}\" is not a placeholder (names are lower-case letters, digits, _ and ., like "
                             "{{{{name}}}})",
                             field, clean_text(truncate_utf8(text.substr(open, close + 2 - open), 80), false)));
    parts.push_back({true, std::string(inner)});
    i = close + 2;
  }
  return parts;
}

bool known_placeholder(const event_def& e, std::string_view name) {
  for (const auto& f : e.fields)
    if (f.name == name) return true;
  for (const auto& b : builtin_placeholders())
    if (b.name == name) return true;
  return false;
}

result<message_template> parse_template_override(const json::value& v, const event_def& e) {
  auto bad = [](std::string field, std::string msg) { return make_error(errc::invalid_argument, std::move(msg), std::move(field)); };
  if (!v.is_object()) return bad("template", "template must be an object {\"subject\"?, \"body\"?}");
  const auto& o = v.as_object();
  for (const auto& [k, _] : o)
    if (k != "subject" && k != "body")
      return bad("template." + clean_text(truncate_utf8(k, 64), false),
                 fmt::format("unknown field \"template.{}\" (a template has subject and body)",
                             clean_text(truncate_utf8(k, 64), false)));
  if (o.empty()) return bad("template", "template needs a subject, a body or both");
  message_template t;
  for (const char* member : {"subject", "body"}) {
    auto* p = o.if_contains(member);
    if (!p) continue;
    const std::string field = fmt::format("template.{}", member);
    if (!p->is_string()) return bad(field, fmt::format("{} must be a string", field));
    std::string_view text = p->as_string();
    const std::size_t max = std::string_view(member) == "subject" ? max_template_subject : max_template_body;
    if (text.empty()) return bad(field, fmt::format("{} must not be empty (leave it out to keep the default)", field));
    if (text.size() > max) return bad(field, fmt::format("{} is longer than {} bytes", field, max));
    auto parts = parse_template_text(text, field);
    if (!parts) return std::move(parts).error();
    if (clean_text(text, true) != text) return bad(field, fmt::format("{} must be valid UTF-8", field));
    std::vector<std::string> unknown;
    for (const auto& part : *parts)
      if (part.placeholder && !known_placeholder(e, part.text) &&
          std::find(unknown.begin(), unknown.end(), part.text) == unknown.end())
        unknown.push_back(part.text);
    if (!unknown.empty()) {
      std::string names;
      for (const auto& u : unknown) names += fmt::format("{}{{{{{}}}}}", names.empty() ? "" : ", ", u);
      return bad(field, fmt::format("unknown placeholder{} {} in {}; {} has {}", unknown.size() > 1 ? "s" : "", names, field,
                                    e.name, placeholder_list(e)));
    }
    (std::string_view(member) == "subject" ? t.subject : t.body) = std::string(text);
  }
  return t;
}

message_template template_for(const event_def& e, const message_template& o) {
  return {o.subject.empty() ? std::string(e.subject) : o.subject, o.body.empty() ? std::string(e.body) : o.body};
}

const std::string& message_values::get(std::string_view name) const {
  static const std::string empty;
  auto it = by_name.find(name);
  return it == by_name.end() ? empty : it->second;
}

json::object machine_data(const event_def& e, const json::object& data) {
  json::object out = data;
  for (const auto& f : e.fields) {
    if (f.type != field_type::time) continue;
    // `out` is ours: the walk is shared with the const readers.
    auto* v = const_cast<json::value*>(at_path(out, f.name));
    if (!v) continue;
    auto text = value_text(f.type, *v);
    *v = text.empty() ? json::value(nullptr) : json::value(text);
  }
  return out;
}

message_values event_values(const event_def& e, const json::object& data, std::string_view event_id,
                            std::string_view project, std::string_view link) {
  message_values v;
  for (const auto& f : e.fields) {
    const auto* x = at_path(data, f.name);
    v.by_name[std::string(f.name)] = x ? truncate_utf8(value_text(f.type, *x), 2000) : std::string();
  }
  v.by_name["event"] = std::string(e.name);
  v.by_name["event_id"] = clean_text(truncate_utf8(event_id, 300), false);
  v.by_name["project"] = clean_text(truncate_utf8(project, 200), false);
  v.by_name["link"] = clean_text(link, false);
  return v;
}

std::string event_link(const event_def& e, const json::object& data, std::string_view ui_base_url,
                       std::string_view project) {
  if (ui_base_url.empty() || e.ui_path.empty()) return {};
  std::string path;
  std::string_view rest = e.ui_path;
  while (!rest.empty()) {
    auto open = rest.find('{');
    path += rest.substr(0, open);
    if (open == std::string_view::npos) break;
    auto close = rest.find('}', open);
    if (close == std::string_view::npos) return {};
    const auto* v = at_path(data, rest.substr(open + 1, close - open - 1));
    if (!v || !v->is_string() || v->as_string().empty()) return {};
    path += percent_encode(v->as_string());
    rest.remove_prefix(close + 1);
  }
  std::string base(ui_base_url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + path + "?project=" + percent_encode(project);
}

std::string fill(const std::vector<template_part>& parts, const message_values& values,
                 std::string (*escape)(std::string_view)) {
  std::string out;
  for (const auto& p : parts) out += escape(p.placeholder ? std::string_view(values.get(p.text)) : std::string_view(p.text));
  return out;
}

message_content compose(const event_def& e, const message_template& tpl, const message_values& values) {
  message_content m;
  auto subject = parse_template_text(tpl.subject, "template.subject");
  std::vector<template_part> subject_parts = subject ? std::move(*subject) : std::vector<template_part>{{false, tpl.subject}};
  m.subject = truncate_utf8(trim_right(one_line(fill(subject_parts, values, as_is))), max_subject_out);
  auto body = parse_template_text(tpl.body, "template.body");
  m.body = body ? std::move(*body) : std::vector<template_part>{{false, tpl.body}};
  m.values = values;
  for (const auto& f : e.fields) {
    if (f.label.empty()) continue;
    const auto& v = values.get(f.name);
    if (!v.empty()) m.facts.emplace_back(std::string(f.label), truncate_utf8(one_line(v), max_fact_value));
  }
  m.link = values.get("link");
  m.event_id = values.get("event_id");
  m.project = values.get("project");
  return m;
}

rendered_email render_email(const message_content& m) {
  rendered_email r;
  r.subject = m.subject;
  const std::string body = trim_right(fill(m.body, m.values, as_is));
  r.text = body + "\n\n";
  for (const auto& [label, value] : m.facts) r.text += fmt::format("{}: {}\n", label, value);
  if (!m.link.empty()) r.text += fmt::format("\n{}: {}\n", open_text, m.link);
  r.text += fmt::format("\nEvent: {}\nProject: {}\n", m.event_id, m.project);

  std::string paragraphs = trim_right(fill(m.body, m.values, escape_html));
  std::string html_body;
  for (std::size_t i = 0; i < paragraphs.size(); ++i) {
    if (paragraphs[i] != '\n') {
      html_body += paragraphs[i];
      continue;
    }
    std::size_t run = 1;
    while (i + run < paragraphs.size() && paragraphs[i + run] == '\n') ++run;
    html_body += run > 1 ? "</p>\n<p>" : "<br>\n";
    i += run - 1;
  }
  r.html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + escape_html(m.subject) +
           "</title></head>\n<body style=\"font-family: sans-serif; color: #1f2328\">\n<h2 style=\"font-size: 18px\">" +
           escape_html(m.subject) + "</h2>\n<p>" + html_body + "</p>\n";
  if (!m.facts.empty()) {
    r.html += "<table style=\"border-collapse: collapse\">\n";
    for (const auto& [label, value] : m.facts)
      r.html += "<tr><th style=\"text-align: left; padding: 2px 12px 2px 0\">" + escape_html(label) + "</th><td>" +
                escape_html(value) + "</td></tr>\n";
    r.html += "</table>\n";
  }
  if (!m.link.empty()) r.html += "<p><a href=\"" + escape_html(m.link) + "\">" + std::string(open_text) + "</a></p>\n";
  r.html += "<p style=\"color: #656d76; font-size: 12px\">Event " + escape_html(m.event_id) + " &middot; project " +
            escape_html(m.project) + "</p>\n</body></html>\n";
  return r;
}

json::object render_slack(const message_content& m) {
  json::array blocks;
  blocks.push_back(json::object{
      {"type", "header"},
      {"text", json::object{{"type", "plain_text"}, {"text", truncate_utf8(m.subject.empty() ? "certfleet" : m.subject, 150)},
                            {"emoji", false}}}});
  auto body = truncate_utf8(trim_right(fill(m.body, m.values, escape_slack)), 3000);
  if (!body.empty())
    blocks.push_back(json::object{{"type", "section"}, {"text", json::object{{"type", "mrkdwn"}, {"text", body}}}});
  if (!m.facts.empty()) {
    json::array fields;
    for (const auto& [label, value] : m.facts) {
      if (fields.size() == 10) break;
      fields.push_back(json::object{
          {"type", "mrkdwn"}, {"text", truncate_utf8("*" + escape_slack(label) + "*\n" + escape_slack(value), 2000)}});
    }
    blocks.push_back(json::object{{"type", "section"}, {"fields", std::move(fields)}});
  }
  if (!m.link.empty() && m.link.size() <= 3000)
    blocks.push_back(json::object{
        {"type", "actions"},
        {"elements", json::array{json::object{{"type", "button"},
                                              {"text", json::object{{"type", "plain_text"}, {"text", open_text}}},
                                              {"url", m.link}}}}});
  blocks.push_back(json::object{
      {"type", "context"},
      {"elements", json::array{json::object{
                       {"type", "mrkdwn"},
                       {"text", truncate_utf8("Event " + escape_slack(m.event_id) + " · project " + escape_slack(m.project),
                                              3000)}}}}});
  return json::object{{"text", truncate_utf8(escape_slack(m.subject), 3000)}, {"blocks", std::move(blocks)}};
}

json::object render_teams(const message_content& m) {
  json::array body;
  body.push_back(json::object{{"type", "TextBlock"},
                              {"text", m.subject.empty() ? "certfleet" : m.subject},
                              {"size", "Large"},
                              {"weight", "Bolder"},
                              {"wrap", true}});
  // Teams' TextBlock starts a new line only at a blank line.
  std::string text;
  for (char c : trim_right(fill(m.body, m.values, as_is))) text += c == '\n' ? std::string("\n\n") : std::string(1, c);
  if (!text.empty()) body.push_back(json::object{{"type", "TextBlock"}, {"text", text}, {"wrap", true}});
  if (!m.facts.empty()) {
    json::array facts;
    for (const auto& [label, value] : m.facts) facts.push_back(json::object{{"title", label}, {"value", value}});
    body.push_back(json::object{{"type", "FactSet"}, {"facts", std::move(facts)}});
  }
  body.push_back(json::object{{"type", "TextBlock"},
                              {"text", "Event " + m.event_id + " · project " + m.project},
                              {"isSubtle", true},
                              {"size", "Small"},
                              {"wrap", true}});
  json::object card{{"$schema", "http://adaptivecards.io/schemas/adaptive-card.json"},
                    {"type", "AdaptiveCard"},
                    {"version", "1.5"},
                    {"body", std::move(body)},
                    {"msteams", json::object{{"width", "Full"}}}};
  if (!m.link.empty())
    card["actions"] = json::array{json::object{{"type", "Action.OpenUrl"}, {"title", open_text}, {"url", m.link}}};
  return json::object{
      {"type", "message"},
      {"attachments", json::array{json::object{{"contentType", "application/vnd.microsoft.card.adaptive"},
                                               {"contentUrl", nullptr},
                                               {"content", std::move(card)}}}}};
}

}  // namespace certfleet::notify
