// Notification templates and rendering (notify/template): a rule's template text
// and any event data (of any JSON shape, not only the table's) render for every format without a
// crash; a refused template names a template field; every rendered text is valid UTF-8, a subject
// stays one line within its limits, and the Slack/Teams payloads serialize and parse back equal.
#include "certfleet/notify/events.hpp"
#include "certfleet/notify/template.hpp"

#include <boost/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

using namespace certfleet;
using namespace certfleet::notify;
namespace json = boost::json;

namespace {

bool valid_utf8(std::string_view s) { return notify::clean_text(s, true) == s; }

void check_text(std::string_view s) {
  // Rendered text is what clean_text lets through, plus the line breaks and tabs formats add.
  std::string without_controls;
  for (char c : s)
    if (c != '\n' && c != '\r' && c != '\t') without_controls += c;
  if (notify::clean_text(without_controls, false) != without_controls) std::abort();
}

void check_json(const json::object& o) {
  auto text = json::serialize(o);
  boost::system::error_code ec;
  auto back = json::parse(text, ec);
  if (ec || back != json::value(o)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const auto events = notify::all_events();
  const notify::event_def& e = data[0] % (events.size() + 1) == events.size() ? notify::test_event() : events[data[0] % (events.size() + 1)];
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  // subject \0 body \0 data-json \0 event-id
  std::vector<std::string_view> parts;
  while (parts.size() < 3) {
    auto nul = in.find('\0');
    parts.push_back(in.substr(0, nul));
    in = nul == std::string_view::npos ? std::string_view{} : in.substr(nul + 1);
  }
  parts.push_back(in);

  json::object tpl_in;
  if (!parts[0].empty()) tpl_in["subject"] = parts[0];
  if (!parts[1].empty()) tpl_in["body"] = parts[1];
  notify::message_template over;
  auto tpl = notify::parse_template_override(tpl_in, e);
  if (tpl) over = *tpl;
  else if (tpl.error().field.rfind("template", 0) != 0) std::abort();
  // Text parsing alone, on whatever bytes came: parts or an error naming the field.
  if (auto p = notify::parse_template_text(parts[1], "template.body"); !p && p.error().field != "template.body") std::abort();

  json::object event_data;
  boost::system::error_code ec;
  auto parsed = json::parse(parts[2], ec);
  if (!ec && parsed.is_object()) event_data = parsed.as_object();
  (void)notify::check_event_data(e, event_data);

  auto link = notify::event_link(e, event_data, "https://certfleet.example.com/", parts[3]);
  for (char c : link)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
  auto values = notify::event_values(e, event_data, parts[3], parts[3], link);
  auto m = compose(e, notify::template_for(e, over), values);
  if (m.subject.size() > 250 || m.subject.find_first_of("\r\n") != std::string::npos) std::abort();
  check_text(m.subject);

  auto mail = notify::render_email(m);
  check_text(mail.subject);
  check_text(mail.text);
  check_text(mail.html);
  auto slack = notify::render_slack(m);
  check_json(slack);
  auto header = slack.at("blocks").at(0).at("text").at("text").as_string();
  if (header.size() > 150 || header.empty()) std::abort();
  auto teams = notify::render_teams(m);
  check_json(teams);

  auto h = notify::escape_html(parts[3]);
  if (h.find_first_of("<>\"'") != std::string::npos) std::abort();
  auto s = notify::escape_slack(parts[3]);
  if (s.find_first_of("<>") != std::string::npos) std::abort();
  auto t = notify::truncate_utf8(notify::clean_text(parts[3], true), 40);
  if (t.size() > 40 || !valid_utf8(t)) std::abort();
  return 0;
}
