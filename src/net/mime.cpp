// Email message text (mime.hpp).
#include "certfleet/net/mime.hpp"

#include <ctime>

#include "certfleet/core/base64.hpp"
#include "certfleet/core/digest.hpp"

namespace certfleet::net {

namespace {

bool printable_ascii(std::string_view s) {
  for (char c : s)
    if (c < 0x20 || c >= 0x7f) return false;
  return true;
}

bool header_name(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// Base64 in lines of 76 characters (RFC 2045).
std::string base64_lines(std::string_view data) {
  auto b = base64_encode(data);
  std::string out;
  out.reserve(b.size() + b.size() / 76 * 2 + 2);
  for (std::size_t i = 0; i < b.size(); i += 76) {
    out.append(b, i, 76);
    out += "\r\n";
  }
  return out;
}

}  // namespace

std::string encode_header_text(std::string_view s) {
  std::string one;
  for (char c : s) one += (c == '\r' || c == '\n' || c == '\t') ? ' ' : c;
  if (printable_ascii(one)) return one;
  // Each encoded word carries whole UTF-8 characters: at most 45 bytes -> 60 base64 characters,
  // 72 with "=?UTF-8?B?" and "?=".
  std::string out;
  std::size_t i = 0;
  while (i < one.size()) {
    std::size_t end = std::min(one.size(), i + 45);
    while (end < one.size() && end > i && (static_cast<unsigned char>(one[end]) & 0xC0) == 0x80) --end;
    if (end == i) end = std::min(one.size(), i + 45);  // not UTF-8 at all: cut anywhere
    if (!out.empty()) out += "\r\n ";
    out += "=?UTF-8?B?" + base64_encode(std::string_view(one).substr(i, end - i)) + "?=";
    i = end;
  }
  return out;
}

std::string rfc5322_date(time_ms t) {
  std::time_t s = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d +0000", days[tm.tm_wday % 7], tm.tm_mday,
                months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

std::string message_id_for(std::string_view event_id, std::string_view domain) {
  std::string d;
  for (char c : domain)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.') d += c;
  if (d.empty()) d = "certfleet.invalid";
  return "<certfleet." + sha256_hex(event_id).substr(0, 32) + "@" + d + ">";
}

std::string build_mime_message(const mail_parts& m) {
  // The boundary cannot occur in base64 parts ('-' and '_' are not in its alphabet).
  const std::string boundary = "certfleet_" + sha256_hex(m.message_id + m.subject).substr(0, 24);
  // Addresses were checked when the channel was made; printable ASCII here whatever reaches us.
  auto safe = [](std::string_view s) {
    std::string r;
    for (char c : s)
      if (c > 0x20 && c < 0x7f) r += c;
    return r;
  };
  std::string out;
  out += "From: " + safe(m.from) + "\r\n";
  out += "To: ";
  for (std::size_t i = 0; i < m.to.size(); ++i) out += (i ? ",\r\n " : "") + safe(m.to[i]);
  out += "\r\n";
  out += "Subject: " + encode_header_text(m.subject) + "\r\n";
  out += "Date: " + rfc5322_date(m.date) + "\r\n";
  out += "Message-ID: " + safe(m.message_id) + "\r\n";
  out += "MIME-Version: 1.0\r\n";
  // RFC 3834: an automatic message (vacation responders do not answer it).
  out += "Auto-Submitted: auto-generated\r\n";
  for (const auto& [name, value] : m.headers)
    if (header_name(name) && printable_ascii(value) && value.size() <= 900) out += name + ": " + value + "\r\n";
  out += "Content-Type: multipart/alternative; boundary=\"" + boundary + "\"\r\n";
  out += "\r\n";
  out += "--" + boundary + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n";
  out += base64_lines(m.text);
  out += "--" + boundary + "\r\n";
  out += "Content-Type: text/html; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n";
  out += base64_lines(m.html);
  out += "--" + boundary + "--\r\n";
  return out;
}

}  // namespace certfleet::net
