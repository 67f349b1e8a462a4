// SMTP: the pure protocol parts (reply parser, EHLO, dot-stuffing, AUTH encodings, classes), the
// MIME message, Retry-After, and the client against a real SMTP server on 127.0.0.1
// (tests/testbed/smtp_server: python3-aiosmtpd with STARTTLS and AUTH): delivery, the message as
// Python's email package parses it, and the faults — 535, 550, 450, a drop mid-DATA, no
// STARTTLS, an untrusted certificate, egress refusal, a closed port.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "certfleet/net/egress.hpp"
#include "certfleet/net/mime.hpp"
#include "certfleet/net/smtp.hpp"
#include "certfleet/net/smtp_protocol.hpp"
#include "run_sync.hpp"
#include "smtp_server.hpp"
#include "sshd.hpp"  // closed_port
#include "temp_dir.hpp"

using namespace certfleet::net;
using namespace std::chrono_literals;

namespace {

egress_policy policy(std::string_view text) {
  auto p = parse_egress_allow_list(text);
  if (!p) throw std::runtime_error("bad test policy: " + p.error().message);
  return *p;
}

// ---- replies ------------------------------------------------------------------------------

TEST(smtp_reply, single_and_multi_line_replies_and_what_follows) {
  auto r = parse_reply("220 smtp.example ESMTP ready\r\n");
  ASSERT_EQ(r.status, reply_status::complete);
  EXPECT_EQ(r.reply.code, 220);
  EXPECT_EQ(r.reply.lines, std::vector<std::string>{"smtp.example ESMTP ready"});
  EXPECT_EQ(r.consumed, 30u);
  EXPECT_EQ(r.reply.summary(), "220 smtp.example ESMTP ready");

  std::string ehlo = "250-smtp.example\r\n250-STARTTLS\r\n250 AUTH PLAIN LOGIN\r\n354 next";
  auto m = parse_reply(ehlo);
  ASSERT_EQ(m.status, reply_status::complete);
  EXPECT_EQ(m.reply.lines.size(), 3u);
  EXPECT_EQ(ehlo.substr(m.consumed), "354 next");  // the next reply is left for later

  EXPECT_EQ(parse_reply("250-one\r\n250 tw").status, reply_status::incomplete);
  EXPECT_EQ(parse_reply("").status, reply_status::incomplete);
  auto bare = parse_reply("250\n");  // a bare LF and no text are accepted
  ASSERT_EQ(bare.status, reply_status::complete);
  EXPECT_EQ(bare.reply.summary(), "250");
}

TEST(smtp_reply, malformed_replies_are_refused_with_a_reason) {
  for (std::string bad : {"HTTP/1.1 400 Bad Request\r\n", "250-a\r\n251 b\r\n", "250*x\r\n", "099 low\r\n",
                          "600 high\r\n", "2x0 no\r\n"}) {
    auto r = parse_reply(bad);
    EXPECT_EQ(r.status, reply_status::malformed) << bad;
    EXPECT_FALSE(r.error.empty());
    for (char c : r.error) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r.error;
  }
  EXPECT_EQ(parse_reply(std::string(3000, '2')).status, reply_status::malformed);  // one endless line
  std::string many;
  for (int i = 0; i < 200; ++i) many += "250-x\r\n";
  EXPECT_EQ(parse_reply(many).status, reply_status::malformed);
  auto ctl = parse_reply("550 bad\x01\xff text\r\n");  // printable in what operators see
  ASSERT_EQ(ctl.status, reply_status::complete);
  EXPECT_EQ(ctl.reply.summary(), "550 bad?? text");
}

TEST(smtp_ehlo, capabilities) {
  auto r = parse_reply("250-smtp.example\r\n250-SIZE 10240000\r\n250-starttls\r\n250-AUTH=LOGIN\r\n"
                       "250-AUTH PLAIN login CRAM-MD5\r\n250 SMTPUTF8\r\n");
  auto caps = parse_ehlo(r.reply);
  EXPECT_TRUE(caps.starttls);
  EXPECT_TRUE(caps.smtputf8);
  EXPECT_EQ(caps.size_limit, 10240000u);
  EXPECT_EQ(caps.auth, (std::set<std::string>{"PLAIN", "LOGIN", "CRAM-MD5"}));
  EXPECT_FALSE(parse_ehlo(parse_reply("250 only.greeting\r\n").reply).starttls);
}

TEST(smtp_data, dot_stuffing_and_line_endings) {
  EXPECT_EQ(dot_stuff("a\r\n.b\r\n..c\r\n"), "a\r\n..b\r\n...c\r\n.\r\n");
  EXPECT_EQ(dot_stuff(".first\nlast"), "..first\r\nlast\r\n.\r\n");
  EXPECT_EQ(dot_stuff("lone\rcr\r\n."), "lone\r\ncr\r\n..\r\n.\r\n");
  EXPECT_EQ(dot_stuff(""), ".\r\n");
  // A line of just "." would end the message early: it is doubled.
  EXPECT_EQ(dot_stuff("x\r\n.\r\ny\r\n"), "x\r\n..\r\ny\r\n.\r\n");
}

TEST(smtp_auth, plain_and_login_encodings) {
  EXPECT_EQ(auth_plain("tim", "tanstaaftanstaaf"), "AHRpbQB0YW5zdGFhZnRhbnN0YWFm");  // RFC 4616's example
  EXPECT_EQ(auth_login_step("user"), "dXNlcg==");
}

TEST(smtp_mailbox, plain_addresses_only) {
  for (auto ok : {"ops@example.com", "a.b+tag@sub.example.co", "x@localhost"}) EXPECT_TRUE(valid_mailbox(ok)) << ok;
  for (auto bad : {"", "ops", "@example.com", "ops@", "Ops <ops@example.com>", "ops@exa mple.com", "a,b@example.com",
                   "ops@example.com\r\nBcc: x@y", "ops@-bad.example", "a..b@example.com", "ops@ex_ample.com"})
    EXPECT_FALSE(valid_mailbox(bad)) << bad;
}

TEST(smtp_classes, replies_map_to_error_classes) {
  EXPECT_EQ(classify_smtp_reply(smtp_step::rcpt_to, 250), error_class::none);
  EXPECT_EQ(classify_smtp_reply(smtp_step::rcpt_to, 450), error_class::io_transient);
  EXPECT_EQ(classify_smtp_reply(smtp_step::greeting, 421), error_class::io_transient);
  EXPECT_EQ(classify_smtp_reply(smtp_step::auth, 535), error_class::auth);
  EXPECT_EQ(classify_smtp_reply(smtp_step::mail_from, 530), error_class::auth);  // authentication required
  EXPECT_EQ(classify_smtp_reply(smtp_step::auth, 504), error_class::auth);
  EXPECT_EQ(classify_smtp_reply(smtp_step::rcpt_to, 550), error_class::validation);
  EXPECT_EQ(classify_smtp_reply(smtp_step::data_end, 554), error_class::validation);
}

TEST(smtp_scrub, secrets_and_their_base64_are_hidden) {
  auto s = scrub("501 bad AUTH " + auth_plain("u", "hunter2-secret") + " for hunter2-secret", {"hunter2-secret", auth_plain("u", "hunter2-secret")});
  EXPECT_EQ(s.find("hunter2"), std::string::npos) << s;
  EXPECT_EQ(s.find(auth_plain("u", "hunter2-secret")), std::string::npos) << s;
  EXPECT_EQ(scrub("no secret here", {"abc"}), "no secret here");  // too short to hide
}

// ---- MIME ---------------------------------------------------------------------------------

TEST(mime, headers_are_encoded_and_cannot_be_injected) {
  EXPECT_EQ(encode_header_text("Certificate www expires"), "Certificate www expires");
  EXPECT_EQ(encode_header_text("a\r\nBcc: evil@x"), "a  Bcc: evil@x");  // one line: no new header
  auto enc = encode_header_text("Zertifikat läuft ab: " + std::string(60, 'x'));
  EXPECT_EQ(enc.rfind("=?UTF-8?B?", 0), 0u) << enc;
  for (std::size_t start = 0; start < enc.size();) {  // every encoded word at most 75 characters
    auto end = enc.find("\r\n ", start);
    auto word = enc.substr(start, end == std::string::npos ? std::string::npos : end - start);
    EXPECT_LE(word.size(), 75u) << word;
    start = end == std::string::npos ? enc.size() : end + 3;
  }
  EXPECT_EQ(rfc5322_date(1'764'680'400'000), "Tue, 02 Dec 2025 13:00:00 +0000");
  auto id = message_id_for("job.dead:abc:3", "example.com");
  EXPECT_EQ(id, message_id_for("job.dead:abc:3", "example.com"));  // the same event, the same id
  EXPECT_NE(id, message_id_for("job.dead:abc:4", "example.com"));
  EXPECT_EQ(id.front(), '<');
  EXPECT_NE(id.find("@example.com>"), std::string::npos);

  mail_parts m;
  m.from = "a@example.com";
  m.to = {"b@example.com", "c@example.com"};
  m.subject = "s";
  m.text = "text";
  m.html = "<p>html</p>";
  m.message_id = id;
  m.date = 1'764'680'400'000;
  m.headers = {{"X-Certfleet-Event-Id", "e1"}, {"X-Bad", "a\r\nBcc: evil@x"}, {"Bad Name", "x"}};
  auto text = build_mime_message(m);
  EXPECT_NE(text.find("\r\nX-Certfleet-Event-Id: e1\r\n"), std::string::npos);
  EXPECT_EQ(text.find("Bcc"), std::string::npos) << text;
  EXPECT_EQ(text.find("Bad Name"), std::string::npos);
  EXPECT_NE(text.find("multipart/alternative"), std::string::npos);
}

// ---- the client against a real server ----------------------------------------------------

class smtp_client : public ::testing::Test {
 protected:
  testbed::temp_dir dir{"certfleet-smtp"};
  egress_policy loopback = policy("127.0.0.1");

  smtp_options options(const testbed::smtp_server& s, std::string user = "certfleet", std::string password = "s3cret-pass") {
    smtp_options o;
    o.host = "127.0.0.1";
    o.port = s.port();
    o.username = std::move(user);
    o.password = std::move(password);
    o.ca_pem = s.ca_pem();
    o.egress = &loopback;
    o.step_timeout = 10s;
    o.total_timeout = 30s;
    return o;
  }
  static smtp_envelope envelope(std::vector<std::string> to = {"ops@example.com"}) {
    mail_parts m;
    m.from = "certfleet@example.com";
    m.to = to;
    m.subject = "Zertifikat läuft ab";
    m.text = "line one\r\n.a line starting with a dot\r\n";
    m.html = "<p>hello</p>";
    m.message_id = message_id_for("event-1", "example.com");
    m.date = 1'764'680'400'000;
    m.headers = {{"X-Certfleet-Event-Id", "event-1"}};
    return {"certfleet@example.com", std::move(to), build_mime_message(m)};
  }
  static smtp_result send(smtp_envelope e, smtp_options o) {
    auto r = testbed::run_sync(send_mail(std::move(e), std::move(o)));
    std::cerr << "  -> [" << error_class_name(r.cls) << "] phase " << r.phase << ": " << r.error << " | " << r.reply << "\n";
    return r;
  }
  static void expect_no_secret(const smtp_result& r, const std::string& secret) {
    EXPECT_EQ(r.error.find(secret), std::string::npos) << r.error;
    EXPECT_EQ(r.reply.find(secret), std::string::npos) << r.reply;
  }
};

TEST_F(smtp_client, starttls_auth_plain_delivers_the_message_intact) {
  testbed::smtp_server server(dir.path() / "srv", {.user = "certfleet", .password = "s3cret-pass"});
  auto r = send(envelope({"ops@example.com", "oncall@example.com"}), options(server));
  ASSERT_TRUE(r.ok()) << r.error << "\n" << server.log();
  EXPECT_EQ(r.reply_code, 250);
  EXPECT_EQ(r.reply.rfind("250 2.0.0 Ok: queued as 1", 0), 0u) << r.reply;
  ASSERT_TRUE(server.wait_for(1, 10s));
  auto m = server.messages().at(0);
  EXPECT_TRUE(m.tls);
  EXPECT_TRUE(m.authenticated);
  EXPECT_EQ(m.auth_login, "certfleet");
  EXPECT_EQ(m.mail_from, "certfleet@example.com");
  EXPECT_EQ(m.rcpt_tos, (std::vector<std::string>{"ops@example.com", "oncall@example.com"}));
  EXPECT_EQ(m.header("Subject"), "Zertifikat läuft ab");  // RFC 2047 decoded by Python
  EXPECT_EQ(m.header("Message-ID"), message_id_for("event-1", "example.com"));
  EXPECT_EQ(m.header("X-Certfleet-Event-Id"), "event-1");
  EXPECT_EQ(m.content_type, "multipart/alternative");
  ASSERT_EQ(m.parts.size(), 2u);
  ASSERT_NE(m.part_of("text/plain"), nullptr);
  // Dot-stuffing undone by the server: the line starting with a dot arrives as written.
  EXPECT_EQ(m.part_of("text/plain")->text, "line one\r\n.a line starting with a dot\r\n");
  EXPECT_EQ(m.part_of("text/html")->text, "<p>hello</p>");
  EXPECT_EQ(m.raw.find("s3cret-pass"), std::string::npos);
}

TEST_F(smtp_client, auth_login_when_plain_is_not_offered) {
  testbed::smtp_server server(dir.path() / "srv",
                              {.user = "certfleet", .password = "s3cret-pass", .auth_exclude = {"PLAIN"}});
  auto r = send(envelope(), options(server));
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_TRUE(server.wait_for(1, 10s));
  EXPECT_TRUE(server.messages().at(0).authenticated);
}

TEST_F(smtp_client, a_wrong_password_is_535_auth_and_never_quoted) {
  testbed::smtp_server server(dir.path() / "srv", {.user = "certfleet", .password = "s3cret-pass"});
  auto r = send(envelope(), options(server, "certfleet", "wrong-password-123"));
  EXPECT_EQ(r.cls, error_class::auth);
  EXPECT_EQ(r.phase, "auth");
  EXPECT_EQ(r.reply_code, 535);
  EXPECT_EQ(r.reply.rfind("535", 0), 0u) << r.reply;
  EXPECT_NE(r.error.find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << r.error;
  expect_no_secret(r, "wrong-password-123");
  expect_no_secret(r, auth_plain("certfleet", "wrong-password-123"));
  EXPECT_EQ(server.count(), 0u);
}

TEST_F(smtp_client, a_refused_recipient_is_550_validation_and_nothing_is_sent) {
  testbed::smtp_server server(dir.path() / "srv",
                              {.user = "certfleet", .password = "s3cret-pass", .refuse_rcpt_suffix = "@nowhere.example"});
  auto r = send(envelope({"ops@example.com", "ghost@nowhere.example"}), options(server));
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "rcpt");
  EXPECT_EQ(r.reply_code, 550);
  EXPECT_EQ(r.refused_recipient, "ghost@nowhere.example");
  EXPECT_NE(r.error.find("refused the recipient ghost@nowhere.example: 550"), std::string::npos) << r.error;
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(server.count(), 0u);  // all or nothing: no copy went to the accepted recipient
}

TEST_F(smtp_client, a_deferred_recipient_is_450_transient) {
  testbed::smtp_server server(dir.path() / "srv",
                              {.user = "certfleet", .password = "s3cret-pass", .defer_rcpt_suffix = "@busy.example"});
  auto r = send(envelope({"ops@busy.example"}), options(server));
  EXPECT_EQ(r.cls, error_class::io_transient);
  EXPECT_EQ(r.reply_code, 450);
}

TEST_F(smtp_client, a_server_that_drops_mid_data_is_transient) {
  testbed::smtp_server server(dir.path() / "srv", {.user = "certfleet", .password = "s3cret-pass", .drop_data = true});
  auto big = envelope();
  big.message += std::string(256 * 1024, 'x') + "\r\n";  // more than the server reads before it hangs up
  auto r = send(big, options(server));
  EXPECT_EQ(r.cls, error_class::io_transient) << r.error;
  EXPECT_EQ(r.phase, "data");
  EXPECT_EQ(server.count(), 0u);
}

TEST_F(smtp_client, no_starttls_offered_is_refused_before_credentials_go_out) {
  testbed::smtp_server server(dir.path() / "srv",
                              {.starttls = false, .user = "certfleet", .password = "s3cret-pass", .plain_auth = true});
  auto r = send(envelope(), options(server));
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "starttls");
  EXPECT_NE(r.error.find("does not offer STARTTLS"), std::string::npos) << r.error;
  EXPECT_EQ(server.count(), 0u);
}

TEST_F(smtp_client, plain_smtp_only_to_a_loopback_relay) {
  testbed::smtp_server server(dir.path() / "srv",
                              {.starttls = false, .user = "certfleet", .password = "s3cret-pass", .plain_auth = true});
  auto o = options(server);
  o.starttls = false;
  auto r = send(envelope(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  ASSERT_TRUE(server.wait_for(1, 10s));
  EXPECT_FALSE(server.messages().at(0).tls);
  // The same to a non-loopback address is refused before connecting (192.0.2.1: TEST-NET-1).
  auto anywhere = policy("0.0.0.0/0");
  o.host = "192.0.2.1";
  o.egress = &anywhere;
  auto far = send(envelope(), o);
  EXPECT_EQ(far.cls, error_class::validation);
  EXPECT_EQ(far.phase, "egress");
}

TEST_F(smtp_client, an_untrusted_certificate_is_auth_and_nothing_is_sent) {
  testbed::smtp_server server(dir.path() / "srv", {.user = "certfleet", .password = "s3cret-pass"});
  auto o = options(server);
  o.ca_pem.clear();
  auto r = send(envelope(), o);
  EXPECT_EQ(r.cls, error_class::auth);
  EXPECT_EQ(r.phase, "tls");
  EXPECT_NE(r.error.find("not trusted"), std::string::npos) << r.error;
  EXPECT_EQ(server.count(), 0u);
}

TEST_F(smtp_client, egress_refusal_connects_to_nothing) {
  testbed::smtp_server server(dir.path() / "srv", {.user = "certfleet", .password = "s3cret-pass"});
  auto elsewhere = policy("10.0.0.0/8");
  auto o = options(server);
  o.egress = &elsewhere;
  auto r = send(envelope(), o);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "egress");
  EXPECT_EQ(r.error, "egress_allow_list does not allow 127.0.0.1");
  auto empty = policy("");
  o.egress = &empty;
  EXPECT_EQ(send(envelope(), o).phase, "check");  // an empty list refuses before resolving
  EXPECT_EQ(server.count(), 0u);
}

TEST_F(smtp_client, a_closed_port_is_network) {
  testbed::closed_port closed;
  smtp_options o;
  o.host = "127.0.0.1";
  o.port = closed.port();
  o.egress = &loopback;
  auto r = send(envelope(), o);
  EXPECT_EQ(r.cls, error_class::network);
  EXPECT_EQ(r.phase, "connect");
}

TEST_F(smtp_client, bad_addresses_are_refused_before_connecting) {
  testbed::closed_port closed;
  smtp_options o;
  o.host = "127.0.0.1";
  o.port = closed.port();
  o.egress = &loopback;
  auto e = envelope();
  e.to = {"Ops <ops@example.com>"};
  auto r = send(e, o);
  EXPECT_EQ(r.cls, error_class::validation);
  EXPECT_EQ(r.phase, "check");
}

}  // namespace
