#pragma once
// An email message as RFC 5322 text: headers (a non-ASCII subject as RFC 2047 encoded words) and
// a multipart/alternative body with a text/plain and a text/html part, each UTF-8 in base64.
// Pure: the SMTP client sends the text it returns.
#include "certfleet/core/clock.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace certfleet::net {

struct mail_parts {
  std::string from;             // a mailbox (smtp_protocol's valid_mailbox)
  std::vector<std::string> to;  // mailboxes
  std::string subject;          // one line of UTF-8
  std::string text;             // text/plain
  std::string html;             // text/html
  std::string message_id;       // "<…@…>"
  time_ms date = 0;
  // Further headers: names of letters, digits and '-', values of printable ASCII (anything
  // else is dropped, so nothing can start a header of its own).
  std::vector<std::pair<std::string, std::string>> headers;
};

std::string build_mime_message(const mail_parts& m);

// One header value: as is when printable ASCII, else RFC 2047 "=?UTF-8?B?…?=" words of at most
// 75 characters, folded onto continuation lines. Line breaks never survive.
std::string encode_header_text(std::string_view utf8);
// "Tue, 01 Dec 2026 10:00:00 +0000".
std::string rfc5322_date(time_ms t);
// A Message-ID derived from `event_id` only, so every copy of one event's message (a retry, a
// duplicate after a lost answer) has the same one and mail clients thread or drop the copies:
// "<certfleet.<first 32 hex of SHA-256(event_id)>@<domain>>".
std::string message_id_for(std::string_view event_id, std::string_view domain);

}  // namespace certfleet::net
