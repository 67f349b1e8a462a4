// Templates and rendering (pure): placeholder parsing and the errors that name unknown ones, every
// default template, values as text, links, escaping per format, and each rendering against its
// format's documented schema (notify_schema.hpp).
#include "certfleet/notify/events.hpp"
#include "certfleet/notify/template.hpp"
#include "notify_schema.hpp"

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <functional>

namespace certfleet::notify {
namespace {

namespace json = boost::json;

const event_def& ev(std::string_view name) { return *find_event(name); }

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

TEST(template_text, placeholders_and_literals) {
  auto p = parse_template_text("Run {{run_no}} of {{ name }}: {{summary.failed}} failed", "template.body");
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 7u);
  EXPECT_FALSE((*p)[0].placeholder);
  EXPECT_EQ((*p)[0].text, "Run ");
  EXPECT_TRUE((*p)[1].placeholder);
  EXPECT_EQ((*p)[1].text, "run_no");
  EXPECT_EQ((*p)[3].text, "name");  // spaces inside the braces are allowed
  EXPECT_EQ((*p)[5].text, "summary.failed");
  EXPECT_EQ((*p)[6].text, " failed");
  EXPECT_TRUE(parse_template_text("", "f"));
  EXPECT_TRUE(parse_template_text("a single { brace } is text", "f"));
}

TEST(template_text, syntax_errors_name_the_field) {
  auto unclosed = parse_template_text("Hello {{name", "template.subject");
  ASSERT_FALSE(unclosed);
  EXPECT_EQ(unclosed.error().field, "template.subject");
  EXPECT_NE(unclosed.error().message.find("never closed"), std::string::npos) << unclosed.error().message;
  auto bad_name = parse_template_text("{{Name}} {{a b}}", "template.body");
  ASSERT_FALSE(bad_name);
  EXPECT_NE(bad_name.error().message.find("\"{{Name}}\" is not a placeholder"), std::string::npos) << bad_name.error().message;
  EXPECT_FALSE(parse_template_text("{{}}", "f"));
  auto ctl = parse_template_text("tab\there", "template.body");
  ASSERT_FALSE(ctl);
  EXPECT_NE(ctl.error().message.find("control characters"), std::string::npos);
}

TEST(template_override, unknown_placeholders_are_refused_naming_each_once) {
  json::value v = json::object{{"body", "{{name}} {{colour}} and {{size}} and {{colour}} again"}};
  auto r = parse_template_override(v, ev(event_names::certificate_expiring));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().field, "template.body");
  EXPECT_NE(r.error().message.find("unknown placeholders {{colour}}, {{size}} in template.body"), std::string::npos)
      << r.error().message;
  // The error lists what the event has, built-ins included.
  EXPECT_NE(r.error().message.find("{{days_threshold}}"), std::string::npos);
  EXPECT_NE(r.error().message.find("{{link}}"), std::string::npos);
  auto subject = parse_template_override(json::object{{"subject", "{{status}}"}}, ev(event_names::certificate_expiring));
  ASSERT_FALSE(subject);
  EXPECT_EQ(subject.error().field, "template.subject");
  EXPECT_NE(subject.error().message.find("unknown placeholder {{status}} in template.subject"), std::string::npos);
  // The same placeholder is fine for the event that has it.
  EXPECT_TRUE(parse_template_override(json::object{{"subject", "{{status}}"}}, ev(event_names::distribution_finished)));
}

TEST(template_override, shape_and_limits) {
  const auto& e = ev(event_names::job_dead);
  auto ok = parse_template_override(json::object{{"subject", "Dead: {{type}}"}}, e);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->subject, "Dead: {{type}}");
  EXPECT_TRUE(ok->body.empty());
  auto full = template_for(e, *ok);
  EXPECT_EQ(full.subject, "Dead: {{type}}");
  EXPECT_EQ(full.body, std::string(e.body));  // the default body stays
  struct bad_case {
    json::value v;
    std::string field;
  };
  std::vector<bad_case> bad{{json::value("text"), "template"},
                            {json::object{}, "template"},
                            {json::object{{"colour", "x"}}, "template.colour"},
                            {json::object{{"body", 7}}, "template.body"},
                            {json::object{{"body", ""}}, "template.body"},
                            {json::object{{"subject", std::string(201, 'x')}}, "template.subject"},
                            {json::object{{"body", std::string(4001, 'x')}}, "template.body"},
                            {json::object{{"body", "bad \xff utf-8"}}, "template.body"}};
  for (auto& b : bad) {
    auto r = parse_template_override(b.v, e);
    ASSERT_FALSE(r) << json::serialize(b.v);
    EXPECT_EQ(r.error().field, b.field) << json::serialize(b.v) << ": " << r.error().message;
  }
}

TEST(template_defaults, every_event_default_parses_and_uses_only_its_placeholders) {
  std::vector<const event_def*> all;
  for (const auto& e : all_events()) all.push_back(&e);
  all.push_back(&test_event());
  for (const auto* e : all) {
    json::object tpl{{"subject", e->subject}, {"body", e->body}};
    auto r = parse_template_override(tpl, *e);
    EXPECT_TRUE(r) << e->name << ": " << (r ? "" : r.error().message);
  }
}

TEST(values, fields_as_text) {
  const auto& e = ev(event_names::distribution_finished);
  json::object data{{"name", "www"},
                    {"run_no", 3},
                    {"status", "partial"},
                    {"summary", json::object{{"targets", 120}, {"failed", 3}}}};
  auto v = event_values(e, data, "distribution.finished:d1:3", "default", "https://ui/x");
  EXPECT_EQ(v.get("name"), "www");
  EXPECT_EQ(v.get("run_no"), "3");
  EXPECT_EQ(v.get("summary.targets"), "120");
  EXPECT_EQ(v.get("summary.skipped"), "");  // missing: empty
  EXPECT_EQ(v.get("event"), "distribution.finished");
  EXPECT_EQ(v.get("event_id"), "distribution.finished:d1:3");
  EXPECT_EQ(v.get("project"), "default");
  EXPECT_EQ(v.get("link"), "https://ui/x");
  const auto& issued = ev(event_names::certificate_issued);
  auto iv = event_values(issued, json::object{{"domains", json::array{"a.example", "b.example"}}, {"not_after", 1'764'680'400'000}},
                         "e", "p", "");
  EXPECT_EQ(iv.get("domains"), "a.example, b.example");
  EXPECT_EQ(iv.get("not_after"), "2025-12-02T13:00:00.000Z");
}

// What a webhook receives: the event's data with its time fields in DESIGN §6's format, nothing
// else changed (numbers stay numbers, unknown members pass through).
TEST(values, machine_data_gives_times_as_rfc3339) {
  const auto& revoked = ev(event_names::certificate_revoked);
  json::object data{{"certificate_id", "c1"}, {"serial", "0a"}, {"revoked_at", 1'764'680'400'123}, {"extra", 7}};
  auto m = machine_data(revoked, data);
  EXPECT_EQ(m.at("revoked_at"), "2025-12-02T13:00:00.123Z");
  EXPECT_EQ(m.at("serial"), "0a");
  EXPECT_EQ(m.at("extra"), 7);
  EXPECT_EQ(data.at("revoked_at"), 1'764'680'400'123);  // the event itself keeps milliseconds
  // A time that is missing stays missing; an unset one (0) is null.
  EXPECT_FALSE(machine_data(revoked, json::object{{"serial", "0a"}}).contains("revoked_at"));
  EXPECT_TRUE(machine_data(revoked, json::object{{"revoked_at", 0}}).at("revoked_at").is_null());
  // Events without time fields are unchanged.
  const auto& finished = ev(event_names::distribution_finished);
  json::object run{{"run_no", 3}, {"summary", json::object{{"targets", 120}}}};
  EXPECT_EQ(machine_data(finished, run), run);
}

TEST(values, text_is_cleaned_to_utf8_without_controls) {
  EXPECT_EQ(clean_text("a\x01" "b\tc\r\nd", true), "ab c \nd");
  EXPECT_EQ(clean_text("a\nb", false), "a b");
  EXPECT_EQ(clean_text("bad \xff\xfe end", true), "bad \xEF\xBF\xBD\xEF\xBF\xBD end");
  EXPECT_EQ(clean_text("\xC0\xAF", true), "\xEF\xBF\xBD\xEF\xBF\xBD");           // overlong '/'
  EXPECT_EQ(clean_text("\xED\xA0\x80", true), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(clean_text("h\xC3\xA9llo \xF0\x9F\x94\x92", true), "h\xC3\xA9llo \xF0\x9F\x94\x92");
  EXPECT_EQ(truncate_utf8("h\xC3\xA9llo", 4), "h\xE2\x80\xA6");  // never cuts inside a character
  EXPECT_EQ(truncate_utf8("short", 10), "short");
}

TEST(links, ui_base_url_and_the_events_page) {
  const auto& e = ev(event_names::job_dead);
  json::object data{{"job_id", "6b0e8f0c1a2b3c4d5e6f7081"}};
  EXPECT_EQ(event_link(e, data, "https://certfleet.example.com/", "default"),
            "https://certfleet.example.com/jobs/6b0e8f0c1a2b3c4d5e6f7081?project=default");
  EXPECT_EQ(event_link(e, data, "", "default"), "");  // no ui_base_url: no link
  EXPECT_EQ(event_link(e, json::object{}, "https://x", "default"), "");  // its id missing
  EXPECT_EQ(event_link(e, json::object{{"job_id", "a/b?c"}}, "https://x", "team a&b"), "https://x/jobs/a%2Fb%3Fc?project=team%20a%26b");
  EXPECT_EQ(event_link(ev(event_names::domain_expiring), json::object{{"domain_id", "d"}}, "https://x", "p"), "");  // no page
}

// An event whose values try to break out of every format.
message_content hostile() {
  const auto& e = ev(event_names::certificate_renewal_failed);
  json::object data{{"certificate_id", "c1"},
                    {"name", "<script>alert(1)</script> & <!channel>"},
                    {"domains", json::array{"www.example.com"}},
                    {"error", "CA said: <b>no</b>\nsecond line"},
                    {"job_id", "6b0e8f0c1a2b3c4d5e6f7081"},
                    {"not_after", 1'764'680'400'000}};
  auto link = event_link(e, data, "https://certfleet.example.com", "default");
  auto v = event_values(e, data, "certificate.renewal_failed:c1:1", "default", link);
  return compose(e, template_for(e, {}), v);
}

TEST(render, email_text_and_html_escape_values) {
  auto m = hostile();
  EXPECT_EQ(m.subject, "Renewal of certificate <script>alert(1)</script> & <!channel> failed");
  auto mail = render_email(m);
  EXPECT_NE(mail.text.find("failed: CA said: <b>no</b>\nsecond line"), std::string::npos) << mail.text;
  EXPECT_NE(mail.text.find("Open in certfleet: https://certfleet.example.com/jobs/6b0e8f0c1a2b3c4d5e6f7081?project=default"),
            std::string::npos)
      << mail.text;
  EXPECT_NE(mail.text.find("Event: certificate.renewal_failed:c1:1"), std::string::npos);
  EXPECT_NE(mail.text.find("Expires: 2025-12-02T13:00:00.000Z"), std::string::npos) << mail.text;  // a fact
  EXPECT_EQ(mail.html.find("<script>"), std::string::npos) << mail.html;
  EXPECT_EQ(mail.html.find("<b>no</b>"), std::string::npos);
  EXPECT_NE(mail.html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;!channel&gt;"), std::string::npos);
  EXPECT_NE(mail.html.find("CA said: &lt;b&gt;no&lt;/b&gt;<br>\nsecond line"), std::string::npos) << mail.html;
  EXPECT_NE(mail.html.find("<a href=\"https://certfleet.example.com/jobs/6b0e8f0c1a2b3c4d5e6f7081?project=default\">"),
            std::string::npos);
}

TEST(render, slack_blocks_escape_mrkdwn_and_fit_the_schema) {
  auto m = hostile();
  auto payload = render_slack(m);
  auto problems = notify_schema::slack_problems(payload);
  EXPECT_TRUE(problems.empty()) << join(problems) << json::serialize(payload);
  // No mention or link can be made from a value: in every text Slack parses as mrkdwn (the
  // fallback and the mrkdwn objects), <, > and & arrive as entities. plain_text (the header) is
  // shown as written.
  std::vector<std::string> mrkdwn{std::string(payload.at("text").as_string())};
  std::function<void(const json::value&)> walk = [&](const json::value& v) {
    if (v.is_object()) {
      const auto& o = v.as_object();
      if (auto* t = o.if_contains("type"); t && *t == "mrkdwn") mrkdwn.emplace_back(o.at("text").as_string());
      for (const auto& [k, x] : o) walk(x);
    } else if (v.is_array()) {
      for (const auto& x : v.as_array()) walk(x);
    }
  };
  walk(payload.at("blocks"));
  bool escaped = false;
  for (const auto& t : mrkdwn) {
    EXPECT_EQ(t.find_first_of("<>"), std::string::npos) << t;
    escaped = escaped || t.find("&lt;!channel&gt;") != std::string::npos;
  }
  EXPECT_TRUE(escaped);
  const auto& blocks = payload.at("blocks").as_array();
  EXPECT_EQ(blocks[0].at("type"), "header");
  EXPECT_EQ(blocks[0].at("text").at("type"), "plain_text");
  bool button = false;
  for (const auto& b : blocks)
    if (b.at("type") == "actions")
      button = b.at("elements").at(0).at("url") == "https://certfleet.example.com/jobs/6b0e8f0c1a2b3c4d5e6f7081?project=default";
  EXPECT_TRUE(button);
}

TEST(render, teams_adaptive_card_fits_the_schema) {
  auto m = hostile();
  auto payload = render_teams(m);
  auto problems = notify_schema::teams_problems(payload);
  EXPECT_TRUE(problems.empty()) << join(problems) << json::serialize(payload);
  const auto& card = payload.at("attachments").at(0).at("content");
  EXPECT_EQ(card.at("version"), "1.5");
  EXPECT_EQ(card.at("body").at(0).at("text").as_string(), m.subject);
  EXPECT_EQ(card.at("actions").at(0).at("url").as_string(), m.link);
  // Without a link (no ui_base_url), no action.
  m.link.clear();
  auto no_link = render_teams(m);
  EXPECT_FALSE(no_link.at("attachments").at(0).at("content").as_object().contains("actions"));
  EXPECT_TRUE(notify_schema::teams_problems(no_link).empty());
}

TEST(render, long_values_are_cut_to_each_format_limit) {
  const auto& e = ev(event_names::job_dead);
  json::object data{{"job_id", "j1"}, {"type", std::string(500, 'T')}, {"error", std::string(20000, 'e')}};
  auto v = event_values(e, data, "job.dead:j1:1", "default", "");
  auto m = compose(e, template_for(e, {}), v);
  EXPECT_LE(m.subject.size(), 250u);
  auto slack = render_slack(m);
  EXPECT_TRUE(notify_schema::slack_problems(slack).empty()) << join(notify_schema::slack_problems(slack));
  auto teams = render_teams(m);
  EXPECT_TRUE(notify_schema::teams_problems(teams).empty()) << join(notify_schema::teams_problems(teams));
  // An override template renders the same way.
  auto tpl = parse_template_override(json::object{{"subject", "{{type}} died"}, {"body", "*{{job_id}}*: {{error}}"}}, e);
  ASSERT_TRUE(tpl);
  auto m2 = compose(e, template_for(e, *tpl), v);
  EXPECT_EQ(m2.subject.substr(0, 5), "TTTTT");
  EXPECT_TRUE(notify_schema::slack_problems(render_slack(m2)).empty());
}

}  // namespace
}  // namespace certfleet::notify
