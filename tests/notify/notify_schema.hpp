#pragma once
// Checks of a Slack and a Teams payload against what each format documents, written from the
// documentation, independently of the renderer: Slack Block Kit for incoming webhooks
// (api.slack.com/reference/block-kit: blocks, their fields and length limits) and a Teams
// message carrying an Adaptive Card 1.5 (adaptivecards.io/explorer: AdaptiveCard, TextBlock,
// FactSet, Action.OpenUrl; learn.microsoft.com "Send Adaptive Cards using an Incoming Webhook":
// the message/attachments envelope). Each returns the problems found; empty means it conforms.
#include <boost/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace notify_schema {

namespace json = boost::json;

inline std::size_t utf8_chars(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

struct checker {
  std::vector<std::string> problems;
  void fail(const std::string& where, const std::string& what) { problems.push_back(where + ": " + what); }

  void only(const json::object& o, const std::string& where, std::set<std::string> allowed) {
    for (const auto& [k, _] : o)
      if (!allowed.count(std::string(k))) fail(where, "unexpected member \"" + std::string(k) + "\"");
  }
  const json::value* need(const json::object& o, const std::string& where, const char* key) {
    auto* v = o.if_contains(key);
    if (!v) fail(where, std::string("missing \"") + key + "\"");
    return v;
  }
  // A string of 1..max characters, valid UTF-8.
  void text(const json::value* v, const std::string& where, std::size_t max, std::size_t min = 1) {
    if (!v) return;
    if (!v->is_string()) return fail(where, "not a string");
    std::string_view s = v->as_string();
    if (!valid_utf8(s)) fail(where, "not valid UTF-8");
    auto n = utf8_chars(s);
    if (n < min || n > max) fail(where, "length " + std::to_string(n) + " outside " + std::to_string(min) + ".." + std::to_string(max));
  }
  // Slack's text object.
  void slack_text(const json::value* v, const std::string& where, std::size_t max, bool plain_only = false) {
    if (!v) return;
    if (!v->is_object()) return fail(where, "text object is not an object");
    const auto& o = v->as_object();
    only(o, where, {"type", "text", "emoji", "verbatim"});
    auto* type = need(o, where, "type");
    if (type && (!type->is_string() || (type->as_string() != "plain_text" && type->as_string() != "mrkdwn")))
      fail(where, "type must be plain_text or mrkdwn");
    if (plain_only && type && type->is_string() && type->as_string() != "plain_text") fail(where, "must be plain_text");
    if (type && type->is_string() && type->as_string() == "mrkdwn" && o.if_contains("emoji"))
      fail(where, "emoji is only for plain_text");
    text(need(o, where, "text"), where + ".text", max);
  }
};

inline std::vector<std::string> slack_problems(const json::value& payload) {
  checker c;
  if (!payload.is_object()) return {"payload is not an object"};
  const auto& p = payload.as_object();
  c.only(p, "payload", {"text", "blocks", "username", "icon_emoji", "icon_url", "channel", "thread_ts", "mrkdwn"});
  c.text(p.if_contains("text"), "text", 40000);
  auto* blocks = c.need(p, "payload", "blocks");
  if (!blocks) return c.problems;
  if (!blocks->is_array() || blocks->as_array().empty() || blocks->as_array().size() > 50) {
    c.fail("blocks", "must be an array of 1..50 blocks");
    return c.problems;
  }
  int i = 0;
  for (const auto& b : blocks->as_array()) {
    std::string where = "blocks[" + std::to_string(i++) + "]";
    if (!b.is_object()) { c.fail(where, "not an object"); continue; }
    const auto& o = b.as_object();
    auto* type = c.need(o, where, "type");
    if (!type || !type->is_string()) continue;
    std::string t(type->as_string());
    if (auto* id = o.if_contains("block_id")) c.text(id, where + ".block_id", 255);
    if (t == "header") {
      c.only(o, where, {"type", "text", "block_id"});
      c.slack_text(c.need(o, where, "text"), where + ".text", 150, true);
    } else if (t == "section") {
      c.only(o, where, {"type", "text", "fields", "block_id", "accessory"});
      auto* tx = o.if_contains("text");
      auto* fields = o.if_contains("fields");
      if (!tx && !fields) c.fail(where, "a section needs text or fields");
      if (tx) c.slack_text(tx, where + ".text", 3000);
      if (fields) {
        if (!fields->is_array() || fields->as_array().empty() || fields->as_array().size() > 10)
          c.fail(where + ".fields", "must be an array of 1..10 text objects");
        else {
          int k = 0;
          for (const auto& f : fields->as_array()) c.slack_text(&f, where + ".fields[" + std::to_string(k++) + "]", 2000);
        }
      }
    } else if (t == "actions") {
      c.only(o, where, {"type", "elements", "block_id"});
      auto* el = c.need(o, where, "elements");
      if (el && (!el->is_array() || el->as_array().empty() || el->as_array().size() > 25))
        c.fail(where + ".elements", "must be an array of 1..25 elements");
      else if (el)
        for (const auto& e : el->as_array()) {
          std::string w = where + ".elements[]";
          if (!e.is_object()) { c.fail(w, "not an object"); continue; }
          const auto& eo = e.as_object();
          c.only(eo, w, {"type", "text", "url", "action_id", "value", "style"});
          auto* et = c.need(eo, w, "type");
          if (et && (!et->is_string() || et->as_string() != "button")) c.fail(w, "only buttons are expected");
          c.slack_text(c.need(eo, w, "text"), w + ".text", 75, true);
          c.text(eo.if_contains("url"), w + ".url", 3000);
        }
    } else if (t == "context") {
      c.only(o, where, {"type", "elements", "block_id"});
      auto* el = c.need(o, where, "elements");
      if (el && (!el->is_array() || el->as_array().empty() || el->as_array().size() > 10))
        c.fail(where + ".elements", "must be an array of 1..10 elements");
      else if (el)
        for (const auto& e : el->as_array()) c.slack_text(&e, where + ".elements[]", 3000);
    } else if (t == "divider") {
      c.only(o, where, {"type", "block_id"});
    } else {
      c.fail(where, "unexpected block type \"" + t + "\"");
    }
  }
  return c.problems;
}

inline std::vector<std::string> teams_problems(const json::value& payload) {
  checker c;
  if (!payload.is_object()) return {"payload is not an object"};
  const auto& p = payload.as_object();
  c.only(p, "payload", {"type", "attachments"});
  auto* type = c.need(p, "payload", "type");
  if (type && (!type->is_string() || type->as_string() != "message")) c.fail("type", "must be \"message\"");
  auto* att = c.need(p, "payload", "attachments");
  if (!att || !att->is_array() || att->as_array().size() != 1) {
    c.fail("attachments", "must be an array of one attachment");
    return c.problems;
  }
  const auto& a = att->as_array()[0];
  if (!a.is_object()) return {"attachments[0] is not an object"};
  const auto& ao = a.as_object();
  c.only(ao, "attachments[0]", {"contentType", "contentUrl", "content"});
  auto* ct = c.need(ao, "attachments[0]", "contentType");
  if (ct && (!ct->is_string() || ct->as_string() != "application/vnd.microsoft.card.adaptive"))
    c.fail("attachments[0].contentType", "must be application/vnd.microsoft.card.adaptive");
  if (auto* cu = ao.if_contains("contentUrl"); cu && !cu->is_null()) c.fail("attachments[0].contentUrl", "must be null");
  auto* content = c.need(ao, "attachments[0]", "content");
  if (!content || !content->is_object()) {
    c.fail("content", "must be an object");
    return c.problems;
  }
  const auto& card = content->as_object();
  c.only(card, "card", {"$schema", "type", "version", "body", "actions", "msteams", "fallbackText", "speak", "lang"});
  auto* ctype = c.need(card, "card", "type");
  if (ctype && (!ctype->is_string() || ctype->as_string() != "AdaptiveCard")) c.fail("card.type", "must be AdaptiveCard");
  auto* ver = c.need(card, "card", "version");
  if (ver && (!ver->is_string() || ver->as_string() != "1.5")) c.fail("card.version", "must be the string \"1.5\"");
  if (auto* s = card.if_contains("$schema"); s && (!s->is_string() || s->as_string() != "http://adaptivecards.io/schemas/adaptive-card.json"))
    c.fail("card.$schema", "unexpected schema URL");
  auto* body = c.need(card, "card", "body");
  if (body && (!body->is_array() || body->as_array().empty())) c.fail("card.body", "must be a non-empty array");
  else if (body) {
    int i = 0;
    for (const auto& e : body->as_array()) {
      std::string where = "card.body[" + std::to_string(i++) + "]";
      if (!e.is_object()) { c.fail(where, "not an object"); continue; }
      const auto& eo = e.as_object();
      auto* et = c.need(eo, where, "type");
      if (!et || !et->is_string()) continue;
      if (et->as_string() == "TextBlock") {
        c.only(eo, where, {"type", "text", "wrap", "size", "weight", "isSubtle", "color", "maxLines", "spacing", "separator"});
        c.text(c.need(eo, where, "text"), where + ".text", 100000);
        if (auto* w = eo.if_contains("wrap"); w && !w->is_bool()) c.fail(where + ".wrap", "must be a boolean");
        if (auto* s = eo.if_contains("isSubtle"); s && !s->is_bool()) c.fail(where + ".isSubtle", "must be a boolean");
        static const std::set<std::string> sizes{"Default", "Small", "Medium", "Large", "ExtraLarge"};
        if (auto* s = eo.if_contains("size"); s && (!s->is_string() || !sizes.count(std::string(s->as_string()))))
          c.fail(where + ".size", "not a TextBlock size");
        static const std::set<std::string> weights{"Default", "Lighter", "Bolder"};
        if (auto* w = eo.if_contains("weight"); w && (!w->is_string() || !weights.count(std::string(w->as_string()))))
          c.fail(where + ".weight", "not a TextBlock weight");
      } else if (et->as_string() == "FactSet") {
        c.only(eo, where, {"type", "facts", "spacing", "separator"});
        auto* facts = c.need(eo, where, "facts");
        if (facts && (!facts->is_array() || facts->as_array().empty())) c.fail(where + ".facts", "must be a non-empty array");
        else if (facts)
          for (const auto& f : facts->as_array()) {
            if (!f.is_object()) { c.fail(where + ".facts[]", "not an object"); continue; }
            c.only(f.as_object(), where + ".facts[]", {"title", "value"});
            c.text(c.need(f.as_object(), where + ".facts[]", "title"), where + ".facts[].title", 1000);
            c.text(c.need(f.as_object(), where + ".facts[]", "value"), where + ".facts[].value", 100000);
          }
      } else {
        c.fail(where, "unexpected element type \"" + std::string(et->as_string()) + "\"");
      }
    }
  }
  if (auto* actions = card.if_contains("actions")) {
    if (!actions->is_array()) c.fail("card.actions", "must be an array");
    else
      for (const auto& a2 : actions->as_array()) {
        if (!a2.is_object()) { c.fail("card.actions[]", "not an object"); continue; }
        const auto& o = a2.as_object();
        c.only(o, "card.actions[]", {"type", "title", "url", "style"});
        auto* t = c.need(o, "card.actions[]", "type");
        if (t && (!t->is_string() || t->as_string() != "Action.OpenUrl")) c.fail("card.actions[]", "only Action.OpenUrl expected");
        c.text(c.need(o, "card.actions[]", "title"), "card.actions[].title", 200);
        auto* url = c.need(o, "card.actions[]", "url");
        c.text(url, "card.actions[].url", 8000);
        if (url && url->is_string() && !url->as_string().starts_with("https://") && !url->as_string().starts_with("http://"))
          c.fail("card.actions[].url", "must be an absolute http(s) URL");
      }
  }
  return c.problems;
}

}  // namespace notify_schema
